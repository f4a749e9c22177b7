"""A model run's kernels as the profiler saw them (lib.profile_model --kernels-out), beside the forecast's (notebook 05).

Profiles live under data/measured/model-kernels/<software>/<GPU folder>/<model>-<inf|train>-<seq>-<batch>.csv, one row
per phase, launching aten op, input dims and kernel name (OP_KERNEL_COLUMNS). A profile and the
forecast's kernel table (lib.forecast.forecast_table) are each added up per phase and launching op:
    op = the aten op's name without namespace, overload or tag: 'aten::addmm' (profiler), 'aten.addmm.default' and
         'aten.add.Tensor[sum of grads]' (forecast) are 'addmm' and 'add'
    measured_ms = sum total_us / 1000,  forecast_ms = sum total_ms,  measured_over_forecast = measured_ms / forecast_ms
A kernel the profiler finds no op for (a memcpy the runtime starts) counts under op ''.
"""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd

from . import paths
from .labels import LABEL_FILE, MODES

PROFILES = paths.MEASURED / "model-kernels"
# A profile's columns, as lib.profile_ops.kernels_by_op writes them (here, so that notebook 05 reads no collector code)
OP_KERNEL_COLUMNS = ["phase", "op", "input_dims", "kernel", "count", "total_us", "mean_us"]
SETTING_COLUMNS = ["software", "gpu", "model", "mode", "seq", "batch"]
COMPARE_COLUMNS = ["phase", "op", "measured_kernels", "measured_ms", "forecast_kernels", "forecast_ms",
                   "measured_over_forecast"]


class ProfileFileError(ValueError):
    """A profile file named or laid out unlike lib.profile_model writes it; the message names the file."""


def op_base(name: str) -> str:
    """'aten::addmm' -> 'addmm'; 'aten.addmm.default' -> 'addmm'; 'aten.add.Tensor[sum of grads]' -> 'add'."""
    name = str(name).split("[", 1)[0]
    if "::" in name:
        return name.split("::", 1)[1]
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def load_profiles(root: Path | str = PROFILES) -> pd.DataFrame:
    """Every profile under root/<software>/<GPU folder>/, SETTING_COLUMNS then OP_KERNEL_COLUMNS; empty if none."""
    frames = []
    for f in sorted(Path(root).glob("*/*/*.csv")):
        m = LABEL_FILE.match(f.stem)
        if m is None or m["option"]:
            raise ProfileFileError(f"{f}: not named <model>-<inf|train>-<seq>-<batch>.csv as lib.profile_model writes it")
        df = pd.read_csv(f, keep_default_na=False, dtype={"phase": str, "op": str, "input_dims": str, "kernel": str})
        if missing := [c for c in OP_KERNEL_COLUMNS if c not in df.columns]:
            raise ProfileFileError(f"{f}: missing column(s) {missing} (lib.model_kernels.OP_KERNEL_COLUMNS)")
        frames.append(df[OP_KERNEL_COLUMNS].assign(software=f.parent.parent.name, gpu=f.parent.name, model=m["model"],
                                                   mode=MODES[m["mode"]], seq=int(m["seq"]), batch=int(m["batch"])))
    if not frames:
        return pd.DataFrame(columns=SETTING_COLUMNS + OP_KERNEL_COLUMNS)
    return pd.concat(frames, ignore_index=True)[SETTING_COLUMNS + OP_KERNEL_COLUMNS]


def compare(profile: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """One profiled setting's kernels beside its forecast's, per phase and op (COMPARE_COLUMNS), the largest
    difference first."""
    measured = (profile.assign(op=profile["op"].map(op_base), ms=profile["total_us"] / 1e3)
                .groupby(["phase", "op"])[["count", "ms"]].sum()
                .rename(columns={"count": "measured_kernels", "ms": "measured_ms"}))
    forecast = (table.assign(op=table["aten"].map(op_base)).groupby(["phase", "op"])[["count", "total_ms"]].sum()
                .rename(columns={"count": "forecast_kernels", "total_ms": "forecast_ms"}))
    out = measured.join(forecast, how="outer").fillna(0.0).reset_index()
    out = out.assign(measured_over_forecast=out["measured_ms"] / out["forecast_ms"].where(out["forecast_ms"] > 0))
    order = (out["measured_ms"] - out["forecast_ms"]).abs().sort_values(ascending=False).index
    return out.loc[order, COMPARE_COLUMNS].reset_index(drop=True)


SPLIT_COLUMNS = ["short_measured_ms", "short_forecast_ms", "long_measured_ms", "long_forecast_ms", "forecast_only_ms",
                 "measured_ms", "forecast_ms"]


# An op row is short when its kernels took under short_us each in the run: measured_ms * 1000 / measured_kernels < short_us.
# Rows the run did not launch (measured_kernels 0) are forecast_only. Per setting:
#     short_* / long_* = sums of measured_ms / forecast_ms over short / other launched rows
def short_kernel_split(compared: pd.DataFrame, short_us: float = 10.0) -> pd.DataFrame:
    """compare() rows of many settings (SETTING_COLUMNS + COMPARE_COLUMNS) added up per setting, split by the
    measured time per kernel of each phase and op: SETTING_COLUMNS + SPLIT_COLUMNS (notebook 05)."""
    launched = compared["measured_kernels"] > 0
    us = 1e3 * compared["measured_ms"] / compared["measured_kernels"].where(launched)
    short = launched & (us < short_us)
    parts = compared.assign(
        short_measured_ms=compared["measured_ms"].where(short, 0.0),
        short_forecast_ms=compared["forecast_ms"].where(short, 0.0),
        long_measured_ms=compared["measured_ms"].where(launched & ~short, 0.0),
        long_forecast_ms=compared["forecast_ms"].where(launched & ~short, 0.0),
        forecast_only_ms=compared["forecast_ms"].where(~launched, 0.0))
    return parts.groupby(SETTING_COLUMNS, sort=False)[SPLIT_COLUMNS].sum().reset_index()


# PyTorch's element-wise kernels: vectorized_elementwise_kernel when every operand is contiguous (or a scalar), else
# elementwise_kernel, whose threads compute each operand's offset from its strides (a permuted or broadcast operand)
INDEXED_ELEMENTWISE = "void at::native::elementwise_kernel<"
VECTORIZED_ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<"


def elementwise_paths(profile: pd.DataFrame, op: str) -> pd.DataFrame:
    """One op's element-wise kernels in profiles (load_profiles rows), per setting, input dims and path ('indexed',
    'vectorized'): kernels, total_us, mean_us (notebook 05)."""
    rows = profile[profile["op"] == op]
    path = pd.Series(pd.NA, index=rows.index, dtype="object")
    path[rows["kernel"].str.startswith(INDEXED_ELEMENTWISE)] = "indexed"
    path[rows["kernel"].str.startswith(VECTORIZED_ELEMENTWISE)] = "vectorized"
    rows = rows.assign(path=path).dropna(subset=["path"])
    out = (rows.groupby(SETTING_COLUMNS + ["input_dims", "path"], sort=False)
           .agg(kernels=("count", "sum"), total_us=("total_us", "sum")).reset_index())
    return out.assign(mean_us=out["total_us"] / out["kernels"])


GEMM_OPS = ("mm", "addmm", "bmm", "baddbmm")   # compare()'s op names of the matrix products


def op_totals(compared: pd.DataFrame, ops=GEMM_OPS) -> pd.DataFrame:
    """compare() rows of many settings, those of `ops` added up per setting: SETTING_COLUMNS, measured_kernels,
    measured_ms, forecast_ms (notebook 05)."""
    rows = compared[compared["op"].isin(ops)]
    return rows.groupby(SETTING_COLUMNS, sort=False)[["measured_kernels", "measured_ms", "forecast_ms"]].sum().reset_index()


# Where a matrix product's two factors sit among the profiler's input dims:
#     mm [[M, K], [K, N]]   addmm [[N], [M, K], [K, N], ...]
#     bmm [[B, M, K], [B, K, N]]   baddbmm [[B, M, N], [B, M, K], [B, K, N], ...]
FIRST_FACTOR = {"mm": 0, "addmm": 1, "bmm": 0, "baddbmm": 1}


def gemm_dims(op: str, input_dims: str) -> tuple[int, int, int, int]:
    """(B, M, N, K) of one profiled matrix product from its op (op_base name, GEMM_OPS) and input dims; B = 1 for
    mm and addmm (notebook 05)."""
    if op not in FIRST_FACTOR:
        raise ValueError(f"gemm_dims: op must be one of {sorted(FIRST_FACTOR)}, got {op!r}")
    dims = ast.literal_eval(input_dims)
    a, b = dims[FIRST_FACTOR[op]], dims[FIRST_FACTOR[op] + 1]
    if len(a) != len(b) or len(a) not in (2, 3) or a[-1] != b[-2]:
        raise ValueError(f"gemm_dims: {op} input dims {input_dims!r} are not two factors (M, K) x (K, N)")
    return (a[0] if len(a) == 3 else 1), a[-2], b[-1], a[-1]


GEMM_CALL_COLUMNS = ["phase", "B", "shape", "calls", "measured_us", "forecast_us", "measured_us_per_call",
                     "forecast_over_measured"]


# One setting's matrix products per phase and shape: B and the sorted M, N, K as 'AxBxC' (a backward lists the
# same layer's sizes in another order, and a layer's two products of the same sizes fall together):
#     calls = the forecast's count (calls in the graph; a call may also launch a split-K reduction or a memset)
#     measured_us = sum of the profile's total_us over the shape's kernels, forecast_us = 1000 x sum of total_ms
#     measured_us_per_call = measured_us / calls,  forecast_over_measured = forecast_us / measured_us
def gemm_calls(profile: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """A profiled setting's matrix products beside its forecast's (lib.forecast.forecast_table), per phase and shape
    (GEMM_CALL_COLUMNS); a shape only one side has gets NaN on the other (notebook 05)."""
    def shaped(rows: pd.DataFrame, dims: pd.DataFrame) -> pd.DataFrame:
        mnk = np.sort(dims[["M", "N", "K"]].to_numpy(dtype=np.int64), axis=1)
        return rows.assign(B=dims["B"].to_numpy(dtype=np.int64),
                           shape=["x".join(map(str, r)) for r in mnk])
    op = profile["op"].map(op_base)
    measured = profile[op.isin(GEMM_OPS)]
    dims = pd.DataFrame([gemm_dims(o, d) for o, d in zip(op[measured.index], measured["input_dims"])],
                        columns=["B", "M", "N", "K"], index=measured.index)
    measured = (shaped(measured, dims).groupby(["phase", "B", "shape"])["total_us"].sum().rename("measured_us"))
    forecast = table[table["aten"].map(op_base).isin(GEMM_OPS)]
    forecast = (shaped(forecast, forecast[["B", "M", "N", "K"]].fillna({"B": 1}))
                .assign(forecast_us=lambda t: 1e3 * t["total_ms"]).groupby(["phase", "B", "shape"])
                [["count", "forecast_us"]].sum().rename(columns={"count": "calls"}))
    out = forecast.join(measured, how="outer").reset_index()
    out = out.assign(measured_us_per_call=out["measured_us"] / out["calls"],
                     forecast_over_measured=out["forecast_us"] / out["measured_us"])
    return out[GEMM_CALL_COLUMNS]


# Bins of a GEMM's time per call (us): the small end, where the forecast of the model runs' GEMMs is too slow,
# is split finer than lib.measured.GEMM_TIME_US_BINS
GEMM_CALL_US_BINS = (0, 50, 100, 200, 500, 1000, 5000, np.inf)


def ratio_by_time(rows: pd.DataFrame, time_us: str, ratio: str, by: list[str] | None = None,
                  bins=GEMM_CALL_US_BINS) -> pd.DataFrame:
    """Rows per `by` and GEMM_CALL_US_BINS interval of `time_us` (column 'time_us'): shapes and the median of
    `ratio` (notebook 05)."""
    keys = [*(by or []), "time_us"]
    binned = rows.assign(time_us=pd.cut(rows[time_us], bins, right=False))
    return (binned.groupby(keys, observed=True, sort=True)[ratio].agg(shapes="size", median_ratio="median")
            .reset_index())
