"""Is a larger kernel forecast slower? Sweeps of one size, the steps where a forecast falls, and the size-guard
trial (notebook 05, "Sizes between the grid points"); measured shapes with one dimension doubled (notebook 04)."""
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


# ---------------------------------------------------------------- twice the work (notebook 04)

# Twice the work should not take less time. A pair is a shape measured on a GPU and the same shape with one dimension
# doubled (B, M, N or K of a GEMM; B or H of a vector op), measured on that GPU too (median latency per shape). It falls
#     when  t(doubled) < (1 - DOUBLING_TOLERANCE) * t(shape)
# once for the measured latencies and once for the forecast ones.
DOUBLING_TOLERANCE = 0.05
# A pair is flat when the doubled shape takes less than FLAT_RATIO times the single one's measured time: the larger
# shape costs (almost) nothing more, as when the single shape leaves half of every tile empty.
FLAT_RATIO = 1.1
ALL_GPUS = "all GPUs"
SHAPE_DIMS = ("B", "M", "N", "K", "H")


def doubled_pairs(df: pd.DataFrame) -> pd.DataFrame:
    """Every (shape, shape with one dimension doubled) pair measured on the same GPU in a kernel table (columns device,
    op_class, op, B..H, latency_ms; kernel_name if present): the smaller shape, `dim`, latency_ms (median) and
    doubled_latency_ms, and kernel_name / doubled_kernel_name (each shape's first row's) (notebook 04)."""
    keys = ["device", "op_class", "op", *SHAPE_DIMS]
    groups = df.fillna({d: -1.0 for d in SHAPE_DIMS}).groupby(keys)
    med = groups["latency_ms"].median().to_frame()
    if "kernel_name" in df.columns:              # the dataset runs one kernel per shape and GPU
        med["kernel_name"] = groups["kernel_name"].first()
    med = med.reset_index().astype({d: float for d in SHAPE_DIMS})
    parts = []
    for d in SHAPE_DIMS:
        small = med[med[d] > 0]                      # -1: a dimension the op does not have
        big = med.rename(columns={"latency_ms": "doubled_latency_ms", "kernel_name": "doubled_kernel_name"})
        parts.append(small.merge(big.assign(**{d: med[d] / 2}), on=keys).assign(dim=d))
    out = pd.concat(parts, ignore_index=True)
    return out.replace({d: {-1.0: np.nan} for d in SHAPE_DIMS})


def doubled(pairs: pd.DataFrame) -> pd.DataFrame:
    """Copy of doubled_pairs' table with each row's `dim` doubled: the larger shape of every pair (notebook 04)."""
    out = pairs.copy()
    for d in SHAPE_DIMS:
        rows = (out["dim"] == d).to_numpy()
        out.loc[rows, d] = out.loc[rows, d] * 2
    return out


def doubling_table(pairs: pd.DataFrame, tolerance: float = DOUBLING_TOLERANCE) -> pd.DataFrame:
    """Per GPU and op class of doubled_pairs' table with pred_ms and doubled_pred_ms, then per class over every GPU
    ('all GPUs'): pairs, how many and % fall measured and forecast (above), the smallest doubled / single ratio of each, how
    many measured falls run one kernel (by name) for both shapes, and the pairs whose measured time grows by less than
    FLAT_RATIO, with the medians of their forecast ratio and of forecast / measured for the single and the doubled
    shape (notebook 04)."""
    t = pairs.assign(measured_ratio=pairs["doubled_latency_ms"] / pairs["latency_ms"],
                     forecast_ratio=pairs["doubled_pred_ms"] / pairs["pred_ms"])
    same = (t["kernel_name"] == t["doubled_kernel_name"]) if "kernel_name" in t.columns else False
    t = t.assign(measured_falls=t["measured_ratio"] < 1 - tolerance, forecast_falls=t["forecast_ratio"] < 1 - tolerance)
    t = t.assign(falls_same_kernel=t["measured_falls"] & same)
    t = t.assign(flat=t["measured_ratio"] < FLAT_RATIO)
    t = t.assign(flat_forecast=t["forecast_ratio"].where(t["flat"]),
                 flat_single_bias=(t["pred_ms"] / t["latency_ms"]).where(t["flat"]),
                 flat_doubled_bias=(t["doubled_pred_ms"] / t["doubled_latency_ms"]).where(t["flat"]))
    stats = dict(pairs=("dim", "size"),
                 measured_falls_pct=("measured_falls", lambda f: 100 * f.mean()),
                 forecast_falls_pct=("forecast_falls", lambda f: 100 * f.mean()),
                 measured_min_ratio=("measured_ratio", "min"), forecast_min_ratio=("forecast_ratio", "min"),
                 measured_falls=("measured_falls", "sum"), forecast_falls=("forecast_falls", "sum"),
                 falls_same_kernel=("falls_same_kernel", "sum"),
                 flat_pairs=("flat", "sum"), flat_forecast_median=("flat_forecast", "median"),
                 flat_single_bias=("flat_single_bias", "median"), flat_doubled_bias=("flat_doubled_bias", "median"))
    per_gpu = t.groupby(["device", "op_class"]).agg(**stats).reset_index()
    pooled = t.groupby("op_class").agg(**stats).reset_index().assign(device=ALL_GPUS)
    return pd.concat([per_gpu, pooled[per_gpu.columns]], ignore_index=True)


def flat_pairs(pairs: pd.DataFrame, op_class: str = "BMM") -> pd.DataFrame:
    """The flat pairs of one class in doubled_pairs' table (doubled shape measured at under FLAT_RATIO times the
    single one), with `size` (the doubled dimension's size before doubling) and, where M or K was doubled,
    `tile_on_dim`: the single shape's measured tile on it, from its kernel name (lib.tiles.gemm_tile_from_name: tile_m
    covers M, tile_n covers K; NaN without one) (notebook 04)."""
    from .tiles import gemm_tile_from_name
    flat = pairs[(pairs["op_class"] == op_class) & (pairs["doubled_latency_ms"] < FLAT_RATIO * pairs["latency_ms"])]
    size = [r[d] for d, (_, r) in zip(flat["dim"], flat.iterrows())]
    tiles = [gemm_tile_from_name(k) or (np.nan, np.nan) for k in flat.get("kernel_name", [None] * len(flat))]
    on_dim = [t[0] if d == "M" else t[1] if d == "K" else np.nan for t, d in zip(tiles, flat["dim"])]
    return flat.assign(size=np.array(size, dtype=float), tile_on_dim=np.array(on_dim, dtype=float))


# Per GPU of flat_pairs' table: how many flat pairs double an M or K of `narrow` (64), and of those the share whose
# single shape ran a tile of at least 2 x narrow on that dimension, i.e. tiles at most half filled:
#     wide_share = #(tile_on_dim >= 2 narrow) / #(dim in {M, K} and size == narrow)
def flat_tile_table(flat: pd.DataFrame, narrow: int = 64) -> pd.DataFrame:
    """Per GPU of flat_pairs' table: flat pairs, those doubling an M or K of `narrow`, and the share of these whose single
    shape ran a tile of at least 2 x narrow on that dimension (NaN where none doubles one; notebook 04)."""
    at = flat["dim"].isin(["M", "K"]) & (flat["size"] == narrow)
    t = flat.assign(at_narrow=at, wide=(flat["tile_on_dim"] >= 2 * narrow).where(at))
    return t.groupby("device").agg(flat_pairs=("dim", "size"), narrow_pairs=("at_narrow", "sum"),
                                   wide_share=("wide", "mean")).reset_index()
