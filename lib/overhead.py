"""A fixed per-kernel time that the paper's wave formula cannot express (notebooks 04 and 05).

Every kernel of the dataset is timed on its own, and pays a fixed time t0 besides its waves: along
a series of held-out kernels that differ only in B, latency is a straight line in B that crosses
B = 0 well above zero (`series_intercepts_ms`). The wave formula of lib.utilization,
    latency = waves * w / (alpha - beta / waves),   w = flops_per_tile / bound_per_sm,
is waves * w / alpha + w * beta / alpha^2 + O(1 / waves) for many waves: its fixed part is at most
about one wave's time (beta < alpha), microseconds for a vector op. The variant (config key
`overhead`, lib.predictors) learns t0 with the MLP:
    latency_ms = t0_ms + (wave formula),   t0_ms = exp(log_t0), one per model (op class)
'isolated' predicts a kernel timed alone (the kernel dataset): t0 added; 'hidden' predicts a
kernel inside a model run, whose launch overlaps the previous kernel: t0 left out.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from torch import nn

from .utilization import UtilizationMLP, _predict_ms

OVERHEADS = ("isolated", "hidden")
T0_INIT_MS = 0.02   # start of training: 20 us


class OverheadMLP(UtilizationMLP):
    """UtilizationMLP plus one learned fixed time per kernel, t0_ms = exp(log_t0)."""

    def __init__(self, n_inputs: int, layers: int, width: int, n_devices: int = 0):
        super().__init__(n_inputs, layers, width, n_devices)
        self.log_t0 = nn.Parameter(torch.tensor(math.log(T0_INIT_MS)))

    def t0_ms(self) -> float:
        """The learned fixed time per kernel (ms)."""
        return float(torch.exp(self.log_t0.detach()))


# latency_ms = t0_ms + num_waves * flops_per_tile / (bound_per_sm * utilization) * 1e3 / e_device
def overhead_predict_ms(model: OverheadMLP, batch: dict) -> torch.Tensor:
    """Latency (ms) of a kernel timed alone: the wave formula plus the learned t0 (training target)."""
    return _predict_ms(model, batch) + torch.exp(model.log_t0)


# Along one series (same GPU, op and every dimension but B): latency_ms = t0_ms + slope * B,
# fitted by least squares over its kernels under max_ms (where t0 is not lost in the noise).
def series_intercepts_ms(kernels: pd.DataFrame, min_points: int = 4, max_ms: float = 2.0) -> pd.DataFrame:
    """One row per series of >= min_points kernels: device, op_class, op, points and the fitted t0_ms."""
    dims = [c for c in ("M", "N", "K", "H") if c in kernels.columns]
    short = kernels[kernels["latency_ms"] < max_ms].fillna({d: -1.0 for d in dims})
    rows = []
    for key, s in short.groupby(["device", "op_class", "op", *dims], sort=True):
        if s["B"].nunique() < min_points:
            continue
        design = np.stack([np.ones(len(s)), s["B"].to_numpy(float)], axis=1)
        (t0_ms, _), *_ = np.linalg.lstsq(design, s["latency_ms"].to_numpy(float), rcond=None)
        rows.append({"device": key[0], "op_class": key[1], "op": key[2], "points": len(s), "t0_ms": t0_ms})
    return pd.DataFrame(rows, columns=["device", "op_class", "op", "points", "t0_ms"])
