"""What a forecast cannot vouch for: a spec outside the training GPUs' range, a device file that is not one NVIDIA GPU,
a model too large for the GPU's memory. The CLIs print these as warnings on stderr (notebook 05)."""
from __future__ import annotations

from pathlib import Path


# Machine balance [FLOP per byte] = peak_gflops / mem_bw_gbps: the arithmetic intensity at which a
# kernel turns from memory-bound to compute-bound on that GPU.
def balance_flop_per_byte(device) -> float:
    """Peak fp32 FLOP/s per byte/s of memory bandwidth of a lib.devices.Device (notebook 05)."""
    return device.peak_gflops / device.mem_bw_gbps


def extrapolation_note(device) -> str | None:
    """One line when a device file describes a tensor-parallel group, or a GPU that is not NVIDIA's or whose machine
    balance lies outside the training GPUs' range, else None (notebook 05)."""
    from .devices import TRAIN_GPUS_NVIDIA, all_devices
    if Path(device.path).stem.endswith("_TP"):   # the dataset's name for a tensor-parallel group (lib.devices.device_files)
        return (f"{device.path} describes a group of GPUs for tensor parallelism, not one GPU: its forecasts treat the "
                "group's summed spec as a single GPU, which nothing here validates")
    if device.vendor != "nvidia":
        return (f"{device.name} is not an NVIDIA GPU: the NeuSight and Habitat-style predictors learned from NVIDIA "
                "GPUs only and tile its kernels by CUDA's launch rules, so its forecasts are unvalidated (AMD is "
                "future work)")
    if device.name in TRAIN_GPUS_NVIDIA:
        return None
    known = [d for d in all_devices().values() if d.name in TRAIN_GPUS_NVIDIA]
    lo, hi = (f(balance_flop_per_byte(d) for d in known) for f in (min, max))
    b = balance_flop_per_byte(device)
    if lo <= b <= hi:
        return None
    return (f"{device.name}'s machine balance ({b:.1f} FLOP/byte) lies outside the training GPUs' "
            f"({lo:.1f}-{hi:.1f}); its forecasts extrapolate and can be far off for some kernels (notebook 05)")


# A lower bound on a run's memory: fp32 weights (4 B per parameter), plus one gradient per weight in
# training; activations, workspaces and the CUDA context come on top:
#     min_memory_gb = 4 * parameters * (2 if training else 1) / 1e9
FP32_BYTES_PER_PARAMETER = 4


def min_memory_gb(parameters: int, mode: str) -> float:
    """fp32 weights (+ gradients in training) of a model, in GB: a lower bound on its memory (notebook 05)."""
    return FP32_BYTES_PER_PARAMETER * parameters * (2 if mode == "training" else 1) / 1e9


def memory_note(parameters: int, mode: str, device) -> str | None:
    """One line when a model's fp32 weights (+ gradients) alone exceed a device's memory, else None (notebook 05)."""
    need_gb = min_memory_gb(parameters, mode)
    if need_gb <= device.mem_gb:
        return None
    what = "weights and gradients" if mode == "training" else "weights"
    return (f"the model's fp32 {what} alone ({parameters / 1e9:.2f} B parameters) need {need_gb:.1f} GB, more than "
            f"{device.name}'s {device.mem_gb:g} GB: this run could not happen as forecast")
