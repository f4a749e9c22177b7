"""Direct latency predictors, shape + GPU spec -> latency, as Habitat's MLP (notebook 03; the
"Habitat-style" baseline of notebook 04).

Features (all log-scaled, then standardized with the training rows' mean and std):
  the op's dimensions (B, M, N, K for BMM / FC; B, H for EW, SOFTMAX, LN), a one-hot of the op
  for the element-wise class, and the device spec (mem_bw_gbps, peak_gflops, num_sm, l2_mb,
  mem_gb, freq_mhz, cores_per_sm).
Output: log latency; latency_ms = exp(output). Trained with lib.train.fit (relative-error loss on
latency) on split == 'train' rows only, so the spec columns of an OOD GPU are all a forecast reads.

Architectures:
  mlp:          L hidden layers (Linear(width) + ReLU), then Linear(1).
  transformer:  each scalar feature x_i becomes a token x_i * w_i + e_i (w_i, e_i learned d_model
                vectors), L pre-norm encoder layers over the tokens, LayerNorm, mean-pool, Linear(1).
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch
from torch import nn

from . import train as train_mod
from .data import EW_OPS, OP_CLASSES, load_kernels
from .devices import all_devices
from .train import TrainConfig

DIMS = {"BMM": ("B", "M", "N", "K"), "FC": ("B", "M", "N", "K"),
        "EW": ("B", "H"), "SOFTMAX": ("B", "H"), "LN": ("B", "H")}
SPEC = ("mem_bw_gbps", "peak_gflops", "num_sm", "l2_mb", "mem_gb", "freq_mhz", "cores_per_sm")
ARCHS = ("mlp", "transformer")
TRANSFORMER_HEADS = 4        # attention heads; width must be divisible by it
TRANSFORMER_FF_MULT = 2      # feed-forward width = TRANSFORMER_FF_MULT * d_model


class DirectError(ValueError):
    """Bad arguments or input table for a direct predictor; the message names the field."""


def feature_names(op_class: str) -> list[str]:
    """Input columns of one op class's direct predictor, in order."""
    if op_class not in DIMS:
        raise DirectError(f"op_class must be one of {OP_CLASSES}, got {op_class!r}")
    ops = [f"op_{op}" for op in EW_OPS] if op_class == "EW" else []
    return [*DIMS[op_class], *ops, *SPEC]


def _with_spec(df: pd.DataFrame) -> pd.DataFrame:
    """df with the device spec columns, looked up by 'device' name where they are missing."""
    missing = [c for c in SPEC if c not in df.columns]
    if not missing:
        return df
    if "device" not in df.columns:
        raise DirectError(f"input table lacks spec column(s) {missing} and a 'device' column to look them up")
    devices = all_devices()
    unknown = sorted(set(df["device"]) - devices.keys())
    if unknown:
        raise DirectError(f"unknown device(s) {unknown} in column 'device'")
    spec = pd.DataFrame([devices[d].spec_columns() for d in df["device"].unique()])
    return df.drop(columns=[c for c in SPEC if c in df.columns]).merge(
        spec[["device", *SPEC]], on="device", how="left").set_index(df.index)


def raw_features(df: pd.DataFrame, op_class: str) -> np.ndarray:
    """(rows, features) float32: log of dims and spec, 0/1 op one-hot (EW), columns as feature_names."""
    df = _with_spec(df)
    cols = []
    for name in feature_names(op_class):
        if name.startswith("op_"):
            if "op" not in df.columns:
                raise DirectError("input table lacks column 'op' (needed for the EW one-hot)")
            cols.append((df["op"].to_numpy() == name[3:]).astype(np.float64))
            continue
        if name not in df.columns:
            raise DirectError(f"input table lacks column '{name}' ({op_class} needs {list(DIMS[op_class])})")
        x = pd.to_numeric(df[name], errors="coerce").to_numpy(dtype=np.float64)
        if not np.all(np.isfinite(x) & (x > 0)):
            raise DirectError(f"column '{name}' must be positive numbers for {op_class} rows")
        cols.append(np.log(x))
    if op_class == "EW" and "op" in df.columns:
        bad = sorted(set(df["op"]) - set(EW_OPS))
        if bad:
            raise DirectError(f"column 'op' has non element-wise op(s) {bad}")
    return np.stack(cols, axis=1).astype(np.float32)


class MLP(nn.Module):
    """L hidden Linear+ReLU layers of one width, then a scalar head (log latency)."""

    def __init__(self, n_features: int, layers: int, width: int):
        super().__init__()
        mods, d = [], n_features
        for _ in range(layers):
            mods += [nn.Linear(d, width), nn.ReLU()]
            d = width
        self.body = nn.Sequential(*mods)
        self.head = nn.Linear(d, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x)).squeeze(-1)


class FeatureTransformer(nn.Module):
    """Transformer encoder over one token per scalar feature: token_i = x_i * w_i + e_i."""

    def __init__(self, n_features: int, layers: int, width: int):
        super().__init__()
        if width % TRANSFORMER_HEADS:
            raise DirectError(f"transformer width {width} must be divisible by {TRANSFORMER_HEADS} heads")
        self.weight = nn.Parameter(torch.randn(n_features, width) / np.sqrt(width))
        self.feature_embedding = nn.Parameter(torch.randn(n_features, width) * 0.02)
        layer = nn.TransformerEncoderLayer(width, TRANSFORMER_HEADS, TRANSFORMER_FF_MULT * width,
                                           dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.unsqueeze(-1) * self.weight + self.feature_embedding   # (rows, features, width)
        return self.head(self.norm(self.encoder(tokens)).mean(dim=1)).squeeze(-1)


def build_model(arch: str, n_features: int, layers: int, width: int) -> nn.Module:
    """An untrained network of one architecture (seeded by the caller)."""
    if arch not in ARCHS:
        raise DirectError(f"arch must be one of {ARCHS}, got {arch!r}")
    if layers < 1 or width < 1:
        raise DirectError(f"layers and width must be >= 1, got {layers} and {width}")
    return (MLP if arch == "mlp" else FeatureTransformer)(n_features, layers, width)


def count_params(model: nn.Module) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def _predict_ms(model: nn.Module, batch: dict) -> torch.Tensor:
    # latency_ms = exp(net(z) + log_offset); the offset (train mean log latency) centres the output
    return torch.exp(model(batch["x"]) + batch["offset"])


@dataclass
class DirectPredictor:
    """A trained direct predictor of one op class; predict(df) -> latency_ms array."""
    op_class: str
    arch: str
    layers: int
    width: int
    model: nn.Module
    mean: np.ndarray       # of the training rows' raw features
    std: np.ndarray
    log_offset: float      # mean log latency of the training rows
    info: dict

    @property
    def num_params(self) -> int:
        return count_params(self.model)

    def predict(self, df: pd.DataFrame, batch_rows: int = 65536) -> np.ndarray:
        """Latency (ms) of every row of df (needs the dims, 'op' for EW, spec or 'device')."""
        z = torch.from_numpy((raw_features(df, self.op_class) - self.mean) / self.std)
        out = []
        self.model.eval()
        with torch.no_grad():
            for i in range(0, len(z), batch_rows):
                x = z[i:i + batch_rows]
                out.append(_predict_ms(self.model, {"x": x, "offset": torch.full((len(x),), self.log_offset)}))
        return torch.cat(out).numpy().astype(np.float64) if out else np.zeros(0)


def training_rows(op_class: str, max_rows: int | None, seed: int) -> pd.DataFrame:
    """split == 'train' rows of one op class (NVIDIA), optionally a seeded subsample of max_rows."""
    df = load_kernels(ops=op_class, splits="train")
    if df.empty:
        raise DirectError(f"no training rows for op class {op_class}")
    if max_rows is not None and max_rows < len(df):
        df = df.sample(n=int(max_rows), random_state=seed).sort_index()
    return df.reset_index(drop=True)


def shape_groups(df: pd.DataFrame, op_class: str) -> np.ndarray:
    """One label per (op, shape): validation holds out whole shapes, on every training GPU."""
    cols = ["op", *DIMS[op_class]]
    return df.groupby(cols, sort=True, dropna=False).ngroup().to_numpy()


def train_direct(op_class: str, arch: str = "mlp", layers: int = 8, cfg: TrainConfig = TrainConfig(),
                 max_rows: int | None = None) -> DirectPredictor:
    """Train (or load from figures/predictors/ or build/predictors/) a direct predictor; `layers` overrides cfg.layers."""
    cfg = replace(cfg, layers=int(layers))
    names = feature_names(op_class)
    if arch not in ARCHS:
        raise DirectError(f"arch must be one of {ARCHS}, got {arch!r}")
    df = training_rows(op_class, max_rows, cfg.seed)
    raw = raw_features(df, op_class)
    target = df["latency_ms"].to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(target) & (target > 0)):
        raise DirectError(f"{op_class} training rows have non-positive or missing latency_ms")
    mean = raw.mean(axis=0)
    std = np.where(raw.std(axis=0) > 1e-8, raw.std(axis=0), 1.0).astype(np.float32)
    log_offset = float(np.mean(np.log(target)))
    groups = shape_groups(df, op_class)
    key = train_mod.cache_key("direct", op_class, arch, cfg, names, raw, target, groups,
                              sys.modules[__name__], *train_mod.FIT_CODE)

    def build():
        train_mod.set_seed(cfg.seed)
        model = build_model(arch, len(names), cfg.layers, cfg.width)
        z = torch.from_numpy((raw - mean) / std)
        inputs = {"x": z, "offset": torch.full((len(z),), log_offset)}
        start = time.perf_counter()
        hist = train_mod.fit(model, _predict_ms, inputs, torch.from_numpy(target.astype(np.float32)),
                             groups, cfg, desc=f"{op_class} {arch}{cfg.layers}")
        info = {"train_seconds": time.perf_counter() - start, "epochs": hist["epochs_run"],
                "best_val_loss": hist["best_val_loss"], "train_rows": len(df), "history": hist["history"]}
        return {"model": model.state_dict()}, info

    state, info = train_mod.cached(f"direct-{op_class}-{arch}{cfg.layers}", key, build)
    model = build_model(arch, len(names), cfg.layers, cfg.width)
    model.load_state_dict(state["model"])
    model.eval()
    return DirectPredictor(op_class, arch, cfg.layers, cfg.width, model, mean, std, log_offset, info)
