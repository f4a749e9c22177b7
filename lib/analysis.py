"""Dataset summaries: coverage, tile usage, utilization vs waves fits, OOD ranges, peaks reached, shape alignment,
OOD errors shape by shape against the training GPUs' (notebooks 01-02, 04). A forecast's warnings: lib.caveats;
size sweeps: lib.size_steps."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .data import OP_CLASSES
from .metrics import ape, mape


def coverage_table(df: pd.DataFrame) -> pd.DataFrame:
    """Rows per device (and split) x op class, with a total column; devices in table order."""
    t = df.pivot_table(index=["device", "split"], columns="op_class", values="latency_ms",
                       aggfunc="size", fill_value=0)
    t = t.reindex(columns=[c for c in OP_CLASSES if c in t.columns])
    t["total"] = t.sum(axis=1)
    return t.reset_index()


def tile_usage(df: pd.DataFrame, top: int = 8) -> pd.DataFrame:
    """Share of each device's GEMM rows per (tile_m x tile_n) tile; `top` tiles, rest as 'other'."""
    g = df[df["tile_m"].notna()].copy()
    g["tile"] = g["tile_m"].astype(int).astype(str) + "x" + g["tile_n"].astype(int).astype(str)
    share = pd.crosstab(g["device"], g["tile"], normalize="index")
    keep = share.mean().sort_values(ascending=False).index[:top]
    out = share[keep].copy()
    out["other"] = 1.0 - out.sum(axis=1)
    return out


# SMs a kernel's trace implies = grid_x * grid_y * grid_z / blocks_per_sm   (the profiler's "Blocks per SM" is the
# launched blocks over the GPU's SMs; it is rounded to 0.1, so a kernel "agrees" within SM_AGREE of the spec's count)
SM_AGREE = 0.01


def traced_sm_count(df: pd.DataFrame) -> pd.DataFrame:
    """Per device: the spec's num_sm, the SM count its kernels' traces imply (median over kernels), and the shares of
    kernels that imply the spec's count and that median (notebook 01)."""
    rows = df[df["blocks_per_sm"] > 0]
    traced = rows["grid_x"] * rows["grid_y"] * rows["grid_z"] / rows["blocks_per_sm"]
    median = traced.groupby(rows["device"]).transform("median")
    near = lambda count: ((traced / count - 1).abs() <= SM_AGREE).rename(None)
    t = pd.DataFrame({"device": rows["device"], "spec_num_sm": rows["num_sm"], "traced": traced,
                      "spec": near(rows["num_sm"]), "median": near(median)})
    return t.groupby("device", sort=False).agg(
        kernels=("traced", "size"), spec_num_sm=("spec_num_sm", "first"), traced_num_sm=("traced", "median"),
        spec_agree_share=("spec", "mean"), median_agree_share=("median", "mean")).round({"traced_num_sm": 1}).reset_index()


def add_utilization(df: pd.DataFrame) -> pd.DataFrame:
    """utilization = roofline_ms / latency_ms (fraction of the roofline bound achieved)."""
    return df.assign(utilization=df["roofline_ms"] / df["latency_ms"])


def binned_median(x, y, bins: int = 12, log: bool = True) -> pd.DataFrame:
    """Median of y in bins of x (log-spaced by default): columns x_mid, y_median, count."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & ((x > 0) if log else True)
    x, y = x[ok], y[ok]
    if len(x) == 0:
        return pd.DataFrame(columns=["x_mid", "y_median", "count"])
    lo, hi = x.min(), x.max()
    edges = np.geomspace(lo, hi * (1 + 1e-9), bins + 1) if log and hi > lo else \
        np.linspace(lo, hi + 1e-9, bins + 1)
    idx = np.clip(np.digitize(x, edges) - 1, 0, bins - 1)
    rows = []
    for b in range(bins):
        m = idx == b
        if m.any():
            mid = np.sqrt(edges[b] * edges[b + 1]) if log else (edges[b] + edges[b + 1]) / 2
            rows.append((mid, float(np.median(y[m])), int(m.sum())))
    return pd.DataFrame(rows, columns=["x_mid", "y_median", "count"])


def fit_alpha_beta(waves, util) -> tuple[float, float, float]:
    """Least squares of util = alpha - beta / waves; returns (alpha, beta, r2)."""
    w, u = np.asarray(waves, dtype=float), np.asarray(util, dtype=float)
    ok = np.isfinite(w) & np.isfinite(u) & (w > 0)
    w, u = w[ok], u[ok]
    if len(w) < 2 or np.ptp(1.0 / w) == 0:
        return float("nan"), float("nan"), float("nan")
    # design matrix [1, -1/waves] @ [alpha, beta] ~ util
    A = np.column_stack([np.ones_like(w), -1.0 / w])
    (alpha, beta), *_ = np.linalg.lstsq(A, u, rcond=None)
    resid = u - A @ np.array([alpha, beta])
    ss_tot = float(((u - u.mean()) ** 2).sum())
    r2 = 1.0 - float((resid ** 2).sum()) / ss_tot if ss_tot > 0 else float("nan")
    return float(alpha), float(beta), r2


def fit_table(df: pd.DataFrame, by=("device", "op_class")) -> pd.DataFrame:
    """alpha, beta, r2 and row count of util = alpha - beta/waves per group (needs utilization, num_waves)."""
    rows = []
    for key, g in df.groupby(list(by)):
        alpha, beta, r2 = fit_alpha_beta(g["num_waves"], g["utilization"])
        rows.append((*key, alpha, beta, r2, len(g), float(g["utilization"].median())))
    return pd.DataFrame(rows, columns=[*by, "alpha", "beta", "r2", "rows", "util_median"])


def ood_fraction(df: pd.DataFrame, features, train_mask, by: str = "device") -> pd.DataFrame:
    """Per group of the non-training rows: fraction of rows with each feature outside the training [min, max]."""
    train_mask = np.asarray(train_mask, dtype=bool)
    lo = df.loc[train_mask, list(features)].min()
    hi = df.loc[train_mask, list(features)].max()
    rest = df.loc[~train_mask]
    outside = (rest[list(features)] < lo) | (rest[list(features)] > hi)
    out = outside.groupby(rest[by]).mean()
    out["any"] = outside.any(axis=1).groupby(rest[by]).mean()
    out["rows"] = rest.groupby(by).size()
    return out


# ---------------------------------------------------------------- what a spec sheet cannot tell
# (spec twins: lib.comparison)

# fraction of the nominal fp32 peak reached = q-quantile of 2*B*M*N*K / latency over peak_gflops
def peak_reached(df: pd.DataFrame, q: float = 0.99) -> pd.Series:
    """Per device: the q-quantile of measured GEMM throughput as a fraction of the spec's fp32 peak (notebook 04)."""
    g = df[df["op_class"].isin(["BMM", "FC"])]
    gflops = 2 * g["B"] * g["M"] * g["N"] * g["K"] / (g["latency_ms"] * 1e6)
    return (gflops.groupby(g["device"]).quantile(q) / g.groupby("device")["peak_gflops"].first()).rename("peak_reached")


# share = bytes / latency / mem_bw = (bytes / (latency_ms * 1e6)) [GB/s] / mem_bw_gbps
def bandwidth_share(df: pd.DataFrame) -> pd.Series:
    """Per row: achieved memory bandwidth as a share of the spec's, from lib.roofline's `bytes` (notebook 04)."""
    return df["bytes"] / (df["latency_ms"] * 1e6) / df["mem_bw_gbps"]


def bandwidth_reached(df: pd.DataFrame, q: float = 0.99) -> pd.Series:
    """Per (op class, split, device): the q-quantile of achieved memory bandwidth as a share of the spec's (notebook 04).

    df: kernels through lib.roofline.add_roofline (its `bytes`, read + written once).
    """
    share = bandwidth_share(df)
    return share.groupby([df["op_class"], df["split"], df["device"]]).quantile(q).rename("bandwidth_reached")


# The dimensions whose alignment decides a kernel's memory access (GEMMs: all three; vector ops: the row).
ALIGN_DIMS = {"BMM": ("M", "N", "K"), "FC": ("M", "N", "K"), "EW": ("H",), "SOFTMAX": ("H",), "LN": ("H",)}


def aligned(df: pd.DataFrame, multiple: int) -> pd.Series:
    """Bool per row: every ALIGN_DIMS dimension of its op class is a multiple of `multiple` (notebook 04)."""
    out = pd.Series(False, index=df.index)
    for op_class, dims in ALIGN_DIMS.items():
        rows = df["op_class"] == op_class
        if rows.any():
            out[rows] = (df.loc[rows, list(dims)].astype("int64") % multiple == 0).all(axis=1)
    return out


def alignment_shares(df: pd.DataFrame, multiples=(4, 32, 128)) -> pd.DataFrame:
    """Per op class and split: rows, and the % of rows whose every dimension is a multiple of m (notebook 04)."""
    # x{m}_pct = 100 * mean over rows of [d % m == 0 for every d in ALIGN_DIMS[op_class]]
    cols = {f"x{m}_pct": aligned(df, m).astype(float) * 100 for m in multiples}
    t = pd.DataFrame({"op_class": df["op_class"], "split": df["split"], **cols})
    out = t.groupby(["op_class", "split"]).agg(rows=("split", "size"), **{c: (c, "mean") for c in cols}).reset_index()
    out["op_class"] = pd.Categorical(out["op_class"], [c for c in OP_CLASSES if c in set(out["op_class"])], ordered=True)
    return out.sort_values(["op_class", "split"]).reset_index(drop=True)


def gemm_throughput_by_shape(df: pd.DataFrame, edges=(-1, 0, 1, 2, 4)) -> pd.DataFrame:
    """Per device and log10(GFLOP) bin: median BMM TFLOP/s of three shape groups, and rows (notebook 04):
    held-out shapes (test_id), training shapes, and training shapes with M, N, K all multiples of 4."""
    # tflops = 2 B M N K / latency_ms / 1e9;  bin = log10(2 B M N K / 1e9) cut at `edges`
    g = df[(df["op_class"] == "BMM") & df["split"].isin(["train", "test_id"])]
    gflop = 2 * g["B"] * g["M"] * g["N"] * g["K"] / 1e9
    g = g.assign(tflops=gflop / g["latency_ms"], gflop_bin=pd.cut(np.log10(gflop), list(edges)),
                 group=g["split"].map({"train": "training shapes", "test_id": "held-out shapes"}))
    x4 = g[(g["split"] == "train") & aligned(g, 4)].assign(group="training shapes, M N K multiples of 4")
    g = pd.concat([g, x4])
    return (g.groupby(["device", "gflop_bin", "group"], observed=True)["tflops"]
            .agg(median_tflops="median", rows="size").reset_index())


def throughput_ratio_by_device(by_shape: pd.DataFrame) -> pd.DataFrame:
    """Per device, each shape group's throughput relative to training shapes', from a
    gemm_throughput_by_shape table (notebook 04)."""
    # ratio(device, group) = median over GFLOP bins of median_tflops(group) / median_tflops(training shapes)
    wide = by_shape.pivot_table(index=["device", "gflop_bin"], columns="group", values="median_tflops", observed=True)
    ratios = wide.div(wide["training shapes"], axis=0).drop(columns="training shapes")
    return ratios.groupby(level="device").median()


# Vector loads of softmax (lib.tiles.softmax_vector_share): bins of the share of a row loaded as 4-vectors.
VECTOR_SHARE_BINS = (0.5, 0.7, 0.8, 0.9, 0.99, 1.0)


def softmax_bandwidth_by_vector_share(df: pd.DataFrame, min_bytes: float = 2 ** 28) -> pd.DataFrame:
    """Median achieved bandwidth share and rows of cunn_SoftMaxForward kernels (H > 1024) moving at least
    min_bytes, per device x bin of the vector-loaded share of a row (notebook 04).

    df: softmax kernels through lib.roofline.add_roofline (`bytes` read + written once).
    """
    from .tiles import SOFTMAX_WARP_MAX_H, softmax_vector_share
    big = df[(df["op"] == "softmax") & (df["H"] > SOFTMAX_WARP_MAX_H) & (df["bytes"] >= min_bytes)]
    share = bandwidth_share(big)
    vec = pd.cut(softmax_vector_share(big["H"]), VECTOR_SHARE_BINS, include_lowest=True)
    return (pd.DataFrame({"device": big["device"], "vector_share": vec, "bandwidth_share": share})
            .groupby(["device", "vector_share"], observed=True)["bandwidth_share"]
            .agg(median="median", rows="size").reset_index())


SHAPE_KEYS = ["op_class", "op", "B", "M", "N", "K", "H"]   # one kernel shape (vector ops: M, N, K = -1)


def shape_log_errors(pred: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per held-out row: its shape (SHAPE_KEYS, missing dims as -1), split, device and log error
    e = log(pred / measured) of the forecasts in `column` (notebook 04)."""
    shape = pred[SHAPE_KEYS].astype({k: float for k in SHAPE_KEYS[2:]}).fillna(-1.0)
    return shape.assign(split=pred["split"], device=pred["device"], e=np.log(pred[column] / pred["latency_ms"]))


def shape_error_transfer(pred: pd.DataFrame, column: str = "pred_neusight_general") -> pd.DataFrame:
    """Per op class, OOD GPU and training GPU: does the forecast's error on a shape on the OOD GPU repeat
    its error on the same shape on that training GPU? (notebook 04)

    pred: held-out kernels (test_id and test_ood) with one model's forecasts in `column` (the unseen-GPU
    model on every GPU, so that both GPUs are forecast alike). Only shapes measured on both GPUs count.
    """
    # e = log(pred / measured) per row; per shape and GPU its median (one row, mostly);
    # corr = Pearson(e_ood, e_train) over the shapes both GPUs measured;
    # MAPE of forecasts with log error e = mape(exp(e), 1);
    # without_shape_error: MAPE of pred * exp(-e_train) on the OOD GPU, i.e. of exp(e_ood - e_train);
    # median_ratio = exp(median e): the typical forecast / measured
    err = shape_log_errors(pred, column)
    per_gpu = err.groupby(["split", "device", *SHAPE_KEYS])["e"].median()
    rows = []
    for train_gpu, e_train in per_gpu.loc["test_id"].groupby(level="device"):
        for ood_gpu, e_ood in per_gpu.loc["test_ood"].groupby(level="device"):
            both = pd.concat({"e_ood": e_ood.droplevel("device"), "e_train": e_train.droplevel("device")},
                             axis=1, join="inner").dropna()
            for op_class, g in both.groupby(level="op_class"):
                rows.append({"op_class": op_class, "device": ood_gpu, "train_gpu": train_gpu, "shapes": len(g),
                             "corr": float(np.corrcoef(g["e_ood"], g["e_train"])[0, 1]) if len(g) > 2 else np.nan,
                             "mape_pct": mape(np.exp(g["e_ood"]), 1.0),
                             "train_gpu_mape_pct": mape(np.exp(g["e_train"]), 1.0),
                             "without_shape_error_mape_pct": mape(np.exp(g["e_ood"] - g["e_train"]), 1.0),
                             "median_ratio": float(np.exp(g["e_ood"].median())),
                             "train_gpu_median_ratio": float(np.exp(g["e_train"].median()))})
    out = pd.DataFrame(rows, columns=["op_class", "device", "train_gpu", "shapes", "corr", "mape_pct",
                                      "train_gpu_mape_pct", "without_shape_error_mape_pct", "median_ratio",
                                      "train_gpu_median_ratio"])
    out["op_class"] = pd.Categorical(out["op_class"], [c for c in OP_CLASSES if c in set(out["op_class"])], ordered=True)
    return out.sort_values(["op_class", "device", "train_gpu"]).reset_index(drop=True)


# Row-length bins of the vector kernels (elements per row, H): PyTorch runs its warp softmax up to 1,024, and the
# training rows stop near 4,096 (lib.data: softmax 4,094, layernorm 4,100); the held-out rows go to 16,384.
ROW_EDGES = (0, 1024, 4096, 8192, 16384)


def error_by_row_length(pred: pd.DataFrame, column: str, longest_train_row: dict, edges=ROW_EDGES) -> pd.DataFrame:
    """Per (op class, split, device, row-length bin) of held-out vector kernels: error and bias of one forecast (notebook 04).

    pred: held-out kernels with `column` and lib.roofline's `bytes`; longest_train_row: {op class: the largest H among
    its training rows}. Columns: kernels, median_ratio (median forecast / measured), mape_pct, bandwidth_share (median,
    lib.analysis.bandwidth_share: bytes read and written once) and beyond_training (every row of the bin is longer
    than any training row of its class).
    """
    d = pred[pred["op_class"].isin(list(longest_train_row))]
    outside = d["H"][(d["H"] <= edges[0]) | (d["H"] > edges[-1])]
    if len(outside):     # pd.cut would leave them without a bin, and groupby would drop them silently
        raise ValueError(f"{len(outside)} rows have H outside the row-length bins ({edges[0]}, {edges[-1]}], "
                         f"e.g. H = {outside.iloc[0]:g}: pass edges that cover them")
    ratio = d[column] / d["latency_ms"]
    frame = pd.DataFrame({"op_class": d["op_class"], "split": d["split"], "device": d["device"],
                          "row_from": pd.cut(d["H"], list(edges), labels=list(edges[:-1])).astype(float),
                          "ratio": ratio, "ape": ape(d[column], d["latency_ms"]), "share": bandwidth_share(d),
                          "beyond": d["H"] > d["op_class"].map(longest_train_row)})
    out = (frame.groupby(["op_class", "split", "device", "row_from"])
           .agg(kernels=("ratio", "size"), median_ratio=("ratio", "median"), mape_pct=("ape", "mean"),
                bandwidth_share=("share", "median"), beyond_training=("beyond", "all")).reset_index())
    out.insert(4, "row_to", out["row_from"].map(dict(zip(edges[:-1], edges[1:]))))
    return out


# A softmax row splits evenly when PyTorch's kernel for it (lib.tiles) leaves no lane idle and loads no element on its
# own: softmax_warp_forward (H <= 1024) gives each lane of a warp next_pow2(H) / 32 slots, every one used iff H is a
# power of two; cunn_SoftMaxForward loads 4-vectors across its threads and the last H mod (4 x threads) elements one
# at a time, none iff H is a multiple of 4 x threads (which also starts every row on a 16-byte boundary):
#     even = (H == 2^ceil(log2 H))                     for H <= 1024
#     even = (H mod (4 * softmax_block_threads(H)) == 0)  for H > 1024
# Analysis only: no predictor reads it (a model input would live in lib.features and retrain every predictor).
def softmax_rows_split_evenly(H) -> np.ndarray:
    """Whether a softmax row of H elements splits evenly over its PyTorch kernel's lanes (notebook 04)."""
    from .tiles import SOFTMAX_ILP, SOFTMAX_WARP_MAX_H, softmax_block_threads
    H = np.asarray(H, dtype=float)
    warp_even = H == 2.0 ** np.ceil(np.log2(np.maximum(H, 1)))
    block_even = np.mod(H, SOFTMAX_ILP * softmax_block_threads(H)) == 0
    return np.where(H <= SOFTMAX_WARP_MAX_H, warp_even, block_even)


def error_by_even_split(soft: pd.DataFrame, column: str, longest_train_row: float) -> pd.DataFrame:
    """Per (split, device, row longer than any training row or not, row split evenly or not) of softmax kernels: how
    many, their share of the split's rows on that GPU, and where `column` holds a forecast, its bias (median forecast /
    measured) and MAPE (notebook 04)."""
    ratio = soft[column] / soft["latency_ms"]
    frame = pd.DataFrame({"split": soft["split"], "device": soft["device"], "beyond_training": soft["H"] > longest_train_row,
                          "even": softmax_rows_split_evenly(soft["H"]), "ratio": ratio,
                          "ape": ape(soft[column], soft["latency_ms"])})
    out = (frame.groupby(["split", "device", "beyond_training", "even"])
           .agg(kernels=("ratio", "size"), median_ratio=("ratio", "median"), mape_pct=("ape", "mean")).reset_index())
    out.insert(5, "share_pct", 100 * out["kernels"] / out.groupby(["split", "device"])["kernels"].transform("sum"))
    return out
