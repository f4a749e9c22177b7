"""Tests of lib.comparison: spec dominance, spec twins and GPU rankings, by hand (notebooks 04-05)."""
import numpy as np
import pandas as pd
import pytest

from lib import comparison as C, paths
from lib.devices import load_device
from lib.forecast import forecast_table


def test_spec_steps_and_dominance_table_hand_case():
    h100 = load_device(paths.DEVICE_CONFIGS / "NVIDIA_H100_80GB_HBM3.json")
    h200 = load_device(paths.DEVICES_ADDED / "NVIDIA_H200.json")
    steps = C.spec_steps(h100, h200)
    assert list(steps) == [h100.name, "+mem_bw_gbps", "+mem_gb", h200.name]
    assert steps["+mem_gb"].mem_gb == 141 and steps["+mem_gb"].mem_bw_gbps == h100.mem_bw_gbps
    with pytest.raises(ValueError, match="does not dominate"):
        C.spec_steps(h200, h100)
    # two kernels: an FC run 3 times and an add run once; the step halves the FC and doubles the add
    base = pd.DataFrame({"op": ["linear", "add"], "count": [3, 1], "pred_ms": [2.0, 1.0], "total_ms": [6.0, 1.0]})
    step = base.assign(pred_ms=[1.0, 2.0], total_ms=[3.0, 2.0])
    t = C.dominance_table({"base": base, "step": step}, "base").set_index(["step", "op_class"])
    assert t.loc[("step", "FC"), "change_pct"] == pytest.approx(-50) and t.loc[("step", "EW"), "change_pct"] == 100
    assert t.loc[("step", "ALL"), "change_pct"] == pytest.approx(100 * (5 / 7 - 1))
    assert t.loc[("step", "ALL"), "slower_launch_pct"] == 25 and t.loc[("base", "ALL"), "slower_launch_pct"] == 0
    assert t.loc[("step", "ALL"), "max_ratio"] == 2 and t.loc[("step", "FC"), "max_ratio"] == 0.5
    assert t.loc[("step", "FC"), "launches"] == 3 and t.loc[("step", "ALL"), "launches"] == 4    # runs, not rows
    # under the roofline, more bandwidth or memory never slows a kernel
    k = forecast_table(paths.MODEL_CONFIGS / "gpt2_large.json", h100, 1, 1024, "training", method="roofline")
    tables = {s: forecast_table(None, d, 1, 1024, "training", method="roofline", kernels=k) for s, d in steps.items()}
    assert (C.dominance_table(tables, h100.name)["change_pct"] <= 1e-9).all()


def test_spec_twins():
    class D:
        def __init__(self, name, num_sm, peak_gflops):
            self.name, self.num_sm, self.peak_gflops = name, num_sm, peak_gflops
    x, y, z = D("x", 108, 19492.0), D("y", 108, 19492.0), D("z", 80, 14000.0)
    assert C.spec_twins([x, z], [x, y, z]) == {"x": "y"}
    v = D("v", 108, 20000.0)                        # the same SM count, another peak: no twin
    assert C.spec_twins([x], [v, y]) == {"x": "y"} and C.spec_twins([x], [v]) == {}


def test_twin_table_hand_computed():
    # two BMM shapes on both GPUs (one repeated on the target: median), one EW shape, one shape on one GPU only
    rows = [("t", "BMM", "bmm", 1, 2, 3, 4, None, 0.9, 1.0), ("t", "BMM", "bmm", 1, 2, 3, 4, None, 1.1, 1.0),
            ("w", "BMM", "bmm", 1, 2, 3, 4, None, 2.0, 1.0),
            ("t", "BMM", "bmm", 2, 2, 3, 4, None, 3.0, 2.0), ("w", "BMM", "bmm", 2, 2, 3, 4, None, 2.0, 2.0),
            ("t", "EW", "add", 8, None, None, None, 16, 0.8, 0.5), ("w", "EW", "add", 8, None, None, None, 16, 1.0, 1.0),
            ("w", "BMM", "bmm", 9, 9, 9, 9, None, 5.0, 5.0)]
    df = pd.DataFrame(rows, columns=["device", "op_class", "op", "B", "M", "N", "K", "H", "latency_ms", "roofline_ms"])
    out = C.twin_table(df, "t", "w")
    assert list(out.index) == ["BMM", "EW"]
    assert out.loc["BMM", "shapes"] == 2
    # target/twin latency ratios 1.0/2.0 and 3.0/2.0 -> median 1.0; raw twin APE |2-1|/1, |2-3|/3
    assert out.loc["BMM", "median_ratio"] == pytest.approx(1.0)
    assert out.loc["BMM", "twin_mape_pct"] == pytest.approx((100 + 100 / 3) / 2)
    # equal rooflines: the scaled twin is the raw twin
    assert out.loc["BMM", "scaled_twin_mape_pct"] == pytest.approx(out.loc["BMM", "twin_mape_pct"])
    # EW: raw 1.0 vs 0.8 -> 25%; scaled 1.0 * 0.5 / 1.0 = 0.5 vs 0.8 -> 37.5%
    assert out.loc["EW", "twin_mape_pct"] == pytest.approx(25.0)
    assert out.loc["EW", "scaled_twin_mape_pct"] == pytest.approx(37.5)
    # three shapes, the twin off by 0, 0 and 90%: the mean (30%), not the median; repeats by their median
    three = pd.DataFrame([(d, "FC", "linear", 1, m, 8, 8, None, ms, 1.0)
                          for m, ms_t, ms_w in ((8, [1.0], [1.0]), (16, [1.0], [1.0]), (32, [1.0, 0.9, 2.0], [1.9]))
                          for d, mss in (("t", ms_t), ("w", ms_w)) for ms in mss],
                         columns=["device", "op_class", "op", "B", "M", "N", "K", "H", "latency_ms", "roofline_ms"])
    assert C.twin_table(three, "t", "w").loc["FC", "twin_mape_pct"] == pytest.approx(30.0)


def test_matched_medians_and_pair_ranking_hand_computed():
    # the twin_table rows' shapes: BMM (1,2,3,4) target median 1.0 vs twin 2.0; BMM (2,2,3,4) 3.0 vs 2.0; EW 0.8 vs 1.0
    rows = [("t", "BMM", "bmm", 1, 2, 3, 4, None, 0.9), ("t", "BMM", "bmm", 1, 2, 3, 4, None, 1.1),
            ("w", "BMM", "bmm", 1, 2, 3, 4, None, 2.0),
            ("t", "BMM", "bmm", 2, 2, 3, 4, None, 3.0), ("w", "BMM", "bmm", 2, 2, 3, 4, None, 2.0),
            ("t", "EW", "add", 8, None, None, None, 16, 0.8), ("w", "EW", "add", 8, None, None, None, 16, 1.0),
            ("w", "BMM", "bmm", 9, 9, 9, 9, None, 5.0)]
    df = pd.DataFrame(rows, columns=["device", "op_class", "op", "B", "M", "N", "K", "H", "latency_ms"])
    both = C.matched_medians(df, "t", "w")
    assert len(both) == 3 and both["H"].isna().sum() == 2 and both["M"].isna().sum() == 1   # NaN dims stay NaN
    assert sorted(both["latency_ms_target"]) == [0.8, 1.0, 3.0]
    # forecasts (in both's row order): target faster on every shape, by half
    out = C.pair_ranking(both, [1.0, 1.0, 1.0], [2.0, 2.0, 2.0])
    assert list(out.index) == ["BMM", "EW"] and out.loc["BMM", "shapes"] == 2
    # BMM: measured faster on 1 of 2 shapes; forecast faster on both -> ranked as measured on 1 of 2
    assert out.loc["BMM", "measured_faster_pct"] == 50 and out.loc["BMM", "forecast_faster_pct"] == 100
    assert out.loc["BMM", "ranked_as_measured_pct"] == 50 and out.loc["EW", "ranked_as_measured_pct"] == 100
    assert out.loc["BMM", "median_measured_ratio"] == pytest.approx((0.5 + 1.5) / 2)
    assert out.loc["EW", "median_forecast_ratio"] == 0.5
    assert (out["forecast_equal_pct"] == 0).all()
    # equal forecasts (both capped at one value) are not "faster": BMM shape 1 equal, shape 2 twin faster
    tied = C.pair_ranking(both, [2.0, 3.0, 1.0], [2.0, 2.0, 2.0])
    assert tied.loc["BMM", "forecast_equal_pct"] == 50 and tied.loc["BMM", "forecast_faster_pct"] == 0
    # the tie does not rank the target faster, as measured on that shape: ranked as measured on the other shape only
    assert tied.loc["BMM", "ranked_as_measured_pct"] == 50


def test_ranking_by_pair_hand_computed():
    # shapes 1-3 measured on a and b, shape 1 also on c; d shares no shape with anyone
    rows = [("a", 1, 1.0, 1.0), ("b", 1, 2.0, 2.5), ("a", 2, 1.0, 3.0), ("b", 2, 1.1, 2.0),
            ("a", 3, 5.0, 5.0), ("b", 3, 1.0, 1.0), ("c", 1, 0.5, 0.4), ("d", 9, 1.0, 1.0)]
    df = pd.DataFrame([(d, "BMM", "bmm", b, 8, 8, 8, np.nan, m, p) for d, b, m, p in rows],
                      columns=["device", "op_class", "op", "B", "M", "N", "K", "H", "latency_ms", "pred"])
    out = C.ranking_by_pair(df, "pred").set_index(["gpu_a", "gpu_b"])
    assert list(out.index) == [("a", "b"), ("a", "c"), ("b", "c")]          # no pair with d
    ab = out.loc[("a", "b")]
    # a/b measured 0.5, 0.909, 5.0; forecast 0.4, 1.5, 5.0 -> ranked as measured on shapes 1 and 3
    assert ab["shapes"] == 3 and ab["ranked_as_measured_pct"] == pytest.approx(200 / 3)
    # close calls (within 1.2x): shape 2 only, ranked wrong
    assert ab["close_shapes"] == 1 and ab["close_ranked_as_measured_pct"] == 0
    assert ab["median_measured_ratio"] == pytest.approx(1.0 / 1.1) and ab["median_forecast_ratio"] == 1.5
    assert np.isnan(out.loc[("a", "c"), "close_ranked_as_measured_pct"])     # 2x apart: no close call
