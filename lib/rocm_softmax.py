"""ROCm's softmax kernels: which one runs a row, and what the AMD softmax models learn of it (notebook 06).

CUDA's PyTorch, which the NVIDIA dataset ran, softmaxes a row of at most 1,024 elements with a warp kernel and a longer
one with cunn_SoftMaxForward (lib.tiles). ROCm's PyTorch, which the AMD dataset ran, has a third kernel for long rows,
cunn_SoftMaxForwardSmem. Amendment A3 (rocm_softmax_vec) sets the AMD softmax rows' f_vec for it, amendment A4
(rocm_softmax_inputs, AMD_SMEM_INPUT) adds an input that names it; lib.amd trains the models with them. The rest of
this module is their evidence: the AMD rows' kernels by name (softmax_rows, softmax_kernels) and two probes of a
trained model (softmax_twins, f_vec_response).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .data import load_kernels
from .devices import TRAIN_GPUS_AMD
from .features import add_features
from .predictors import NeuSightPredictor
from .tiles import SOFTMAX_ILP, SOFTMAX_WARP_MAX_H, softmax_block_threads, softmax_vector_share

# Amendment A3 (notebook 06; made after every inference label's softmax had been seen forecast too slow, decided from
# the AMD training rows' kernel names and PyTorch's dispatch before its effect on any held-out kernel or label was
# computed, and the default whatever that effect): for rows over 1,024 elements ROCm's PyTorch runs
# cunn_SoftMaxForwardSmem wherever it can (host_softmax), which stages the row in shared memory through 4-vector loads
# alone. The dataset's NVIDIA PyTorch has no such kernel; lib.features' f_vec counts the 4-vector loads of
# cunn_SoftMaxForward, which it runs for every such row. The shared-memory kernel runs where (fp32, aligned pointers)
#   H > 1024,  H mod 4 = 0  and  H < (LDS bytes per block - 4 x threads / 64) / 4
# (threads: lib.tiles.softmax_block_threads; 64: ROCm's wavefront, C10_WARP_SIZE), and there
#   f_vec = 1
AMD_LDS_BYTES = 65536    # shared memory per block (sharedMemPerBlock) of the MI100, MI210 and MI250
ROCM_WARP_SIZE = 64


def smem_softmax(H) -> np.ndarray:
    """Per row length: does ROCm's PyTorch run softmax over it with cunn_SoftMaxForwardSmem (fp32; amendment A3)?"""
    H = np.asarray(H, dtype=float)
    max_elements = (AMD_LDS_BYTES - 4 * softmax_block_threads(H) / ROCM_WARP_SIZE) / 4
    return (H > SOFTMAX_WARP_MAX_H) & (np.mod(H, SOFTMAX_ILP) == 0) & (H < max_elements)


def rocm_softmax_kernel(H) -> np.ndarray:
    """Per row length: the softmax kernel ROCm's PyTorch runs (fp32): 'warp', 'smem' or 'block' (amendment A3)."""
    H = np.asarray(H, dtype=float)
    return np.where(H <= SOFTMAX_WARP_MAX_H, "warp", np.where(smem_softmax(H), "smem", "block"))


def rocm_softmax_vec(feat: pd.DataFrame) -> pd.DataFrame:
    """A featured table with f_vec = 1 on the softmax rows that run ROCm's shared-memory kernel (amendment A3;
    notebook 06)."""
    if "H" not in feat:
        return feat
    smem = (feat["op"].to_numpy() == "softmax") & smem_softmax(np.nan_to_num(feat["H"].to_numpy(float), nan=1.0))
    return feat.assign(f_vec=np.where(smem, 1.0, feat["f_vec"].to_numpy(float))) if smem.any() else feat


# Amendment A4, decided with its criterion before any A4 model was trained or scored: A3 put the shared-memory rows at
# f_vec = 1, the end of a feature whose other values belong to the block kernel, and the models fitted a smooth trend
# along it (f_vec_response), so they forecast those rows much as the block kernel's (softmax_twins). A4 gives the AMD
# softmax model one more input, on top of A3's, that names the kernel:
#   f_smem = 1 where ROCm's PyTorch runs cunn_SoftMaxForwardSmem (smem_softmax), else 0
# It is the AMD models' default (AMD_SMEM_INPUT) only if its softmax MAPE on the held-out shapes of both AMD GPUs,
# forecast by the 'shapes' models, is lower than A3's (lib.amd_eval.smem_input_choice): no row of a GPU never trained
# on, no label.
# Notebook 06 made the choice (06-amd-a4-choice.csv, tests hold the constant to it): 6.3% against A3's 7.4%.
SMEM_FEATURE = "f_smem"
AMD_SMEM_INPUT = True


def rocm_softmax_inputs(feat: pd.DataFrame) -> pd.DataFrame:
    """rocm_softmax_vec's table with the column f_smem: 1 on the softmax rows that run ROCm's shared-memory kernel,
    else 0 (amendment A4; notebook 06)."""
    out = rocm_softmax_vec(feat)
    H = out["H"].to_numpy(float) if "H" in out else np.full(len(out), np.nan)
    smem = (out["op"].to_numpy() == "softmax") & smem_softmax(np.nan_to_num(H, nan=1.0))
    return out.assign(**{SMEM_FEATURE: smem.astype(float)})


# A3's evidence, from the AMD training rows' kernel names: per GPU and the kernel a row ran (warp: softmax_warp_forward,
# block: cunn_SoftMaxForward, smem: cunn_SoftMaxForwardSmem), the rows, the share whose kernel rocm_softmax_kernel names,
# lib.features' f_vec (CUDA's rule) and A3's, and the median time per element of the rows over LARGE_SOFTMAX_ELEMENTS:
#   ns_per_element = latency_ms x 1e6 / (B x H)
LARGE_SOFTMAX_ELEMENTS = 1e7


def softmax_rows() -> pd.DataFrame:
    """Every AMD training softmax row (load_kernels' columns) with the kernel it ran (from its name), whether
    rocm_softmax_kernel names it (agrees), f_vec by CUDA's rule and by A3's, elements (B x H) and ns_per_element
    (notebook 06)."""
    df = load_kernels(ops="softmax", devices=list(TRAIN_GPUS_AMD), vendor="amd")
    name = df["kernel_name"]
    kernel = np.where(name.str.contains("SoftMaxForwardSmem"), "smem",
                      np.where(name.str.contains("softmax_warp_forward"), "warp", "block"))
    cuda_vec = softmax_vector_share(df["H"])
    elements = df["B"] * df["H"]
    return df.assign(kernel=kernel, agrees=rocm_softmax_kernel(df["H"]) == kernel, f_vec_cuda=cuda_vec,
                     f_vec_a3=np.where(smem_softmax(df["H"]), 1.0, cuda_vec), elements=elements,
                     ns_per_element=df["latency_ms"] * 1e6 / elements)


def softmax_kernels(rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per AMD training GPU and softmax kernel (rows: softmax_rows(), the default): rows, rule_share
    (rocm_softmax_kernel names it), the range of f_vec by CUDA's rule and by A3's, and the large rows' count and median
    ns per element (notebook 06)."""
    t = softmax_rows() if rows is None else rows
    large = (t[t["elements"] > LARGE_SOFTMAX_ELEMENTS].groupby(["device", "kernel"])["ns_per_element"]
             .agg(large_rows="size", ns_per_element="median"))
    return (t.groupby(["device", "kernel"])
             .agg(rows=("agrees", "size"), rule_share=("agrees", "mean"), f_vec_cuda_min=("f_vec_cuda", "min"),
                  f_vec_cuda_max=("f_vec_cuda", "max"), f_vec_a3_min=("f_vec_a3", "min"), f_vec_a3_max=("f_vec_a3", "max"))
             .join(large).reset_index())


# Whether a model tells the two block kernels apart: twin softmax shapes, B rows of H elements (a multiple of 4, the
# shared-memory kernel) and of H - 1 (the block kernel), forecast on one AMD GPU's spec; per pair
#   smem_over_block = (forecast ms / (B x H)) / (forecast ms / (B x (H - 1)))      [time per element]
TWIN_LENGTHS = (1028, 1536, 2048, 3072, 4000)
TWIN_ROWS = (4096, 65536)


def softmax_twins(models: dict, device: str = TRAIN_GPUS_AMD[1]) -> pd.DataFrame:
    """Per twin pair (TWIN_ROWS x TWIN_LENGTHS): the forecast ns per element of the shared-memory row and of the block row
    one element shorter, and smem_over_block, by models (lib.amd.amd_predictors') on device's spec (notebook 06)."""
    from .devices import device_by_name
    from .kernels import predict_kernels
    pairs = pd.DataFrame([(b, h) for b in TWIN_ROWS for h in TWIN_LENGTHS], columns=["B", "H"])
    shapes = pd.concat([pairs.assign(op="softmax"), pairs.assign(op="softmax", H=pairs["H"] - 1)], ignore_index=True)
    ns = predict_kernels(shapes, device_by_name(device), cfg_by_class=models) * 1e6 / (shapes["B"] * shapes["H"])
    smem, block = ns[:len(pairs)].to_numpy(), ns[len(pairs):].to_numpy()
    return pairs.assign(device=device, smem_ns_per_element=smem, block_ns_per_element=block,
                        smem_over_block=smem / block)


# What a softmax model makes of f_vec alone: one block-kernel shape (F_VEC_PROBE: B rows of H elements, H - 1 of a twin),
# featured on one AMD GPU's spec, forecast with f_vec set to each of F_VEC_VALUES, every other input as it is.
F_VEC_PROBE = (TWIN_ROWS[-1], 2047)
F_VEC_VALUES = tuple(np.round(np.linspace(0, 1, 11), 1))


def f_vec_response(model: NeuSightPredictor, device: str = TRAIN_GPUS_AMD[1]) -> pd.DataFrame:
    """Per value of F_VEC_VALUES: a softmax model's forecast ns per element of F_VEC_PROBE on device's spec with f_vec set
    to it (notebook 06)."""
    from .devices import device_by_name
    B, H = F_VEC_PROBE
    shape = pd.DataFrame({"op": ["softmax"], "B": [B], "H": [float(H)]}).assign(**device_by_name(device).spec_columns())
    feat = add_features(shape, tiles="oracle")
    ms = [model.predict(feat.assign(f_vec=v))[0] for v in F_VEC_VALUES]
    return pd.DataFrame({"f_vec": F_VEC_VALUES, "ns_per_element": np.array(ms) * 1e6 / (B * H)})
