"""Hand-computed cases for lib.size_steps: falls along a size sweep, drops, the size guard, doubled shapes."""
import numpy as np
import pandas as pd
import pytest

from lib import size_steps as S


def test_falls_below_running_max_by_hand():
    # steps: 2.0 rises; 1.95 stays within 5% of 2.0; 1.5 falls (below 0.95 x 2.0); 2.5 rises; 2.0 falls (below 2.375)
    falls = S.falls_below_running_max([1.0, 2.0, 1.95, 1.5, 2.5, 2.0], tolerance=0.05)
    assert falls.tolist() == [False, False, True, False, True]
    # the default tolerance, 1%: 1.95 now falls too (below 0.99 x 2.0 = 1.98), 1.99 does not
    assert S.falls_below_running_max([2.0, 1.95, 1.99]).tolist() == [True, False]


def test_size_sweep_table_sorts_by_size_first():
    # by size: 2.5 (1), 1.5 (2), 2.0 (3), 2.0 (4): every later step lies below 0.99 x 2.5; worst 2.5 / 1.5
    table = S.size_sweep_table({"a": pd.Series([2.0, 1.5, 2.5, 2.0], index=[4, 2, 1, 3])})
    assert table.to_dict("records") == [{"sweep": "a", "steps": 3, "falls": 3, "worst_ratio": pytest.approx(2.5 / 1.5)}]
    # the worst ratio is against the running maximum: 1, 3, 2, 1.5 -> 3 / 1.5 = 2 (against the step below: 1.5)
    rising = S.size_sweep_table({"b": pd.Series([1.0, 3.0, 2.0, 1.5], index=[1, 2, 3, 4])})
    assert rising["worst_ratio"].iloc[0] == pytest.approx(2.0)


def test_drops_from_previous_by_hand():
    # by size: 1.0 (1), 2.0 (2), 1.5 (3), 1.49 (4), 3.0 (5): 3 drops from 2.0; 4 stays within 1% of 1.5
    values = pd.Series([3.0, 1.0, 2.0, 1.5, 1.49], index=[5, 1, 2, 3, 4])
    assert S.drops_from_previous(values) == [3]
    assert S.drops_from_previous(values, tolerance=0.0) == [3, 4]


def test_floor_to_multiple_by_hand():
    assert S.floor_to_multiple([1, 32, 33, 63, 64, 65, 129]).tolist() == [1, 32, 32, 32, 64, 64, 128]
    assert S.floor_to_multiple([100], multiple=64).tolist() == [64]


def test_floor_guarded_raises_a_gemm_to_its_rounded_shapes():
    # a fake forecast that halves for each output dim off the 32 grid (GEMMs), and falls with M (other ops)
    calls = []

    def predict(t):
        calls.append(t.copy())
        m, k = t["M"].to_numpy(float), t["K"].to_numpy(float)
        half = lambda x: np.where(x % 32 == 0, 1.0, 0.5)
        return np.where(t["op"].isin(["bmm", "linear"]).to_numpy(), m * k * half(m) * half(k), 1000 - m)

    df = pd.DataFrame({"op": ["linear", "bmm", "linear", "bmm", "softmax", "bmm", "linear"],
                       "B": [1, 2, 1, 2, 1, 1, 4], "M": [129, 64, 65, 64, 129, np.nan, 63],
                       "N": 8, "K": [64, 33, 65, 64, np.nan, 64, 64], "H": 0},
                      index=[10, 3, 7, 0, 5, 1, 2])                     # not a default index: results are by position
    out = S.floor_guarded(df, predict)
    expected = [128 * 64,      # M only: f(129, 64) = 4128 < f(128, 64) = 8192
                64 * 32,       # K only: f(64, 33) = 1056 < f(64, 32) = 2048
                64 * 64,       # both: f(65, 65) = 1056.25, one rounded 2080, both rounded 4096
                64 * 64,       # on the grid: unchanged
                1000 - 129,    # not a GEMM: not guarded, although f(128) = 872 would be larger
                np.nan,        # M missing: NaN, and no rounded shape predicted for it
                224 * 64]      # linear B = 4, M = 63: 252 rows (f 8064), rounded to 224 rows, not 4 x 32
    np.testing.assert_array_equal(out, expected)
    assert len(calls) == 2 and calls[1]["M"].notna().all() and calls[1]["op"].isin(["bmm", "linear"]).all()


def test_doubled_pairs_by_hand():
    # on T4: bmm (1,64,64,64) measured three times (1, 2, 6: median 2, mean 3) with M doubled to 128 and again to 256,
    # a chain in which (1,128,64,64) is both a doubled and a single shape; add (B=2, H=8) and its H doubled; the
    # doubled bmm on V100 has no single shape there, and add H=24 is not a doubling
    nan = np.nan
    df = pd.DataFrame({
        "device": ["T4"] * 8 + ["V100"],
        "op_class": ["BMM"] * 5 + ["EW"] * 3 + ["BMM"],
        "op": ["bmm"] * 5 + ["add"] * 3 + ["bmm"],
        "B": [1, 1, 1, 1, 1, 2, 2, 2, 1], "M": [64, 64, 64, 128, 256, nan, nan, nan, 128],
        "N": [64] * 5 + [nan] * 3 + [64], "K": [64] * 5 + [nan] * 3 + [64], "H": [nan] * 5 + [8, 16, 24, nan],
        "latency_ms": [1.0, 2.0, 6.0, 1.2, 2.5, 0.5, 0.4, 0.9, 3.0],
        "kernel_name": ["k64"] * 3 + ["k64", "k128", "e", "e", "e", "k64"]})
    pairs = S.doubled_pairs(df).sort_values(["op", "M"]).reset_index(drop=True)
    got = pairs[["device", "op", "dim", "M", "H", "latency_ms", "doubled_latency_ms", "kernel_name",
                 "doubled_kernel_name"]].fillna(0).to_dict("records")
    assert got == [
        {"device": "T4", "op": "add", "dim": "H", "M": 0, "H": 8.0, "latency_ms": 0.5, "doubled_latency_ms": 0.4,
         "kernel_name": "e", "doubled_kernel_name": "e"},
        {"device": "T4", "op": "bmm", "dim": "M", "M": 64.0, "H": 0, "latency_ms": 2.0, "doubled_latency_ms": 1.2,
         "kernel_name": "k64", "doubled_kernel_name": "k64"},
        {"device": "T4", "op": "bmm", "dim": "M", "M": 128.0, "H": 0, "latency_ms": 1.2, "doubled_latency_ms": 2.5,
         "kernel_name": "k64", "doubled_kernel_name": "k128"}]
    big = S.doubled(pairs)
    assert big[["M", "H"]].fillna(0).to_numpy().tolist() == [[0, 16], [128, 0], [256, 0]]
    assert pairs["H"].iloc[0] == 8                                   # the input is not changed
    assert "kernel_name" not in S.doubled_pairs(df.drop(columns="kernel_name")).columns


def test_doubling_table_by_hand():
    # T4: ratios measured 0.8 (falls: below 0.95; same kernel), 0.95 (on the boundary: does not fall; flat) and 1.9;
    # forecast 0.96, 1.0 and 2.0. V100: measured 1.05 (flat: below 1.1; 1.1 itself is not flat), forecast 1.8
    pairs = pd.DataFrame({"device": ["T4", "T4", "T4", "V100", "V100"], "op_class": ["BMM"] * 5,
                          "dim": ["M", "M", "K", "B", "B"],
                          "latency_ms": [1.0, 1.0, 1.0, 2.0, 1.0], "doubled_latency_ms": [0.8, 0.95, 1.9, 2.1, 1.1],
                          "pred_ms": [1.0, 1.0, 2.0, 1.0, 1.0], "doubled_pred_ms": [0.96, 1.0, 4.0, 1.8, 1.5],
                          "kernel_name": ["a", "a", "a", "b", "b"], "doubled_kernel_name": ["a", "c", "a", "b", "b"]})
    t = S.doubling_table(pairs).set_index("device")
    assert list(t.index) == ["T4", "V100", S.ALL_GPUS]
    row = t.loc["T4"]
    assert (row.pairs, row.measured_falls, row.falls_same_kernel, row.flat_pairs) == (3, 1, 1, 2)
    assert (row.measured_falls_pct, row.forecast_falls_pct) == (pytest.approx(100 / 3), 0.0)
    assert row.measured_min_ratio == pytest.approx(0.8) and row.forecast_min_ratio == pytest.approx(0.96)
    assert row.flat_forecast_median == pytest.approx(0.98)           # flat: 0.8 and 0.95 (forecast 0.96 and 1.0)
    pooled = t.loc[S.ALL_GPUS]
    assert (pooled.pairs, pooled.flat_pairs) == (5, 3)
    # flat pairs: forecast ratios 0.96, 1.0, 1.8 (median 1.0, mean 1.25); forecast / measured of the single shapes
    # 1.0, 1.0, 0.5 (median 1.0) and of the doubled ones 1.2, 1.05, 1.8 / 2.1 = 0.857 (median 1.05)
    assert pooled.flat_forecast_median == pytest.approx(1.0)
    assert pooled.flat_single_bias == pytest.approx(1.0) and pooled.flat_doubled_bias == pytest.approx(1.0 / 0.95)
    assert (row.forecast_falls, t.loc["V100"].forecast_falls) == (0, 0)
    assert S.doubling_table(pairs.drop(columns=["kernel_name", "doubled_kernel_name"])).falls_same_kernel.sum() == 0


def test_flat_pairs_by_hand():
    # flat: M 64 -> 128 at 1.05x on a 128x128 kernel (tile on M: 128), K 64 -> 128 at 1.0x on a 64x64 one (tile on K:
    # 64), B 12 -> 24 at 1.08x (no tile on B); not flat: 1.1x, and an add pair at 1.0x (another class)
    pairs = pd.DataFrame({"op_class": ["BMM"] * 4 + ["EW"], "dim": ["M", "K", "B", "M", "H"],
                          "B": [1, 1, 12, 1, 4], "M": [64, 64, 64, 64, np.nan], "K": [64, 64, 64, 64, np.nan],
                          "H": [np.nan] * 4 + [8], "latency_ms": [1.0, 1.0, 1.0, 1.0, 1.0],
                          "doubled_latency_ms": [1.05, 1.0, 1.08, 1.1, 1.0],
                          "kernel_name": ["ampere_sgemm_128x128_nn", "volta_sgemm_64x64_nn", "x", "x", "y"]})
    flat = S.flat_pairs(pairs)
    assert flat["dim"].tolist() == ["M", "K", "B"] and flat["size"].tolist() == [64, 64, 12]
    assert flat["tile_on_dim"].fillna(0).tolist() == [128, 64, 0]
    # a cuBLAS name gives the tile column-major, K first: 128x64 covers K with 128 and M with 64
    wide = S.flat_pairs(pairs.iloc[:2].assign(kernel_name="ampere_sgemm_128x64_nn"))
    assert wide["dim"].tolist() == ["M", "K"] and wide["tile_on_dim"].tolist() == [64, 128]


def test_flat_tile_table_by_hand():
    # A100: three flat pairs, two doubling a 64 of M or K (tiles on it 128 and 64: half wide), one doubling B;
    # T4: one doubling a K of 128 (not 64), so no share
    flat = pd.DataFrame({"device": ["A100", "A100", "A100", "T4"], "dim": ["M", "K", "B", "K"],
                         "size": [64.0, 64.0, 64.0, 128.0], "tile_on_dim": [128.0, 64.0, np.nan, 256.0]})
    t = S.flat_tile_table(flat).set_index("device")
    assert t.loc["A100", ["flat_pairs", "narrow_pairs", "wide_share"]].tolist() == [3, 2, 0.5]
    assert (t.loc["T4", "flat_pairs"], t.loc["T4", "narrow_pairs"]) == (1, 0) and np.isnan(t.loc["T4", "wide_share"])
    assert S.flat_tile_table(flat, narrow=128).set_index("device").loc["T4", "wide_share"] == 1.0
