"""lib.metrics: APE, MAPE and the bootstrap interval, against hand-computed cases and the normal approximation."""
import numpy as np
import pandas as pd
import pytest

from lib import metrics


def test_ape_and_mape_by_hand():
    assert metrics.ape([110.0, 45.0], [100.0, 50.0]) == pytest.approx([10.0, 10.0])
    assert metrics.mape([110.0, 60.0], [100.0, 50.0]) == pytest.approx(15.0)


def test_bootstrap_two_points_by_hand():
    # n = 2 draws from {0, 10}: means 0, 5, 10 with probabilities 1/4, 1/2, 1/4 -> 95% interval (0, 10)
    assert metrics.bootstrap_mean_ci([0.0, 10.0]) == (0.0, 10.0)
    assert metrics.bootstrap_mean_ci([7.0] * 5) == (7.0, 7.0)
    assert np.isnan(metrics.bootstrap_mean_ci([np.nan])[0])


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
