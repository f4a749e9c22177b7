"""NeuSight utilization predictors: the formula by hand, training, caching (tiny configs)."""
import math

import numpy as np
import pandas as pd
import pytest
import torch

from lib import paths, predictors as P, selection
from lib.data import OP_CLASSES

TINY = {"layers": 1, "width": 8, "epochs": 1, "batch_size": 4096, "max_rows": 1500}


def test_utilization_and_latency_by_hand():
    # alpha = 0.8, beta = 0.4, 2 waves: utilization = 0.8 - 0.4 / 2 = 0.6
    assert P.utilization(0.8, 0.4, 2.0) == pytest.approx(0.6)
    # 4 waves x 2e9 FLOP per tile at 1e12 FLOP/s per SM and utilization 0.5: 4*2e9/(1e12*0.5) s = 16 ms
    assert P.latency_ms(4.0, 2e9, 1e12, 0.5) == pytest.approx(16.0)
    alpha, beta = P.alpha_beta(torch.tensor([[0.0, 0.0]]))
    assert alpha.item() == pytest.approx(0.5) and beta.item() == pytest.approx(0.25)


def test_predict_ms_follows_the_formula():
    model = P.UtilizationMLP(5, 1, 4)
    with torch.no_grad():   # a zero head: z = 0, so alpha = sigmoid(0) = 0.5 and beta = alpha * sigmoid(0) = 0.25
        model.head.weight.zero_()
        model.head.bias.zero_()
    batch = {"x": torch.randn(3, 5), "waves": torch.tensor([1.0, 3.0, 10.0]),
             "gflop_per_tile": torch.tensor([1.0, 2.0, 0.5]),
             "bound_gflops_per_sm": torch.tensor([100.0, 50.0, 10.0]), "device_idx": torch.tensor([0, -1, 3])}
    # utilization = 0.5 - 0.25 / waves = 0.25, 5/12, 0.475; ms = waves * GFLOP / (GFLOP/s * util) * 1e3
    expected = [1 * 1.0 / (100 * 0.25) * 1e3, 3 * 2.0 / (50 * 5 / 12) * 1e3, 10 * 0.5 / (10 * 0.475) * 1e3]
    assert expected[:2] == pytest.approx([40.0, 288.0])
    assert P._predict_ms(model, batch).detach().tolist() == pytest.approx(expected, rel=1e-6)


def test_device_efficiency_by_hand():
    # log_eff = (ln 2, ln 0.5, 0, ln 4, 0); trained on GPUs 0, 1, 3 (GPU 2 held out, GPU 4 unused):
    # known GPUs get exp(log_eff); others (-1, 2, 4) get exp(mean(ln 2, ln 0.5, ln 4)) = 4 ** (1/3)
    model = P.UtilizationMLP(5, 1, 4, n_devices=5)
    with torch.no_grad():
        model.log_eff.copy_(torch.log(torch.tensor([2.0, 0.5, 1.0, 4.0, 1.0])))
    model.trained[[0, 1, 3]] = True
    eff = P.device_efficiency(model, torch.tensor([0, 1, 3, -1, 2, 4]))
    typical = 4.0 ** (1 / 3)
    assert torch.allclose(eff, torch.tensor([2.0, 0.5, 4.0, typical, typical, typical]))
    # the latency divides by it: twice as efficient -> half the latency
    x = torch.randn(2, 5)
    batch = {"x": x, "waves": torch.tensor([2.0, 2.0]), "gflop_per_tile": torch.tensor([1.0, 1.0]),
             "bound_gflops_per_sm": torch.tensor([10.0, 10.0]), "device_idx": torch.tensor([0, -1])}
    plain = P.UtilizationMLP(5, 1, 4)
    plain.load_state_dict({k: v for k, v in model.state_dict().items() if k not in ("log_eff", "trained")}, strict=False)
    base = P._predict_ms(plain, batch).detach()
    assert torch.allclose(P._predict_ms(model, batch).detach(), base / torch.tensor([2.0, typical]))
    assert P.device_efficiency(plain, batch["device_idx"]) == 1.0


def test_model_inputs_one_hot_the_ew_op_by_hand():
    # the five features, then for EW one column per EW op: 1 in the row's own op's column, 0 elsewhere
    from lib.data import EW_OPS
    feat = pd.DataFrame({**{f: [1.0, 2.0] for f in P.FEATURES}, "op": ["gelu", "add"]})
    x = P.model_inputs(feat, "EW")
    assert x.dtype == np.float32 and x.shape == (2, len(P.FEATURES) + len(EW_OPS))
    assert x[:, :len(P.FEATURES)].tolist() == [[1.0] * 5, [2.0] * 5]
    one_hot = np.zeros((2, len(EW_OPS)))
    one_hot[0, EW_OPS.index("gelu")] = one_hot[1, EW_OPS.index("add")] = 1.0
    assert x[:, len(P.FEATURES):].tolist() == one_hot.tolist()
    assert P.model_inputs(feat, "FC").shape == (2, len(P.FEATURES))   # no op columns for the other classes


def test_mlp_hidden_layers_are_relu():
    # one hidden unit (weight 1, bias 0) feeding both head outputs: a negative input gives z = 0 (ReLU), not tanh
    model = P.UtilizationMLP(1, 1, 1)
    with torch.no_grad():
        model.body[0].weight.fill_(1.0)
        model.body[0].bias.zero_()
        model.head.weight.fill_(1.0)
        model.head.bias.zero_()
    assert model(torch.tensor([[-2.0], [3.0]])).tolist() == [[0.0, 0.0], [3.0, 3.0]]


def test_device_index_names_training_gpus_only():
    idx = P.device_index(["Tesla T4", "NVIDIA H100 80GB HBM3", "Tesla P4"])
    assert idx.tolist() == [P.TRAIN_GPUS_NVIDIA.index("Tesla T4"), -1, P.TRAIN_GPUS_NVIDIA.index("Tesla P4")]


def test_training_is_cached(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    first = P.train_predictor("LN", TINY)
    second = P.train_predictor("LN", TINY)
    assert first.info["cached"] is False and second.info["cached"] is True
    assert len(list((tmp_path / "predictors").glob("*/neusight-LN-*.pt"))) == 1
    for p1, p2 in zip(first.model.parameters(), second.model.parameters()):
        assert torch.equal(p1, p2)
    feat = P.training_table("LN", 50)
    assert np.allclose(first.predict(feat), second.predict(feat))


def test_train_all_reports_seconds_per_class(monkeypatch):
    # stub models recording 1.5 s (a named config), 2 s (DEFAULT_CONFIGS) and 3 s (KNOWN_CONFIGS): a class
    # train_all names gets its config's seconds, any other class both defaults' seconds summed
    from types import SimpleNamespace
    named = {"name": "x"}
    seconds = lambda c, cfg: (1.5 if cfg is named else 2.0 if cfg is P.DEFAULT_CONFIGS[c]
                              else 3.0 if cfg is P.KNOWN_CONFIGS[c] else math.nan)
    monkeypatch.setattr(P, "train_predictor", lambda c, cfg, force=False: SimpleNamespace(
        info={"train_seconds": seconds(c, cfg)}))
    assert P.train_all({"LN": named}) == {c: 1.5 if c == "LN" else 5.0 for c in OP_CLASSES}
    with pytest.raises(P.PredictorError, match="unknown op class"):
        P.train_all({"GEMM": named})


def test_predictions_positive_and_inputs_clipped(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    p = P.train_predictor("SOFTMAX", TINY)
    feat = P.training_table("SOFTMAX", 20)
    big = feat.copy()
    big["f_l2"] = 1e3   # far outside the training range: clipped to it
    clipped = big.copy()
    clipped["f_l2"] = p.hi[list(P.input_names("SOFTMAX")).index("f_l2")]
    assert np.all(p.predict(feat) > 0)
    assert np.allclose(p.predict(big), p.predict(clipped))
    assert not np.allclose(p.predict(feat), p.predict(big))   # f_l2 does reach the model


def test_bad_config_names_the_key():
    with pytest.raises(P.PredictorError, match="unknown predictor config key"):
        P.make_config({"layerz": 2})
    for bad, key in (({"lr": "fast"}, "lr"), ({"layers": -3}, "layers"), ({"max_rows": "many"}, "max_rows"),
                     ({"epochs": 2.5}, "epochs"), ({"val_fraction": 1.0}, "val_fraction"), ({"seed": True}, "seed"),
                     ({"features": 5}, "features"), ({"schedule_epochs": 0}, "schedule_epochs")):
        with pytest.raises(P.PredictorError, match=f"^{key} must be"):
            P.make_config(bad)
    assert P.make_config({"max_rows": np.int64(5), "lr": np.float32(1e-3), "layers": 0})[1] == 5
    with pytest.raises(P.PredictorError, match="schedule_epochs .* at least epochs"):
        P.make_config({"epochs": 41, "schedule_epochs": 40})
    assert P.make_config({"epochs": 40, "schedule_epochs": 40})[0].schedule_epochs == 40    # its own schedule
    with pytest.raises(P.PredictorError, match="^lr must be a number > 0, got 0"):
        P.make_config({"lr": 0})
    with pytest.raises(P.PredictorError, match="hold_mem must be true or false, got 'yes'"):
        P.make_config({"hold_mem": "yes"})
    with pytest.raises(P.PredictorError, match="op_class"):
        P.input_names("CONV")


def test_paper_configs_are_the_papers_predictor():
    """lib.selection.PAPER_CONFIGS resolve to the paper's MLP: 8 x 512, 100 epochs, its five features, AdamW defaults."""
    from lib.features import FEATURES
    for c in OP_CLASSES:
        cfg, max_rows, features, validation, device_factors, overhead, hold_mem, _ = P.make_config(selection.PAPER_CONFIGS[c])
        assert (cfg.layers, cfg.width, cfg.epochs, cfg.batch_size, cfg.lr) == (8, 512, 100, 4096, 1e-3)
        assert cfg.patience >= cfg.epochs and validation == "none"   # no early stopping: all 100 epochs
        assert features == FEATURES and max_rows is None
        assert not (device_factors or overhead or hold_mem)        # one model for every GPU, nothing of ours added


def test_leave_one_gpu_out_and_no_validation(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    cfg = {**TINY, "epochs": 3, "patience": 3}
    gpu = "Tesla T4"
    feat = P.training_table("LN", TINY["max_rows"])
    n_gpu = int((feat["device"] == gpu).sum())
    logo = P.train_predictor("LN", {**cfg, "validation": gpu})
    assert logo.info["train_rows"] == len(feat) - n_gpu          # the held-out GPU is never learned
    assert 1 <= logo.info["best_epoch"] <= 3
    full = P.train_predictor("LN", {**cfg, "validation": "none"})
    assert full.info["train_rows"] == len(feat) and full.info["epochs"] == 3   # every epoch, no early stop
    assert np.isnan(full.info["best_val_loss"]) or full.info["best_val_loss"] == float("inf")
    with pytest.raises(P.PredictorError, match="validation"):
        P.make_config({"validation": "NVIDIA H100 80GB HBM3"})   # an OOD GPU is never a validation fold


def test_held_out_gpu_is_never_learned(tmp_path, monkeypatch):
    """held_out_gpu drops that GPU's rows before anything else: not trained on, not validated on, not in f_mem's held
    range; its key and file differ from the model trained with it, which stays as it was."""
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    cfg = {**TINY, "epochs": 2, "patience": 2, "validation": "none", "hold_mem": True}
    gpu = "Tesla P4"
    feat = P.training_table("LN", TINY["max_rows"])
    without = P.train_predictor("LN", {**cfg, "held_out_gpu": gpu})
    assert without.info["train_rows"] == len(feat) - int((feat["device"] == gpu).sum())
    assert without.mem_per_sm_gb[0] == pytest.approx(16 / 56)   # P4's 8 GB / 40 SMs left out: P100's is the least
    full = P.train_predictor("LN", cfg)
    assert full.info["train_rows"] == len(feat) and full.mem_per_sm_gb[0] == pytest.approx(8 / 40)
    files = sorted(f.name for f in tmp_path.rglob("*.pt"))
    assert len(files) == 2 and sum("withoutTeslaP4" in f for f in files) == 1
    with pytest.raises(P.PredictorError, match="held_out_gpu"):
        P.make_config({"held_out_gpu": "NVIDIA H100 80GB HBM3"})   # only a training GPU can be held out
    with pytest.raises(P.PredictorError, match="held_out_gpu"):
        P.make_config({"held_out_gpu": gpu, "validation": gpu})
    configs = selection.held_out_configs(gpu)
    assert set(configs) == set(OP_CLASSES)
    for c, conf in configs.items():
        assert conf == {**selection.DEFAULT_CONFIGS[c], "held_out_gpu": gpu, "envelope": False}


def test_largest_rows_by_hand():
    # per GPU, rows above that GPU's 80th-percentile roofline bound; a and b are ranked separately
    feat = pd.DataFrame({"device": ["a"] * 5 + ["b"] * 5, "roofline_ms": [1, 2, 3, 4, 5, 10, 20, 30, 40, 50.0]})
    assert list(P.largest_rows(feat)) == [False] * 4 + [True] + [False] * 4 + [True]
    # rows at the cut are not above it: a GPU whose rows all have one bound has no largest rows
    assert not P.largest_rows(pd.DataFrame({"device": "c", "roofline_ms": [2.0] * 5})).any()


def test_size_extrapolation_trains_without_the_largest_rows(tmp_path, monkeypatch):
    from lib.protocol import size_extrapolation
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    cfg = {**TINY, "epochs": 2, "patience": 2}
    feat = P.training_table("SOFTMAX", TINY["max_rows"])
    p = P.train_predictor("SOFTMAX", {**cfg, "validation": "largest"})
    assert p.info["train_rows"] == len(feat) - int(P.largest_rows(feat).sum())   # the largest are never learned
    t = size_extrapolation("SOFTMAX", cfg)
    assert len(t) == 2 and (t["rows"] == int(P.largest_rows(feat).sum())).all()
    assert np.isfinite(t["mape_pct"]).all() and (t["mape_pct"] > 0).all()
    # the clipped row is the model as it predicts (inputs clipped), per GPU the mean APE of that GPU's largest rows
    from lib.protocol import CLIPPED
    held = feat[P.largest_rows(feat)]
    err = pd.Series(100 * np.abs(p.predict(held) - held["latency_ms"]) / held["latency_ms"], index=held.index)
    clipped = t.set_index("inputs").loc[CLIPPED]
    assert clipped["mape_pct"] == pytest.approx(err.mean())
    per_gpu = err.groupby(held["device"]).mean()
    assert clipped[per_gpu.index].tolist() == pytest.approx(per_gpu.tolist())


def test_logo_table_holds_out_each_gpu(tmp_path, monkeypatch):
    from lib.protocol import logo_table
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    trained = []
    real = P.train_predictor
    monkeypatch.setattr(P, "train_predictor", lambda op_class, cfg: trained.append(real(op_class, cfg)) or trained[-1])
    t = logo_table("SOFTMAX", {**TINY, "epochs": 2, "patience": 2}, holdouts=["Tesla P4", "Tesla T4"])
    assert list(t["held_out"]) == ["Tesla P4", "Tesla T4"]
    feat = P.training_table("SOFTMAX", TINY["max_rows"])
    held = [int((feat["device"] == gpu).sum()) for gpu in ("Tesla P4", "Tesla T4")]
    assert t["rows"].tolist() == held and min(held) > 0
    # each model was trained with that GPU as its validation fold and never learned from its rows
    assert [p.info["validation"] for p in trained] == ["Tesla P4", "Tesla T4"]
    assert [p.info["train_rows"] for p in trained] == [len(feat) - n for n in held]
    assert np.isfinite(t["mape_oracle"]).all() and (t["mape_oracle"] > 0).all()
    assert t["mape_spec"].isna().all()                              # vector ops: no tile to choose


def test_logo_table_scores_spec_tiles_for_both_gemm_classes(tmp_path, monkeypatch):
    from lib.protocol import logo_table
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    for c in ("BMM", "FC"):
        t = logo_table(c, {**TINY, "epochs": 1, "patience": 1}, holdouts=["Tesla T4"], spec_tiles=True)
        assert np.isfinite(t["mape_spec"]).all() and (t["mape_spec"] > 0).all(), c


def test_ensemble_averages_the_seeds(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    ens = P.train_predictor("LN", {**TINY, "ensemble": 2})
    one, two = P.train_predictor("LN", TINY), P.train_predictor("LN", {**TINY, "seed": 1})
    feat = P.training_table("LN", 30)
    assert np.allclose(ens.predict(feat), (one.predict(feat) + two.predict(feat)) / 2)
    assert not np.allclose(one.predict(feat), two.predict(feat))
    with pytest.raises(P.PredictorError, match="ensemble"):
        P.make_config({"ensemble": 0})


def _curves():
    """Hand-made selection curves: 3 LOGO folds (fold A with two seeds, fold C stopped at 3) + shapes."""
    runs = {("A", 0): [44, 28, 35, 40], ("A", 1): [36, 32, 35, 32],      # seed mean [40, 30, 35, 36]
            ("B", 0): [50, 45, 44, 48], ("C", 0): [30, 20, 25], ("shapes", 0): [20, 10, 8, 4]}
    return pd.DataFrame([{"op_class": "EW", "run": r, "seed": s, "epoch": e + 1, "val_mape": v}
                         for (r, s), vals in runs.items() for e, v in enumerate(vals)])


def test_combined_scores_by_hand():
    from lib.protocol import combined_scores
    t = combined_scores(_curves()).set_index("candidate")
    # best epochs: folds A 2, B 3, C 2 -> median 2; shapes 4; geometric mean sqrt(8) = 2.83 -> 3
    assert t["epochs"].to_dict() == {"logo_median_best": 2, "shapes_best": 4, "geometric_mean": 3}
    # E = 2: LOGO (30 + 45 + 20) / 3 = 31.67, shapes 10, score 20.83
    assert t.loc["logo_median_best", "logo_mape"] == pytest.approx(95 / 3)
    assert t.loc["logo_median_best", "score"] == pytest.approx((95 / 3 + 10) / 2)
    # E = 4: fold C stopped at 3 and counts with its last epoch (25): (36 + 48 + 25) / 3, shapes 4
    assert t.loc["shapes_best", "score"] == pytest.approx((109 / 3 + 4) / 2)
    # E = 3: (35 + 44 + 25) / 3, shapes 8
    assert t.loc["geometric_mean", "score"] == pytest.approx((104 / 3 + 8) / 2)
    with pytest.raises(ValueError, match="shapes"):
        combined_scores(_curves().query("run != 'shapes'"))
    # the LOGO candidate is the median of the folds' best epochs, not their mean: bests 1, 1, 4 -> 1 (mean 2)
    skew = pd.DataFrame([{"op_class": "EW", "run": r, "seed": 0, "epoch": e + 1, "val_mape": v}
                         for r, vals in {"A": [1, 2, 3, 4], "B": [1, 2, 3, 4], "C": [4, 3, 2, 1],
                                         "shapes": [4, 3, 2, 1]}.items() for e, v in enumerate(vals)])
    assert combined_scores(skew).set_index("candidate").loc["logo_median_best", "epochs"] == 1


def test_selection_candidates_and_curves(tmp_path, monkeypatch):
    from lib.protocol import selection_curves
    for c in OP_CLASSES:   # the LOGO choice is always a candidate; every run trains all epochs
        assert "logo_choice" in P.CANDIDATES[c]
        assert all(cfg["patience"] >= cfg["epochs"] for cfg in P.CANDIDATES[c].values())
        assert set(P.SELECTED[c]) >= {"features", "epochs"}
        # the defaults are copies of the chosen candidates (epochs aside)
        for chosen, choice in ((P.SELECTED[c], selection.UNSEEN_CHOICE[c]), (P.KNOWN_SELECTED[c], selection.KNOWN_CHOICE[c])):
            cand = P.CANDIDATES[c][choice[0]]
            assert chosen["epochs"] == choice[1] and chosen["batch_size"] == cand["batch_size"]
            assert tuple(chosen["features"]) == tuple(cand["features"])
        # the batch-256 trial: each '<name>_b256' is a protocol winner at batch 256, nothing else changed
        trial = selection.TRIAL_CANDIDATES[c]
        assert {n[:-5] for n in trial} == {selection.AMENDMENT2_UNSEEN_CHOICE[c][0], selection.AMENDMENT2_KNOWN_CHOICE[c][0]}
        assert all(cfg == {**P.CANDIDATES[c][n[:-5]], "batch_size": 256} for n, cfg in trial.items())
        assert selection.TRIAL_KNOWN_CONFIGS[c]["device_factors"] and "device_factors" not in selection.TRIAL_DEFAULT_CONFIGS[c]
        # what the CLIs train: the chosen config, retrained on all five GPUs (no validation split) for E epochs
        for final, chosen, factors, name in ((P.DEFAULT_CONFIGS[c], P.SELECTED[c], False, selection.UNSEEN_CHOICE[c][0]),
                                             (P.KNOWN_CONFIGS[c], P.KNOWN_SELECTED[c], True, selection.KNOWN_CHOICE[c][0])):
            assert final["validation"] == "none" and final["epochs"] == final["patience"] == chosen["epochs"]
            # ... on the lr schedule of the search run whose epoch E the criterion scored
            assert final["schedule_epochs"] == P.CANDIDATES[c][name]["epochs"] >= final["epochs"]
            assert tuple(final["features"]) == tuple(chosen["features"]) and final.get("device_factors", False) == factors
            # as before the correction (notebooks 04, 05): only E < 40 loses the longer schedule, nothing else changes
            before = selection.without_schedule_correction({c: final})[c]
            assert before == ({k: v for k, v in final.items() if k != "schedule_epochs"}
                              if final["epochs"] < final["schedule_epochs"] else final)
            assert P.make_config(before)[0].schedule_epochs in (None, final["epochs"])
    assert selection.without_schedule_correction(P.DEFAULT_CONFIGS)["SOFTMAX"] != P.DEFAULT_CONFIGS["SOFTMAX"]   # E = 8
    # amendment 7: each '<name>_fill' is a GEMM protocol's pre-amendment candidate plus f_fill, scored only by that
    # protocol; the defaults keep amendments 5 and 6 (FC's envelope), the other classes keep their models
    for proto, choice, before in (("unseen", selection.UNSEEN_CHOICE, selection.AMENDMENT4_UNSEEN_CHOICE),
                                  ("known", selection.KNOWN_CHOICE, selection.AMENDMENT4_KNOWN_CHOICE)):
        scored = selection.scored_candidates(P.CANDIDATES, proto)
        for c in OP_CLASSES:
            base = selection.AMENDMENT7_SCORED[proto].get(c)
            fill = {n for n in scored[c] if n.endswith("_fill")}
            assert fill == ({f"{base}_fill"} if base else set()) and base in (None, before[c][0])
            if base:
                cand = P.CANDIDATES[c][f"{base}_fill"]
                assert cand == {**P.CANDIDATES[c][base], "features": (*P.CANDIDATES[c][base]["features"], "f_fill")}
            else:
                assert choice[c] == before[c]
    assert set(scored["BMM"]) == set(P.CANDIDATES["BMM"]) - {"logo_choice_fill"}    # 'known' scores wave_l2_fill only
    for c in OP_CLASSES:
        assert {k: v for k, v in P.DEFAULT_CONFIGS[c].items() if k not in ("envelope", "hold_mem")} == selection._final(P.SELECTED)[c]
        assert P.DEFAULT_CONFIGS[c].get("envelope", False) == (c in selection.ENVELOPE_CLASSES)
        assert selection.AMENDMENT6_DEFAULT_CONFIGS[c].get("envelope", False) == (c in selection.ENVELOPE_CLASSES)
        assert P.DEFAULT_CONFIGS[c].get("hold_mem", False) == (c in selection.HOLD_MEM_CLASSES)
        if c not in selection.AMENDMENT7:
            assert P.DEFAULT_CONFIGS[c] == selection.AMENDMENT6_DEFAULT_CONFIGS[c]
            assert P.KNOWN_CONFIGS[c] == selection.AMENDMENT6_KNOWN_CONFIGS[c]
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    cur = selection_curves("LN", {**TINY, "epochs": 2, "patience": 2, "ensemble": 2}, holdouts=["Tesla T4"])
    assert set(cur["run"]) == {"Tesla T4", "shapes"} and set(cur["seed"]) == {0, 1}
    assert len(cur) == 2 * 2 * 2 and (cur["val_mape"] > 0).all()


def test_training_gpu_rows_use_the_known_gpu_model(tmp_path, monkeypatch):
    # tiny stand-ins for the two default sets: the unseen-GPU one without, the known-GPU one with device factors
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    monkeypatch.setattr(P, "DEFAULT_CONFIGS", {c: TINY for c in OP_CLASSES})
    monkeypatch.setattr(P, "KNOWN_CONFIGS", {c: {**TINY, "device_factors": True} for c in OP_CLASSES})
    feat = P.training_table("LN", 400)
    t4 = feat[feat["device"] == "Tesla T4"].head(5)
    ood = t4.assign(device="NVIDIA H100 80GB HBM3")
    both = pd.concat([t4, ood], ignore_index=True)
    known = P.get_predictor("LN", P.KNOWN_CONFIGS["LN"])
    unseen = P.get_predictor("LN", P.DEFAULT_CONFIGS["LN"])
    assert known.model.log_eff is not None and unseen.model.log_eff is None
    got = P.predict_featured(both)
    assert np.allclose(got[:5], known.predict(t4)) and np.allclose(got[5:], unseen.predict(ood))
    # a config named by the caller is used on every row
    assert np.allclose(P.predict_featured(both, {"LN": TINY}), unseen.predict(both))


def test_learned_device_factors_cover_the_trained_gpus(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    p = P.train_predictor("LN", {**TINY, "device_factors": True, "validation": "Tesla T4"})
    trained = {P.TRAIN_GPUS_NVIDIA[i] for i in np.flatnonzero(p.model.trained.numpy())}
    assert trained == set(P.TRAIN_GPUS_NVIDIA) - {"Tesla T4"}    # the held-out GPU has no factor


def test_known_gpu_selection_runs_held_out_shapes_only(tmp_path, monkeypatch):
    from lib.protocol import selection_curves
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    cfg = {**TINY, "epochs": 3, "patience": 3}
    cur = selection_curves("LN", {**cfg, "device_factors": True}, holdouts=())
    assert set(cur["run"]) == {"shapes"} and len(cur) == 3


def test_known_gpu_selection_table_by_hand(monkeypatch):
    # hand curves: config a, two seeds [40, 20, 30] and [20, 20, 20] (mean [30, 20, 25]: best epoch 2, 20.0);
    # config b, one seed [10, 12, 9] (best epoch 3, 9.0). Best first: b, then a
    import lib.protocol as protocol
    curves = {"a": [[40, 20, 30], [20, 20, 20]], "b": [[10, 12, 9]]}
    asked = []

    def fake_curves(op_class, cfg, holdouts=None, shapes=True):
        asked.append((cfg["name"], cfg.get("device_factors"), holdouts))
        return pd.DataFrame([{"op_class": op_class, "run": "shapes", "seed": s, "epoch": e + 1, "val_mape": v}
                             for s, vals in enumerate(curves[cfg["name"]]) for e, v in enumerate(vals)])
    monkeypatch.setattr(protocol, "selection_curves", fake_curves)
    t = protocol.known_gpu_selection_table({"LN": {"a": {"name": "a"}, "b": {"name": "b"}}})
    assert list(t.columns) == ["op_class", "config", "epochs", "shapes_mape"]
    assert list(t[["config", "epochs", "shapes_mape"]].itertuples(index=False, name=None)) == [("b", 3, 9.0), ("a", 2, 20.0)]
    assert asked == [("a", True, ()), ("b", True, ())]     # device factors on, no LOGO fold


def test_tile_rule_scores_by_hand():
    from lib.protocol import tile_rule_scores
    t = pd.DataFrame({"op_class": "BMM", "rule": ["autotune"] * 3 + ["oracle"] * 3,
                      "run": ["Tesla P4", "Tesla T4", "shapes"] * 2, "mape_pct": [20, 30, 10, 40, 20, 6.0]})
    s = tile_rule_scores(t).set_index("rule")
    # autotune: LOGO (20 + 30) / 2 = 25, shapes 10 -> 17.5; oracle: 30, 6 -> 18
    assert s.loc["autotune", ["logo_mape", "shapes_mape", "score"]].tolist() == [25, 10, 17.5]
    assert s.loc["oracle", "score"] == 18


def test_tile_rule_table_runs_each_rule(tmp_path, monkeypatch):
    from lib import protocol, tile_choice
    from lib.train import split_indices
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    fitted = []
    real_fit = tile_choice.fit_tile_classifier
    monkeypatch.setattr(tile_choice, "fit_tile_classifier", lambda df, seed=0: fitted.append(df) or real_fit(df, seed))
    cfg = {**TINY, "epochs": 2, "patience": 2}
    t = protocol.tile_rule_table("FC", cfg, holdouts=["Tesla T4"])
    assert set(t["run"]) == {"Tesla T4", "shapes"} and set(t["rule"]) == set(protocol.TILE_RULES)
    assert np.isfinite(t[["mape_pct", "median_ratio"]]).all().all() and (t["rows"] > 0).all()
    # the LOGO fold's classifier never saw the held-out GPU; the shapes run's never saw a held-out shape
    assert "Tesla T4" not in set(fitted[0]["device"])
    shapes_rows = int(t.loc[t["run"] == "shapes", "rows"].iloc[0])
    feat = P.training_table("FC", TINY["max_rows"])
    val = split_indices(P.shape_groups(feat), P.make_config(cfg)[0].val_fraction, 0)[1]
    held = set(map(tuple, feat.iloc[val][["B", "M", "N", "K"]].to_numpy(float)))
    seen = set(map(tuple, fitted[1].query("op == 'linear'")[["B", "M", "N", "K"]].to_numpy(float)))
    assert len(val) == shapes_rows and held and not held & seen
    # the shapes run's oracle rule, by hand: the model early-stopped on those shapes, MAPE and median pred / meas
    oracle = t.set_index(["run", "rule"]).loc[("shapes", "oracle")]
    rows = feat.iloc[val]
    ratio = P.train_predictor("FC", {**cfg, "validation": "shapes"}).predict(rows) / rows["latency_ms"].to_numpy()
    assert oracle["median_ratio"] == pytest.approx(np.median(ratio))
    assert oracle["mape_pct"] == pytest.approx(100 * np.mean(np.abs(ratio - 1)))


def test_hold_mem_term_by_hand():
    from lib.utilization import hold_mem_term, learned_mem_per_sm_gb
    feat = pd.DataFrame({"mem_gb": [80.0, 8.0, 30.0], "num_sm": [100.0, 100.0, 100.0], "f_mem": [1.0, 1.0, 1.0]})
    # 0.8 GB per SM held to 0.4: f_mem + log(0.8 / 0.4); 0.08 held up to 0.2: f_mem + log(0.08 / 0.2); 0.3: as is
    assert hold_mem_term(feat, (0.2, 0.4))["f_mem"].tolist() == pytest.approx([1 + np.log(2), 1 + np.log(0.4), 1.0])
    assert learned_mem_per_sm_gb("none") == pytest.approx((8 / 40, 32 / 80))   # P4's and V100's spec sheets
    assert learned_mem_per_sm_gb("Tesla P4")[0] == pytest.approx(16 / 56)      # P100's, once P4 is held out


def test_held_memory_term_makes_capacity_beyond_the_training_range_moot(tmp_path, monkeypatch):
    import dataclasses
    from lib.devices import device_by_name
    from lib.kernels import predict_kernels
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    h100 = device_by_name("NVIDIA H100 80GB HBM3")
    more_memory = dataclasses.replace(h100, mem_gb=141.0)
    shapes = pd.DataFrame({"op": ["ln", "ln"], "B": [4096.0, 64.0], "H": [1024.0, 4096.0]})
    for hold in (False, True):
        cfg = {"LN": {**TINY, "epochs": 2, "features": P.FEATURES, "hold_mem": hold}}
        a, b = (predict_kernels(shapes, d, cfg_by_class=cfg) for d in (h100, more_memory))
        # as is, f_mem reads the capacity; held, both GPUs sit above the learned range and get the same forecast
        assert (a == pytest.approx(b)) == hold


def test_hold_mem_evidence_is_vacuous_on_the_p100_fold(tmp_path, monkeypatch):
    # P100's 0.29 GB per SM lies inside the other four training GPUs' 0.20-0.40, so the hold changes nothing
    # there (lib.selection, amendment 5): if a spec changed that, the amendment's evidence would need a new look
    from lib.protocol import hold_mem_evidence
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    cands = {c: {"tiny": {**TINY, "features": P.FEATURES}} for c in ("EW", "LN")}
    ev = hold_mem_evidence(cands, {c: ("tiny", 1) for c in cands}, classes=("EW", "LN"))
    assert (ev["rows"] > 0).all() and ev["adopt"].all()
    assert ev["mape_held"].tolist() == pytest.approx(ev["mape_as_is"].tolist())


def test_seeded_puts_the_seed_where_it_is_read():
    from lib.selection import seeded
    given = {"BMM": {"layers": 1, "seed": 9}, "LN": {"layers": 2}}
    assert seeded(given, 3) == ({"BMM": {"layers": 1, "seed": 3}, "LN": {"layers": 2, "seed": 3}}, 0)
    assert seeded(None, 3) == (None, 3) and seeded({}, 2) == (None, 2)
    assert given["LN"] == {"layers": 2}        # the caller's configs are not changed
    # an ensemble of 3 trains seeds seed..seed+2: run 1 starts at 3, so no two runs share a member
    assert seeded({"LN": {"ensemble": 3}}, 1) == ({"LN": {"ensemble": 3, "seed": 3}}, 0)


def test_default_config_seed_spread_runs_share_no_ensemble_member():
    from lib.predictors import DEFAULT_CONFIGS, default_config
    n = DEFAULT_CONFIGS["SOFTMAX"]["ensemble"]
    assert n > 1
    members = [set(range(default_config("SOFTMAX", False, run).get("seed", 0),
                         default_config("SOFTMAX", False, run).get("seed", 0) + n)) for run in range(5)]
    assert all(not (a & b) for i, a in enumerate(members) for b in members[i + 1:])
    assert members[0] == set(range(n))          # run 0: the committed model


def test_defaults_as_swaps_both_defaults_and_restores_them():
    """selection.defaults_as: the no-config forecasts (default_config, the envelope's classes) read the given configs."""
    from lib.envelope import envelope_rows
    before, known = {**P.DEFAULT_CONFIGS, "FC": {**P.DEFAULT_CONFIGS["FC"], "envelope": False}}, {"FC": {"epochs": 1}}
    df = pd.DataFrame({"op": ["linear", "add"]})
    assert envelope_rows(df, None).tolist() == [True, True]          # FC and EW carry the envelope by default
    with selection.defaults_as(before, known):
        assert P.default_config("FC", False) is before["FC"] and P.default_config("FC", True) is known["FC"]
        assert envelope_rows(df, None).tolist() == [False, True]
    assert P.default_config("FC", False) is selection.DEFAULT_CONFIGS["FC"] and P.KNOWN_CONFIGS is selection.KNOWN_CONFIGS
    assert envelope_rows(df, None).tolist() == [True, True]


def test_a_spec_only_forecast_reads_nothing_the_target_measured(tmp_path, monkeypatch):
    # DESIGN.md: a forecast reads the device's spec and the training GPUs' data only. The H100's own rows carry
    # its measured latency, kernel name and launch geometry; scrambling them moves no spec-only forecast, while
    # the oracle-tile variant, which reads the kernel name on purpose, does move (so the scrambling reaches it).
    from lib.data import load_kernels
    from lib.devices import device_by_name
    from lib.kernels import predict_kernels
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    h100 = device_by_name("NVIDIA H100 80GB HBM3")
    rows = load_kernels(devices=h100.name, splits="test_ood").groupby("op_class").head(15).reset_index(drop=True)
    measured = ["latency_ms", "kernel_name", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                "warps_per_sm", "blocks_per_sm"]
    rng = np.random.default_rng(0)
    scrambled = rows.assign(**{c: rows.groupby("op_class")[c].transform(lambda v: rng.permutation(v.to_numpy()))
                               for c in measured})   # within a class: every kernel name stays a GEMM's for a GEMM
    cfg = {c: TINY for c in OP_CLASSES}
    for tiles in ("spec", "classifier"):
        assert np.array_equal(predict_kernels(rows, h100, tiles=tiles, cfg_by_class=cfg),
                              predict_kernels(scrambled, h100, tiles=tiles, cfg_by_class=cfg))
    gemm = rows.op_class.isin(["BMM", "FC"]).to_numpy()
    oracle = [predict_kernels(t[gemm], h100, tiles="oracle", cfg_by_class=cfg) for t in (rows, scrambled)]
    assert np.isfinite(oracle).all() and not np.array_equal(*oracle)


def _lib_callees(obj) -> list:
    """Functions and classes of lib that a function (or a class's methods) names: globals, and attributes of lib modules."""
    import inspect
    from lib import train
    names, scope = train.names_read(obj)
    found = []
    for n in names:
        v = scope.get(n)
        if inspect.ismodule(v) and v.__name__.startswith("lib."):   # train_mod.fit: 'fit' is an attribute name
            found += [getattr(v, a) for a in names if inspect.isfunction(getattr(v, a, None)) or inspect.isclass(getattr(v, a, None))]
        elif inspect.isfunction(v) or inspect.isclass(v):
            found.append(v)
    return [f for f in found if getattr(f, "__module__", "").startswith("lib.")]


def test_the_cache_key_reads_all_code_that_trains_a_model():
    # A stale cache hit needs an edit the key cannot see. Walk everything lib code that training runs calls,
    # from _fit_state down: each must be hashed whole (CODE's modules), through the data fingerprint (the
    # loader's modules), or be one of the code texts the key reads. Exceptions shape no weights.
    import inspect
    from lib import data, overhead, predictor_config, train
    whole = {m.__name__ for m in P.CODE if inspect.ismodule(m)} | {"lib." + f.removesuffix(".py") for f in data.FINGERPRINT_CODE}
    conditional = (overhead.OverheadMLP, overhead.overhead_predict_ms, predictor_config.largest_rows)  # their configs add them
    texts = set(P._own_code()) | {P._code_text(c) for c in (*P.CODE, *conditional)}
    seen, todo, unhashed = set(), [P._fit_state], []
    while todo:
        obj = todo.pop()
        if obj in seen or obj.__module__ in whole or (inspect.isclass(obj) and issubclass(obj, Exception)):
            continue
        seen.add(obj)
        if train.code_text(obj) not in texts:
            unhashed.append(f"{obj.__module__}.{obj.__qualname__}")
        todo += _lib_callees(obj)
    assert len(seen) > 10 and train.fit in seen and train.relative_error_loss in seen
    assert not unhashed, f"training runs code the cache key does not read: {unhashed}"


def test_fit_code_holds_every_lib_function_that_fit_runs():
    # both keys (NeuSight's CODE, the direct models') read lib.train through FIT_CODE alone
    import inspect
    from lib import direct, train
    seen, todo = set(), [train.fit]
    while todo:
        obj = todo.pop()
        if obj not in seen and not (inspect.isclass(obj) and issubclass(obj, Exception)):
            seen.add(obj)
            todo += _lib_callees(obj)
    assert seen - {train.TrainConfig} == set(train.FIT_CODE)
    assert set(train.FIT_CODE) <= set(P.CODE)


def test_the_direct_key_reads_the_lib_code_that_trains_a_direct_model(monkeypatch):
    # the direct key hashes lib.direct whole, the training table as arrays, and lib.train through FIT_CODE: walk the
    # lib.direct functions train_direct runs, and check what they call outside lib.direct
    import inspect
    from lib import direct, train
    seen, todo, outside = set(), [direct.train_direct], set()
    while todo:
        obj = todo.pop()
        if obj in seen or (inspect.isclass(obj) and issubclass(obj, Exception)):
            continue
        seen.add(obj)
        if obj.__module__ == "lib.direct":
            todo += _lib_callees(obj)
        else:
            outside.add(obj)
    from_train = {o for o in outside if o.__module__ == "lib.train"}
    assert from_train - {train.cache_key, train.cached, train.TrainConfig} == {train.fit, train.set_seed}
    assert {o.__module__ for o in outside} <= {"lib.train", "lib.data", "lib.devices"}   # the rest builds the table
    # and the key does read FIT_CODE: a change to the loss moves it
    keys = []

    def stop(name, key, build, weights=True):
        keys.append(key)
        raise StopIteration
    monkeypatch.setattr(train, "cached", stop)
    tiny = train.TrainConfig(layers=1, width=4, epochs=1)

    def absolute_loss(pred, meas):
        return (pred - meas).abs().mean()
    for loss in (train.relative_error_loss, absolute_loss):
        monkeypatch.setattr(train, "FIT_CODE", (train.fit, loss, train.split_indices, train.set_seed))
        with pytest.raises(StopIteration):
            direct.train_direct("LN", "mlp", 1, tiny, max_rows=50)
    assert keys[0] != keys[1]


def _training_key(monkeypatch, cfg) -> str:
    """The cache key train_predictor builds for a layernorm model of cfg: built before any training, captured, stopped."""
    from lib import train
    P._code_text.cache_clear()
    seen = []

    def stop(name, key, build, weights=True):
        seen.append(key)
        raise StopIteration
    with monkeypatch.context() as m:
        m.setattr(train, "cached", stop)
        with pytest.raises(StopIteration):
            P.train_predictor("LN", cfg)
    return seen[0]


def test_a_module_constant_that_training_reads_changes_the_key(monkeypatch):
    from lib import utilization

    def key_of():
        return _training_key(monkeypatch, TINY)
    base = key_of()
    assert key_of() == base
    monkeypatch.setattr(P, "SHAPE_COLS", ("op", "B", "M", "N", "K"))         # validation groups
    assert key_of() != base
    monkeypatch.undo()
    monkeypatch.setattr(utilization, "GIGA", 1e6)                             # tensor scale in _tensors
    assert key_of() != base
    monkeypatch.undo()
    assert key_of() == base


def test_numpy_numbers_in_a_config_key_like_python_ones():
    from lib import train
    cfg = P.make_config({**TINY, "seed": np.int64(1), "lr": np.float32(0.5)})[0]
    assert type(cfg.seed) is int and type(cfg.lr) is float
    assert train.cache_key(cfg) == train.cache_key(P.make_config({**TINY, "seed": 1, "lr": 0.5})[0])


def test_a_migration_copies_the_model_instead_of_retraining(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    first = P.train_predictor("LN", TINY)
    previous = P.fingerprint("nvidia")
    monkeypatch.setattr(P, "fingerprint", lambda vendor="nvidia": "moved")   # the loader's code changed ...
    monkeypatch.setattr(P, "_migration_source", lambda: previous)           # ... and its table was found equal
    second = P.train_predictor("LN", TINY)
    assert second.info["cached"] and second.info["train_seconds"] == first.info["train_seconds"]   # copied, not trained
    assert all(torch.equal(a, b) for a, b in zip(first.model.state_dict().values(), second.model.state_dict().values()))
    assert len(list(tmp_path.rglob("neusight-LN-*.pt"))) == 2              # the old key's file and the new one


def test_a_migration_still_retrains_after_an_edit_to_lib_ops(tmp_path, monkeypatch):
    # lib.ops' constants shape the features but not the cached table: the key names them itself (TABLE_CODE)
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    P.train_predictor("LN", TINY)
    previous = P.fingerprint("nvidia")
    monkeypatch.setattr(P, "fingerprint", lambda vendor="nvidia": "moved")
    monkeypatch.setattr(P, "_migration_source", lambda: previous)
    real = P._code_text
    monkeypatch.setattr(P, "_code_text", lambda obj: real(obj) + ("\nFP32_BYTES = 2\n" if obj is P.ops_mod else ""))
    assert not P.train_predictor("LN", TINY).info["cached"]


def test_the_migration_check_follows_the_variable_and_the_fingerprint(monkeypatch):
    seen = []
    monkeypatch.setattr(P, "migration_source", lambda vendor: seen.append(vendor) or "old")
    P._migration_source_for.cache_clear()
    monkeypatch.delenv(P.MIGRATE_ENV, raising=False)
    assert P._migration_source() is None and seen == []
    monkeypatch.setenv(P.MIGRATE_ENV, "old")
    assert P._migration_source() == P._migration_source() == "old" and len(seen) == 1   # checked once ...
    monkeypatch.setattr(P, "fingerprint", lambda vendor="nvidia": "another")
    assert P._migration_source() == "old" and len(seen) == 2                           # ... per fingerprint
    P._migration_source_for.cache_clear()


def test_model_inputs_give_the_bound_per_sm():
    # 1,000 GFLOP/s over 10 SMs: 100 GFLOP/s per SM; work per tile in GFLOP
    from lib.utilization import _tensors
    feat = pd.DataFrame({"bound_gflops": [1000.0], "num_sm": [10.0], "device": ["Tesla T4"], "num_waves": [2.0],
                         "flops_per_tile": [3e9]})
    t = _tensors(feat, np.zeros((1, 5), np.float32))
    assert t["bound_gflops_per_sm"].tolist() == [100.0] and t["gflop_per_tile"].tolist() == [3.0]
    from lib.devices import TRAIN_GPUS_NVIDIA
    assert t["device_idx"].tolist() == [TRAIN_GPUS_NVIDIA.index("Tesla T4")]


def test_cache_names_by_hand():
    # the committed weights (figures/predictors/) are found by these names: neither fold without a GPU adds a suffix,
    # a GPU is named by the last 12 letters and digits of its name
    cfg = P.make_config({"layers": 4, "width": 128})[0]
    assert P._cache_name("BMM", cfg, "shapes") == P._cache_name("BMM", cfg, "none") == "neusight-BMM-4x128"
    assert P._cache_name("BMM", cfg, "largest") == "neusight-BMM-4x128-largest"
    assert P._cache_name("BMM", cfg, "Tesla V100-PCIE-32GB") == "neusight-BMM-4x128-logoV100PCIE32GB"
    assert P._cache_name("BMM", cfg, "none", "isolated", "Tesla P4") == "neusight-BMM-4x128-t0-withoutTeslaP4"


def test_each_config_field_that_shapes_a_model_moves_its_key(monkeypatch):
    # configs that train different models get different keys, also where their file names agree (validation
    # 'shapes' and 'none'; another max_rows) and where only the name tells them apart (held_out_gpu)
    def key_of(cfg):
        return _training_key(monkeypatch, cfg)
    none = {**TINY, "validation": "none"}
    configs = [TINY, none, {**TINY, "max_rows": 1000}, {**none, "held_out_gpu": "Tesla P4"}, {**TINY, "seed": 1},
               {**TINY, "device_factors": True}, {**TINY, "features": P.FEATURES[:4]}]
    assert len({key_of(c) for c in configs}) == len(configs)


def test_inputs_are_standardized_on_the_rows_the_model_learned_from(tmp_path, monkeypatch):
    # a LOGO fold's model never sees its GPU: mean, std and the clipping range come from the other GPUs' rows alone,
    # and predict standardizes with them (the learned rows come out with mean 0 and std 1 per input)
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    gpu = "Tesla P4"
    p = P.train_predictor("LN", {**TINY, "validation": gpu})
    feat = P.training_table("LN", TINY["max_rows"])
    learned = feat[feat["device"] != gpu]
    x = P.model_inputs(learned, "LN", p.features)
    assert np.allclose(p.lo, x.min(axis=0)) and np.allclose(p.hi, x.max(axis=0))
    z = p.inputs(learned)
    assert np.allclose(z.mean(axis=0), 0, atol=1e-4) and np.allclose(z.std(axis=0), 1, atol=1e-3)
    # EW's one-hot inputs go in as they are (mean 0, std 1)
    ew = P.train_predictor("EW", TINY)
    onehot = np.array([n.startswith("op_") for n in P.input_names("EW", ew.features)])
    assert onehot.sum() > 1 and (ew.mean[onehot] == 0).all() and (ew.std[onehot] == 1).all()
    rows = P.training_table("EW", 200)
    assert np.array_equal(ew.inputs(rows)[:, onehot], P.model_inputs(rows, "EW", ew.features)[:, onehot])


def test_a_constant_input_is_not_divided_by_its_zero_spread(monkeypatch):
    # an input equal on every training row has std 0: it is left unscaled (std 1), so training stays finite
    real = P.training_table
    monkeypatch.setattr(P, "training_table", lambda op_class, max_rows=None, seed=0:
                        real(op_class, max_rows, seed).assign(f_l2=0.5))
    names = P.input_names("LN")
    state, info = P._fit_state("LN", P.make_config(TINY)[0], 300, P.FEATURES, names, "none", 0, None, None)
    assert state["std"][names.index("f_l2")] == 1.0
    assert all(torch.isfinite(v).all() for v in state["model"].values())


def test_best_epoch_counts_epochs_from_one(monkeypatch):
    # validation losses 3, 1, 2: the best is epoch 2; without a validation loss (all NaN) it is the last epoch
    from lib import train
    for losses, best in (([3.0, 1.0, 2.0], 2), ([math.nan] * 3, 3)):
        monkeypatch.setattr(train, "fit", lambda *a, losses=losses, **kw: {
            "history": [{"val_loss": v} for v in losses], "epochs_run": 3, "best_val_loss": min(losses)})
        _, info = P._fit_state("LN", P.make_config(TINY)[0], 200, P.FEATURES, P.input_names("LN"), "shapes", 0,
                               None, None)
        assert info["best_epoch"] == best


def test_get_predictor_tells_an_ensemble_from_its_first_member(monkeypatch):
    monkeypatch.setattr(P, "_LOADED", {})
    monkeypatch.setattr(P, "train_predictor", lambda op_class, cfg: object())
    one = P.get_predictor("LN", TINY)
    assert P.get_predictor("LN", dict(TINY)) is one                      # loaded once per process
    assert P.get_predictor("LN", {**TINY, "ensemble": 2}) is not one     # the average of two seeds is another model


def test_ensemble_info_by_hand(monkeypatch):
    # three members: seconds summed (1 + 2 + 3), best epoch their median (1, 2, 6 -> 2, not the mean 3), cached only
    # if every member was
    real = P.train_predictor

    def member(op_class, cfg, force=False):
        if cfg.get("ensemble", 1) != 1:
            return real(op_class, cfg, force)
        s = cfg["seed"]
        return P.NeuSightPredictor(op_class, None, (), None, None, None, None, None,
                                   {"train_seconds": 1.0 + s, "best_epoch": [1, 2, 6][s], "cached": s != 1})
    monkeypatch.setattr(P, "train_predictor", member)
    ens = P.train_predictor("LN", {**TINY, "ensemble": 3})
    assert (ens.info["train_seconds"], ens.info["best_epoch"], ens.info["cached"]) == (6.0, 2.0, False)
    assert len(ens.members) == 2 and ens.info["ensemble"] == 3


def test_every_training_gpu_gets_the_known_gpu_model_and_its_floor(monkeypatch):
    # stand-in predictors: the known-GPU one an ensemble whose members learned efficiencies (P4: 2 and 4;
    # A100: 1 and 0.5), the unseen-GPU one without factors (e = 1)
    from types import SimpleNamespace

    def model(effs):
        m = P.UtilizationMLP(5, 1, 4, n_devices=5)
        with torch.no_grad():
            m.log_eff.copy_(torch.log(torch.tensor(effs)))
        m.trained[:] = True
        return m
    known = SimpleNamespace(model=model([2.0, 1, 1, 1, 1]), predict=lambda f: np.full(len(f), 1.0),
                            members=(SimpleNamespace(model=model([4.0, 1, 1, 1, 0.5])),))
    unseen = SimpleNamespace(model=P.UtilizationMLP(5, 1, 4), members=(), predict=lambda f: np.full(len(f), 2.0))
    monkeypatch.setattr(P, "get_predictor", lambda op_class, cfg: known if cfg is P.KNOWN_CONFIGS[op_class] else unseen)
    feat = pd.DataFrame({"op": "ln", "device": [*P.TRAIN_GPUS_NVIDIA, "NVIDIA H100 80GB HBM3"], "roofline_ms": 8.0})
    assert P.predict_featured(feat).tolist() == [1.0] * 5 + [2.0]      # P4 (index 0) is a training GPU too
    # floor = roofline / the largest member efficiency: P4 8 / 4, A100 8 / max(1, 0.5), the others 8 / 1
    assert P.forecast_floor_ms(feat).tolist() == [2.0, 8.0, 8.0, 8.0, 8.0, 8.0]
    # an op of no class: NaN in both, as the forecast gives it, instead of a KeyError from the floor
    other = pd.concat([feat, feat.iloc[:1].assign(op="gather")], ignore_index=True)
    assert np.isnan(P.predict_featured(other)[-1]) and np.isnan(P.forecast_floor_ms(other)[-1])
    assert P.forecast_floor_ms(other)[:-1].tolist() == [2.0, 8.0, 8.0, 8.0, 8.0, 8.0]


def test_training_table_subsample_follows_the_seed():
    # max_rows draws a seeded subsample: the same seed the same rows, another seed other rows
    cols = ["device", "op", "B", "H"]
    a, b = (P.training_table("LN", 100, seed=s)[cols] for s in (0, 1))
    assert a.equals(P.training_table("LN", 100, seed=0)[cols]) and not a.equals(b)


def test_shape_groups_by_hand():
    # one group per (op, shape) across GPUs: B and H both tell vector shapes apart, and NaN dims match NaN dims
    nan = math.nan
    df = pd.DataFrame({"op": ["ln", "ln", "ln", "ln", "linear"], "device": ["a", "b", "a", "a", "a"],
                       "B": [4, 4, 4, 8, 4.0], "M": [nan, nan, nan, nan, 2], "N": [nan, nan, nan, nan, 3],
                       "K": [nan, nan, nan, nan, 5], "H": [16, 16, 32, 16, nan]})
    g = P.shape_groups(df)
    assert g[0] == g[1] and len(set(g)) == 4


def test_op_class_of_by_hand():
    from lib.predictors import op_class_of
    ops = ["bmm", "add", None, float("nan"), "zzz", "linear", "add", "mem"]
    assert op_class_of(ops).tolist() == ["BMM", "EW", "", "", "", "FC", "EW", ""]
    assert op_class_of(pd.Series(["ln", "softmax"], index=[7, 3])).tolist() == ["LN", "SOFTMAX"]   # by position
    assert op_class_of(np.array([], dtype=str)).tolist() == []
