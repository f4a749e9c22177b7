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
    # on T4: bmm (1,64,64,64) measured twice (median 1.5) and its M doubled; add (B=2, H=8) and its H doubled;
    # the same doubled bmm on V100 has no single shape there, and add H=24 is not a doubling
    nan = np.nan
    df = pd.DataFrame({
        "device": ["T4", "T4", "T4", "T4", "T4", "T4", "V100"],
        "op_class": ["BMM", "BMM", "BMM", "EW", "EW", "EW", "BMM"],
        "op": ["bmm", "bmm", "bmm", "add", "add", "add", "bmm"],
        "B": [1, 1, 1, 2, 2, 2, 1], "M": [64, 64, 128, nan, nan, nan, 128], "N": [64, 64, 64, nan, nan, nan, 64],
        "K": [64, 64, 64, nan, nan, nan, 64], "H": [nan, nan, nan, 8, 16, 24, nan],
        "latency_ms": [1.0, 2.0, 1.2, 0.5, 0.4, 0.9, 3.0]})
    pairs = S.doubled_pairs(df).sort_values("op").reset_index(drop=True)
    assert pairs[["device", "op", "dim", "M", "H", "latency_ms", "doubled_latency_ms"]].to_dict("records") == [
        {"device": "T4", "op": "add", "dim": "H", "M": pytest.approx(nan, nan_ok=True), "H": 8.0,
         "latency_ms": 0.5, "doubled_latency_ms": 0.4},
        {"device": "T4", "op": "bmm", "dim": "M", "M": 64.0, "H": pytest.approx(nan, nan_ok=True),
         "latency_ms": 1.5, "doubled_latency_ms": 1.2}]
    big = S.doubled(pairs)
    assert big[["M", "H"]].fillna(0).to_numpy().tolist() == [[0, 16], [128, 0]]
    assert pairs["H"].iloc[0] == 8                                   # the input is not changed


def test_doubling_table_by_hand():
    # ratios measured 0.8 (falls: below 0.95) and 1.9; forecast 0.96 (does not fall) and 2.0
    pairs = pd.DataFrame({"device": ["T4", "T4"], "op_class": ["BMM", "BMM"], "dim": ["M", "K"],
                          "latency_ms": [1.0, 1.0], "doubled_latency_ms": [0.8, 1.9],
                          "pred_ms": [1.0, 2.0], "doubled_pred_ms": [0.96, 4.0]})
    # with a pair on V100 measured 1.05 (flat: below 1.1), forecast 1.8
    pairs.loc[2] = ["V100", "BMM", "B", 2.0, 2.1, 1.0, 1.8]
    t = S.doubling_table(pairs).set_index("device")
    assert list(t.index) == ["T4", "V100", S.ALL_GPUS]
    row = t.loc["T4"]
    assert (row.pairs, row.measured_falls_pct, row.forecast_falls_pct, row.flat_pairs) == (2, 50.0, 0.0, 1)
    assert row.measured_min_ratio == pytest.approx(0.8) and row.forecast_min_ratio == pytest.approx(0.96)
    assert row.flat_forecast_median == pytest.approx(0.96)             # the falling pair is flat too (0.8 < 1.1)
    pooled = t.loc[S.ALL_GPUS]
    assert (pooled.pairs, pooled.flat_pairs) == (3, 2)
    assert pooled.measured_falls_pct == pytest.approx(100 / 3) and pooled.flat_forecast_median == pytest.approx(1.38)
    # forecast / measured of the flat pairs: single 1.0 / 1.0 and 1.0 / 2.0, doubled 0.96 / 0.8 = 1.2 and 1.8 / 2.1
    assert pooled.flat_single_bias == pytest.approx(0.75)
    assert pooled.flat_doubled_bias == pytest.approx((1.2 + 1.8 / 2.1) / 2)
