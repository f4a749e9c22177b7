"""Roofline: FLOPs, bytes and the compute/memory bound of each kernel (notebook 02).

Units: flops in FLOP, bytes in B, bandwidth in GB/s (1e9 B/s), peaks in GFLOP/s, time in ms.
fp32 everywhere (4 bytes per element). Upstream naming: out[B,M,K] = A[B,M,N] @ W[B,N,K].
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .ops import FP32_BYTES, GEMM_OPS


# FLOPs per output element of the element-wise ops (our choice, a small constant per op):
# add/mul/div/relu one arithmetic op; pow ~ exp+log+mul; tanh ~ exp-based formula;
# gelu (erf form) ~ erf + 3 mul/add. Only relative size matters to the learned model.
EW_FLOPS_PER_ELEM = {"add": 1, "addu": 1, "mul": 1, "mulu": 1, "div": 1, "divu": 1,
                     "relu": 1, "pow": 10, "powu": 10, "tanh": 8, "gelu": 10}
# Binary ops read two tensors; the 'u' forms (tensor op scalar) and unary ops read one. All write one.
EW_BINARY = ("add", "mul", "div", "pow")
# softmax per element: max, subtract, exp (~4), sum, divide; layernorm: mean, var (2), normalize, affine (2).
SOFTMAX_FLOPS_PER_ELEM = 8
LN_FLOPS_PER_ELEM = 7


def _col(df, name):
    if name not in df:
        raise KeyError(f"add_roofline: missing column '{name}'")
    return df[name].astype(float).to_numpy()


def flops_and_bytes(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(flops [FLOP], bytes [B]) per row from op and dimensions."""
    op = df["op"].to_numpy()
    unknown = sorted(set(op) - set(GEMM_OPS) - set(EW_FLOPS_PER_ELEM) - {"softmax", "ln"})
    if unknown:
        raise ValueError(f"add_roofline: unknown op(s) {unknown} in column 'op'")
    flops = np.full(len(df), np.nan)
    nbytes = np.full(len(df), np.nan)
    gemm = np.isin(op, GEMM_OPS)
    if gemm.any():
        B, M, N, K = (_col(df, c)[gemm] for c in "BMNK")
        linear = op[gemm] == "linear"
        # bmm:    flops = 2*B*M*N*K;             bytes = 4*B*(M*N + N*K + M*K)
        # linear: flops = 2*B*M*N*K + B*M*K (bias); bytes = 4*(B*M*N + N*K + K + B*M*K)
        flops[gemm] = 2 * B * M * N * K + np.where(linear, B * M * K, 0)
        nbytes[gemm] = FP32_BYTES * np.where(linear, B * M * N + N * K + K + B * M * K,
                                             B * (M * N + N * K + M * K))
    vec = ~gemm
    if vec.any():
        B, H = _col(df, "B")[vec], _col(df, "H")[vec]
        v = op[vec]
        elems = B * H
        per_elem = np.array([EW_FLOPS_PER_ELEM.get(o, 0) for o in v], dtype=float)
        per_elem = np.where(v == "softmax", SOFTMAX_FLOPS_PER_ELEM, per_elem)
        per_elem = np.where(v == "ln", LN_FLOPS_PER_ELEM, per_elem)
        flops[vec] = per_elem * elems
        # EW binary: read 2 + write 1 -> 12*B*H; unary/'u': 8*B*H; softmax: 8*B*H; ln: 8*B*H + 8*H
        tensors = np.where(np.isin(v, EW_BINARY), 3, 2)
        nbytes[vec] = FP32_BYTES * tensors * elems + np.where(v == "ln", 2 * FP32_BYTES * H, 0)
    return flops, nbytes


def peak_for_op(df: pd.DataFrame) -> np.ndarray:
    """Peak GFLOP/s that applies: matrix peak for GEMMs, vector peak for everything else."""
    gemm = df["op"].isin(GEMM_OPS).to_numpy()
    return np.where(gemm, _col(df, "peak_gflops"), _col(df, "peak_vec_gflops"))


def add_roofline(df: pd.DataFrame) -> pd.DataFrame:
    """Add flops, bytes, intensity [FLOP/B], bound_gflops [GFLOP/s], roofline_ms."""
    flops, nbytes = flops_and_bytes(df)
    # K = flops / bytes;  bound = min(K * mem_bw, peak);  roofline time = flops / bound
    intensity = flops / nbytes
    bound_gflops = np.minimum(intensity * _col(df, "mem_bw_gbps"), peak_for_op(df))
    roofline_ms = flops / (bound_gflops * 1e9) * 1e3
    return df.assign(flops=flops, bytes=nbytes, intensity=intensity,
                     bound_gflops=bound_gflops, roofline_ms=roofline_ms)
