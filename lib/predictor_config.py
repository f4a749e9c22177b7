"""Predictor configs: what a dict of config keys means, checked key by key (notebook 04).

lib.predictors trains what make_config returns; lib.selection holds the configs chosen. Nothing here
enters a model's cache key except `largest_rows` and `LARGEST_SHARE` (for validation 'largest').
"""
from __future__ import annotations

import numbers
from dataclasses import fields

import numpy as np
import pandas as pd

from .devices import TRAIN_GPUS_NVIDIA
from .features import EXTRA_FEATURES, FEATURES
from .overhead import OVERHEADS
from .train import TrainConfig
from .utilization import PredictorError

VALIDATIONS = ("shapes", "none", "largest", *TRAIN_GPUS_NVIDIA)
LARGEST_SHARE = 0.2    # 'largest': the share of each training GPU's rows held out, by roofline bound


def largest_rows(feat: pd.DataFrame, share: float = LARGEST_SHARE) -> np.ndarray:
    """Bool per row: among the rows of its GPU, roofline_ms above the (1 - share) quantile (notebook 04)."""
    bound_ms = feat["roofline_ms"].to_numpy(float)
    cut = feat.groupby("device")["roofline_ms"].transform(lambda s: s.quantile(1 - share)).to_numpy(float)
    return bound_ms > cut


def make_config(cfg) -> tuple[TrainConfig, int | None, tuple, str, bool, str | None, bool, str | None]:
    """(TrainConfig, max_rows, features, validation, device_factors, overhead, hold_mem, held_out_gpu) from a TrainConfig or
    a dict of its fields plus the optional `max_rows` (seeded subsample), `features` (subset of
    lib.features.FEATURES), `ensemble` (number of seeds whose forecasts are averaged), `device_factors` (bool: learn
    one efficiency per training GPU),
    `overhead` (lib.overhead: None, or 'isolated' / 'hidden' to learn a fixed time per kernel),
    `hold_mem` (bool, amendment 5: predictions hold f_mem's memory term to the learned GPUs' range),
    `envelope` (bool, amendment 6: lib.kernels caps the forecast by lib.envelope; not read by the model),
    `held_out_gpu` (a training GPU's name: its rows are left out of training altogether, so that GPU can be
    forecast as one never trained on: the leave-one-GPU-out evaluation of notebooks 04 and 05) and
    `validation`: 'shapes' (early stopping on held-out shapes of the training GPUs),
    'none' (train on every row for `epochs`, keep the last weights), 'largest' (as 'none', without
    each GPU's largest rows: `largest_rows`, which score size extrapolation) or a training GPU's name
    (leave-one-GPU-out: train on the other four, early stopping on that GPU's rows)."""
    if isinstance(cfg, TrainConfig):
        return cfg, None, FEATURES, "shapes", False, None, False, None
    cfg = dict(cfg or {})
    max_rows = cfg.pop("max_rows", None)
    features = cfg.pop("features", FEATURES)
    if not isinstance(features, (list, tuple)):
        raise PredictorError(f"features must be a list of feature names, got {features!r}")
    features = tuple(features)
    validation = cfg.pop("validation", "shapes")
    ensemble = cfg.pop("ensemble", 1)
    device_factors = cfg.pop("device_factors", False)
    overhead = cfg.pop("overhead", None)
    hold_mem = cfg.pop("hold_mem", False)
    if not isinstance(hold_mem, bool):
        raise PredictorError(f"hold_mem must be true or false, got {hold_mem!r}")
    envelope = cfg.pop("envelope", False)
    if not isinstance(envelope, bool):
        raise PredictorError(f"envelope must be true or false, got {envelope!r}")
    held_out = cfg.pop("held_out_gpu", None)
    if held_out is not None and held_out not in TRAIN_GPUS_NVIDIA:
        raise PredictorError(f"held_out_gpu must be null or one of the training GPUs {TRAIN_GPUS_NVIDIA}, got {held_out!r}")
    if held_out is not None and held_out == validation:
        raise PredictorError(f"held_out_gpu {held_out!r} has no rows to validate on (validation names the same GPU)")
    if overhead not in (None, *OVERHEADS):
        raise PredictorError(f"overhead must be null or one of {OVERHEADS}, got {overhead!r}")
    if not isinstance(device_factors, bool):
        raise PredictorError(f"device_factors must be true or false, got {device_factors!r}")
    if not isinstance(ensemble, int) or ensemble < 1:
        raise PredictorError(f"ensemble must be a positive integer (number of seeds), got {ensemble!r}")
    if not features or not set(features) <= set(FEATURES + EXTRA_FEATURES):
        raise PredictorError(f"features must be a non-empty subset of {FEATURES + EXTRA_FEATURES}, got {features}")
    if validation not in VALIDATIONS:
        raise PredictorError(f"validation must be one of {VALIDATIONS}, got {validation!r}")
    known = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(cfg) - known)
    if unknown:
        raise PredictorError(f"unknown predictor config key(s) {unknown}; known: {sorted(known)}, "
                             f"max_rows, features, validation, ensemble, device_factors, overhead, hold_mem, envelope, held_out_gpu")
    _check_numbers({**cfg, "max_rows": max_rows})
    if cfg.get("schedule_epochs") is not None and cfg["schedule_epochs"] < cfg.get("epochs", TrainConfig.epochs):
        raise PredictorError(f"schedule_epochs ({cfg['schedule_epochs']}) must be at least epochs "
                             f"({cfg.get('epochs', TrainConfig.epochs)}): past its end the cosine schedule raises the lr again")
    cfg = {k: v.item() if isinstance(v, np.generic) else v for k, v in cfg.items()}   # np.int64(1) -> 1: JSON in the key
    return (TrainConfig(**cfg), (int(max_rows) if max_rows is not None else None), features, validation,
            device_factors, overhead, hold_mem, held_out)


# The least value of each integer field of a predictor config (max_rows may also be None).
_LEAST_INT = {"layers": 0, "width": 1, "epochs": 1, "batch_size": 1, "patience": 1, "seed": 0, "max_rows": 1,
              "schedule_epochs": 1}


def _check_numbers(cfg: dict) -> None:
    """PredictorError naming the first numeric config field of cfg with a wrong type or out of range."""
    for key, least in _LEAST_INT.items():
        v = cfg.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < least):
            raise PredictorError(f"{key} must be an integer >= {least}, got {v!r}")
    for key, ok, rule in (("lr", lambda v: v > 0, "> 0"), ("weight_decay", lambda v: v >= 0, ">= 0"),
                          ("val_fraction", lambda v: 0 <= v < 1, "in [0, 1)")):
        v = cfg.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Real) or not ok(v)):
            raise PredictorError(f"{key} must be a number {rule}, got {v!r}")
