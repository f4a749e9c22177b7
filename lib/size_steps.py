"""Is a larger kernel forecast slower? Sweeps of one size, the steps where a forecast falls, and the size-guard
trial (notebook 05, "Sizes between the grid points")."""
from __future__ import annotations

import numpy as np
import pandas as pd


# A larger kernel of the same kind should not run faster. Along a sweep of one size (the others fixed), step i
# "falls" when its value lies more than `tolerance` below the largest value at any smaller size:
#     falls_i = value_i < (1 - tolerance) * max(value_0 .. value_{i-1})
def falls_below_running_max(values, tolerance: float = 0.01) -> np.ndarray:
    """Per step of a sweep in increasing size (len - 1 entries): does it fall below the running maximum (notebook 05)."""
    x = np.asarray(values, dtype=float)
    return x[1:] < (1 - tolerance) * np.maximum.accumulate(x)[:-1]


def drops_from_previous(values: pd.Series, tolerance: float = 0.01) -> list:
    """Sizes (index values) whose value lies more than `tolerance` below that of the size just below (notebook 05)."""
    s = values.sort_index()
    x = s.to_numpy(float)
    return s.index[1:][x[1:] < (1 - tolerance) * x[:-1]].tolist()


def size_sweep_table(sweeps: dict, tolerance: float = 0.01) -> pd.DataFrame:
    """One row per named sweep {name: Series of forecasts indexed by size}: steps, how many fall below the running
    maximum by more than `tolerance`, and the largest running max / value (above 1: a larger size forecast faster;
    notebook 05)."""
    rows = []
    for name, s in sweeps.items():
        x = s.sort_index().to_numpy(float)
        falls = falls_below_running_max(x, tolerance)
        worst = np.maximum.accumulate(x)[:-1] / x[1:]
        rows.append({"sweep": name, "steps": len(falls), "falls": int(falls.sum()),
                     "worst_ratio": float(worst.max()) if len(falls) else np.nan})
    return pd.DataFrame(rows)


def floor_to_multiple(x, multiple: int = 32) -> np.ndarray:
    """x rounded down to a multiple of `multiple` where it lies above one and is not one already, else x (notebook 05)."""
    x = np.asarray(x, dtype=float)
    return np.where((x > multiple) & (x % multiple != 0), np.floor(x / multiple) * multiple, x)


# Size guard (a trial of notebook 05, not used by any forecast): a GEMM is forecast no faster than the same GEMM with
# its output rows M, its output columns K, or both rounded down to a multiple of 32 (M32 = 32 floor(M / 32)):
#   guarded(B, M, N, K) = max(f(B, M, N, K), f(B, M32, N, K), f(B, M, N, K32), f(B, M32, N, K32))
# A linear layer's rows are B x M (lib.kernels.flatten_linear), so M is rounded after that fold. Other rows keep f.
# Only the rounded shapes that differ from the row's own are predicted, in one call.
def floor_guarded(df: pd.DataFrame, predict, multiple: int = 32) -> np.ndarray:
    """predict(df) with each GEMM row raised to the largest forecast of its shape rounded down as above (notebook 05)."""
    from .kernels import flatten_linear
    from .ops import GEMM_OPS
    df = flatten_linear(df.reset_index(drop=True))
    out = np.asarray(predict(df), dtype=float).copy()
    g = df[df["op"].isin(GEMM_OPS)]
    shapes, owners = [], []
    for round_m, round_k in ((True, False), (False, True), (True, True)):
        v = g.assign(M=floor_to_multiple(g["M"], multiple) if round_m else g["M"],
                     K=floor_to_multiple(g["K"], multiple) if round_k else g["K"])
        moved = ((v["M"] != g["M"]) & g["M"].notna() | (v["K"] != g["K"]) & g["K"].notna()).to_numpy()
        shapes.append(v[moved])
        owners.append(g.index.to_numpy()[moved])
    rounded = pd.concat(shapes)
    if len(rounded):
        np.maximum.at(out, np.concatenate(owners), np.asarray(predict(rounded), dtype=float))
    return out
