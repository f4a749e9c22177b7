"""Hand-computed cases for lib.analysis: the alpha/beta fit, binned medians, OOD ranges, coverage."""
import numpy as np
import pandas as pd
import pytest

from lib import analysis as A


def test_fit_alpha_beta_recovers_exact_curve():
    waves = np.array([1, 2, 4, 8, 16], dtype=float)
    util = 0.8 - 0.6 / waves
    alpha, beta, r2 = A.fit_alpha_beta(waves, util)
    assert (alpha, beta) == (pytest.approx(0.8), pytest.approx(0.6))
    assert r2 == pytest.approx(1.0)


def test_fit_table_median_utilization():
    # one group, utilization 0.1, 0.2 and 0.9 at 1, 2 and 4 waves: the median (0.2), not the mean (0.4)
    df = pd.DataFrame({"device": "a", "op_class": "EW", "num_waves": [1.0, 2.0, 4.0], "utilization": [0.1, 0.2, 0.9]})
    t = A.fit_table(df).iloc[0]
    assert t["util_median"] == pytest.approx(0.2) and t["rows"] == 3


def test_fit_alpha_beta_degenerate():
    assert np.isnan(A.fit_alpha_beta([3, 3, 3], [0.1, 0.2, 0.3])[0])   # 1/waves constant
    assert np.isnan(A.fit_alpha_beta([1], [0.5])[0])


def test_binned_median():
    x = np.array([1, 1, 100, 100, 100])
    y = np.array([0.1, 0.3, 0.5, 0.7, 0.9])
    out = A.binned_median(x, y, bins=2)
    assert list(out["count"]) == [2, 3]
    assert list(out["y_median"]) == pytest.approx([0.2, 0.7])
    assert out["x_mid"].iloc[0] == pytest.approx(np.sqrt(1 * 10))      # geometric bin middle


def test_ood_fraction():
    df = pd.DataFrame({"f": [0.0, 1.0, 0.5, 2.0, -1.0, 0.5], "g": [0, 0, 0, 0, 0, 9],
                       "device": ["t", "t", "x", "x", "y", "y"]})
    out = A.ood_fraction(df, ["f", "g"], df["device"] == "t")
    assert out.loc["x", "f"] == 0.5 and out.loc["y", "f"] == 0.5
    assert out.loc["y", "g"] == 0.5 and out.loc["x", "any"] == 0.5 and out.loc["y", "any"] == 1.0
    assert out.loc["x", "rows"] == 2


def test_coverage_and_utilization():
    df = pd.DataFrame({"device": ["a", "a", "b"], "split": ["train"] * 3, "op_class": ["BMM", "EW", "EW"],
                       "latency_ms": [2.0, 1.0, 1.0], "roofline_ms": [1.0, 0.5, 0.25]})
    cov = A.coverage_table(df).set_index("device")
    assert list(cov.columns[:3]) == ["split", "BMM", "EW"]
    assert cov.loc["a", "total"] == 2 and cov.loc["b", "BMM"] == 0
    assert list(A.add_utilization(df)["utilization"]) == [0.5, 0.5, 0.25]


def test_tile_usage_shares_sum_to_one():
    df = pd.DataFrame({"device": ["a", "a", "a", "b"], "tile_m": [128, 128, 64, np.nan],
                       "tile_n": [64, 64, 64, np.nan]})
    t = A.tile_usage(df)
    assert t.loc["a", "128x64"] == pytest.approx(2 / 3) and t.loc["a", "64x64"] == pytest.approx(1 / 3)
    assert "b" not in t.index
    top = A.tile_usage(df, top=1)                   # the most used tile is kept, the rest is 'other'
    assert list(top.columns) == ["128x64", "other"] and top.loc["a", "other"] == pytest.approx(1 / 3)


def test_traced_sm_count_by_hand():
    # GPU a (spec 40 SMs): grids of 80, 8x5 and 7 blocks at 2, 1 and 0.2 blocks per SM imply 40, 40 and 35 SMs;
    # GPU b (spec 40): 40 and 3x10 blocks at 2 and 1.5 per SM imply 20 and 20; a row without blocks per SM is skipped
    df = pd.DataFrame({"device": ["a", "a", "a", "b", "b", "b"], "num_sm": [40] * 6,
                       "grid_x": [80, 8, 7, 40, 3, 9], "grid_y": [1, 5, 1, 1, 10, 1], "grid_z": [1] * 6,
                       "blocks_per_sm": [2.0, 1.0, 0.2, 2.0, 1.5, 0.0]})
    t = A.traced_sm_count(df).set_index("device")
    assert t["kernels"].tolist() == [3, 2] and t["spec_num_sm"].tolist() == [40, 40]
    assert t.loc["a", "traced_num_sm"] == 40 and t.loc["b", "traced_num_sm"] == 20     # the median over kernels
    assert t.loc["a", "spec_agree_share"] == pytest.approx(2 / 3) and t.loc["b", "spec_agree_share"] == 0
    assert t.loc["a", "median_agree_share"] == pytest.approx(2 / 3) and t.loc["b", "median_agree_share"] == 1
    # within SM_AGREE (1%) counts as agreeing: 40.3 SMs (blocks per SM rounded to 0.1) agree with 40, 40.5 does not
    near = pd.DataFrame({"device": ["c", "c"], "num_sm": [40, 40], "grid_x": [403, 405], "grid_y": [1, 1],
                         "grid_z": [1, 1], "blocks_per_sm": [10.0, 10.0]})
    assert A.traced_sm_count(near)["spec_agree_share"].item() == 0.5



def test_peak_reached():
    df = pd.DataFrame({"device": ["a", "a", "b"], "op_class": ["BMM", "FC", "EW"], "B": [1, 1, 1],
                       "M": [10, 10, None], "N": [10, 10, None], "K": [10, 10, None],
                       "latency_ms": [2e-6, 1e-6, 1.0], "peak_gflops": [4000.0, 4000.0, 1.0]})
    # 2*1000 FLOP in 2e-6 ms = 1000 GFLOP/s, in 1e-6 ms = 2000 GFLOP/s; q=1 -> 2000 / 4000
    out = A.peak_reached(df, q=1.0)
    assert list(out.index) == ["a"] and out["a"] == pytest.approx(0.5)
    # the default: the 99th percentile. 100 kernels at 1, 2, ..., 100 GFLOP/s on a 100 GFLOP/s peak -> 99.01 / 100
    ramp = pd.DataFrame({"device": "r", "op_class": "BMM", "B": 1, "M": 10, "N": 10, "K": 10,
                         "latency_ms": 2e-3 / np.arange(1, 101), "peak_gflops": 100.0})
    assert A.peak_reached(ramp)["r"] == pytest.approx(0.9901)


def test_bandwidth_reached_by_hand():
    # 2e6 B in 1 ms = 2 GB/s of a 4 GB/s spec -> 0.5 (the max of 0.5 and 0.25 at q = 1)
    df = pd.DataFrame({"op_class": ["EW", "EW", "LN"], "split": ["train", "train", "test_ood"],
                       "device": ["a", "a", "b"], "bytes": [2e6, 1e6, 3e6], "latency_ms": [1.0, 1.0, 1.0],
                       "mem_bw_gbps": [4.0, 4.0, 6.0]})
    out = A.bandwidth_reached(df, q=1.0)
    assert out[("EW", "train", "a")] == pytest.approx(0.5) and out[("LN", "test_ood", "b")] == pytest.approx(0.5)


def test_alignment_shares_by_hand():
    df = pd.DataFrame({"op_class": ["BMM", "BMM", "BMM", "SOFTMAX", "SOFTMAX"],
                       "split": ["train", "train", "test_id", "train", "train"],
                       "M": [4, 128, 256, np.nan, np.nan], "N": [8, 128, 32, np.nan, np.nan],
                       "K": [3, 128, 128, np.nan, np.nan], "H": [np.nan, np.nan, np.nan, 2048, 2043]})
    # BMM train: (4, 8, 3) aligned to nothing, (128, 128, 128) to 4, 32 and 128; test_id (256, 32, 128): 4 and 32
    assert list(A.aligned(df, 4)) == [False, True, True, True, False]
    t = A.alignment_shares(df).set_index(["op_class", "split"])
    assert t.loc[("BMM", "train"), "rows"] == 2
    assert t.loc[("BMM", "train"), ["x4_pct", "x32_pct", "x128_pct"]].tolist() == [50.0, 50.0, 50.0]
    assert t.loc[("BMM", "test_id"), ["x4_pct", "x32_pct", "x128_pct"]].tolist() == [100.0, 100.0, 0.0]
    assert t.loc[("SOFTMAX", "train"), ["x4_pct", "x128_pct"]].tolist() == [50.0, 50.0]


def test_gemm_throughput_by_shape_by_hand():
    # 2*1*100*100*52 = 1.04e6 FLOP = 1.04e-3 GFLOP in 1.04e-3 ms -> 1 TFLOP/s; log10 GFLOP ~ -3 (bin (-4, 0])
    df = pd.DataFrame({"op_class": "BMM", "device": "g", "B": 1,
                       "split": ["train", "train", "test_id"], "M": [100, 101, 100], "N": [100, 100, 100],
                       "K": [52, 50, 50], "latency_ms": [1.04e-3, 2.02e-3, 0.5e-3]})
    t = A.gemm_throughput_by_shape(df, edges=(-4, 0)).set_index("group")
    assert t.loc["held-out shapes", "median_tflops"] == pytest.approx(2.0)
    assert t.loc["training shapes", "median_tflops"] == pytest.approx(0.75)   # median of 1.0 and 1.01e-3 / 2.02e-3
    assert t.loc["training shapes", "rows"] == 2
    assert t.loc["training shapes, M N K multiples of 4", "median_tflops"] == pytest.approx(1.0)
    assert t.loc["training shapes, M N K multiples of 4", "rows"] == 1


def test_softmax_bandwidth_by_vector_share_by_hand():
    # H=2560 -> share 0.8 (bin (0.7, 0.8]); H=2048 -> 1.0 (bin (0.99, 1.0]); H=1000 (warp kernel) and the
    # small kernel are left out. Bandwidth share: 4e9 B in 1 ms = 4000 GB/s of 8000 -> 0.5; in 2 ms -> 0.25.
    df = pd.DataFrame({"op": ["softmax"] * 5, "device": ["a"] * 5, "H": [2560, 2560, 2048, 1000, 2048],
                       "bytes": [4e9, 4e9, 4e9, 4e9, 1e3], "latency_ms": [1.0, 2.0, 1.0, 1.0, 1.0],
                       "mem_bw_gbps": [8000.0] * 5})
    out = A.softmax_bandwidth_by_vector_share(df).set_index("vector_share")
    assert out["rows"].tolist() == [2, 1]
    assert out["median"].tolist() == pytest.approx([0.375, 0.5])
    assert [iv.right for iv in out.index] == [0.8, 1.0]


def test_throughput_ratio_by_device_is_the_median_over_bins():
    from lib.analysis import throughput_ratio_by_device
    # GPU A: held-out shapes run 1.2x, 1.5x, 2.0x the training shapes' throughput in three bins -> median 1.5;
    # multiple-of-4 training shapes 1.0x and 0.8x in two bins -> 0.9. GPU B: one bin, 3.0x.
    rows = [("A", b, g, t) for b, g, t in [
        ("(0, 1]", "training shapes", 10.0), ("(0, 1]", "held-out shapes", 12.0),
        ("(1, 2]", "training shapes", 4.0), ("(1, 2]", "held-out shapes", 6.0),
        ("(2, 4]", "training shapes", 5.0), ("(2, 4]", "held-out shapes", 10.0),
        ("(0, 1]", "training shapes, M N K multiples of 4", 10.0),
        ("(1, 2]", "training shapes, M N K multiples of 4", 3.2)]] + [
        ("B", "(0, 1]", "training shapes", 2.0), ("B", "(0, 1]", "held-out shapes", 6.0)]
    by_shape = pd.DataFrame(rows, columns=["device", "gflop_bin", "group", "median_tflops"])
    r = throughput_ratio_by_device(by_shape)
    assert r.loc["A", "held-out shapes"] == pytest.approx(1.5) and r.loc["B", "held-out shapes"] == pytest.approx(3.0)
    assert r.loc["A", "training shapes, M N K multiples of 4"] == pytest.approx(0.9)
    assert np.isnan(r.loc["B", "training shapes, M N K multiples of 4"]) and "training shapes" not in r.columns


def test_shape_error_transfer_by_hand():
    # three BMM shapes on training GPU T (test_id) and OOD GPU O (test_ood), plus a shape only O measured
    # and one softmax shape on both (too few shapes for a correlation)
    rows = []
    for i, (r_t, r_o) in enumerate([(2.0, 4.0), (1.0, 1.0), (0.5, 0.25)]):   # pred / measured on T and on O
        rows += [dict(split="test_id", device="T", op_class="BMM", op="bmm", B=1, M=8 * (i + 1), N=8, K=8, H=np.nan,
                      latency_ms=1.0, pred=r_t),
                 dict(split="test_ood", device="O", op_class="BMM", op="bmm", B=1, M=8 * (i + 1), N=8, K=8, H=np.nan,
                      latency_ms=2.0, pred=2.0 * r_o)]
    rows += [dict(split="test_ood", device="O", op_class="BMM", op="bmm", B=1, M=99, N=8, K=8, H=np.nan,
                  latency_ms=1.0, pred=9.0),
             dict(split="test_id", device="T", op_class="SOFTMAX", op="softmax", B=4, M=np.nan, N=np.nan, K=np.nan,
                  H=64, latency_ms=1.0, pred=1.1),
             dict(split="test_ood", device="O", op_class="SOFTMAX", op="softmax", B=4, M=np.nan, N=np.nan, K=np.nan,
                  H=64, latency_ms=1.0, pred=1.1)]
    out = A.shape_error_transfer(pd.DataFrame(rows), column="pred").set_index("op_class")
    bmm = out.loc["BMM"]
    # log errors: T = (log 2, 0, -log 2), O = (2 log 2, 0, -2 log 2): perfectly correlated, O's error twice T's
    assert (bmm["device"], bmm["train_gpu"], bmm["shapes"]) == ("O", "T", 3)
    assert bmm["corr"] == pytest.approx(1.0)
    assert bmm["mape_pct"] == pytest.approx((300 + 0 + 75) / 3)          # |4-1|, |1-1|, |0.25-1| in %
    assert bmm["train_gpu_mape_pct"] == pytest.approx((100 + 0 + 50) / 3)
    # O's forecast divided by T's pred/measured on the same shape: 4/2, 1/1, 0.25/0.5 -> APE 100, 0, 50
    assert bmm["without_shape_error_mape_pct"] == pytest.approx((100 + 0 + 50) / 3)
    assert (bmm["median_ratio"], bmm["train_gpu_median_ratio"]) == (pytest.approx(1.0), pytest.approx(1.0))
    soft = out.loc["SOFTMAX"]
    assert soft["shapes"] == 1 and np.isnan(soft["corr"])
    assert soft["without_shape_error_mape_pct"] == pytest.approx(0.0)
    # two shared shapes: a correlation of two points is always +-1, so none is given
    two = A.shape_error_transfer(pd.DataFrame(rows[:4]), column="pred")
    assert two["shapes"].tolist() == [2] and np.isnan(two["corr"]).all()


def test_error_by_row_length_by_hand():
    # SOFTMAX on one GPU: two rows of 512 (forecast 2x and 1x measured), one of 10,000 (0.5x); training rows <= 4,094
    pred = pd.DataFrame({"op_class": ["SOFTMAX"] * 3 + ["EW"], "split": "test_id", "device": "g",
                         "H": [512, 512, 10_000, 512], "latency_ms": [1.0, 2.0, 4.0, 1.0], "p": [2.0, 2.0, 2.0, 1.0],
                         "bytes": [1e6, 2e6, 4e6, 1e6], "mem_bw_gbps": 1.0})
    out = A.error_by_row_length(pred, "p", {"SOFTMAX": 4094}).set_index("row_from")
    assert list(out.index) == [0, 8192] and list(out["row_to"]) == [1024, 16384]   # EW is not asked for
    assert list(out["kernels"]) == [2, 1]
    assert out.loc[0, "median_ratio"] == pytest.approx(1.5) and out.loc[8192, "median_ratio"] == pytest.approx(0.5)
    assert out.loc[0, "mape_pct"] == pytest.approx(50.0) and out.loc[8192, "mape_pct"] == pytest.approx(50.0)
    # share = bytes / (latency_ms * 1e6) / mem_bw_gbps: 1.0 for every row here
    assert list(out["bandwidth_share"]) == pytest.approx([1.0, 1.0])
    assert list(out["beyond_training"]) == [False, True]
    # a row longer than the last edge has no bin: an error, not a row dropped from the table
    with pytest.raises(ValueError, match="H = 20000"):
        A.error_by_row_length(pred.assign(H=[512, 512, 20_000, 512]), "p", {"SOFTMAX": 4094})
    # a bin is beyond training only if every row of it is: 5,000 and 7,000 against a longest training row of 6,000
    mixed = A.error_by_row_length(pred.assign(H=[5_000, 7_000, 10_000, 512]), "p", {"SOFTMAX": 6000})
    assert mixed.set_index("row_from")["beyond_training"].to_dict() == {4096: False, 8192: True}


def test_softmax_rows_split_evenly_by_hand():
    # warp kernel (H <= 1024): a power of two fills every lane's slots
    assert list(A.softmax_rows_split_evenly([1, 64, 768, 1000, 1024])) == [True, True, False, False, True]
    # block kernel: threads = least power of two >= floor(min(floor(H / 4), 1024) / 2), at least 32
    #   H = 2048: 256 threads, 4 x 256 = 1,024 divides 2,048;  H = 3072: 512 threads, 2,048 does not divide 3,072
    #   H = 1280: 256 threads, 1,024 does not divide;  H = 10240: 512 threads, 2,048 x 5;  H = 6400: 3.125 x 2,048
    assert list(A.softmax_rows_split_evenly([2048, 3072, 1280, 10240, 6400, 16384])) == [True, False, False, True, False, True]


def test_error_by_even_split_by_hand():
    # one GPU: held-out rows H = 2048 (even; forecasts 1.5x and 1.1x), 3072 (not; 0.9x) and 8192 (even, longer than
    # the longest training row, 4,000; 0.5x); a training row, no forecast
    soft = pd.DataFrame({"split": ["test_ood"] * 4 + ["train"], "device": "g", "H": [2048, 2048, 3072, 8192, 1500],
                         "latency_ms": [1.0, 2.0, 1.0, 1.0, 1.0], "p": [1.5, 2.2, 0.9, 0.5, np.nan]})
    out = A.error_by_even_split(soft, "p", 4000).set_index(["split", "beyond_training", "even"])
    within_even, within_odd, beyond = ("test_ood", False, True), ("test_ood", False, False), ("test_ood", True, True)
    assert [out.loc[k, "kernels"] for k in (within_even, within_odd, beyond)] == [2, 1, 1]
    assert out.loc[within_even, "share_pct"] == pytest.approx(50.0)          # of the 4 held-out rows on g
    assert out.loc[within_even, "median_ratio"] == pytest.approx(1.3)
    assert out.loc[within_even, "mape_pct"] == pytest.approx(30.0)
    assert out.loc[within_odd, "mape_pct"] == pytest.approx(10.0) and out.loc[beyond, "mape_pct"] == pytest.approx(50.0)
    train = out.loc[("train", False, False)]
    assert train["share_pct"] == 100 and np.isnan(train["median_ratio"])
