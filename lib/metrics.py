"""Error metrics of the evaluation protocol (introduced in notebook 04)."""
from __future__ import annotations

import numpy as np
import pandas as pd


def ape(pred, meas) -> np.ndarray:
    """Absolute percentage error, %: |pred - meas| / meas * 100."""
    pred, meas = np.asarray(pred, dtype=float), np.asarray(meas, dtype=float)
    return np.abs(pred - meas) / meas * 100.0


def mape(pred, meas) -> float:
    """Mean absolute percentage error, % (DESIGN.md metric)."""
    return float(np.mean(ape(pred, meas)))


def mape_table(df: pd.DataFrame, pred_col: str, by, meas_col: str = "latency_ms") -> pd.Series:
    """MAPE (%) of one prediction column per group."""
    err = pd.Series(ape(df[pred_col], df[meas_col]), index=df.index)
    return err.groupby([df[c] for c in ([by] if isinstance(by, str) else by)]).mean()
