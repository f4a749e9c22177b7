"""Half precision on tensor cores, forecast by the fp32 predictors on an equivalent device (notebook 04).

The model reads a kernel's bytes only as bytes over a device resource: f_bytes over bandwidth, f_l2 and f_wave_l2
over L2, f_mem over memory, f_intensity and the roofline as flops / bytes against peak / bandwidth. So an fp16 GEMM,
which moves half the bytes of the fp32 GEMM of its shape, gives every input the fp32 GEMM gives on a device with
twice each resource, and with the tensor cores' fp16 peak P16 for the fp32 peak:
    K16 = flops / (bytes32 / 2) = 2 K32;    bound = min(K16 x bw, P16) = min(K32 x (2 bw), P16)
The predictors learned fp32 kernels on CUDA cores only. A tensor-core kernel's efficiency and tiles are not theirs,
so these forecasts extrapolate; the dataset's nine fp16 BMMs on the H100 score them (notebook 04). Extrapolating,
the model forecasts some narrow batched matmuls slower in fp16 than in fp32, which a kernel moving half the bytes at
many times the peak does not do; predict_fp16 caps the forecast by the fp32 one.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from . import paths
from .devices import Device
from .metrics import ape
from .ops import FP32_BYTES, GEMM_OPS

FP16_BYTES = 2
FP16_OPS = GEMM_OPS              # the ops with an fp16 forecast: tensor cores run GEMMs
FP16_NAMES = ("fp16", "float16", "torch.float16", "half", "f16")
# A device JSON may give its dense fp16 tensor-core peak (GFLOP/s, fp32 accumulate) under this key; the dataset's
# files do not, so FP16_TENSOR_GFLOPS holds it for the GPUs the data measured in fp16.
FP16_TENSOR_KEY = "Fp16TensorFLOPs"
# Sparsity doubles a datasheet's tensor figure, so dense is half of it:
#   NVIDIA H100 datasheet (H100 SXM): FP16 Tensor Core 1,979 TFLOPS with sparsity;
#   NVIDIA H200 datasheet (H200 SXM): FP16 Tensor Core 1,979 TFLOPS with sparsity.
FP16_TENSOR_GFLOPS = {"NVIDIA H100 80GB HBM3": 1_979_000 / 2, "NVIDIA H200": 1_979_000 / 2}
# The dataset's fp16 measurements: upstream's fp16mm.csv, H100 batched matmuls on tensor cores (B,M,N,K,Latency).
FP16_BMM_CSV = paths.NEUSIGHT / "data" / "fp16" / "h100_bmm_fp16.csv"
FP16_BMM_DEVICE = "NVIDIA H100 80GB HBM3"


class PrecisionError(ValueError):
    """No fp16 peak for a device, or an fp16 file that cannot be read; the message names the file or field."""


def fp16_device(device: Device, tensor_gflops: float) -> Device:
    """The device on which the fp32 predictors see a GEMM as `device` runs it in fp16 on tensor cores (notebook 04)."""
    # fp16 bytes = fp32 bytes / 2, so every resource a byte count is divided by doubles (module docstring)
    scale = FP32_BYTES / FP16_BYTES
    return replace(device, name=f"{device.name} (fp16 tensor cores)", mem_bw_gbps=device.mem_bw_gbps * scale,
                   l2_mb=device.l2_mb * scale, mem_gb=device.mem_gb * scale, peak_gflops=float(tensor_gflops))


def predict_fp16(df: pd.DataFrame, device: Device, tensor_gflops: float, predict) -> np.ndarray:
    """fp16 tensor-core latency (ms) of df's GEMMs on `device`: predict(rows, device) on fp16_device, capped by the
    fp32 forecast on `device` itself (notebook 04)."""
    # fp16_ms = min(forecast on the equivalent device, fp32 forecast): half the bytes, a higher peak, never slower
    return np.minimum(predict(df, fp16_device(device, tensor_gflops)), predict(df, device))


# cuBLAS's fastest fp16 kernels load 16-byte vectors along a matrix row, 8 fp16 elements: a GEMM whose row lengths,
# K (of the left operand) and N (of the right one and the output), are multiples of 8 can run them. On the H200 the
# Hopper kernels (nvjet_sm90) ran for exactly those shapes, and Ampere kernels aligned to 2 elements for the rest.
FP16_ALIGN_ELEMENTS = 8


def tensor_aligned(rows: pd.DataFrame) -> pd.Series:
    """Whether each GEMM row's K and N are multiples of FP16_ALIGN_ELEMENTS (notebook 04)."""
    return (rows["K"] % FP16_ALIGN_ELEMENTS == 0) & (rows["N"] % FP16_ALIGN_ELEMENTS == 0)


def unaligned_note(rows: pd.DataFrame) -> str | None:
    """The warning for fp16 GEMM rows that are not tensor_aligned, or None if all are (lib.kernels; notebook 04)."""
    off = np.flatnonzero(~tensor_aligned(rows).to_numpy())
    if not len(off):
        return None
    return (f"{len(off)} of {len(rows)} fp16 rows (the first: row {off[0]}) have K or N not a multiple of "
            f"{FP16_ALIGN_ELEMENTS}: on our H200 such GEMMs ran slower kernels, aligned to 2 elements, and were "
            "forecast too fast (notebook 04, figures/tables/04-fp16-measured-alignment.csv)")


FP16_METHODS = {"pred_neusight": "NeuSight, fp16 device", "pred_roofline": "roofline, fp16 device",
                "pred_fp32": "NeuSight, fp32 (no tensor cores)"}   # the forecasts notebook 04 scores


def fp16_forecasts(rows: pd.DataFrame, device: Device, predict) -> pd.DataFrame:
    """rows (B, M, N, K) with gflop, FP16_METHODS' forecasts (ms) of them in fp16 on `device` and the NeuSight one
    without predict_fp16's cap, pred_neusight_uncapped; predict(rows, device) -> ms (notebook 04)."""
    from .kernels import predict_kernels   # lib.kernels imports this module
    peak = tensor_gflops(device)
    fp16 = fp16_device(device, peak)
    return rows.assign(gflop=2 * rows["B"] * rows["M"] * rows["N"] * rows["K"] / 1e9,
                       pred_neusight=predict_fp16(rows, device, peak, predict),
                       pred_neusight_uncapped=predict(rows, fp16),
                       pred_roofline=predict_kernels(rows, fp16, method="roofline"),
                       pred_fp32=predict(rows, device))


def fp16_scores(df: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    """Per FP16_METHODS method (and `by` group) of fp16_forecasts rows: kernels, MAPE (%) and the median, smallest
    and largest forecast / measured (notebook 04)."""
    by = by or []
    rows = []
    for key, d in (df.groupby(by, sort=True, observed=True) if by else [((), df)]):
        group = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        for col, label in FP16_METHODS.items():
            ratio = d[col] / d["latency_ms"]
            rows.append({**group, "method": label, "kernels": len(d), "mape_pct": ape(d[col], d["latency_ms"]).mean(),
                         "median_ratio": ratio.median(), "min_ratio": ratio.min(), "max_ratio": ratio.max()})
    return pd.DataFrame(rows, columns=[*by, "method", "kernels", "mape_pct", "median_ratio", "min_ratio", "max_ratio"])


def tensor_gflops(device: Device, path: Path | str | None = None) -> float:
    """Dense fp16 tensor-core peak (GFLOP/s): the device JSON's FP16_TENSOR_KEY, else FP16_TENSOR_GFLOPS by name."""
    path = Path(path or device.path) if (path or device.path) else None
    raw = json.loads(path.read_text(encoding="utf-8")) if path and path.is_file() else {}
    if FP16_TENSOR_KEY in raw:
        value = raw[FP16_TENSOR_KEY]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise PrecisionError(f"{path}: field '{FP16_TENSOR_KEY}' must be a positive number (GFLOP/s), "
                                 f"got {value!r}")
        return float(value)
    if device.name in FP16_TENSOR_GFLOPS:
        return float(FP16_TENSOR_GFLOPS[device.name])
    raise PrecisionError(f"{path or device.name}: no fp16 tensor-core peak for {device.name}; add the field "
                         f"'{FP16_TENSOR_KEY}' (dense fp16 GFLOP/s, from the GPU's datasheet) to the device JSON")


def fp16_note(device: Device) -> str:
    """The warning every fp16 forecast of lib.kernels carries: what it extrapolates from (notebook 04)."""
    return (f"{device.name}: forecast by predictors that learned fp32 CUDA-core kernels only, with the fp16 peak "
            f"({device.peak_gflops:g} GFLOP/s) and twice the bandwidth, L2 and memory (lib.precision); an "
            "extrapolation, scored on the dataset's nine H100 fp16 BMMs and on our H200's fp16 BMMs and linear layers "
            "(notebook 04)")


def fp16_bmm_measurements(path: Path | str = FP16_BMM_CSV) -> pd.DataFrame:
    """The dataset's fp16 H100 BMMs: op, B, M, N, K, latency_ms, device (notebook 04)."""
    try:
        raw = pd.read_csv(path)
    except FileNotFoundError:
        raise PrecisionError(f"{path}: not found (make data materializes the dataset)") from None
    missing = [c for c in ("B", "M", "N", "K", "Latency") if c not in raw.columns]
    if missing:
        raise PrecisionError(f"{path}: missing column(s) {', '.join(missing)}")
    out = raw[["B", "M", "N", "K"]].astype(int).assign(latency_ms=raw["Latency"].astype(float))
    return out.assign(op="bmm", device=FP16_BMM_DEVICE)[["op", "B", "M", "N", "K", "latency_ms", "device"]]
