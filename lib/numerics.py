"""The numeric environment a predictor trains in: torch's thread count, MKL's kernels, the CPU and the library versions
(notebook 03). With code and data they decide the weights (docs/reproducibility.md), so
lib.train names its cache folder by them and records them in every trained model's info.
"""
from __future__ import annotations

import functools
import hashlib
import os
import platform
from importlib.metadata import version
from pathlib import Path

import torch


# Every predictor trains on the same number of torch threads, whatever the machine: a CPU matmul
# sums in an order set by its thread count, and over thousands of optimizer steps those last-bit
# differences grow into different weights (several MAPE points for the deep direct models). Pinned,
# a rerun on a machine like the reference one (same vector ISA, torch's cpu_capability) trains the
# same weights. 2 = the reference machine's cores; NEUSIGHT_TRAIN_THREADS overrides it.
def _train_threads() -> int:
    raw = os.environ.get("NEUSIGHT_TRAIN_THREADS", "2")
    if not raw.strip().isdigit() or int(raw) < 1:
        raise ValueError(f"NEUSIGHT_TRAIN_THREADS must be a positive integer, got {raw!r}")
    return int(raw)


TRAIN_THREADS = _train_threads()


# MKL picks its float32 matmul kernels by CPU unless MKL_CBWR pins them (lib/__init__ sets COMPATIBLE), and the order in
# which they sum decides the weights: on a 2-core AMD EPYC, COMPATIBLE changed them while torch's own ISA (avx2 or
# avx512) did not. Two runs whose fingerprints differ sum matmuls in another order.
@functools.cache
def blas_fingerprint() -> str:
    """md5 (12 hex digits) of one fixed float32 matmul on the training threads (PROVENANCE.json; docs/reproducibility.md)."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(1024, 256, generator=g), torch.randn(256, 512, generator=g)
    threads = torch.get_num_threads()
    torch.set_num_threads(TRAIN_THREADS)
    try:
        product = (a @ b).numpy()
    finally:
        torch.set_num_threads(threads)
    return hashlib.md5(product.tobytes()).hexdigest()[:12]


# The libraries that build a predictor's inputs (pandas, numpy) and train it (torch): another version may train
# other weights from the same code and data, so their versions name the cache folder (requirements.txt pins them).
TRAINING_LIBRARIES = ("torch", "numpy", "pandas")


@functools.cache
def library_versions() -> dict:
    """Installed version of each of TRAINING_LIBRARIES, e.g. {"torch": "2.13.0+cpu", ...} (notebook 03)."""
    return {name: version(name) for name in TRAINING_LIBRARIES}


@functools.cache
def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo, else platform.processor()): with the same vector ISA, MKL_CBWR and BLAS
    fingerprint, an Intel Xeon trained other weights than an AMD EPYC (docs/reproducibility.md)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def numeric_env() -> dict:
    """Thread count, CPU model, vector ISA, MKL's kernels and library versions, which with code and data decide the
    weights (notebook 03)."""
    return {"train_threads": TRAIN_THREADS, "cpu_model": cpu_model(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "mkl_cbwr": os.environ.get("MKL_CBWR", ""), "blas_fingerprint": blas_fingerprint(),
            "libraries": library_versions()}
