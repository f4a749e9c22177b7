"""Error metrics of the evaluation protocol (introduced in notebook 04)."""
from __future__ import annotations

import numpy as np
import pandas as pd


def ape(pred, meas) -> np.ndarray:
    """Absolute percentage error, %: |pred - meas| / meas * 100 (by position; a measurement must be positive)."""
    pred, meas = np.asarray(pred, dtype=float), np.asarray(meas, dtype=float)
    if (meas <= 0).any():
        raise ValueError(f"ape: a measurement must be positive (got {meas[meas <= 0][0]:g})")
    return np.abs(pred - meas) / meas * 100.0


def mape(pred, meas) -> float:
    """Mean absolute percentage error, % (DESIGN.md metric)."""
    return float(np.mean(ape(pred, meas)))


BOOTSTRAP_RESAMPLES = 2000   # resamples per interval
CI_LEVEL = 0.95
_CHUNK = 100                 # resamples drawn at once (bounds memory: chunk x rows indices)


def bootstrap_mean_ci(values, n_boot: int = BOOTSTRAP_RESAMPLES, level: float = CI_LEVEL,
                      seed: int = 0, groups=None) -> tuple[float, float]:
    """Percentile-bootstrap interval of the mean of `values`, rows resampled i.i.d. (notebook 04); with `groups`
    (one label per value), whole groups resampled instead: rows of a group that share their errors (the labels of
    one model on one GPU) count as one draw.

    A paired comparison (ours - paper on the same labels) passes the per-label differences.
    """
    # means_b = mean(values[idx_b]), idx_b ~ n draws with replacement;  CI = quantiles (1 -+ level) / 2
    # groups: means_b = sum_g in idx_b sum(values of g) / sum_g in idx_b count(g), idx_b ~ G draws of the G groups
    v = np.asarray(values, dtype=float)
    keep = ~np.isnan(v)                  # NaN: no forecast (e.g. Li et al. on an unmeasured GPU)
    v = v[keep]
    if len(v) == 0 or np.isinf(v).any():   # an infinite error (an overflowed forecast): the mean has no interval
        return (np.nan, np.nan)
    rng = np.random.default_rng(seed)
    if groups is None:
        means = np.concatenate([v[rng.integers(0, len(v), size=(min(_CHUNK, n_boot - i), len(v)))].mean(axis=1)
                                for i in range(0, n_boot, _CHUNK)])
    else:
        by = pd.Series(v).groupby(np.asarray(pd.Series(list(groups)).astype(str))[keep])
        sums, counts = by.sum().to_numpy(), by.size().to_numpy(float)
        chunks = (rng.integers(0, len(sums), size=(min(_CHUNK, n_boot - i), len(sums))) for i in range(0, n_boot, _CHUNK))
        means = np.concatenate([sums[idx].sum(axis=1) / counts[idx].sum(axis=1) for idx in chunks])
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def mape_ci_table(df: pd.DataFrame, pred_col: str, by, meas_col: str = "latency_ms") -> pd.DataFrame:
    """Rows, MAPE (%) and its bootstrap interval (ci_low_pct, ci_high_pct) of one prediction column per group; a row
    without a prediction (NaN) is left out of each and of `rows`, where lib.metrics.mape would give NaN."""
    err = pd.Series(ape(df[pred_col], df[meas_col]), index=df.index)
    keys = [by] if isinstance(by, str) else list(by)
    rows = []
    for key, e in err.groupby([df[c] for c in keys]):
        lo, hi = bootstrap_mean_ci(e.to_numpy())
        rows.append({**dict(zip(keys, key if isinstance(key, tuple) else (key,))),
                     "rows": int(e.notna().sum()), "mape_pct": float(e.mean()), "ci_low_pct": lo, "ci_high_pct": hi})
    return pd.DataFrame(rows)


NEVER_TRAINED_POOLS = ("training GPUs, each held out", "OOD GPUs", "every GPU never trained on")


def never_trained_table(held: pd.DataFrame, ood: pd.DataFrame, by: str) -> pd.DataFrame:
    """Error per GPU never trained on and `by` value, and pooled over NEVER_TRAINED_POOLS (notebooks 04 and 05).

    held: rows of the training GPUs forecast by models trained without that GPU (columns device, `by`, pred, meas,
    trained: the forecast when the GPU is trained on); ood: rows of GPUs never trained on at all (device, `by`, pred,
    meas). Columns out: group, `by`, n, mape_pct, median_ratio (of pred / meas), trained_mape_pct (NaN where a row
    has no `trained`) and level_free_mape_pct: the MAPE left once each GPU's forecasts of each `by` value are divided
    by their median pred / meas, a diagnosis that reads the measurements (how much of the error is one level per
    GPU), not a forecast."""
    rows = pd.concat([held.assign(pool=0), ood.assign(pool=1, trained=np.nan)], ignore_index=True)
    ratio = rows["pred"] / rows["meas"]
    level = ratio.groupby([rows["device"], rows[by]]).transform("median")
    rows = rows.assign(group=rows["device"], err=ape(rows["pred"], rows["meas"]),
                       trained_err=ape(rows["trained"], rows["meas"]), ratio=ratio,
                       level_free_err=ape(rows["pred"] / level, rows["meas"]))
    pooled = [rows[rows["pool"] == 0], rows[rows["pool"] == 1], rows]
    rows = pd.concat([rows, *[p.assign(group=name) for name, p in zip(NEVER_TRAINED_POOLS, pooled) if len(p)]],
                     ignore_index=True)
    g = rows.groupby(["group", by], sort=False)
    trained = g["trained_err"].mean().where(g["trained_err"].count() == g.size())
    return pd.DataFrame({"n": g.size(), "mape_pct": g["err"].mean(), "median_ratio": g["ratio"].median(),
                         "trained_mape_pct": trained, "level_free_mape_pct": g["level_free_err"].mean()}).reset_index()


# p = share of the n! orderings of y whose Spearman correlation with x is at least the observed one (one-sided,
# exact; ties keep pandas' average ranks)
def spearman_exact_p(x, y) -> tuple[float, float]:
    """(Spearman's rho, exact one-sided permutation p-value) for a few paired values, n <= 9 (notebook 04)."""
    import itertools
    x, y = pd.Series(np.asarray(x, dtype=float)), pd.Series(np.asarray(y, dtype=float))
    if len(x) != len(y) or not 3 <= len(x) <= 9:
        raise ValueError(f"spearman_exact_p needs 3 to 9 pairs, got {len(x)} and {len(y)}")
    if x.isna().any() or y.isna().any() or x.nunique() < 2 or y.nunique() < 2:
        raise ValueError("spearman_exact_p needs values without NaN, and at least two different values on each side")
    rx, ry = x.rank().to_numpy(), y.rank().to_numpy()
    rx, ry = rx - rx.mean(), ry - ry.mean()
    scale = np.sqrt((rx ** 2).sum() * (ry ** 2).sum())
    rhos = np.array(list(itertools.permutations(ry))) @ rx / scale    # Pearson of the ranks, every ordering
    rho = float(ry @ rx / scale)
    return rho, float(np.mean(rhos >= rho - 1e-12))
