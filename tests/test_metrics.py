"""lib.metrics: APE, MAPE and the bootstrap interval, against hand-computed cases and the normal approximation."""
import numpy as np
import pandas as pd
import pytest

from lib import metrics


def test_ape_and_mape_by_hand():
    assert metrics.ape([110.0, 45.0], [100.0, 50.0]) == pytest.approx([10.0, 10.0])
    assert metrics.mape([110.0, 60.0], [100.0, 50.0]) == pytest.approx(15.0)
    for bad in (0.0, -2.0):   # a percentage of no time, or of a negative one, is no error measure
        with pytest.raises(ValueError, match="a measurement must be positive"):
            metrics.ape([1.0, 1.0], [1.0, bad])


def test_bootstrap_two_points_by_hand():
    # n = 2 draws from {0, 10}: means 0, 5, 10 with probabilities 1/4, 1/2, 1/4 -> 95% interval (0, 10)
    assert metrics.bootstrap_mean_ci([0.0, 10.0]) == (0.0, 10.0)
    assert metrics.bootstrap_mean_ci([7.0] * 5) == (7.0, 7.0)
    assert np.isnan(metrics.bootstrap_mean_ci([np.nan])[0])
    assert metrics.bootstrap_mean_ci([np.nan, 0.0, 10.0]) == (0.0, 10.0)   # NaN rows are no forecast: left out
    assert np.isnan(metrics.bootstrap_mean_ci([1.0, np.inf])).all()     # an infinite mean has no interval


def test_bootstrap_by_groups_by_hand():
    # two groups, {0, 0} and {10}: a draw of two groups gives mean 0 (a, a), 10 (b, b) or 10/3 (a, b: (0+0+10)/3),
    # with probabilities 1/4, 1/4, 1/2 -> 95% interval (0, 10); every row alike within a group: one draw each
    assert metrics.bootstrap_mean_ci([0.0, 0.0, 10.0], groups=["a", "a", "b"]) == (0.0, 10.0)
    lo, hi = metrics.bootstrap_mean_ci([0.0, 0.0, 10.0], groups=["a", "a", "b"], level=0.4)
    assert lo == hi == pytest.approx(10 / 3)
    # NaN rows leave their group; one group: its mean every time
    assert metrics.bootstrap_mean_ci([np.nan, 4.0, 6.0], groups=["a", "b", "b"]) == (5.0, 5.0)
    # rows that share their errors: resampling the groups gives a wider interval than resampling the rows
    rng = np.random.default_rng(1)
    shared = np.repeat(rng.normal(0, 1, 30), 5) + rng.normal(0, 0.1, 150)
    groups = np.repeat(np.arange(30), 5)
    lo_rows, hi_rows = metrics.bootstrap_mean_ci(shared)
    lo_groups, hi_groups = metrics.bootstrap_mean_ci(shared, groups=groups)
    assert hi_groups - lo_groups > 1.5 * (hi_rows - lo_rows)


def test_bootstrap_matches_normal_approximation():
    x = np.random.default_rng(3).exponential(10.0, size=4000)
    lo, hi = metrics.bootstrap_mean_ci(x)
    half = 1.96 * x.std(ddof=1) / np.sqrt(len(x))
    assert lo == pytest.approx(x.mean() - half, abs=0.15 * half)
    assert hi == pytest.approx(x.mean() + half, abs=0.15 * half)
    assert metrics.bootstrap_mean_ci(x) == (lo, hi)            # seeded: the same interval every run


def test_mape_ci_table_per_group():
    df = pd.DataFrame({"g": ["a", "a", "b"], "pred": [110.0, 90.0, 150.0], "latency_ms": [100.0] * 3})
    t = metrics.mape_ci_table(df, "pred", "g").set_index("g")
    assert t.loc["a", "mape_pct"] == pytest.approx(10.0) and t.loc["a", "rows"] == 2
    assert (t.loc["a", "ci_low_pct"], t.loc["a", "ci_high_pct"]) == (10.0, 10.0)
    assert t.loc["b", "mape_pct"] == pytest.approx(50.0)
    # three unequal errors (10, 0, 30): the mean, not the median; a row without a forecast is not a row;
    # the interval is the 95% bootstrap of the group's own errors
    df = pd.DataFrame({"g": ["c"] * 4, "pred": [110.0, 100.0, 130.0, np.nan], "latency_ms": [100.0] * 4})
    t = metrics.mape_ci_table(df, "pred", "g").iloc[0]
    assert t["mape_pct"] == pytest.approx(40 / 3) and t["rows"] == 3
    assert (t["ci_low_pct"], t["ci_high_pct"]) == metrics.bootstrap_mean_ci([10.0, 0.0, 30.0])
    assert (t["ci_low_pct"], t["ci_high_pct"]) != metrics.bootstrap_mean_ci([10.0, 0.0, 30.0], level=0.9)


def test_never_trained_table_by_hand():
    from lib.metrics import NEVER_TRAINED_POOLS, never_trained_table
    # GPU A held out: forecasts 11 and 18 of 10 and 20 (trained on: 10 and 22); GPU O never trained on: 30 of 20
    held = pd.DataFrame({"device": ["A", "A"], "k": ["x", "x"], "pred": [11.0, 18.0], "meas": [10.0, 20.0],
                         "trained": [10.0, 22.0]})
    ood = pd.DataFrame({"device": ["O"], "k": ["x"], "pred": [30.0], "meas": [20.0]})
    t = never_trained_table(held, ood, "k").set_index("group")
    assert list(t.index) == ["A", "O", *NEVER_TRAINED_POOLS]
    assert t.loc["A", ["n", "mape_pct", "trained_mape_pct"]].tolist() == pytest.approx([2, 10.0, 5.0])
    assert t.loc["A", "median_ratio"] == pytest.approx((1.1 + 0.9) / 2)
    assert t.loc["O", "mape_pct"] == pytest.approx(50.0) and np.isnan(t.loc["O", "trained_mape_pct"])
    assert t.loc[NEVER_TRAINED_POOLS[0], "mape_pct"] == pytest.approx(10.0)
    assert t.loc[NEVER_TRAINED_POOLS[2], ["n", "mape_pct"]].tolist() == pytest.approx([3, 70 / 3])
    assert np.isnan(t.loc[NEVER_TRAINED_POOLS[2], "trained_mape_pct"])   # the OOD row has no trained forecast
    # level-free: A's forecasts / their median ratio 1.0 stay 11 and 18 (10%); O's single row / 1.5 is exact (0%)
    assert t["level_free_mape_pct"].tolist() == pytest.approx([10.0, 0.0, 10.0, 0.0, 20 / 3])


def test_never_trained_table_levels_and_ratios_per_gpu_and_group():
    from lib.metrics import never_trained_table
    # one GPU, two kernels: x forecast at 1.1 of its measurement, y at 2.0 and 2.0 and 3.5 (three unequal ratios)
    held = pd.DataFrame({"device": ["A"] * 4, "k": ["x", "y", "y", "y"], "pred": [11.0, 20.0, 20.0, 35.0],
                         "meas": [10.0] * 4, "trained": [10.0] * 4})
    ood = pd.DataFrame({"device": ["O"], "k": ["x"], "pred": [10.0], "meas": [10.0]})
    t = never_trained_table(held, ood, "k").set_index(["group", "k"])
    assert t.loc[("A", "y"), "median_ratio"] == pytest.approx(2.0)          # the median, not the mean (2.5)
    # each kernel's level is its own median ratio: x is exact once divided by 1.1, y's 3.5 is 75% off 2.0
    assert t.loc[("A", "x"), "level_free_mape_pct"] == pytest.approx(0.0)
    assert t.loc[("A", "y"), "level_free_mape_pct"] == pytest.approx(75 / 3)


def test_spearman_exact_p_by_hand():
    from lib.metrics import spearman_exact_p
    # n = 5: rho >= 0.8 means sum d^2 <= 4: the identity, 4 adjacent swaps and 3 pairs of disjoint adjacent swaps
    rho, p = spearman_exact_p([1, 2, 3, 4, 5], [1, 3, 2, 5, 4])      # two disjoint swaps: sum d^2 = 4
    assert rho == pytest.approx(0.8) and p == pytest.approx(8 / 120)
    rho, p = spearman_exact_p([1, 2, 3], [3, 2, 1])                  # the reverse order: every ordering does as well
    assert rho == pytest.approx(-1) and p == 1.0
    assert spearman_exact_p([1, 2, 3], [1, 2, 3]) == (pytest.approx(1.0), pytest.approx(1 / 6))
    with pytest.raises(ValueError, match="3 to 9 pairs"):
        spearman_exact_p([1, 2], [1, 2])
    with pytest.raises(ValueError, match="3 to 9 pairs"):                  # 10! orderings: too many to list
        spearman_exact_p(range(10), range(10))
    for x in ([1, 1, 1], [1, float("nan"), 3]):                       # no ranking, or a missing value
        with pytest.raises(ValueError, match="two different values"):
            spearman_exact_p(x, [1, 2, 3])
    # ties keep average ranks, and every ordering of them counts: [1, 1, 2, 2] against itself, 4 of 24 orderings
    assert spearman_exact_p([1, 1, 2, 2], [1, 1, 2, 2]) == (pytest.approx(1.0), pytest.approx(4 / 24))
