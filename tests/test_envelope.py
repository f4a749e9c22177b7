"""Spec envelope (amendment 6): which GPUs dominate which, and the cap, by hand and on tiny predictors."""
import dataclasses

import numpy as np
import pandas as pd
import pytest

from lib import envelope as E, paths
from lib.devices import TRAIN_GPUS_NVIDIA, device_by_name
from lib.selection import DEFAULT_CONFIGS, ENVELOPE_CLASSES

TINY = {"layers": 1, "width": 8, "epochs": 1, "batch_size": 4096, "max_rows": 1500}


def per_gpu(fn, calls=None):
    """A cap callback (all training GPUs' tables at once) from fn(table, g) per GPU; calls counts the calls."""
    def on_gpus(pairs):
        if calls is not None:
            calls.append(len(pairs))
        return [fn(sub, g) for sub, g in pairs]
    return on_gpus


def _names(device):
    return [g.name for g in E.dominated_training_gpus(device)]


def test_dominated_training_gpus_from_the_spec_sheets():
    # A100-80GB: A100-PCIE-40GB's SMs, peak and L2 with more bandwidth, so it dominates it and all it dominates
    assert _names(device_by_name("NVIDIA A100 80GB PCIe")) == list(TRAIN_GPUS_NVIDIA)
    assert _names(device_by_name("NVIDIA H100 80GB HBM3")) == list(TRAIN_GPUS_NVIDIA)
    # L4: 300 GB/s is below T4's 320, so only P4 (192 GB/s, 2 MB L2) is dominated
    assert _names(device_by_name("NVIDIA L4")) == ["Tesla P4"]
    # a training GPU is forecast by its own model: no cap
    assert _names(device_by_name("Tesla V100-PCIE-32GB")) == []
    assert _names(device_by_name("AMD Instinct MI250")) == []   # another vendor's GPUs are never compared


def test_dominates_needs_every_field():
    v100 = device_by_name("Tesla V100-PCIE-32GB")
    p100 = device_by_name("Tesla P100-PCIE-16GB")
    assert E.dominates(v100, p100) and not E.dominates(p100, v100) and not E.dominates(v100, v100)
    for field in E.DOMINANCE_FIELDS:   # one number below P100's breaks it
        assert not E.dominates(dataclasses.replace(v100, **{field: getattr(p100, field) * 0.99}), p100), field
    assert E.dominates(dataclasses.replace(v100, mem_gb=1.0), p100)   # capacity is not compared


def test_dominance_compares_each_spec_number_but_capacity():
    # named here, not read from DOMINANCE_FIELDS: a GPU below P100 on any one of these five does not dominate it
    v100 = device_by_name("Tesla V100-PCIE-32GB")
    p100 = device_by_name("Tesla P100-PCIE-16GB")
    for field in ("num_sm", "peak_gflops", "peak_vec_gflops", "mem_bw_gbps", "l2_mb"):
        assert not E.dominates(dataclasses.replace(v100, **{field: getattr(p100, field) * 0.99}), p100), field


def test_envelope_rows_follow_each_class_config():
    # by default FC and EW only; a class whose config does not say 'envelope' is off, as is one given without it
    df = pd.DataFrame({"op": ["bmm", "linear", "add", "softmax", "ln"]})
    assert E.envelope_rows(df, None).tolist() == [False, True, True, False, False]
    given = {"BMM": {"epochs": 1}, "EW": {"epochs": 1}, "LN": {"envelope": True}}
    assert E.envelope_rows(df, given).tolist() == [False, True, False, False, True]


def test_cap_by_hand():
    h100 = device_by_name("NVIDIA H100 80GB HBM3")
    df = pd.DataFrame({"op": ["add", "bmm", "mul"], "B": [1.0] * 3, "H": [8.0] * 3})
    on = {c: {"envelope": c in ("EW",)} for c in DEFAULT_CONFIGS}
    # each dominated training GPU forecasts the EW rows (add, mul) at 4 and 2 ms; the H100's own: 3, 9, 5
    seen = []

    def forecast(sub, g):
        seen.append((g.name, sub["op"].tolist()))
        return np.array([4.0, 2.0])
    calls = []
    out = E.cap(df, np.array([3.0, 9.0, 5.0]), h100, on, per_gpu(forecast, calls))
    assert out.tolist() == [3.0, 9.0, 2.0]      # min per EW row; the bmm row is left alone
    assert seen == [(g, ["add", "mul"]) for g in TRAIN_GPUS_NVIDIA] and calls == [len(TRAIN_GPUS_NVIDIA)]   # one call
    off = {c: {"envelope": False} for c in DEFAULT_CONFIGS}   # ({} would mean the defaults, as in predict_featured)
    assert E.cap(df, np.array([3.0, 9.0, 5.0]), h100, off, per_gpu(forecast, calls)).tolist() == [3.0, 9.0, 5.0]
    assert calls == [len(TRAIN_GPUS_NVIDIA)]    # nothing to cap: not called


def test_cap_with_a_device_per_row_asks_each_training_gpu_once():
    h100, l4, t4 = (device_by_name(n) for n in ("NVIDIA H100 80GB HBM3", "NVIDIA L4", "Tesla T4"))
    df = pd.DataFrame({"op": ["add", "add", "mul", "bmm"], "B": [1.0] * 4, "H": [8.0] * 4})
    on = {c: {"envelope": c == "EW"} for c in DEFAULT_CONFIGS}
    seen = []

    def forecast(sub, g):   # 2 ms on P4, 4 ms on every other training GPU
        seen.append((g.name, len(sub)))
        return np.full(len(sub), 2.0 if g.name == "Tesla P4" else 4.0)
    # rows: H100 (dominates all five), L4 (dominates P4 only), T4 (a training GPU: never capped), H100's bmm (no
    # envelope for BMM). P4 caps both EW rows of H100 and L4 in one call; the other four GPUs only H100's
    out = E.cap(df, np.array([9.0, 9.0, 9.0, 9.0]), [h100, l4, t4, h100], on, per_gpu(forecast))
    assert out.tolist() == [2.0, 2.0, 9.0, 9.0]
    assert seen == [("Tesla P4", 2)] + [(g, 1) for g in TRAIN_GPUS_NVIDIA if g != "Tesla P4"]
    # the same rows one device at a time give the same numbers
    one = [E.cap(df.iloc[[i]], np.array([9.0]), d, on, per_gpu(forecast))[0] for i, d in enumerate([h100, l4, t4])]
    assert one == out[:3].tolist()
    with pytest.raises(ValueError, match="3 devices for 4 rows"):
        E.cap(df, np.full(4, 9.0), [h100, l4, t4], on, per_gpu(forecast))


def test_adopted_classes_are_on_by_default():
    assert ENVELOPE_CLASSES == ("FC", "EW")   # the reference run's evidence (lib.selection, amendment 6)
    assert [c for c, cfg in DEFAULT_CONFIGS.items() if cfg.get("envelope")] == list(ENVELOPE_CLASSES)


def test_cap_skips_rows_below_the_floor():
    h100 = device_by_name("NVIDIA H100 80GB HBM3")
    df = pd.DataFrame({"op": ["add", "mul", "relu"], "B": [1.0] * 3, "H": [8.0] * 3})
    on = {c: {"envelope": c == "EW"} for c in DEFAULT_CONFIGS}
    asked = []

    def forecast(sub, g):   # every training GPU forecasts 2 ms
        asked.append(len(sub))
        return np.full(len(sub), 2.0)
    # floor 1.5 ms on every GPU: rows forecast at 1 ms here cannot be capped, so only the 3 ms row is asked for
    floor_calls = []
    floor = per_gpu(lambda sub, g: np.full(len(sub), 1.5), floor_calls)
    out = E.cap(df, np.array([1.0, 3.0, 1.0]), h100, on, per_gpu(forecast), floor)
    assert out.tolist() == [1.0, 2.0, 1.0] and asked == [1] * len(TRAIN_GPUS_NVIDIA)
    assert floor_calls == [len(TRAIN_GPUS_NVIDIA)]   # every GPU's floor in one call
    assert E.cap(df, np.array([1.0, 3.0, 1.0]), h100, on, per_gpu(forecast)).tolist() == out.tolist()   # no floor


def test_cap_floor_slack_and_missing_forecasts():
    h100 = device_by_name("NVIDIA H100 80GB HBM3")
    df = pd.DataFrame({"op": ["add", "mul", "relu"], "B": [1.0] * 3, "H": [8.0] * 3})
    on = {c: {"envelope": c == "EW"} for c in DEFAULT_CONFIGS}
    asked = []

    def forecast(sub, g):   # every training GPU forecasts 0.5 ms, but no number for a relu
        asked.append(sub["op"].tolist())
        return np.where(sub["op"] == "relu", np.nan, 0.5)
    # a floor within FLOOR_SLACK above the forecast (float32 last bits) still asks; one further above does not.
    # Every GPU's floor is compared with the forecast before any cap, so every GPU is asked for the add and the relu
    floor = per_gpu(lambda sub, g: np.array([1.0 + E.FLOOR_SLACK / 2, 1.0 + 2 * E.FLOOR_SLACK, 0.0]))
    out = E.cap(df, np.array([1.0, 1.0, 1.0]), h100, on, per_gpu(forecast), floor)
    assert asked == [["add", "relu"]] * len(TRAIN_GPUS_NVIDIA)
    assert out.tolist() == [0.5, 1.0, 1.0]   # a missing (NaN) forecast caps nothing (np.fmin)


def test_forecast_floor_lies_below_every_forecast(tmp_path, monkeypatch):
    from lib.kernels import _with_spec, predict_kernels
    from lib.predictors import forecast_floor_ms, get_predictor
    from lib.roofline import add_roofline
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    cfg = {"EW": TINY, "FC": {**TINY, "device_factors": True}}
    shapes = pd.DataFrame({"op": ["add", "relu", "linear", "linear"], "B": [64.0, 4096.0, 1.0, 8.0],
                           "H": [4096.0, 1024.0, np.nan, np.nan], "M": [np.nan, np.nan, 512.0, 3.0],
                           "N": [np.nan, np.nan, 1024.0, 77.0], "K": [np.nan, np.nan, 4096.0, 5.0]})
    for name in ("Tesla T4", "NVIDIA H100 80GB HBM3"):
        g = device_by_name(name)
        roof = add_roofline(_with_spec(shapes, g))
        floor = forecast_floor_ms(roof, cfg)
        assert (floor > 0).all() and (predict_kernels(shapes, g, cfg_by_class=cfg) > floor).all()
        # by hand: roofline / e, e = 1 without device factors (EW); with them (FC), exp of the GPU's learned
        # log-efficiency, or of their mean over the trained GPUs for a GPU never trained on
        log_eff = get_predictor("FC", cfg["FC"]).model.log_eff.detach().numpy()
        e_fc = np.exp(log_eff[TRAIN_GPUS_NVIDIA.index(name)] if name in TRAIN_GPUS_NVIDIA else log_eff.mean())
        fc = shapes["op"].eq("linear").to_numpy()
        assert floor[~fc] == pytest.approx(roof["roofline_ms"].to_numpy()[~fc], rel=1e-12)
        assert floor[fc] == pytest.approx(roof["roofline_ms"].to_numpy()[fc] / e_fc, rel=1e-6)


def test_envelope_adoption_by_hand():
    from lib.protocol import envelope_adoption
    ev = pd.DataFrame({"op_class": ["FC", "FC", "EW", "EW", "LN"],
                       "mape_as_is": [30.0, 10.0, 20.0, 20.0, 5.0], "mape_capped": [31.0, 8.0, 20.0, 20.0, 6.0]})
    out = envelope_adoption(ev).set_index("op_class")
    # FC: mean 20 -> 19.5, adopted; EW: a tie is not lower, kept; LN: worse, kept
    assert out["mape_capped"].to_dict() == {"FC": 19.5, "EW": 20.0, "LN": 6.0}
    assert out["adopt"].to_dict() == {"FC": True, "EW": False, "LN": False}


def test_forecast_never_slower_than_on_a_dominated_training_gpu(tmp_path, monkeypatch):
    from lib.kernels import predict_kernels
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    cfg = {"EW": {**TINY, "envelope": True}}
    shapes = pd.DataFrame({"op": ["add", "relu", "mul"], "B": [64.0, 4096.0, 1.0], "H": [4096.0, 1024.0, 8.0]})
    h100 = device_by_name("NVIDIA H100 80GB HBM3")
    capped = predict_kernels(shapes, h100, cfg_by_class=cfg)
    as_is = predict_kernels(shapes, h100, cfg_by_class={"EW": TINY})
    refs = np.vstack([predict_kernels(shapes, g, cfg_by_class=cfg) for g in E.dominated_training_gpus(h100)])
    assert capped == pytest.approx(np.minimum(as_is, refs.min(axis=0)))


def test_several_devices_at_once_as_one_at_a_time(tmp_path, monkeypatch):
    from lib.kernel_input import KernelInputError
    from lib.kernels import predict_devices, predict_kernels
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    cfg = {"EW": {**TINY, "envelope": True}, "FC": TINY}
    shapes = pd.DataFrame({"op": ["add", "relu", "linear", "mem"], "B": [64.0, 4096.0, 2.0, np.nan],
                           "H": [4096.0, 1024.0, np.nan, np.nan], "M": [np.nan, np.nan, 512.0, np.nan],
                           "N": [np.nan, np.nan, 1024.0, np.nan], "K": [np.nan, np.nan, 4096.0, np.nan],
                           "bytes": [np.nan, np.nan, np.nan, 1e9]})
    h100, l4, t4 = (device_by_name(n) for n in ("NVIDIA H100 80GB HBM3", "NVIDIA L4", "Tesla T4"))
    # a renamed copy of T4's spec is a GPU never trained on; one of H100's with another bandwidth keeps its name
    t4_new, h100_slow = dataclasses.replace(t4, name="T4 copy"), dataclasses.replace(h100, mem_bw_gbps=1000.0)
    devs = [h100, l4, t4, t4_new, h100_slow]
    for method in ("neusight", "roofline", "li"):
        both = predict_devices(shapes, devs, method, cfg_by_class=cfg)
        one = np.column_stack([predict_kernels(shapes, d, method, cfg_by_class=cfg) for d in devs])
        assert both.shape == (4, 5) and both == pytest.approx(one, rel=1e-6, nan_ok=True)
    assert both[3, 0] == pytest.approx(1e9 / (h100.mem_bw_gbps * 1e9) * 1e3)   # mem: bytes / bandwidth
    assert np.isnan(both[0, 1]) and not np.isnan(both[0, 2])   # li: L4 has no measurements, T4 has
    neusight = predict_devices(shapes, devs, cfg_by_class=cfg)
    assert not np.allclose(neusight[:, 0], neusight[:, 4])     # same name, other spec: not merged as one GPU
    with pytest.raises(KernelInputError, match="at least one device"):
        predict_devices(shapes, [], cfg_by_class=cfg)


class _Stub:
    """A predictor that forecasts `ms(feat)` for every row, standing in for a trained model."""

    def __init__(self, ms):
        self.predict = ms


def _stub_predictors(monkeypatch, known_ms):
    """train_predictor -> an unseen-GPU model at 2 ms, a known-GPU one (device_factors) at known_ms(feat); the
    configs it was asked for are recorded."""
    import lib.predictors as P
    asked = []

    def train(op_class, cfg):
        asked.append((op_class, dict(cfg)))
        return _Stub(known_ms if cfg.get("device_factors") else lambda feat: np.full(len(feat), 2.0))
    monkeypatch.setattr(P, "train_predictor", train)
    return asked


def test_envelope_evidence_per_fold(monkeypatch):
    # Stub models: the unseen-GPU model forecasts 2 ms; the known-GPU model 1 ms on P4's spec, 3 ms on any other.
    # T4 dominates P4 only, so in T4's fold every row is capped to 1 ms; P4 dominates no training GPU.
    from lib.data import load_kernels
    from lib.metrics import mape
    from lib.protocol import envelope_adoption, envelope_evidence
    p4_sm = device_by_name("Tesla P4").num_sm
    asked = _stub_predictors(monkeypatch, lambda feat: np.where(feat["num_sm"] == p4_sm, 1.0, 3.0))
    ev = envelope_evidence({"EW": TINY}, {"EW": {**TINY, "device_factors": True}}, ["EW"], ["Tesla P4", "Tesla T4"])
    p4, t4 = ev.set_index("held_out").loc[["Tesla P4", "Tesla T4"]].to_dict("records")
    train = load_kernels(ops="EW", splits="train")
    y = {g: train.loc[train["device"] == g, "latency_ms"].to_numpy() for g in ("Tesla P4", "Tesla T4")}
    assert p4["dominated"] == "" and p4["capped_pct"] == 0
    assert p4["mape_capped"] == p4["mape_as_is"] == pytest.approx(mape(np.full(len(y["Tesla P4"]), 2.0), y["Tesla P4"]))
    assert t4["dominated"] == "Tesla P4" and t4["rows"] == len(y["Tesla T4"]) and t4["capped_pct"] == 100
    assert t4["mape_as_is"] == pytest.approx(mape(np.full(len(y["Tesla T4"]), 2.0), y["Tesla T4"]))
    assert t4["mape_capped"] == pytest.approx(mape(np.full(len(y["Tesla T4"]), 1.0), y["Tesla T4"]))
    # each fold's models were trained without the held-out GPU (it validates them); only T4's needs the known model
    assert [(cfg["validation"], bool(cfg.get("device_factors"))) for _, cfg in asked] == [
        ("Tesla P4", False), ("Tesla T4", False), ("Tesla T4", True)]
    assert envelope_adoption(ev)["op_class"].tolist() == ["EW"]


def test_envelope_evidence_no_undercut_moves_nothing(monkeypatch):
    from lib.protocol import envelope_evidence
    _stub_predictors(monkeypatch, lambda feat: np.full(len(feat), 3.0))   # never below the unseen model's 2 ms
    ev = envelope_evidence({"EW": TINY}, {"EW": {**TINY, "device_factors": True}}, ["EW"], ["Tesla T4"])
    assert ev["capped_pct"].tolist() == [0.0] and ev["mape_capped"].tolist() == ev["mape_as_is"].tolist()
