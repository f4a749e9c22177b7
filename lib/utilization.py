"""The utilization model of one op class: inputs, network, the wave formula, per-GPU efficiency (notebook 04).

    alpha = sigmoid(z_a),  beta = alpha * sigmoid(z_b),  utilization = alpha - beta / num_waves
    latency_ms = num_waves * flops_per_tile / (bound_per_sm * utilization) * 1e3 / e_device
lib.predictors trains and caches these models; the sources of the functions here are part of
its cache key (lib.predictors._own_code).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch import nn

from .data import EW_OPS, OP_CLASSES
from .devices import TRAIN_GPUS_NVIDIA
from .features import FEATURES

GIGA = 1e9
MS_PER_S = 1e3

class PredictorError(ValueError):
    """Bad arguments to a NeuSight predictor; the message names the field."""


def input_names(op_class: str, features=FEATURES) -> list[str]:
    """Model inputs of one op class: the features (default all five), plus op one-hot for EW."""
    if op_class not in OP_CLASSES:
        raise PredictorError(f"op_class must be one of {OP_CLASSES}, got {op_class!r}")
    return [*features, *([f"op_{op}" for op in EW_OPS] if op_class == "EW" else [])]


# Amendment 5 (lib.selection): memory capacity decides no kernel's time, yet f_mem = log(wave_bytes /
# mem_size_per_sm) carries it, and the five training GPUs span only 0.20-0.40 GB per SM, so no model could learn
# what more memory does. A forecast holds that term inside the range of the GPUs its model learned from:
#   f_mem' = f_mem + log(m / clip(m, m_min, m_max)),   m = mem_gb / num_sm   [GB per SM]
def hold_mem_term(feat: pd.DataFrame, mem_per_sm_gb: tuple[float, float]) -> pd.DataFrame:
    """feat with f_mem's memory-per-SM term clipped to (min, max) GB per SM (notebook 04, amendment 5)."""
    m = feat["mem_gb"].to_numpy(float) / feat["num_sm"].to_numpy(float)
    return feat.assign(f_mem=feat["f_mem"].to_numpy(float) + np.log(m / np.clip(m, *mem_per_sm_gb)))


def learned_mem_per_sm_gb(*left_out: str) -> tuple[float, float]:
    """(min, max) memory per SM (GB) of the training GPUs a model learns from, without the GPUs named in left_out
    (a LOGO fold's validation GPU, a held_out_gpu; other values, such as 'none', name no GPU)."""
    from .devices import device_by_name
    per_sm = [d.mem_gb / d.num_sm for d in map(device_by_name, TRAIN_GPUS_NVIDIA) if d.name not in left_out]
    return min(per_sm), max(per_sm)


def model_inputs(feat: pd.DataFrame, op_class: str, features=FEATURES) -> np.ndarray:
    """(rows, inputs) float32 from a table that went through lib.features.add_features."""
    cols = [feat[f].to_numpy(dtype=np.float64) for f in features]
    if op_class == "EW":
        op = feat["op"].to_numpy()
        cols += [(op == o).astype(np.float64) for o in EW_OPS]
    return np.stack(cols, axis=1).astype(np.float32)


class UtilizationMLP(nn.Module):
    """L hidden Linear+ReLU layers of one width, then a head with two outputs (z_alpha, z_beta);
    optionally one learned log-efficiency per training GPU (see device_efficiency)."""

    def __init__(self, n_inputs: int, layers: int, width: int, n_devices: int = 0):
        super().__init__()
        mods, d = [], n_inputs
        for _ in range(layers):
            mods += [nn.Linear(d, width), nn.ReLU()]
            d = width
        self.body = nn.Sequential(*mods)
        self.head = nn.Linear(d, 2)
        self.log_eff = nn.Parameter(torch.zeros(n_devices)) if n_devices else None
        # which of the n_devices had training rows (set before training; saved with the weights)
        self.register_buffer("trained", torch.zeros(n_devices, dtype=torch.bool))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


# Per-device efficiency (config key `device_factors`): training GPU d gets a learned scalar
#   e_d = exp(log_eff_d),  latency_ms = (formula below) / e_d
# e_d absorbs what one GPU's spec sheet misstates for every kernel of a class (e.g. a sustained
# clock below the listed boost clock), so the MLP learns utilizations that carry over between GPUs.
# A GPU without training rows (any OOD GPU; the held-out GPU of a LOGO fold) gets
#   log e = mean of log_eff_d over the GPUs trained on     (the typical training GPU).
def device_efficiency(model: nn.Module, device_idx: torch.Tensor) -> torch.Tensor | float:
    """e per row (1.0 for models without device factors); device_idx -1 = not a training GPU."""
    if getattr(model, "log_eff", None) is None:
        return 1.0
    trained = model.trained
    default = model.log_eff[trained].mean() if bool(trained.any()) else model.log_eff.sum() * 0.0
    idx = device_idx.clamp(min=0)
    known = (device_idx >= 0) & trained[idx]
    return torch.exp(torch.where(known, model.log_eff[idx], default))


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
    """Kernel latency (ms) from waves, work per tile, per-SM bound (FLOP and FLOP/s, or GFLOP and GFLOP/s) and utilization."""
    return num_waves * flops_per_tile / (bound_flops_per_sm * util) * MS_PER_S


def _predict_ms(model: nn.Module, batch: dict) -> torch.Tensor:
    alpha, beta = alpha_beta(model(batch["x"]))
    return latency_ms(batch["waves"], batch["gflop_per_tile"], batch["bound_gflops_per_sm"],
                      utilization(alpha, beta, batch["waves"])) / device_efficiency(model, batch["device_idx"])


def device_index(names) -> np.ndarray:
    """Index of each device name in TRAIN_GPUS_NVIDIA (int64), -1 for any other device."""
    pos = {n: i for i, n in enumerate(TRAIN_GPUS_NVIDIA)}
    return pd.Series(np.asarray(names, dtype=object)).map(pos).fillna(-1).to_numpy(np.int64)


def _tensors(feat: pd.DataFrame, x: np.ndarray) -> dict:
    """The inputs of _predict_ms as float32 tensors (work per tile in GFLOP, per-SM bound in GFLOP/s)."""
    # gflop_per_tile / bound_gflops_per_sm is ~1e-9..1e-2 s; both in giga units keep float32 in range
    # (the ratio is the same as in FLOP and FLOP/s).
    bound_gflops_per_sm = feat["bound_gflops"].to_numpy(float) / feat["num_sm"].to_numpy(float)
    return {"x": torch.from_numpy(x), "device_idx": torch.from_numpy(device_index(feat["device"]).copy()),
            "waves": torch.from_numpy(feat["num_waves"].to_numpy(np.float32)),
            "gflop_per_tile": torch.from_numpy((feat["flops_per_tile"].to_numpy(float) / GIGA).astype(np.float32)),
            "bound_gflops_per_sm": torch.from_numpy(bound_gflops_per_sm.astype(np.float32))}
