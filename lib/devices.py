"""GPU specs from the dataset's device JSON format (introduced in notebook 01).

NVIDIA files give `SingleFLOPs` (fp32 GFLOP/s); AMD files give `SingleFLOPsMM` (matrix) and
`SingleFLOPsVEC` (vector) instead. Files this project adds (`data/devices/`) use the same keys
plus `Sources`, a mapping from key to the public document the number comes from.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from . import paths

# The evaluation protocol (DESIGN.md, contract): predictors train on these GPUs only.
TRAIN_GPUS_NVIDIA = ("Tesla P4", "Tesla P100-PCIE-16GB", "Tesla T4",
                     "Tesla V100-PCIE-32GB", "NVIDIA A100-PCIE-40GB")
TRAIN_GPUS_AMD = ("AMD Instinct MI100", "AMD Instinct MI210")
TRAIN_GPUS = TRAIN_GPUS_NVIDIA + TRAIN_GPUS_AMD

# JSON key -> (field, unit, plausible range) for the numeric fields every device file must have. The
# ranges reach far beyond any GPU built so far (about 100x each way); a value outside one is a units
# mistake (bytes/s given as GB/s) or a typo, and would make forecasts overflow rather than fail clearly.
NUMERIC_KEYS = {
    "Dev_Mem": ("mem_gb", "GB", (0.1, 1e5)),
    "Mem_Bw": ("mem_bw_gbps", "GB/s", (1.0, 1e6)),
    "Num_Sm": ("num_sm", "count", (1, 1e5)),
    "Core_Per_SM": ("cores_per_sm", "count", (1, 1e5)),
    "Freq": ("freq_mhz", "MHz", (10.0, 1e5)),
    "L2Cache": ("l2_mb", "MB", (0.01, 1e5)),
}
# Words in a GPU's name that say its vendor (lib.devices.parse_device)
VENDOR_WORDS = {"nvidia": ("NVIDIA", "Tesla", "GeForce", "Quadro"), "amd": ("AMD", "Instinct", "Radeon")}
PEAK_RANGE_GFLOPS = (1.0, 1e8)   # SingleFLOPs, SingleFLOPsMM, SingleFLOPsVEC (fp32 GFLOP/s)
COUNT_KEYS = ("Num_Sm", "Core_Per_SM")   # whole numbers


class DeviceError(ValueError):
    """A device JSON that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class Device:
    """One GPU's spec sheet, units in the names (notebook 01)."""
    name: str
    vendor: str              # "nvidia" or "amd"
    mem_gb: float
    mem_bw_gbps: float
    num_sm: int
    cores_per_sm: int
    freq_mhz: float
    peak_gflops: float       # fp32 peak for matrix kernels (GEMM)
    peak_vec_gflops: float   # fp32 peak for vector kernels (equal to peak_gflops in a SingleFLOPs file)
    l2_mb: float
    path: str = ""

    def spec_columns(self) -> dict:
        """The spec as table columns (everything but name and path)."""
        d = asdict(self)
        d.pop("path")
        d["device"] = d.pop("name")
        return d


def _number(raw: dict, key: str, path: Path, unit: str, bounds: tuple) -> float:
    if key not in raw:
        raise DeviceError(f"{path}: missing field '{key}'")
    value = raw[key]
    if isinstance(value, bool):   # JSON true is not 1
        raise DeviceError(f"{path}: field '{key}' is not a number: {json.dumps(value)}")
    if not isinstance(value, (int, float)):
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise DeviceError(f"{path}: field '{key}' is not a number: {raw[key]!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise DeviceError(f"{path}: field '{key}' must be a positive number, got {raw[key]!r}")
    if key in COUNT_KEYS and value != int(value):
        raise DeviceError(f"{path}: field '{key}' must be a whole number, got {raw[key]!r}")
    low, high = bounds
    if not low <= value <= high:
        raise DeviceError(f"{path}: field '{key}' = {raw[key]!r} is outside the plausible range "
                          f"{low:g} to {high:g} {unit} (check its units)")
    return float(value)


def parse_device(raw: dict, path: Path | str = "<dict>") -> Device:
    """Validate one device JSON object and convert it to a Device."""
    path = Path(path)
    if not isinstance(raw, dict):
        raise DeviceError(f"{path}: expected a JSON object")
    name = raw.get("Device")
    if not isinstance(name, str) or not name.strip():
        raise DeviceError(f"{path}: missing field 'Device' (the GPU's name)")
    values = {field: _number(raw, key, path, unit, bounds) for key, (field, unit, bounds) in NUMERIC_KEYS.items()}
    if "SingleFLOPs" in raw:
        peak = peak_vec = _number(raw, "SingleFLOPs", path, "GFLOP/s", PEAK_RANGE_GFLOPS)
    elif "SingleFLOPsMM" in raw or "SingleFLOPsVEC" in raw:
        peak = _number(raw, "SingleFLOPsMM", path, "GFLOP/s", PEAK_RANGE_GFLOPS)
        peak_vec = _number(raw, "SingleFLOPsVEC", path, "GFLOP/s", PEAK_RANGE_GFLOPS)
    else:
        raise DeviceError(f"{path}: missing field 'SingleFLOPs' (or 'SingleFLOPsMM' and 'SingleFLOPsVEC')")
    # vendor: the name decides where it names exactly one (whole words, any case, between any non-alphanumerics, so
    # "AMD_Instinct_MI300X" too); otherwise the peak's format does (SingleFLOPs: NVIDIA's files, which then ignore
    # SingleFLOPsMM / SingleFLOPsVEC)
    named = {v for v, words in VENDOR_WORDS.items()
             if re.search(rf"(?<![a-z0-9])({'|'.join(words)})(?![a-z0-9])", name, re.IGNORECASE)}
    vendor = named.pop() if len(named) == 1 else "nvidia" if "SingleFLOPs" in raw else "amd"
    return Device(name=name.strip(), vendor=vendor, peak_gflops=peak, peak_vec_gflops=peak_vec,
                  num_sm=int(values.pop("num_sm")), cores_per_sm=int(values.pop("cores_per_sm")),
                  path=str(path), **values)


def load_device(path: Path | str) -> Device:
    """Read and validate a device JSON file (dataset format)."""
    path = Path(path)
    if path.is_dir():
        raise DeviceError(f"{path}: is a folder; give the device JSON file")
    # A pipe (<(cat x.json)) is not a regular file and gets this message too; the CLIs refuse one first, by name
    # (lib.cli.file_path). Left so here: this module's code enters the dataset fingerprint
    # (lib.data.FINGERPRINT_CODE), and any change to it retrains every predictor.
    if not path.is_file():
        raise DeviceError(f"{path}: device file not found")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DeviceError(f"{path}: not valid JSON ({e.msg}, line {e.lineno})") from None
    except UnicodeDecodeError:
        raise DeviceError(f"{path}: not a UTF-8 text file (a JSON device spec is expected)") from None
    except OSError as e:
        raise DeviceError(f"{path}: cannot be read ({e.strerror})") from None
    return parse_device(raw, path)


def device_files() -> list[Path]:
    """Every single-GPU device JSON: the dataset's (NVIDIA, AMD) and the ones this project adds."""
    dirs = [paths.DEVICE_CONFIGS, paths.DEVICES_ADDED]
    files = [f for d in dirs if d.is_dir() for f in sorted(d.glob("*.json"))]
    return [f for f in files if not f.stem.endswith("_TP")]  # _TP: a tensor-parallel group's spec, not one GPU's


def all_devices() -> dict[str, Device]:
    """Device name -> Device for every known single GPU (dataset first, then additions)."""
    out: dict[str, Device] = {}
    for f in device_files():
        dev = load_device(f)
        out.setdefault(dev.name, dev)
    return out


def device_by_name(name: str) -> Device:
    """Look a GPU up by its `Device` name, e.g. 'Tesla T4' or 'NVIDIA H200'."""
    devices = all_devices()
    if name not in devices:
        raise DeviceError(f"unknown device '{name}'; known: {', '.join(sorted(devices))}")
    return devices[name]
