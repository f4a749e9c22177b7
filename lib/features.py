"""The predictor's inputs: per-tile work, waves and the five log-scaled features (notebook 02).

Units: FLOP, bytes (B), seconds. Per-SM quantities are device totals / num_sm:
peak_flops_per_sm [FLOP/s] = peak_gflops*1e9/num_sm (vector peak for non-GEMM ops),
mem_bw_per_sm [B/s] = mem_bw_gbps*1e9/num_sm, l2_per_sm [B] = l2_mb*1e6/num_sm,
mem_size_per_sm [B] = mem_gb*1e9/num_sm.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .ops import GEMM_OPS
from .roofline import add_roofline, peak_for_op
from .tiles import SOFTMAX_WARP_MAX_H, add_tiles, softmax_vector_share
from .waves import add_waves

FEATURES = ("f_flops", "f_bytes", "f_l2", "f_mem", "f_intensity")
# Beyond the paper: whether ONE wave's data fits in L2 (one tile per SM per wave, lib.waves).
# f_l2 compares the whole kernel's bytes with L2; a softmax or layernorm pass that re-reads its
# rows runs from L2 when a wave's rows fit there, from DRAM when they do not.
# For softmax, which of PyTorch's two kernels runs (f_softmax_block: 1 = cunn_SoftMaxForward, one block
# per row, for H > 1024; 0 = softmax_warp_forward), and f_vec: the share of a softmax row that kernel
# loads as 4-element vectors (lib.tiles), the rest one element at a time. Other ops: 0 and 1.
# f_fill (GEMMs; 1 for other ops): the useful share of the output tiles launched. Random training shapes leave
# the last tile of a row or column partly empty; the held-out shapes, multiples of 32, mostly fill theirs.
EXTRA_FEATURES = ("f_wave_l2", "f_vec", "f_softmax_block", "f_fill")
GIGA = 1e9
MEGA = 1e6


def add_features(df: pd.DataFrame, tiles: str = "oracle") -> pd.DataFrame:
    """Roofline + tiles + waves, per-tile work, and FEATURES.

    tiles='oracle': GEMM tiles parsed from kernel_name; tiles='given': the caller supplies
    tile_m / tile_n columns for GEMM rows (e.g. a spec-only tile choice).
    """
    out = add_waves(add_tiles(add_roofline(df), tiles=tiles))
    num_sm = out["num_sm"].astype(float)
    out["flops_per_tile"] = out["flops"] / out["num_tiles"]
    out["bytes_per_tile"] = out["bytes"] / out["num_tiles"]
    peak_flops = peak_for_op(out) * GIGA                       # FLOP/s
    mem_bw = out["mem_bw_gbps"].astype(float) * GIGA           # B/s
    peak_flops_per_sm = peak_flops / num_sm
    mem_bw_per_sm = mem_bw / num_sm
    l2_per_sm = out["l2_mb"].astype(float) * MEGA / num_sm     # B
    mem_size_per_sm = out["mem_gb"].astype(float) * GIGA / num_sm  # B
    wave_bytes = out["num_waves"] * out["bytes_per_tile"]
    # f_flops = log(flops_per_tile / peak_flops_per_sm)            [log s]
    out["f_flops"] = np.log(out["flops_per_tile"] / peak_flops_per_sm)
    # f_bytes = log(bytes_per_tile / mem_bw_per_sm)                [log s]
    out["f_bytes"] = np.log(out["bytes_per_tile"] / mem_bw_per_sm)
    # f_l2 = log(num_waves * bytes_per_tile / l2_per_sm)
    out["f_l2"] = np.log(wave_bytes / l2_per_sm)
    # f_mem = log(num_waves * bytes_per_tile / mem_size_per_sm)
    out["f_mem"] = np.log(wave_bytes / mem_size_per_sm)
    # f_wave_l2 = log(bytes_per_tile / l2_per_sm)
    out["f_wave_l2"] = np.log(out["bytes_per_tile"] / l2_per_sm)
    # f_vec = softmax_vector_share(H) for softmax rows, 1 otherwise            [share, not log-scaled]
    H = out["H"].to_numpy(float) if "H" in out else np.ones(len(out))
    softmax = out["op"].to_numpy() == "softmax"
    out["f_vec"] = np.where(softmax, softmax_vector_share(np.nan_to_num(H, nan=1.0)), 1.0)
    # f_softmax_block = 1 for softmax rows with H > SOFTMAX_WARP_MAX_H, else 0
    out["f_softmax_block"] = (softmax & (H > SOFTMAX_WARP_MAX_H)).astype(float)
    # f_fill = B M K / (num_tiles tile_m tile_n) for GEMM rows (output [B, M, K]), 1 otherwise     [share, not log-scaled]
    gemm = out["op"].isin(GEMM_OPS).to_numpy()
    out["f_fill"] = 1.0
    if gemm.any():
        g = out[gemm]
        out.loc[gemm, "f_fill"] = g["B"] * g["M"] * g["K"] / (g["num_tiles"] * g["tile_m"] * g["tile_n"])
    # f_intensity = log((flops_per_tile / bytes_per_tile) / (peak_flops / mem_bw))
    out["f_intensity"] = np.log((out["flops_per_tile"] / out["bytes_per_tile"]) / (peak_flops / mem_bw))
    return out
