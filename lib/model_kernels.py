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

from pathlib import Path

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
