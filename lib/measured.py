"""This project's own measurements (data/measured/): kernels written by lib.profile, scored like the dataset's
held-out kernels (notebook 04), and whole-model labels written by lib.profile_model, scored like the dataset's
labels (notebook 05).

A measured GPU is forecast from its spec JSON (the dataset's or data/devices/, looked up by the name the GPU
reported) and the training GPUs' data, as any GPU never trained on: the collector's own device.json is written
beside the CSVs for checking the spec, never read by a forecast. The measurements only score the forecasts.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from . import paths
from .data import OP_CLASS, read_kernel_csv
from .devices import DeviceError, device_by_name
from .labels import LABEL_COLUMNS as DATASET_LABEL_COLUMNS
from .labels import LABEL_FILE, load_labels
from .metrics import mape

COLUMNS = ("run", "op", "op_class", "device", "B", "M", "N", "K", "H", "latency_ms", "kernel_name")
SETTING_KEYS = ["gpu", "device", "model", "mode", "seq", "batch", "option"]   # one measured setting on one GPU
LABEL_COLUMNS = ["software", *SETTING_KEYS, "e2e_ms", "dataset_e2e_ms", "ratio_to_dataset", "neusight_ms", "neusight_ape"]


class MeasuredError(ValueError):
    """A measured file that cannot be scored; the message names the file or folder."""


def measured_kernels(root: Path | str = paths.MEASURED) -> pd.DataFrame:
    """Every kernel CSV under root/<run folder>/, one row per kernel with its run folder; empty if none."""
    frames = [read_kernel_csv(f).assign(run=f.parent.name) for f in sorted(Path(root).glob("*/*.csv"))]
    if not frames:
        return pd.DataFrame(columns=list(COLUMNS))
    df = pd.concat(frames, ignore_index=True)
    df["op_class"] = df["op"].map(OP_CLASS)
    for col in ("M", "N", "K", "H", "kernel_name"):      # GEMM files lack H, vector files M, N, K
        if col not in df:
            df[col] = np.nan
    return df[list(COLUMNS)]


def score_measured(df: pd.DataFrame, predict) -> pd.DataFrame:
    """Kernels, MAPE (%) and median forecast / measured per run and op class; predict(rows, device) -> ms (notebook 04)."""
    rows = []
    for (run, device), d in df.groupby(["run", "device"], sort=True):
        try:
            spec = device_by_name(device)
        except DeviceError:
            raise MeasuredError(f"measured run {run}: no spec JSON for '{device}' (add one to "
                                f"{paths.DEVICES_ADDED}, with a source per number)") from None
        d = d.assign(pred_ms=predict(d, spec))
        for op_class, c in d.groupby("op_class", sort=True):
            rows.append({"run": run, "device": device, "op_class": op_class, "kernels": len(c),
                         "mape_pct": mape(c["pred_ms"], c["latency_ms"]),
                         "median_ratio": float(np.median(c["pred_ms"] / c["latency_ms"]))})
    return pd.DataFrame(rows, columns=["run", "device", "op_class", "kernels", "mape_pct", "median_ratio"])


def measured_labels(root: Path | str = paths.MEASURED / "labels") -> pd.DataFrame:
    """lib.labels.load_labels rows of every root/<software>/<GPU folder>/*.json, software first; empty if none
    (notebook 05). A file named unlike a label, or of a model with no config in DLmodel_configs/, is an error."""
    root, frames = Path(root), []
    for software in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        for f in sorted(software.glob("*/*.json")):
            m = LABEL_FILE.match(f.stem)
            if m is None:
                raise MeasuredError(f"{f}: not named <model>-<inf|train>-<seq>-<batch>.json as a label is")
            if not (paths.MODEL_CONFIGS / f"{m['model']}.json").is_file():
                raise MeasuredError(f"{f}: model '{m['model']}' has no config in {paths.MODEL_CONFIGS}, so notebook 05 "
                                    f"cannot forecast it")
        try:
            df = load_labels(software)
        except DeviceError as e:
            raise MeasuredError(f"{software}: {e} (add one to {paths.DEVICES_ADDED}, with a source per number)") from None
        if len(df):
            frames.append(df.assign(software=software.name))
    if not frames:
        return pd.DataFrame(columns=["software", *DATASET_LABEL_COLUMNS])
    df = pd.concat(frames, ignore_index=True)
    return df[["software", *(c for c in df.columns if c != "software")]]


# ratio = e2e_ms / dataset_e2e_ms: our measurement of a setting over the dataset's label of it on the same GPU
def score_measured_labels(ev: pd.DataFrame, dataset: pd.DataFrame) -> pd.DataFrame:
    """Measured labels forecast by lib.forecast.evaluate_labels (neusight columns) beside the dataset's label of the
    same GPU, setting and option (dataset_e2e_ms, NaN where it has none) (notebook 05)."""
    if ev.empty:
        return pd.DataFrame(columns=LABEL_COLUMNS)
    theirs = dataset[SETTING_KEYS + ["e2e_ms"]].rename(columns={"e2e_ms": "dataset_e2e_ms"})
    out = ev.merge(theirs, on=SETTING_KEYS, how="left", validate="many_to_one")
    return out.assign(ratio_to_dataset=out["e2e_ms"] / out["dataset_e2e_ms"])[LABEL_COLUMNS]
