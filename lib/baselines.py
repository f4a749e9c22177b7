"""Baselines beside NeuSight (notebook 04): roofline, Habitat-style direct MLP, Li et al.

roofline:  latency_ms = flops / min(intensity * mem_bw, peak)          (lib.roofline)
habitat:   MLP(log dims, op one-hot, log spec) -> latency (lib.direct), training GPUs only.
           At prediction, an input that was constant on the training GPUs (cores_per_sm: 64 on
           all of them) is held at its training value, and latency_ms = exp(min(log_ms, MAX_LOG_MS)).
li:        latency_ms = a * flops + b, one (a, b) per (GPU, op), fitted on THAT GPU's own
           training-shape measurements (split == 'train' rows of the target). It needs
           measurements on the target, so it cannot forecast a GPU without them (OOD GPUs in
           this dataset): its predictions there are NaN. Fit: least squares on relative
           error, min sum ((a*flops + b - y) / y)^2, the metric the tables report.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .data import OP_CLASS, load_kernels
from .roofline import flops_and_bytes
from .train import TrainConfig

# Habitat-style MLP size: the same budget as NeuSight's defaults (lib.predictors.DEFAULT_CONFIGS).
HABITAT_CONFIG = {"layers": 4, "width": 128, "epochs": 40, "batch_size": 1024, "lr": 2e-3, "patience": 8}


def habitat_predict(df: pd.DataFrame, cfg: dict | None = None) -> np.ndarray:
    """Habitat-style direct MLP latency (ms) per row (needs dims, op and the spec columns)."""
    cfg = dict(HABITAT_CONFIG if cfg is None else cfg)
    max_rows = cfg.pop("max_rows", None)
    layers = cfg.pop("layers", 8)
    out = np.full(len(df), np.nan)
    cls = df["op"].map(OP_CLASS).to_numpy()
    seed = cfg.get("seed", TrainConfig().seed)
    for op_class in pd.unique(cls):
        rows = np.flatnonzero(cls == op_class)
        model = _habitat_model(op_class, layers, tuple(sorted(cfg.items())), max_rows)
        out[rows] = _habitat_latency_ms(model, df.iloc[rows], *_training_range(op_class, max_rows, seed))
    return out


# A feature constant on the training GPUs has a float32 std that is rounding noise (1e-5..1e-3, above
# lib.direct's 1e-8 guard), so z = (x - mean) / std of any other value is in the hundreds or more: on
# a GPU with 128 cores per SM (H100, L4, ...) log latencies reached ~230 (exp overflowed to inf) or
# sank to ~1e-17 ms. Such a feature told the model nothing, so it is held at its training value. The
# cap keeps any other far extrapolation finite: exp(MAX_LOG_MS) ms = 1e12 ms, far above any kernel.
MAX_LOG_MS = float(np.log(1e12))
# numpy's vector and scalar exp may differ in the last bit, so the cap is recognized in log space, within this
CAP_LOG_TOLERANCE = 1e-9


def habitat_capped(latency_ms) -> np.ndarray:
    """Which habitat latencies (ms) are the cap exp(MAX_LOG_MS), a bound on a far extrapolation, not a forecast."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(np.asarray(latency_ms, dtype=float)) >= MAX_LOG_MS - CAP_LOG_TOLERANCE


def _habitat_latency_ms(model, df: pd.DataFrame, lo: np.ndarray, hi: np.ndarray,
                        batch_rows: int = 65536) -> np.ndarray:
    """latency_ms = exp(min(net(z) + log_offset, MAX_LOG_MS)), z = (x - mean) / std, x[lo == hi] = lo."""
    import torch
    from .direct import raw_features

    raw = raw_features(df, model.op_class)
    constant = lo == hi
    raw[:, constant] = lo[constant]
    z = torch.from_numpy(((raw - model.mean) / model.std).astype(np.float32))
    model.model.eval()
    with torch.no_grad():
        log_ms = np.concatenate([model.model(z[i:i + batch_rows]).numpy().astype(np.float64)
                                 for i in range(0, len(z), batch_rows)] or [np.zeros(0)])
    return np.exp(np.minimum(log_ms + model.log_offset, MAX_LOG_MS))


_RANGE: dict = {}


def _training_range(op_class: str, max_rows: int | None, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(min, max) of each raw feature over the rows lib.direct.train_direct trains on."""
    from .direct import raw_features, training_rows
    key = (op_class, max_rows, seed)
    if key not in _RANGE:
        raw = raw_features(training_rows(op_class, max_rows, seed), op_class)
        _RANGE[key] = (raw.min(axis=0), raw.max(axis=0))
    return _RANGE[key]


_HABITAT: dict = {}


# A direct MLP whose output exp(net) sinks towards 0 gets stuck: relative error |p - y| / y -> 1 and
# its gradient vanishes. That collapse shows on the training GPUs' validation split (loss ~ 1.0),
# so it is detected there and the model retrained with a smaller step; test data plays no part.
COLLAPSED_VAL_LOSS = 0.99
RETRY_LR_FACTOR = 0.25


def _habitat_model(op_class, layers, cfg_items, max_rows):
    from .direct import train_direct
    key = (op_class, layers, cfg_items, max_rows)
    if key not in _HABITAT:
        cfg = TrainConfig(**dict(cfg_items))
        model = train_direct(op_class, arch="mlp", layers=layers, cfg=cfg, max_rows=max_rows)
        if model.info["best_val_loss"] >= COLLAPSED_VAL_LOSS:
            cfg = TrainConfig(**{**dict(cfg_items), "lr": cfg.lr * RETRY_LR_FACTOR})
            model = train_direct(op_class, arch="mlp", layers=layers, cfg=cfg, max_rows=max_rows)
        _HABITAT[key] = model
    return _HABITAT[key]


def fit_li(flops: np.ndarray, latency_ms: np.ndarray) -> tuple[float, float]:
    """(a [ms/FLOP], b [ms]) minimizing sum(((a*flops + b) - y) / y)^2."""
    A = np.stack([flops / latency_ms, 1.0 / latency_ms], axis=1)
    (a, b), *_ = np.linalg.lstsq(A, np.ones(len(flops)), rcond=None)
    return float(a), float(b)


_LI: dict = {}


def li_coefficients(device_name: str, vendor: str = "nvidia") -> dict:
    """{op: (a, b)} fitted on the device's own split == 'train' rows ({} when it has none)."""
    if (device_name, vendor) not in _LI:
        df = load_kernels(devices=device_name, splits="train", vendor=vendor)
        coef = {}
        if len(df):
            flops, _ = flops_and_bytes(df)
            for op, rows in df.groupby("op").indices.items():
                coef[op] = fit_li(flops[rows], df["latency_ms"].to_numpy(float)[rows])
        _LI[device_name, vendor] = coef
    return _LI[device_name, vendor]


def li_missing(device_name: str, op_classes) -> str:
    """Why li_predict gives NaN: the op classes without training-split measurements on the device (CLI messages)."""
    return (f"Li et al. fits on measurements of the target itself, and {device_name} has no training-split "
            f"(split == 'train') measurements of op class {', '.join(sorted(set(op_classes)))}")


def li_predict(df: pd.DataFrame, device_name: str, vendor: str = "nvidia") -> np.ndarray:
    """Li et al. latency (ms) per row; NaN for ops/devices without target training measurements."""
    coef = li_coefficients(device_name, vendor)
    flops, _ = flops_and_bytes(df)
    a = np.array([coef.get(op, (np.nan, np.nan))[0] for op in df["op"]])
    b = np.array([coef.get(op, (np.nan, np.nan))[1] for op in df["op"]])
    return a * flops + b
