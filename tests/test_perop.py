"""lib.perop: the paper's per-op numbers as read from summary/perop.csv, and where our interval lies beside them."""
import numpy as np
import pandas as pd
import pytest

from lib import perop

NEUSIGHT = f"paper: {perop.PAPER_METHODS['NeuSight']}"


def test_paper_table_reads_the_summary_csv():
    paper = perop.paper_table()
    # summary/perop.csv, row 'NeuSight': OOD BMM 13.7836..., in-distribution LN 20.0516...
    assert paper.loc[NEUSIGHT, ("OOD", "BMM")] == pytest.approx(13.7836, abs=1e-4)
    assert paper.loc[NEUSIGHT, ("in-distribution", "LN")] == pytest.approx(20.0516, abs=1e-4)
    assert paper.loc[NEUSIGHT, ("OOD", "SOFTMAX")] == pytest.approx(13.8601, abs=1e-4)
    assert len(paper) == 4 and paper.shape[1] == 10


def test_mape_ci_says_where_the_interval_lies_beside_the_paper():
    # every BMM row off by exactly 15% (interval 15 to 15), every FC row by 10%; EW alternates 5% and 25%
    ape_pct = {"BMM": [15.0] * 40, "FC": [10.0] * 40, "EW": [5.0, 25.0] * 20}
    df = pd.DataFrame([{"split": "test_ood", "op_class": c, "latency_ms": 1.0, "pred_neusight": 1 + a / 100}
                       for c, apes in ape_pct.items() for a in apes])
    paper = pd.DataFrame([[14.0, 13.9, 15.0]], index=[NEUSIGHT],
                         columns=pd.MultiIndex.from_tuples([("OOD", "BMM"), ("OOD", "FC"), ("OOD", "EW")]))
    out = perop.mape_ci(df, ["pred_neusight"], paper).set_index("op_class")
    assert out.loc["BMM", ["ci_low_pct", "ci_high_pct"]].tolist() == pytest.approx([15.0, 15.0])
    assert out["vs_paper"].to_dict() == {"BMM": "above", "FC": "below", "EW": "spans"}
    assert out.loc["EW", "mape_pct"] == pytest.approx(15.0) and (out["rows"] == 40).all()
    # an interval that touches the paper's number does not lie below or above it
    tied = paper.copy()
    tied.loc[NEUSIGHT, ("OOD", "BMM")] = out.loc["BMM", "ci_high_pct"]      # 15, as the float the interval holds
    assert perop.mape_ci(df[df["op_class"] == "BMM"], ["pred_neusight"], tied)["vs_paper"].tolist() == ["spans"]


def test_spec_whatif_mape_reforecasts_one_gpu_only():
    from lib.devices import device_by_name
    from lib.kernels import predict_kernels
    h100, t4 = "NVIDIA H100 80GB HBM3", "Tesla T4"
    df = pd.DataFrame({"op": ["add", "add"], "op_class": ["EW", "EW"], "B": [64, 64], "H": [2 ** 20, 2 ** 20],
                       "device": [h100, t4], "split": ["test_ood", "test_id"]})
    # measured = the roofline forecast at the real spec, so every APE starts at 0
    df["latency_ms"] = [predict_kernels(df.iloc[[i]], device_by_name(d), "roofline")[0] for i, d in enumerate(df["device"])]
    df["pred_roofline"] = df["latency_ms"]
    bw = device_by_name(h100).mem_bw_gbps
    t = perop.spec_whatif_mape(df, "pred_roofline", h100, "mem_bw_gbps", [bw, 2 * bw])
    # an add (1 FLOP per 12 bytes) is memory-bound: twice the bandwidth halves the forecast, an APE of 50%
    assert t.loc[("OOD", "EW"), bw] == pytest.approx(0.0, abs=1e-9)
    assert t.loc[("OOD", "EW"), 2 * bw] == pytest.approx(50.0)
    assert t.loc[("in-distribution", "EW")].tolist() == pytest.approx([0.0, 0.0], abs=1e-9)   # T4's row is not forecast again


def test_error_by_size_splits_each_class_into_its_own_fifths():
    # ten EW kernels of growing size (bytes ~ B * H) and ten BMMs of growing FLOPs, each class its own scale;
    # kernel i is off by i% (APE), so a quintile of two kernels has MAPE (2q-1 + 2q) / 2 - 1 in %
    t4 = "Tesla T4"
    ew = pd.DataFrame({"op": "add", "op_class": "EW", "B": 1, "H": [2 ** (10 + i) for i in range(10)]})
    bmm = pd.DataFrame({"op": "bmm", "op_class": "BMM", "B": 1, "M": [64 * (i + 1) for i in range(10)], "N": 64, "K": 64,
                        "kernel_name": "volta_sgemm_128x64_tn"})
    from lib.devices import device_by_name
    df = pd.concat([ew, bmm], ignore_index=True).assign(split="test_id", latency_ms=1.0,
                                                        **device_by_name(t4).spec_columns())
    df["pred"] = 1 + np.tile(np.arange(10), 2) / 100
    out = perop.error_by(df, "pred", "size")
    for cls in ("EW", "BMM"):
        got = out[out.op_class == cls].set_index("size")
        assert list(got.index) == ["Q1", "Q2", "Q3", "Q4", "Q5"] and (got["rows"] == 2).all()
        assert got["mape_pct"].tolist() == pytest.approx([0.5, 2.5, 4.5, 6.5, 8.5])
    by_device = perop.error_by(df, "pred", "device")
    assert by_device["mape_pct"].tolist() == pytest.approx([4.5, 4.5]) and set(by_device["device"]) == {t4}
    with pytest.raises(ValueError, match="by must be device, waves or size"):
        perop.error_by(df, "pred", "gpu")


def test_seed_spread_by_hand():
    # two seeds; BMM OOD 15 and 17 around the paper's 16 (spans), FC 10 and 12 under 13.9 (below)
    per_seed = pd.DataFrame({"seed": [0, 0, 1, 1], "split": "OOD", "op_class": ["BMM", "FC", "BMM", "FC"],
                             "mape_pct": [15.0, 10.0, 17.0, 12.0]})
    paper = pd.DataFrame([[16.0, 13.9]], index=[NEUSIGHT], columns=pd.MultiIndex.from_tuples([("OOD", "BMM"), ("OOD", "FC")]))
    out = perop.seed_spread(per_seed, paper).set_index("op_class")
    assert out.loc["BMM", ["seed0_pct", "min_pct", "mean_pct", "max_pct"]].tolist() == [15.0, 15.0, 16.0, 17.0]
    assert "mean_forecast_pct" not in out
    mean_forecast = pd.Series([14.0], index=pd.MultiIndex.from_tuples([("OOD", "BMM")]))   # none for FC
    with_mean = perop.seed_spread(per_seed, paper, mean_forecast).set_index("op_class")["mean_forecast_pct"]
    assert with_mean["BMM"] == 14.0 and np.isnan(with_mean["FC"])
    assert out["vs_paper"].to_dict() == {"BMM": "spans", "FC": "below"}
    assert (out["seeds"] == 2).all() and out.loc["FC", "paper_pct"] == 13.9
    # the paper's 16.5 lies above the seeds' mean (16) but within their range (15 to 17): still 'spans'
    paper.loc[NEUSIGHT, ("OOD", "BMM")] = 16.5
    assert perop.seed_spread(per_seed, paper).set_index("op_class").loc["BMM", "vs_paper"] == "spans"


def test_seed_mape_trains_each_seed_and_scores_it_like_mape_table():
    # tiny softmax models: the table of seed s is mape_table's of the predictions made with seed s's config
    cfg = {"SOFTMAX": {"layers": 1, "width": 8, "epochs": 1, "batch_size": 4096, "max_rows": 500}}
    test = perop.test_table(20)
    test = test[test["op_class"] == "SOFTMAX"].reset_index(drop=True)
    forecasts = perop.seed_forecasts(test, [0, 3], cfg)
    out = perop.seed_mape(test, forecasts).set_index(["seed", "split", "op_class"])["mape_pct"]
    preds = []
    for seed in (0, 3):
        pred = perop.predict_all(test, ["pred_neusight"], {"SOFTMAX": {**cfg["SOFTMAX"], "seed": seed}})
        assert forecasts[seed].tolist() == pytest.approx(pred["pred_neusight"].tolist())
        ours = perop.mape_table(pred, ["pred_neusight"]).iloc[0]
        assert [out[(seed, *k)] for k in ours.index] == pytest.approx(ours.tolist())
        preds.append(pred["pred_neusight"].to_numpy())
    assert out[(0, "OOD", "SOFTMAX")] != out[(3, "OOD", "SOFTMAX")]     # another seed, other weights
    # the seeds' mean forecast, scored by hand: mean over rows of 100 |(p0 + p3) / 2 - measured| / measured, per split
    mean = perop.neusight_mape(test, forecasts.mean(axis=1))
    by_hand = (100 * np.abs((preds[0] + preds[1]) / 2 - test["latency_ms"]) / test["latency_ms"]).groupby(
        test["split"].map(perop.SPLIT_LABEL)).mean()
    assert [mean[(s, "SOFTMAX")] for s in by_hand.index] == pytest.approx(by_hand.tolist())


def test_default_config_is_the_committed_one_at_seed_zero():
    from lib.predictors import default_config, make_config
    from lib.selection import DEFAULT_CONFIGS, KNOWN_CONFIGS
    assert default_config("BMM", False) is DEFAULT_CONFIGS["BMM"] and default_config("LN", True, 0) is KNOWN_CONFIGS["LN"]
    seeded, known = make_config(default_config("FC", True, 2))[0], make_config(KNOWN_CONFIGS["FC"])[0]
    assert seeded.seed == 2 and {**vars(seeded), "seed": 0} == vars(known)


def test_held_out_gpu_forecasts_use_models_trained_without_that_gpu():
    # tiny softmax models: T4's held-out shapes are forecast by the model trained without T4's rows, and only those rows
    from lib.devices import device_by_name
    from lib.kernels import predict_kernels
    from lib.selection import held_out_configs
    cfg = {"SOFTMAX": {"layers": 1, "width": 8, "epochs": 1, "batch_size": 4096, "max_rows": 500, "validation": "none"}}
    test = perop.test_table(20)
    test = test[test["op_class"] == "SOFTMAX"].reset_index(drop=True)
    out = perop.held_out_gpu_forecasts(test, ["Tesla T4"], cfg)
    t4 = ((test["device"] == "Tesla T4") & (test["split"] == "test_id")).to_numpy()
    assert t4.any() and np.isfinite(out[t4]).all() and np.isnan(out[~t4]).all()
    t4_rows, t4_spec = test[t4], device_by_name("Tesla T4")
    assert out[t4] == pytest.approx(predict_kernels(t4_rows, t4_spec, cfg_by_class=held_out_configs("Tesla T4", cfg)))
    assert not np.allclose(out[t4], predict_kernels(t4_rows, t4_spec, cfg_by_class=cfg))   # with T4: other weights
    table = perop.held_out_gpu_mape(test.assign(held=out, pred_neusight=1.0), "held").set_index("group")
    assert table.loc["Tesla T4", "kernels"] == t4.sum() and "NVIDIA A100 80GB PCIe" in table.index
    # the OOD pool is the OOD GPUs' rows alone (not the other training GPUs' rows without a held-out forecast), and
    # 'trained' is T4's forecast when trained on (here 1.0 ms everywhere), not the held-out one
    from lib.metrics import NEVER_TRAINED_POOLS
    assert table.loc[NEVER_TRAINED_POOLS[1], "kernels"] == (test["split"] == "test_ood").sum()
    t4_meas = test.loc[t4, "latency_ms"]
    assert table.loc["Tesla T4", "trained_mape_pct"] == pytest.approx((100 * (1 - t4_meas).abs() / t4_meas).mean())


def test_error_by_tile_choice_by_hand():
    # OOD FC on one GPU: two kernels whose tile the rule can choose (128x128; APE 10% and 20%), one it cannot
    # (256x128; APE 90%) and a gemv whose name gives no tile (APE 0%); a BMM with a candidate tile (APE 0%) and an
    # in-distribution row, left out
    df = pd.DataFrame({
        "op_class": ["FC", "FC", "FC", "FC", "BMM", "FC"], "split": ["test_ood"] * 5 + ["test_id"],
        "device": "H", "latency_ms": 1.0, "pred": [1.1, 0.8, 1.9, 1.0, 1.0, 5.0], "other": [1.0, 1.0, 1.5, 1.0, 2.0, 1.0],
        "kernel_name": ["ampere_sgemm_128x128_tn", "ampere_sgemm_128x128_tn", "volta_sgemm_128x256_nn", "gemv2T_kernel",
                        "ampere_sgemm_128x64_tn", "ampere_sgemm_128x64_tn"]})
    out = perop.error_by_tile_choice(df, ["pred", "other"]).set_index(["op_class", "tile"])
    can, other, none = perop.TILE_GROUPS
    assert out["rows"].to_dict() == {("BMM", can): 1, ("FC", can): 2, ("FC", other): 1, ("FC", none): 1}
    assert out.loc[("FC", can), "mape_pct_pred"] == pytest.approx(15.0)
    assert out.loc[("FC", other), "mape_pct_pred"] == pytest.approx(90.0)
    # FC's summed error 10 + 20 + 90 + 0 = 120: the other tile carries 90 / 120
    assert out.loc[("FC", other), "error_share_pred"] == pytest.approx(0.75)
    assert out.loc[("BMM", can), "error_share_other"] == pytest.approx(1.0)
    assert out.loc[("FC", other), "error_share_other"] == pytest.approx(1.0)   # 0 + 0 + 50 + 0
    table = out.reset_index()
    assert perop.tile_choice_class_mape(table, "pred").to_dict() == pytest.approx({"BMM": 0.0, "FC": 30.0})
    assert perop.tile_choice_class_mape(table, "pred", [can]).to_dict() == pytest.approx({"BMM": 0.0, "FC": 15.0})
    # a missing prediction would be dropped from the mean but counted in rows: an error instead
    with pytest.raises(ValueError, match="other has no prediction"):
        perop.error_by_tile_choice(df.assign(other=[1.0, np.nan, 1.0, 1.0, 1.0, np.nan]), ["pred", "other"])
    # a share is of the class's error on every OOD GPU: FC off by 10% on one GPU and 30% on another -> 1/4 and 3/4
    two = pd.DataFrame({"op_class": "FC", "split": "test_ood", "device": ["H", "A"], "latency_ms": 1.0,
                        "pred": [1.1, 1.3], "kernel_name": "ampere_sgemm_128x128_tn"})
    shares = perop.error_by_tile_choice(two, ["pred"]).set_index("device")["error_share_pred"]
    assert shares.to_dict() == pytest.approx({"H": 0.25, "A": 0.75})


def test_test_table_subsample_keeps_the_asked_rows_per_class_and_split():
    t = perop.test_table(3)
    sizes = t.groupby(["op_class", "split"]).size()
    assert (sizes == 3).all() and len(sizes) == 10        # five classes, each with in-distribution and OOD rows


def test_error_by_waves_puts_a_single_wave_in_the_first_bin():
    # the bins are right-closed: exactly 1 wave is (0, 1], 4 waves (1, 4], ...
    from lib.devices import device_by_name
    from lib.features import add_features
    df = pd.DataFrame({"op": "add", "op_class": "EW", "B": 1, "H": [256, 2 ** 26], "split": "test_id",
                       "latency_ms": 1.0, "pred": [1.1, 1.0], **device_by_name("Tesla T4").spec_columns()})
    waves = add_features(df)["num_waves"].tolist()
    assert waves[0] == 1 and waves[1] > 256
    out = perop.error_by(df, "pred", "waves").set_index("waves")["mape_pct"]
    assert str(out.index[0]) == "(0.0, 1.0]" and out.iloc[0] == pytest.approx(10.0)
    assert str(out.index[1]) == "(256.0, inf]"
