"""Thread-block tiles: GEMM tiles from kernel names, vector-op tiles from launch rules (notebook 02).

Upstream naming: bmm/linear compute out[B, M, K] = A[B, M, N] @ W[B, N, K] (N is reduced).
`tile_m` is the output tile extent over M, `tile_n` the extent over K (the output's columns).

Libraries are column-major: cuBLAS / rocBLAS see out^T[K, M] = W^T A^T, so the FIRST tile
number in a cuBLAS/Tensile name (rows of the column-major C) covers upstream K and the SECOND
covers M; sm80 xmma names put M first. The orientation of every family below was checked against the
measured launch grid (grid_x*grid_y*grid_z blocks, AMD grid_x counted in work-items, so /block_x): see
`tile_grid_agreement`. Kernel-name families (NVIDIA and AMD data):
  {maxwell,volta,turing,ampere}_sgemm_<a>x<b>[_sliced1x4]_{nn,tn,..}   (a over K, b over M)
  sgemm_<a>x<b>x<k>_{NN,NT,TN}[_vec]                                   (a over K, b over M)
  sm80_xmma_gemm_..._tilesize<a>x<b>x<k>_...                          (a over M, b over K)
  cutlass_80_simt_sgemm_<a>x<b>_<k>x<stages>_..                        (a over K, b over M)
  Tensile Cijk_..._MT<a>x<b>x<k>_...  (AMD)                            (a over K, b over M)
Names with no tile in them (gemv, gemmSN, splitKreduce, ...) fall back to the launch grid:
tile_n = ceil(K / grid_x), tile_m = ceil(M / grid_y) (see `_tiles_from_grid`).

Vector ops (EW, softmax, LN) tile [B, H]; `vec_tile` gives PyTorch's (device-independent)
launch rule as (tile_elems, num_tiles).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .ops import FP32_BYTES, GEMM_OPS

# ---------------------------------------------------------------- GEMM tiles from the name

# (regex, swap): swap=False means group 1 covers upstream K (tile_n) and group 2 covers M (tile_m).
GEMM_NAME_PATTERNS = (
    (re.compile(r"_MT(\d+)x(\d+)x\d+"), False),                                 # AMD Tensile
    (re.compile(r"tilesize(\d+)x(\d+)x\d+"), True),                             # sm80 xmma
    (re.compile(r"cutlass_\d+_\w*?sgemm_(\d+)x(\d+)_\d+x\d+"), False),          # CUTLASS simt
    (re.compile(r"(?:^|_)sgemm_(\d+)x(\d+)x\d+_[NT][NT]"), False),              # sgemm_128x128x8_NT
    (re.compile(r"[a-z]+_sgemm_(?:largek_lds64|(\d+)x(\d+))"), False),          # maxwell/volta/ampere
)


def gemm_tile_from_name(kernel_name: str) -> tuple[int, int] | None:
    """(tile_m, tile_n): output tile over upstream M and over K, parsed from a GEMM kernel name."""
    if not isinstance(kernel_name, str):
        return None
    for pattern, swap in GEMM_NAME_PATTERNS:
        match = pattern.search(kernel_name)
        if match and match.group(1) is not None:
            over_k, over_m = int(match.group(1)), int(match.group(2))
            if swap:
                over_k, over_m = over_m, over_k
            return over_m, over_k
    return None


def _ceil_div(a, b):
    return np.ceil(np.asarray(a, dtype=float) / np.asarray(b, dtype=float))


def grid_blocks(df: pd.DataFrame) -> pd.Series:
    """Thread blocks launched: grid_x*grid_y*grid_z (AMD's grid_x counts work-items: / block_x)."""
    gx = df["grid_x"].astype(float)
    if "vendor" in df:
        amd = (df["vendor"] == "amd").to_numpy()
        gx = gx.where(~amd, np.ceil(gx / df["block_x"].astype(float)))
    return gx * df["grid_y"].astype(float) * df["grid_z"].astype(float)


def _tiles_from_grid(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Fallback tile for untiled names: tile_n = ceil(K / grid_x), tile_m = ceil(M / grid_y)."""
    gx = df["grid_x"].astype(float).to_numpy()
    if "vendor" in df:
        gx = np.where(df["vendor"] == "amd", np.ceil(gx / df["block_x"].astype(float)), gx)
    tile_n = _ceil_div(df["K"], np.maximum(gx, 1))
    tile_m = _ceil_div(df["M"], np.maximum(df["grid_y"].astype(float), 1))
    return tile_m, tile_n


def gemm_num_tiles(B, M, K, tile_m, tile_n):
    """num_tiles = B * ceil(M / tile_m) * ceil(K / tile_n) (output [B, M, K])."""
    return np.asarray(B, dtype=float) * _ceil_div(M, tile_m) * _ceil_div(K, tile_n)


# ---------------------------------------------------------------- vector ops: launch rules

# PyTorch vectorized_elementwise_kernel: 128 threads x 4 elements (thread_work_size) per block.
EW_ELEMS_PER_BLOCK = 512
# softmax_warp_forward is used when H <= 1024 (dispatch_softmax_forward); 128 threads per block.
SOFTMAX_WARP_MAX_H = 1024
SOFTMAX_WARP_THREADS = 128
WARP_SIZE = 32


def softmax_rows_per_block(H):
    """Rows per block of softmax_warp_forward: (128 / warp) warps x (2 if 2^ceil(log2 H) <= 128 else 1)."""
    H = np.asarray(H, dtype=float)
    pow2 = 2.0 ** np.ceil(np.log2(np.maximum(H, 1)))
    warp = np.minimum(pow2, WARP_SIZE)
    batches_per_warp = np.where(pow2 <= 128, 2, 1)
    return SOFTMAX_WARP_THREADS / warp * batches_per_warp


# cunn_SoftMaxForward<ILP = 4> (H > 1024), PyTorch 2.1 (the dataset's version):
#   threads per block = max(32, the least power of two >= floor(min(floor(H / 4), 1024) / 2))   (SoftMax_getBlockSize)
# Each of its passes over a row (max, sum, write) loads 4-element vectors over the row's aligned body
# (ilpReduce). A row starting s = (r*H) mod 4 elements past a 16-byte boundary (row r) first loads
# (threads - s) elements one at a time; then rest = H + s - threads (or H when s = 0) elements remain, of
# which the last (rest mod (4 * threads)) are loaded one at a time too.
SOFTMAX_ILP = 4
SOFTMAX_MAX_THREADS = 1024


def softmax_block_threads(H):
    """Threads per block of cunn_SoftMaxForward (used for H > 1024) by PyTorch's SoftMax_getBlockSize."""
    H = np.asarray(H, dtype=float)
    half = np.maximum(np.floor(np.minimum(np.floor(H / SOFTMAX_ILP), SOFTMAX_MAX_THREADS) / 2), 1)
    return np.maximum(2.0 ** np.ceil(np.log2(half)), WARP_SIZE)


def softmax_vector_share(H):
    """Share of a softmax row's elements loaded as 4-vectors, mean over the 4 row alignments; 0 for
    H <= 1024 (softmax_warp_forward loads one element at a time) (notebook 04)."""
    H = np.asarray(H, dtype=float)
    threads = softmax_block_threads(H)
    shares = []
    for r in range(SOFTMAX_ILP):          # rows r, r + 4, r + 8, ... start at the same misalignment
        s = np.mod(r * H, SOFTMAX_ILP)
        rest = np.where(s > 0, H + s - threads, H)
        scalar = np.where(s > 0, threads - s, 0) + np.mod(rest, SOFTMAX_ILP * threads)
        shares.append(1 - scalar / H)
    return np.where(H > SOFTMAX_WARP_MAX_H, np.clip(np.mean(shares, axis=0), 0, 1), 0.0)


# TensorIterator splits an EW op whose byte offsets overflow int32 into halves until each fits:
# launches = 2^ceil(log2(4*B*H / 2^31)) (>= 1), each launching num_tiles / launches blocks.
INT32_OFFSET_BYTES = 2.0 ** 31


def ew_launches(B, H):
    """Sub-launches of an element-wise op: 2^ceil(log2(4*B*H / 2^31)), at least 1."""
    ratio = FP32_BYTES * np.asarray(B, dtype=float) * np.asarray(H, dtype=float) / INT32_OFFSET_BYTES
    return 2.0 ** np.ceil(np.log2(np.maximum(ratio, 1.0)))


def vec_tile(op, B, H):
    """(tile_elems, num_tiles) of a [B, H] vector op by PyTorch's launch rule; vectorized over arrays.

    EW:      tile = 512 elements, num_tiles = ceil(B*H / 512) (all sub-launches, see ew_launches)
    softmax: H <= 1024: tile = rows_per_block * H, num_tiles = ceil(B / rows_per_block)
             H > 1024:  one block per row (cunn_SoftMaxForward): tile = H, num_tiles = B
    ln:      one block per row (vectorized_layer_norm_kernel): tile = H, num_tiles = B
    """
    op = np.broadcast_to(np.asarray(op, dtype=object), np.broadcast(B, H).shape) if np.ndim(op) == 0 \
        else np.asarray(op, dtype=object)
    B = np.asarray(B, dtype=float) * np.ones(op.shape)
    H = np.asarray(H, dtype=float) * np.ones(op.shape)
    is_softmax = op == "softmax"
    is_ln = op == "ln"
    rows = np.where(is_softmax & (H <= SOFTMAX_WARP_MAX_H), softmax_rows_per_block(H), 1.0)
    row_tile = rows * H
    tile = np.where(is_softmax | is_ln, row_tile, float(EW_ELEMS_PER_BLOCK))
    num = np.where(is_softmax | is_ln, np.ceil(B / rows), np.ceil(B * H / EW_ELEMS_PER_BLOCK))
    return tile, num


# ---------------------------------------------------------------- the table



def add_tiles(df: pd.DataFrame, tiles: str = "oracle") -> pd.DataFrame:
    """Add tile_m, tile_n (GEMM: over M and over K), tile_elems (vector ops) and num_tiles.

    tiles='oracle': GEMM tiles from kernel_name (grid fallback for untiled names);
    tiles='given':  keep the caller's tile_m / tile_n columns for GEMM rows.
    """
    if tiles not in ("oracle", "given"):
        raise ValueError(f"add_tiles: tiles must be 'oracle' or 'given', got {tiles!r}")
    for col in ("op", "B"):
        if col not in df:
            raise KeyError(f"add_tiles: missing column '{col}'")
    out = df.copy()
    gemm = out["op"].isin(GEMM_OPS).to_numpy()
    if tiles == "given":
        missing = [c for c in ("tile_m", "tile_n") if c not in out]
        if missing:
            raise KeyError(f"add_tiles(tiles='given'): missing column(s) {missing}")
        if out.loc[gemm, ["tile_m", "tile_n"]].isna().any().any():
            raise ValueError("add_tiles(tiles='given'): tile_m/tile_n are NaN on some GEMM rows")
    else:
        out["tile_m"] = np.nan
        out["tile_n"] = np.nan
        if gemm.any():
            parsed = out.loc[gemm, "kernel_name"].map(gemm_tile_from_name)
            ok = parsed.notna()
            out.loc[parsed.index[ok], "tile_m"] = [t[0] for t in parsed[ok]]
            out.loc[parsed.index[ok], "tile_n"] = [t[1] for t in parsed[ok]]
            if (~ok).any():
                rest = out.loc[parsed.index[~ok]]
                tm, tn = _tiles_from_grid(rest)
                out.loc[rest.index, "tile_m"] = tm
                out.loc[rest.index, "tile_n"] = tn
    out["tile_elems"] = np.nan
    out["num_tiles"] = np.nan
    if gemm.any():
        g = out.loc[gemm]
        out.loc[gemm, "num_tiles"] = gemm_num_tiles(g["B"], g["M"], g["K"], g["tile_m"], g["tile_n"])
        out.loc[gemm, "tile_elems"] = g["tile_m"] * g["tile_n"]  # output elements per tile
    vec = ~gemm
    if vec.any():
        v = out.loc[vec]
        tile, num = vec_tile(v["op"].to_numpy(), v["B"].to_numpy(), v["H"].to_numpy())
        out.loc[vec, "tile_elems"] = tile
        out.loc[vec, "num_tiles"] = num
    return out


def cutlass_swizzled_blocks(B, M, K, tile_m, tile_n):
    """Blocks CUTLASS launches with GemmIdentityThreadblockSwizzle<8>: tiles padded to the swizzle.

    log = 3 if tiles_k >= 6, 2 if >= 3, 1 if >= 2, else 0 (tiles_k = ceil(K / tile_n));
    blocks = B * (tiles_m << log) * ceil(tiles_k / 2^log).
    """
    tiles_m, tiles_k = _ceil_div(M, tile_m), _ceil_div(K, tile_n)
    log = np.select([tiles_k >= 6, tiles_k >= 3, tiles_k >= 2], [3, 2, 1], 0)
    return np.asarray(B, dtype=float) * tiles_m * 2.0 ** log * np.ceil(tiles_k / 2.0 ** log)


def tile_grid_agreement(df: pd.DataFrame) -> pd.DataFrame:
    """Per kernel family: share of GEMM rows whose num_tiles explains the launched blocks.

    exact: blocks == num_tiles; split_k: B == 1, grid_z > 1 reduction slices of num_tiles blocks
    each (AMD: blocks == num_tiles * GSU from the name); swizzle: CUTLASS swizzle padding
    (times split-K grid_z for B == 1); capped: B > 65535 with grid_z capped at 65535.
    """
    t = add_tiles(df[df["op"].isin(GEMM_OPS)])
    blocks = grid_blocks(t).to_numpy()
    tiles = t["num_tiles"].to_numpy()
    gz = t["grid_z"].astype(float).to_numpy()
    single = (t["B"] == 1).to_numpy()
    exact = np.isclose(blocks, tiles)
    gsu = t["kernel_name"].astype(str).str.extract(r"_GSU(\d+)_")[0].astype(float).fillna(1).to_numpy()
    split_k = ~exact & ((single & (gz > 1) & np.isclose(blocks / gz, tiles))
                        | ((gsu > 1) & np.isclose(blocks, tiles * gsu)))
    swz = cutlass_swizzled_blocks(t["B"], t["M"], t["K"], t["tile_m"], t["tile_n"])
    swizzle = ~exact & t["kernel_name"].astype(str).str.contains("cutlass").to_numpy() & \
        np.isclose(blocks, swz * np.where(single, gz, 1))
    capped = ~exact & (gz == 65535) & (t["B"] > 65535).to_numpy() & \
        np.isclose(blocks / 65535, tiles / t["B"].to_numpy())
    family = t["kernel_name"].astype(str).str.replace(r"\d+", "#", regex=True).str.slice(0, 60)
    flags = pd.DataFrame({"family": family.to_numpy(), "exact": exact, "split_k": split_k,
                          "swizzle": swizzle, "capped": capped,
                          "match": exact | split_k | swizzle | capped})
    return (flags.groupby("family").agg(rows=("match", "size"), exact=("exact", "mean"),
                                        split_k=("split_k", "mean"), swizzle=("swizzle", "mean"),
                                        capped=("capped", "mean"), match=("match", "mean"))
            .sort_values("rows", ascending=False))


def vec_grid_agreement(df: pd.DataFrame) -> pd.DataFrame:
    """Per (device, op): share of vector-op rows whose vec_tile blocks equal the measured grid."""
    t = add_tiles(df[~df["op"].isin(GEMM_OPS)])
    launches = np.where(t["op_class"] == "EW", ew_launches(t["B"], t["H"]), 1.0)
    per_launch = np.ceil(t["num_tiles"] / launches)
    # softmax_warp_forward runs in chunks of 2^30 // H rows (host_softmax); first chunk measured.
    warp = (t["op"] == "softmax") & (t["H"] <= SOFTMAX_WARP_MAX_H)
    chunk_rows = np.minimum(t["B"], np.floor(2.0 ** 30 / t["H"]))
    per_launch = np.where(warp, np.ceil(chunk_rows / softmax_rows_per_block(t["H"])), per_launch)
    t = t.assign(match=np.isclose(per_launch, grid_blocks(t)))
    return t.pivot_table(index="op", columns="device", values="match", aggfunc="mean")


# (tile_m, tile_n) pairs parsed from the training GPUs' GEMM kernel names in the NeuSight dataset:
# candidates for a spec-only tile choice. tests/test_tiles.py recomputes them from the data.
GEMM_TILE_CANDIDATES = frozenset({
    (32, 32), (32, 64), (32, 128), (64, 64), (64, 128), (128, 32), (128, 128),
})
GEMM_TILE_CANDIDATES_AMD = frozenset({
    (8, 16), (16, 16), (16, 64), (32, 32), (32, 64), (32, 128), (64, 16), (64, 32), (64, 64),
    (64, 128), (64, 144), (96, 64), (96, 96), (96, 128), (128, 64), (128, 96), (128, 128),
    (144, 64), (144, 128), (160, 128), (192, 64),
})


def gemm_tile_candidates(vendor: str = "nvidia") -> frozenset:
    """The (tile_m, tile_n) pairs parsed from training-GPU GEMM kernel names in the dataset."""
    from .data import load_kernels
    from .devices import TRAIN_GPUS
    df = load_kernels(ops=list(GEMM_OPS), vendor=vendor)
    df = df[df["device"].isin(TRAIN_GPUS)]
    return frozenset(t for t in df["kernel_name"].drop_duplicates().map(gemm_tile_from_name) if t)
