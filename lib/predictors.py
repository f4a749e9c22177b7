"""NeuSight's per-op-class utilization predictors (notebook 04; their scaling in notebook 03).

One MLP per op class (BMM, FC, EW, SOFTMAX, LN) maps the five log-scaled features of
lib.features (plus a one-hot of the op for EW) to two numbers z_a, z_b; then
    alpha = sigmoid(z_a),  beta = alpha * sigmoid(z_b)        (so 0 < beta < alpha < 1)
    utilization = alpha - beta / num_waves                     (in (0, 1) for any num_waves >= 1)
    latency_ms = num_waves * flops_per_tile / (bound_per_sm * utilization)
with bound_per_sm = bound_gflops * 1e9 / num_sm [FLOP/s] (lib.roofline). Writing beta as a
fraction of alpha keeps utilization positive at one wave; the paper's formula is otherwise kept.
Trained on split == 'train' rows only (the five training GPUs) with lib.train.fit (relative
error, AdamW, early stopping on held-out shapes of the training GPUs), cached under
build/predictors/ by a hash of data, config and code.
"""
from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, fields, replace

import numpy as np
import pandas as pd
import torch
from torch import nn

from . import features as features_mod
from . import paths
from . import roofline as roofline_mod
from . import tiles as tiles_mod
from . import train as train_mod
from . import waves as waves_mod
from .data import EW_OPS, OP_CLASS, OP_CLASSES, load_kernels
from .features import FEATURES, add_features
from .train import TrainConfig

GIGA = 1e9
MS_PER_S = 1e3
SHAPE_COLS = ("op", "B", "M", "N", "K", "H")

# Full-run defaults (params/full, the CLI and end-to-end forecasts), sized so that all five
# train in <= 10 min on 2 CPU cores (the paper used 8 x 512 for 100 epochs). Inputs: the
# paper's five features. (Dropping f_l2 and f_mem, which also identify the GPU, was tried during
# development: they are the only inputs that see a kernel's total size, and without them the
# validation error on held-out training shapes rose, e.g. BMM from 0.15 to 0.24.)
_BASE = {"layers": 4, "width": 128, "epochs": 40, "batch_size": 1024, "lr": 2e-3, "patience": 8}
DEFAULT_CONFIGS = {c: dict(_BASE) for c in OP_CLASSES}


class PredictorError(ValueError):
    """Bad arguments to a NeuSight predictor; the message names the field."""


def input_names(op_class: str, features=FEATURES) -> list[str]:
    """Model inputs of one op class: the features (default all five), plus op one-hot for EW."""
    if op_class not in OP_CLASSES:
        raise PredictorError(f"op_class must be one of {OP_CLASSES}, got {op_class!r}")
    return [*features, *([f"op_{op}" for op in EW_OPS] if op_class == "EW" else [])]


def model_inputs(feat: pd.DataFrame, op_class: str, features=FEATURES) -> np.ndarray:
    """(rows, inputs) float32 from a table that went through lib.features.add_features."""
    cols = [feat[f].to_numpy(dtype=np.float64) for f in features]
    if op_class == "EW":
        op = feat["op"].to_numpy()
        cols += [(op == o).astype(np.float64) for o in EW_OPS]
    return np.stack(cols, axis=1).astype(np.float32)


class UtilizationMLP(nn.Module):
    """L hidden Linear+ReLU layers of one width, then a head with two outputs (z_alpha, z_beta)."""

    def __init__(self, n_inputs: int, layers: int, width: int):
        super().__init__()
        mods, d = [], n_inputs
        for _ in range(layers):
            mods += [nn.Linear(d, width), nn.ReLU()]
            d = width
        self.body = nn.Sequential(*mods)
        self.head = nn.Linear(d, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def alpha_beta(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """alpha = sigmoid(z_a), beta = alpha * sigmoid(z_b)."""
    alpha = torch.sigmoid(z[..., 0])
    return alpha, alpha * torch.sigmoid(z[..., 1])


# utilization = alpha - beta / num_waves
def utilization(alpha, beta, num_waves):
    """Share of the per-SM roofline bound a kernel reaches (paper's wave formula)."""
    return alpha - beta / num_waves


# latency_ms = num_waves * flops_per_tile / (bound_per_sm * utilization) * 1e3
def latency_ms(num_waves, flops_per_tile, bound_flops_per_sm, util):
    """Kernel latency (ms) from waves, FLOPs per tile, per-SM bound (FLOP/s) and utilization."""
    return num_waves * flops_per_tile / (bound_flops_per_sm * util) * MS_PER_S


def _predict_ms(model: nn.Module, batch: dict) -> torch.Tensor:
    alpha, beta = alpha_beta(model(batch["x"]))
    return latency_ms(batch["waves"], batch["flops_per_tile"], batch["bound_per_sm"],
                      utilization(alpha, beta, batch["waves"]))


def _tensors(feat: pd.DataFrame, x: np.ndarray) -> dict:
    """The inputs of _predict_ms as float64-safe float32 tensors (per-SM bound in FLOP/s)."""
    bound_per_sm = feat["bound_gflops"].to_numpy(float) * GIGA / feat["num_sm"].to_numpy(float)
    # flops_per_tile / bound_per_sm is ~1e-9..1e-2 s: keep it as seconds-scale float32 by
    # folding the 1e9 into both terms (ratio unchanged).
    return {"x": torch.from_numpy(x),
            "waves": torch.from_numpy(feat["num_waves"].to_numpy(np.float32)),
            "flops_per_tile": torch.from_numpy((feat["flops_per_tile"].to_numpy(float) / GIGA).astype(np.float32)),
            "bound_per_sm": torch.from_numpy((bound_per_sm / GIGA).astype(np.float32))}


@dataclass
class NeuSightPredictor:
    """A trained utilization MLP of one op class; predict(feat) -> latency_ms array."""
    op_class: str
    cfg: TrainConfig
    features: tuple    # the lib.features columns the model reads
    model: nn.Module
    mean: np.ndarray   # of the training rows' inputs (one-hot columns: mean 0, std 1)
    std: np.ndarray
    lo: np.ndarray     # training range of each input: predictions clip inputs to it
    hi: np.ndarray
    info: dict

    def inputs(self, feat: pd.DataFrame) -> np.ndarray:
        """Standardized model inputs, each clipped to its training range first.

        Outside the training range a ReLU MLP extrapolates linearly; clipping instead keeps the
        utilization of the nearest trained kernels (e.g. the largest ones, whose utilization
        has saturated), which is what the wave model expects of ever larger kernels.
        """
        x = np.clip(model_inputs(feat, self.op_class, self.features), self.lo, self.hi)
        return ((x - self.mean) / self.std).astype(np.float32)

    def alpha_beta(self, feat: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """(alpha, beta) per row of a featured table."""
        x = torch.from_numpy(self.inputs(feat))
        with torch.no_grad():
            a, b = alpha_beta(self.model(x))
        return a.numpy().astype(float), b.numpy().astype(float)

    def predict(self, feat: pd.DataFrame, batch_rows: int = 1 << 16) -> np.ndarray:
        """Latency (ms) of every row of a table that went through add_features."""
        if len(feat) == 0:
            return np.zeros(0)
        x = self.inputs(feat)
        t = _tensors(feat, x)
        out = []
        with torch.no_grad():
            for i in range(0, len(x), batch_rows):
                out.append(_predict_ms(self.model, {k: v[i:i + batch_rows] for k, v in t.items()}))
        return torch.cat(out).numpy().astype(np.float64)


def make_config(cfg) -> tuple[TrainConfig, int | None, tuple]:
    """(TrainConfig, max_rows, features) from a TrainConfig or a dict of its fields plus the
    optional `max_rows` (seeded subsample) and `features` (subset of lib.features.FEATURES)."""
    if isinstance(cfg, TrainConfig):
        return cfg, None, FEATURES
    cfg = dict(cfg or {})
    max_rows = cfg.pop("max_rows", None)
    features = tuple(cfg.pop("features", FEATURES))
    if not features or not set(features) <= set(FEATURES):
        raise PredictorError(f"features must be a non-empty subset of {FEATURES}, got {features}")
    known = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(cfg) - known)
    if unknown:
        raise PredictorError(f"unknown predictor config key(s) {unknown}; known: {sorted(known)}, max_rows, features")
    return TrainConfig(**cfg), (int(max_rows) if max_rows is not None else None), features


def training_table(op_class: str, max_rows: int | None = None, seed: int = 0) -> pd.DataFrame:
    """split == 'train' rows of one class (NVIDIA training GPUs), featured with oracle tiles."""
    df = load_kernels(ops=op_class, splits="train")
    if df.empty:
        raise PredictorError(f"no training rows for op class {op_class}")
    if max_rows is not None and max_rows < len(df):
        df = df.sample(n=int(max_rows), random_state=seed).sort_index()
    feat = add_features(df.reset_index(drop=True), tiles="oracle")
    ok = np.isfinite(feat[list(FEATURES) + ["num_waves", "flops_per_tile", "bound_gflops"]]).all(axis=1)
    ok &= feat["latency_ms"] > 0
    return feat[ok.to_numpy()].reset_index(drop=True)


def shape_groups(df: pd.DataFrame) -> np.ndarray:
    """One label per (op, shape): validation holds out whole shapes on every training GPU."""
    return df.groupby(list(SHAPE_COLS), sort=True, dropna=False).ngroup().to_numpy()


# The code a trained model depends on (its source is part of the cache key).
CODE = (features_mod, tiles_mod, waves_mod, roofline_mod, train_mod.fit)


def _own_code() -> list[str]:
    """Source of this module's functions that shape a trained model (not of the whole file)."""
    return [inspect.getsource(f) for f in (input_names, model_inputs, UtilizationMLP, alpha_beta,
                                           utilization, latency_ms, _predict_ms, _tensors,
                                           training_table, shape_groups)]


def _cache_name(op_class: str, cfg: TrainConfig) -> str:
    return f"neusight-{op_class}-{cfg.layers}x{cfg.width}"


def train_predictor(op_class: str, cfg=None, force: bool = False) -> NeuSightPredictor:
    """Train (or load from build/predictors/) the utilization MLP of one op class.

    cfg: TrainConfig, or a dict of its fields plus `max_rows` (seeded subsample of training rows);
    None = DEFAULT_CONFIGS[op_class]. force=True retrains even when a cached model exists.
    """
    cfg, max_rows, features = make_config(DEFAULT_CONFIGS[op_class] if cfg is None else cfg)
    names = input_names(op_class, features)
    feat = training_table(op_class, max_rows, cfg.seed)
    x = model_inputs(feat, op_class, features)
    target = feat["latency_ms"].to_numpy(np.float64)
    mean, std = x.mean(axis=0), x.std(axis=0)
    onehot = np.array([n.startswith("op_") for n in names])
    mean[onehot], std[onehot] = 0.0, 1.0
    std = np.where(std > 1e-8, std, 1.0).astype(np.float32)
    groups = shape_groups(feat)
    key = train_mod.cache_key("neusight", op_class, cfg, max_rows, names, x, target, groups,
                              *[inspect.getsource(c) for c in CODE], *_own_code())
    name = _cache_name(op_class, cfg)
    if force:
        (paths.BUILD / "predictors" / f"{name}-{key}.pt").unlink(missing_ok=True)

    def build():
        train_mod.set_seed(cfg.seed)
        model = UtilizationMLP(len(names), cfg.layers, cfg.width)
        inputs = _tensors(feat, ((x - mean) / std).astype(np.float32))
        start = time.perf_counter()
        hist = train_mod.fit(model, _predict_ms, inputs, torch.from_numpy(target.astype(np.float32)),
                             groups, cfg, desc=f"NeuSight {op_class}")
        info = {"train_seconds": time.perf_counter() - start, "epochs": hist["epochs_run"],
                "best_val_loss": hist["best_val_loss"], "train_rows": len(feat), "history": hist["history"]}
        return {"model": model.state_dict()}, info

    state, info = train_mod.cached(name, key, build)
    model = UtilizationMLP(len(names), cfg.layers, cfg.width)
    model.load_state_dict(state["model"])
    model.eval()
    return NeuSightPredictor(op_class, cfg, features, model, mean.astype(np.float32), std,
                             x.min(axis=0), x.max(axis=0), info)


_LOADED: dict = {}


def get_predictor(op_class: str, cfg=None) -> NeuSightPredictor:
    """train_predictor with a module-level cache: each (class, config) is loaded once per process."""
    key = (op_class, repr(make_config(DEFAULT_CONFIGS.get(op_class) if cfg is None else cfg)))
    if key not in _LOADED:
        _LOADED[key] = train_predictor(op_class, cfg)
    return _LOADED[key]


def train_all(cfg_by_class: dict | None = None, force: bool = False) -> dict:
    """Train (or load) every class's predictor; {op_class: training seconds (as recorded)}.

    cfg_by_class maps op class -> config (see train_predictor); missing classes use the defaults.
    With force=True every predictor is retrained, so the seconds are measured by this call.
    """
    cfg_by_class = cfg_by_class or {}
    unknown = sorted(set(cfg_by_class) - set(OP_CLASSES))
    if unknown:
        raise PredictorError(f"train_all: unknown op class(es) {unknown}")
    out = {}
    for op_class in OP_CLASSES:
        p = train_predictor(op_class, cfg_by_class.get(op_class), force=force)
        out[op_class] = float(p.info["train_seconds"])
    return out


def op_class_of(op) -> np.ndarray:
    """Op class per op name (NaN-free object array); unknown ops -> ''."""
    return np.array([OP_CLASS.get(o, "") for o in np.asarray(op, dtype=object)], dtype=object)


def predict_featured(feat: pd.DataFrame, cfg_by_class: dict | None = None) -> np.ndarray:
    """NeuSight latency (ms) per row of a featured table holding any mix of op classes."""
    cfg_by_class = cfg_by_class or {}
    out = np.full(len(feat), np.nan)
    cls = op_class_of(feat["op"])
    for op_class in OP_CLASSES:
        rows = np.flatnonzero(cls == op_class)
        if len(rows):
            out[rows] = get_predictor(op_class, cfg_by_class.get(op_class)).predict(feat.iloc[rows])
    return out
