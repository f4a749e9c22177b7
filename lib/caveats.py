"""What a forecast cannot vouch for: a spec outside the training GPUs' range, a device file that is not one NVIDIA GPU,
a spec field that looks like other units or a training GPU's name with another spec, a model or a kernel too large for
the GPU's memory, a model config naming another class than the one built. The CLIs print these on stderr
(notebook 05)."""
from __future__ import annotations

import re
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
                "group's spec as a single GPU's, which nothing here validates")
    if device.vendor != "nvidia":
        return (f"{device.name} is not an NVIDIA GPU: NeuSight forecasts it with the models trained on the AMD MI100 "
                "and MI210 (lib.amd; notebook 06 scores them on the MI250's labels, and finds the softmax of rows of "
                "up to 1,024 elements, ROCm's warp kernel, forecast too slow), with GEMM tiles from a classifier "
                "of those GPUs' tiles; the Habitat-style baseline and --calibrate with NVIDIA's; element-wise, softmax "
                "and layernorm kernels are tiled by CUDA's launch rules, which ROCm's need not follow")
    if device.name in TRAIN_GPUS_NVIDIA:
        return None
    known = [d for d in all_devices().values() if d.name in TRAIN_GPUS_NVIDIA]
    lo, hi = (f(balance_flop_per_byte(d) for d in known) for f in (min, max))
    b = balance_flop_per_byte(device)
    if lo <= b <= hi:
        return None
    return (f"{device.name}'s machine balance ({b:.1f} FLOP/byte) lies outside the training GPUs' "
            f"({lo:.1f}-{hi:.1f}); its forecasts extrapolate and can be far off for some kernels (notebook 05)")


# A lower bound on a run's memory: fp32 weights (4 B per parameter); in training, at the forward's end the tensors
# autograd saves for the backward (A bytes, lib.sharding.activation_bytes) are all held, and at the backward's end a
# gradient per weight, so the peak holds the weights and at least the larger of the two; workspaces and the CUDA
# context come on top:
#     min_memory_gb = 4 * parameters / 1e9                                   (inference)
#     min_memory_gb = (4 * parameters + max(4 * parameters, A)) / 1e9        (training; A = 0 where not counted)
FP32_BYTES_PER_PARAMETER = 4


def min_memory_gb(parameters: int, mode: str, saved_gb: float = 0.0) -> float:
    """fp32 weights, in training with the larger of their gradients and the saved activations (GB): a lower bound on
    a run's memory (notebook 05)."""
    weights_gb = FP32_BYTES_PER_PARAMETER * parameters / 1e9
    return weights_gb + (max(weights_gb, saved_gb) if mode == "training" else 0.0)


def activation_gb(config_path, batch: int, seq: int) -> float:
    """GB of the tensors autograd saves for the backward of one training forward of the whole model (lib.sharding's
    count on the meta device, cached beside the graphs) (notebook 05)."""
    from .model_config import load_config
    from .sharding import activation_bytes, saved_bytes_of
    saved = activation_bytes(config_path, batch, seq)
    return saved_bytes_of(saved, sum(load_config(config_path).num_layers)) / 1e9


def memory_bound_checks(memory):
    """lib.measured.memory_against_dataset's table (one training setting per row) with the setting's activation_gb and
    min_memory_gb: the bound beside the smallest GPU that ran the setting and our H200's measured peaks (notebook 05)."""
    import pandas as pd
    from . import paths
    from .graph import parameter_count
    rows = []
    for r in memory.itertuples():
        path = paths.MODEL_CONFIGS / f"{r.model}.json"
        saved = activation_gb(path, int(r.batch), int(r.seq))
        rows.append({"activation_gb": saved,
                     "min_memory_gb": min_memory_gb(parameter_count(path), "training", saved or 0.0)})
    return pd.concat([memory, pd.DataFrame(rows, index=memory.index)], axis=1)


def memory_note(parameters: int, mode: str, device, saved_gb: float | None = None) -> str | None:
    """One line when a model's fp32 weights (+ in training the larger of their gradients and the saved activations,
    saved_gb where counted) alone exceed a device's memory, else None (notebook 05)."""
    need_gb = min_memory_gb(parameters, mode, saved_gb or 0.0)
    if need_gb <= device.mem_gb:
        return None
    weights_gb = FP32_BYTES_PER_PARAMETER * parameters / 1e9
    if mode == "training" and (saved_gb or 0.0) > weights_gb:
        what = (f"weights ({weights_gb:.1f} GB, {parameters / 1e9:.2f} B parameters) and the activations autograd "
                f"saves for the backward ({saved_gb:.1f} GB)")
    else:
        what = (f"{'weights and gradients' if mode == 'training' else 'weights'} alone ({parameters / 1e9:.2f} B "
                "parameters)")
    return (f"the model's fp32 {what} need {need_gb:.1f} GB, more than {device.name}'s {device.mem_gb:g} GB: this run "
            "could not happen as forecast")


# One kernel's tensors (its inputs and output, lib.roofline's bytes: what the roofline reads and writes, or a 'mem'
# row's own bytes) must all be in the GPU's memory while it runs:
#     kernel_gb = bytes * (bytes_per_element / 4) / 1e9        (lib.roofline counts fp32, 4 bytes per element)
def kernel_memory_note(kernels, device, bytes_per_element: int = 4) -> str | None:
    """One line when some kernels' tensors alone exceed a device's memory, naming the first such row, else None
    (lib.kernels)."""
    import numpy as np
    from .kernel_input import MEM_OP
    from .roofline import flops_and_bytes
    mem = (kernels["op"] == MEM_OP).to_numpy()
    nbytes = np.zeros(len(kernels))
    if mem.any():
        nbytes[mem] = kernels.loc[mem, "bytes"].to_numpy(float)
    if (~mem).any():
        nbytes[~mem] = flops_and_bytes(kernels[~mem])[1] * bytes_per_element / 4
    need_gb = nbytes / 1e9
    over = np.flatnonzero(need_gb > device.mem_gb)
    if not len(over):
        return None
    first = over[0]
    return (f"{len(over)} of {len(kernels)} rows (the first: row {first}, {need_gb[first]:.3g} GB) have tensors that "
            f"alone need more than {device.name}'s {device.mem_gb:g} GB of memory: such kernels could not run on it as given")


def fusion_note(fusion: bool, mode: str) -> str | None:
    """One line when a forecast fuses a training pass, which no label validates, else None (notebook 05)."""
    if fusion and mode == "training":
        return ("--fusion in training mode fuses the backward pass too; every fused label of the dataset is inference, "
                "so this forecast is unvalidated")
    return None


def head_note(model_config, mode: str) -> str | None:
    """One line when a model config's `architectures` names another class than the one the forecast builds, else None
    (notebook 05). The class follows the labels (lib.model_config.ARCHS): a BERT config is built as the dataset's BERT-Large
    labels ran, with a classification head for inference and BertForPreTraining for training."""
    from .model_config import ARCHS, load_config
    cfg = load_config(model_config)
    built = ARCHS[cfg.model_type][0 if mode == "inference" else 1]
    named = cfg.raw.get("architectures")
    if not isinstance(named, list) or not named or built in named:
        return None
    return (f"{cfg.path.name} names {', '.join(map(str, named))} in 'architectures'; the {mode} forecast builds "
            f"{built}, the class it takes for model_type '{cfg.model_type}' (for the paper's models, what the labels "
            "ran), so its head may differ from the named one")


# A spec field off by an order of magnitude from every known GPU of its vendor is most likely in other units
# (TFLOP/s for GFLOP/s, TB/s for GB/s, KB for MB, GHz for MHz). An NVIDIA GPU's fp32 peak is its FMA rate:
#     SingleFLOPs [GFLOP/s] = 2 * Num_Sm * Core_Per_SM * Freq [MHz] / 1000
# which every NVIDIA file of the dataset and of data/devices/ meets within 4% (P100's file: 0.96), the dataset's
# tensor-parallel group file (*_TP.json, skipped by the check) aside.
SPEC_FIELDS = {"Dev_Mem": "mem_gb", "Mem_Bw": "mem_bw_gbps", "Num_Sm": "num_sm", "Core_Per_SM": "cores_per_sm",
               "Freq": "freq_mhz", "L2Cache": "l2_mb", "SingleFLOPs": "peak_gflops"}
UNITS_FACTOR = 10.0       # "far outside": beyond the known GPUs' range by more than this factor
FMA_PEAK_TOLERANCE = 1.5  # SingleFLOPs within this factor of the FMA rate (a base clock given for the boost: ~1.6)
MEGA_PER_GIGA = 1000


def _name_key(name: str) -> str:
    """A GPU name in lower case with every run of other characters than letters and digits one space."""
    return " ".join(re.split(r"[^a-z0-9]+", name.casefold())).strip()


def spec_notes(device) -> list[str]:
    """Lines on a device file's spec that a forecast cannot check: a training GPU's name with another spec or in
    other spelling, a name that names no vendor, a field in other units, an fp32 peak off the FMA rate (notebook 05)."""
    from .devices import TRAIN_GPUS_NVIDIA, VENDOR_WORDS, all_devices
    if device.vendor != "nvidia" or Path(device.path).stem.endswith("_TP"):
        return []   # extrapolation_note has said these are unvalidated
    known = all_devices()
    notes = []
    if device.name in TRAIN_GPUS_NVIDIA:
        ref = known[device.name]
        changed = [k for k, f in SPEC_FIELDS.items() if getattr(device, f) != getattr(ref, f)]
        if changed:
            notes.append(f"{device.name} is a training GPU's name, so its forecasts use the model that learned that "
                         f"GPU's own efficiency, but {device.path} gives it another spec ({', '.join(changed)}) than "
                         f"{ref.path}; to forecast a GPU with this spec as one never trained on, give it another name")
    else:
        near = [t for t in TRAIN_GPUS_NVIDIA if _name_key(t) == _name_key(device.name)]
        if near:
            notes.append(f"{device.name} is spelled unlike the training GPU '{near[0]}', so it is forecast as a GPU "
                         f"never trained on; name it '{near[0]}' exactly to use the model that learned that GPU's "
                         "own efficiency")
    # parse_device's rule (a vendor word, whole, in any case), kept there inline: devices.py is in the data fingerprint
    words = [w.casefold() for w in VENDOR_WORDS["nvidia"] + VENDOR_WORDS["amd"]]
    if not set(_name_key(device.name).split()) & set(words):
        notes.append(f"'{device.name}' names no vendor, so it is read as an NVIDIA GPU (its file gives "
                     "'SingleFLOPs'); a forecast for another vendor's GPU is unvalidated")
    same_vendor = [d for d in known.values() if d.vendor == "nvidia"]
    far = []
    for key, f in SPEC_FIELDS.items():
        lo, hi = (g(getattr(d, f) for d in same_vendor) for g in (min, max))
        if not lo / UNITS_FACTOR <= (value := getattr(device, f)) <= hi * UNITS_FACTOR:
            far.append(f"'{key}' = {value:g} (known: {lo:g} to {hi:g})")
    if far:
        verb = "lies" if len(far) == 1 else "lie"
        notes.append(f"{device.path}: {', '.join(far)} {verb} more than {UNITS_FACTOR:g} times outside every known "
                     "NVIDIA GPU's range; check the units (README, 'Forecast a model on a GPU')")
    fma_gflops = 2 * device.num_sm * device.cores_per_sm * device.freq_mhz / MEGA_PER_GIGA
    ratio = device.peak_gflops / fma_gflops
    if not 1 / FMA_PEAK_TOLERANCE <= ratio <= FMA_PEAK_TOLERANCE:
        notes.append(f"{device.path}: 'SingleFLOPs' ({device.peak_gflops:g} GFLOP/s) is {ratio:.3g} times "
                     f"2 x Num_Sm x Core_Per_SM x Freq ({fma_gflops:g} GFLOP/s); check the units, and that 'Freq' is "
                     "the boost clock in MHz")
    return notes
