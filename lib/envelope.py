"""Spec envelope (protocol amendment 6, notebook 04): a GPU that is at least as capable as a training GPU on
every number of its spec sheet forecasts no kernel slower than that training GPU's own forecast.

For a GPU the predictors never trained on, with config key `envelope` on for the kernel's class:
    forecast_ms = min(forecast_ms on the GPU, min over dominated training GPUs g of forecast_ms on g)
where g is dominated when num_sm, peak_gflops, peak_vec_gflops, mem_bw_gbps and l2_mb are each at least g's
(memory capacity decides no kernel's time, so it is not compared). The forecast on g reads g's spec only,
so with the default configs it is made by the model for the training GPUs (lib.selection.KNOWN_CONFIGS), as for
g itself; with a config given for every GPU (lib.kernels' cfg_by_class), by that config's model.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd

from .devices import TRAIN_GPUS_NVIDIA, Device, device_by_name

# The spec numbers a GPU must match or exceed to dominate another (capacity: see the module docstring).
DOMINANCE_FIELDS = ("num_sm", "peak_gflops", "peak_vec_gflops", "mem_bw_gbps", "l2_mb")


def dominates(a: Device, b: Device) -> bool:
    """True when a is another GPU of b's vendor with every DOMINANCE_FIELDS number at least b's."""
    return a.name != b.name and a.vendor == b.vendor and all(getattr(a, f) >= getattr(b, f) for f in DOMINANCE_FIELDS)


def dominated_training_gpus(device: Device) -> list[Device]:
    """The training GPUs (those the predictors learned from) that `device` dominates; none for a training GPU."""
    if device.name in TRAIN_GPUS_NVIDIA:
        return []
    return [g for g in map(device_by_name, TRAIN_GPUS_NVIDIA) if dominates(device, g)]


def envelope_rows(df: pd.DataFrame, cfg_by_class: dict | None) -> np.ndarray:
    """Which kernels of a table the envelope applies to: those whose class's unseen-GPU config (or the predictor given
    in its place) has `envelope` on."""
    from .predictors import op_class_of
    from .selection import DEFAULT_CONFIGS
    cls = op_class_of(df["op"])
    chosen = {c: (cfg_by_class or {}).get(c) or cfg for c, cfg in DEFAULT_CONFIGS.items()}
    # a config's `envelope` key, or a predictor's field (lib.predictors.NeuSightPredictor.envelope)
    on = [c for c, cfg in chosen.items() if (cfg.get("envelope", False) if isinstance(cfg, dict) else
                                            getattr(cfg, "envelope", False))]
    return np.isin(cls, on)


# Relative slack under a floor, for the float32 arithmetic of the forecasts.
FLOOR_SLACK = 1e-4


# One table per training GPU g, each to be forecast on g's spec: [(kernels, g), ...] -> one array per pair
OnGpus = Callable[[list[tuple[pd.DataFrame, Device]]], list[np.ndarray]]


def cap(df: pd.DataFrame, pred_ms: np.ndarray, device: Device | Sequence[Device], cfg_by_class: dict | None,
        forecast: OnGpus, floor: OnGpus | None = None) -> np.ndarray:
    """pred_ms (forecast of df's kernels on device) capped by the forecast of the same kernels on each dominated
    training GPU g; forecast gets every g's rows at once (one pass of each model instead of one per GPU).

    device: the GPU of every row, or one per row (a sequence as long as df: several GPUs at once, lib.kernels.
    predict_devices).
    floor, if given, is a lower bound of forecast per row (lib.predictors.forecast_floor_ms): a row whose pred_ms
    lies below g's floor (by more than FLOOR_SLACK) cannot be capped by g, so g's forecast is not computed for it.
    The result is the same up to float32 last bits, which can depend on how many rows are forecast at once."""
    gpus = {}   # id of each distinct Device object -> (its number, in order of first row; the Device)
    if isinstance(device, Device):
        gpus[id(device)] = (0, device)
        which = np.zeros(len(df), dtype=int)
    else:
        per_row = list(device)
        if len(per_row) != len(df):
            raise ValueError(f"envelope.cap: {len(per_row)} devices for {len(df)} rows")
        which = np.array([gpus.setdefault(id(d), (len(gpus), d))[0] for d in per_row], dtype=int)
    refs = {i: {g.name: g for g in dominated_training_gpus(d)} for i, d in gpus.values()}
    on = envelope_rows(df, cfg_by_class)
    out = np.asarray(pred_ms, dtype=float).copy()
    rows_of, pairs = [], []   # per dominated training GPU g: the rows it caps, and (those rows, g)
    for name in TRAIN_GPUS_NVIDIA:   # dominated_training_gpus' order
        capped = [i for i, gs in refs.items() if name in gs]
        rows = np.flatnonzero(on & np.isin(which, capped))
        if len(rows):
            rows_of.append(rows)
            pairs.append((df.iloc[rows].reset_index(drop=True), refs[capped[0]][name]))
    if floor is not None and pairs:
        opened = [out[rows] >= low * (1 - FLOOR_SLACK) for rows, low in zip(rows_of, floor(pairs))]
        rows_of = [rows[o] for rows, o in zip(rows_of, opened)]
        pairs = [(sub[o].reset_index(drop=True), g) for (sub, g), o in zip(pairs, opened)]
    kept = [i for i, rows in enumerate(rows_of) if len(rows)]
    for i, ms in zip(kept, forecast([pairs[i] for i in kept]) if kept else []):
        out[rows_of[i]] = np.fmin(out[rows_of[i]], ms)
    return out
