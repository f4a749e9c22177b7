"""Kernel-latency collector: time the dataset's ops on this GPU, write its CSV schema (notebook 01).

  python -m lib.profile --ops bmm,linear --dims train|test|DIMS.csv --output OUT.csv
                        [--repeat 30] [--warmup 10] [--sample N] [--max-seconds S]
                        [--device-json OUT.json]

Ops and their dims follow the dataset (upstream naming): bmm [B,M,N] @ [B,N,K]; linear feeds
[B,M,N] through Linear(N, K) with bias; element-wise ops, ln and softmax take [B,H] tensors.
Latency = mean of the fastest `KEEP_FRACTION` of `repeat` single calls, each timed with CUDA
events after `warmup` calls (the dataset README's method). Kernel names and launch geometry come
from the PyTorch profiler's trace (kernel events' args: grid, block, warps/blocks per SM).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import tempfile
import time
from pathlib import Path

from . import paths

GEMM_OPS = ("bmm", "linear")
EW_OPS = ("add", "addu", "mul", "mulu", "div", "divu", "pow", "powu", "relu", "gelu", "tanh")
VEC_OPS = EW_OPS + ("ln", "softmax")
ALL_OPS = GEMM_OPS + VEC_OPS
GEMM_DIMS = ("B", "M", "N", "K")
VEC_DIMS = ("B", "H")
KEEP_FRACTION = 0.5  # latency = mean of the fastest half of the timed calls
SLOW_MS = 50.0       # a first call slower than this gets at most 2 warmup and 6 timed calls
SCALAR = 1.5         # the scalar operand of the 'u' ops (x + 1.5, x * 1.5, x / 1.5, x ** 1.5)

# The dataset's CSV columns, in its order; the op's dims follow.
SCHEMA = ("OPName", "Latency", "Device", "Torch Version", "CUDNN Version", "Kernel Name",
          "Warps per SM", "Blocks per SM", "Grid x", "Grid y", "Grid z",
          "Block x", "Block y", "Block z", "CUDA Version", "Kernels")

# Dataset shape lists per op: data/neusight/data/dataset/dims/<split>_<list>.csv
DIMS_LIST = {"bmm": ("bmm", "bmm"), "linear": ("linear", "linear"), "ln": ("ln", "vec"),
             **{op: ("vec", "vec") for op in EW_OPS + ("softmax",)}}

# FP32 cores per SM by compute capability (the CUDA samples' helper_cuda.h _ConvertSMVer2Cores).
CORES_PER_SM = {(6, 0): 64, (6, 1): 128, (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64,
                (8, 6): 128, (8, 7): 128, (8, 9): 128, (9, 0): 128, (10, 0): 128, (12, 0): 128}


class ProfileError(RuntimeError):
    """Bad arguments or input files; the message names the file/field."""


def dims_of(op: str) -> tuple[str, ...]:
    """The dims columns of an op: B,M,N,K for GEMMs, B,H for the rest."""
    if op not in ALL_OPS:
        raise ProfileError(f"unknown op '{op}'; known: {', '.join(ALL_OPS)}")
    return GEMM_DIMS if op in GEMM_OPS else VEC_DIMS


def read_dims(path: Path | str, dims: tuple[str, ...]) -> list[tuple[int, ...]]:
    """Shapes from a dims file (`B;M;N;K` or `B;H` per line, no header; commas accepted too)."""
    path = Path(path)
    if not path.is_file():
        raise ProfileError(f"{path}: dims file not found")
    shapes = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = [f.strip() for f in line.replace(",", ";").split(";")]
        if lineno == 1 and fields[0] == dims[0]:
            continue  # a header line naming the dims
        if len(fields) != len(dims):
            raise ProfileError(f"{path}:{lineno}: expected {len(dims)} fields "
                               f"({';'.join(dims)}), got {len(fields)}: {line!r}")
        try:
            values = tuple(int(f) for f in fields)
        except ValueError:
            raise ProfileError(f"{path}:{lineno}: not integers: {line!r}") from None
        if min(values) <= 0:
            raise ProfileError(f"{path}:{lineno}: dims must be positive: {line!r}")
        shapes.append(values)
    if not shapes:
        raise ProfileError(f"{path}: no shapes")
    return shapes


def dataset_dims_file(op: str, split: str) -> Path:
    """The dataset's shape list of an op for split 'train' or 'test'."""
    train_list, test_list = DIMS_LIST[op]
    name = train_list if split == "train" else test_list
    return paths.NVIDIA_DATASET / "dims" / f"{split}_{name}.csv"


def footprint_bytes(op: str, shape: tuple[int, ...]) -> int:
    """fp32 bytes an op's inputs, weights and output occupy (4 bytes per element)."""
    if op in GEMM_OPS:
        B, M, N, K = shape
        weights = N * K + K if op == "linear" else B * N * K
        return 4 * (B * M * N + weights + B * M * K)
    B, H = shape
    return 4 * B * H * (3 if op in ("add", "mul", "div", "pow") else 2)


def build_op(op: str, shape: tuple[int, ...], device="cpu", seed: int = 0):
    """A zero-argument callable running one op on random fp32 tensors of `shape`."""
    import torch
    import torch.nn.functional as F

    dims_of(op)
    g = torch.Generator(device=device).manual_seed(seed)
    rand = lambda *s: torch.rand(*s, generator=g, device=device)  # noqa: E731  in [0, 1): pow stays real
    if op == "bmm":
        B, M, N, K = shape
        a, b = rand(B, M, N), rand(B, N, K)
        return lambda: torch.bmm(a, b)
    if op == "linear":
        B, M, N, K = shape
        layer = torch.nn.Linear(N, K, bias=True, device=device)
        x = rand(B, M, N)
        return lambda: layer(x)
    B, H = shape
    x = rand(B, H)
    y = rand(B, H) + 0.5 if op in ("add", "mul", "div", "pow") else None  # second operand
    if op == "ln":
        norm = torch.nn.LayerNorm(H, device=device)
        return lambda: norm(x)
    table = {
        "add": lambda: x + y, "addu": lambda: x + SCALAR,
        "mul": lambda: x * y, "mulu": lambda: x * SCALAR,
        "div": lambda: x / y, "divu": lambda: x / SCALAR,
        "pow": lambda: torch.pow(x, y), "powu": lambda: torch.pow(x, SCALAR),
        "relu": lambda: torch.relu(x), "gelu": lambda: F.gelu(x), "tanh": lambda: torch.tanh(x),
        "softmax": lambda: torch.softmax(x, dim=-1),
    }
    return table[op]


def time_op(fn, warmup: int = 10, repeat: int = 30) -> float:
    """Latency (ms): mean of the fastest KEEP_FRACTION of `repeat` CUDA-event-timed calls."""
    import torch

    first_s, first_e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    first_s.record()
    fn()
    first_e.record()
    torch.cuda.synchronize()
    if first_s.elapsed_time(first_e) > SLOW_MS:  # long kernels: few calls give a stable mean
        warmup, repeat = min(warmup, 2), min(repeat, 6)
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return fastest_mean([s.elapsed_time(e) for s, e in zip(starts, ends)])


def fastest_mean(times_ms: list[float], keep: float = KEEP_FRACTION) -> float:
    """Mean of the fastest ceil(keep * n) values."""
    if not times_ms:
        raise ValueError("no timings")
    n = max(1, math.ceil(keep * len(times_ms)))
    return float(sum(sorted(times_ms)[:n]) / n)


def kernels_by_label(trace: dict, prefix: str = "lib.profile:") -> dict[str, list[dict]]:
    """GPU kernels of each record_function(label) range in a chrome trace, in launch order.

    A kernel belongs to the label whose CPU range holds the runtime call that launched it
    (kernel and launch share args['correlation']).
    """
    events = trace.get("traceEvents", [])
    ranges = [(e["ts"], e["ts"] + e.get("dur", 0), e["name"]) for e in events
              if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(prefix)]
    launch_ts = {e["args"]["correlation"]: e["ts"] for e in events
                 if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    out: dict[str, list[dict]] = {name: [] for _, _, name in ranges}
    for k in sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"]):
        ts = launch_ts.get(k.get("args", {}).get("correlation"))
        for lo, hi, name in ranges:
            if ts is not None and lo <= ts <= hi:
                out[name].append(k)
                break
    return out


def kernel_columns(kernels: list[dict], num_sm: int) -> dict:
    """Schema columns from one call's kernels: the longest kernel's name and geometry, all names."""
    if not kernels:
        return {"Kernel Name": "", "Kernels": ""}
    main = max(kernels, key=lambda k: k.get("dur", 0))
    args = main.get("args", {})
    grid = list(args.get("grid", [1, 1, 1])) + [1, 1, 1]
    block = list(args.get("block", [1, 1, 1])) + [1, 1, 1]
    blocks = grid[0] * grid[1] * grid[2]
    # warps per SM = blocks x ceil(threads per block / 32) / SMs (the profiler's own value when given)
    warps = blocks * math.ceil(block[0] * block[1] * block[2] / 32)
    return {"Kernel Name": main["name"],
            "Warps per SM": args.get("warps per SM", warps / num_sm),
            "Blocks per SM": args.get("blocks per SM", blocks / num_sm),
            "Grid x": grid[0], "Grid y": grid[1], "Grid z": grid[2],
            "Block x": block[0], "Block y": block[1], "Block z": block[2],
            "Kernels": "".join(";" + k["name"] for k in kernels)}


def profile_kernels(calls: list, num_sm: int) -> list[dict]:
    """Run each callable once under the PyTorch profiler; kernel columns per call."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i, fn in enumerate(calls):
            with record_function(f"lib.profile:{i}"):
                fn()
            torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        trace_path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(trace_path))
        trace = json.loads(trace_path.read_text())
    found = kernels_by_label(trace)
    return [kernel_columns(found.get(f"lib.profile:{i}", []), num_sm) for i in range(len(calls))]


def write_rows(rows: list[dict], dims: tuple[str, ...], output: Path | str) -> Path:
    """Write rows in the dataset's CSV schema (SCHEMA then the dims columns)."""
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    columns = list(SCHEMA) + list(dims)
    for i, row in enumerate(rows):
        missing = [c for c in ("OPName", "Latency", "Device", *dims) if c not in row]
        if missing:
            raise ProfileError(f"row {i}: missing {', '.join(missing)}")
    with open(output, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore", restval="")
        w.writeheader()
        w.writerows(rows)
    return output


def require_cuda():
    """The CUDA torch module, or ProfileError('no CUDA GPU: ...')."""
    try:
        import torch
    except ImportError:
        raise ProfileError("no CUDA GPU: PyTorch is not installed") from None
    if not torch.cuda.is_available():
        raise ProfileError(f"no CUDA GPU: torch {torch.__version__} sees no CUDA device "
                           "(this collector needs an NVIDIA GPU; on CPU explore the dataset instead)")
    return torch


def versions(torch) -> dict:
    """The version columns as the dataset writes them (p2.1.0, 8902, cu121)."""
    cuda = torch.version.cuda or ""
    return {"Torch Version": "p" + torch.__version__.split("+")[0],
            "CUDNN Version": torch.backends.cudnn.version() or "",
            "CUDA Version": "cu" + cuda.replace(".", "")}


def device_spec(torch, index: int = 0) -> dict:
    """Device JSON (dataset keys) from torch/NVML; unreadable fields None, marked in Sources."""
    p = torch.cuda.get_device_properties(index)
    l2 = getattr(p, "L2_cache_size", 0)
    cores = CORES_PER_SM.get((p.major, p.minor))
    spec = {"Device": p.name, "Dev_Mem": round(p.total_memory / 2**30, 1), "Mem_Bw": None,
            "Num_Sm": p.multi_processor_count, "Core_Per_SM": cores, "Freq": None,
            "SingleFLOPs": None, "L2Cache": round(l2 / 2**20, 1) if l2 else None}
    src = {"Dev_Mem": "torch.cuda.get_device_properties().total_memory / 2^30 (GiB the driver "
                      "reports; datasheets round differently)",
           "Num_Sm": "torch.cuda.get_device_properties().multi_processor_count",
           "Core_Per_SM": f"compute capability {p.major}.{p.minor} -> CUDA samples _ConvertSMVer2Cores"
                          if cores else "NEEDS DATASHEET (unknown compute capability)",
           "L2Cache": "torch.cuda.get_device_properties().L2_cache_size / 2^20"
                      if l2 else "NEEDS DATASHEET"}
    try:  # NVML: max SM clock; bandwidth = max memory clock x 2 (DDR) x bus width / 8
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        spec["Freq"] = pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)
        mem_mhz = pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM)
        bus_bits = pynvml.nvmlDeviceGetMemoryBusWidth(h)
        spec["Mem_Bw"] = round(mem_mhz * 2 * bus_bits / 8 / 1000, 1)
        src["Freq"] = "NVML nvmlDeviceGetMaxClockInfo(SM) (MHz)"
        src["Mem_Bw"] = (f"NVML: {mem_mhz} MHz max memory clock x 2 x {bus_bits}-bit bus / 8; "
                         "prefer the datasheet figure")
    except Exception as e:  # noqa: BLE001  NVML missing or refused: say so in the file
        src["Freq"] = src["Mem_Bw"] = f"NEEDS DATASHEET (NVML unavailable: {type(e).__name__})"
    if spec["Freq"] and cores:
        # SingleFLOPs (GFLOP/s) = 2 FLOP/FMA x SMs x FP32 cores/SM x boost clock (GHz)
        spec["SingleFLOPs"] = round(2 * spec["Num_Sm"] * cores * spec["Freq"] / 1000)
        src["SingleFLOPs"] = "2 x Num_Sm x Core_Per_SM x Freq"
    else:
        src["SingleFLOPs"] = "NEEDS DATASHEET"
    spec["Sources"] = src
    return spec


def collect(ops: list[str], dims_arg: str, output: Path, warmup: int = 10, repeat: int = 30,
            sample: int | None = None, seed: int = 0, device_json: Path | None = None,
            chunk: int = 100, max_seconds: float | None = None) -> Path:
    """Measure every (op, shape) on GPU 0 and write one dataset-schema CSV."""
    torch = require_cuda()
    from tqdm import tqdm

    formats = {dims_of(op) for op in ops}
    if len(formats) > 1:
        raise ProfileError(f"ops {','.join(ops)} take different dims (B;M;N;K vs B;H): run them separately")
    dims = formats.pop()
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 like the dataset (PyTorch 2.1 default)
    torch.backends.cudnn.allow_tf32 = False
    name = torch.cuda.get_device_name(0)
    num_sm = torch.cuda.get_device_properties(0).multi_processor_count
    fixed = {"Device": name, **versions(torch)}
    work = []
    for op in ops:
        src = dataset_dims_file(op, dims_arg) if dims_arg in ("train", "test") else Path(dims_arg)
        shapes = read_dims(src, dims)
        if sample and sample < len(shapes):
            import random
            shapes = random.Random(seed).sample(shapes, sample)
        work += [(op, s) for s in shapes]
    rows, batch, calls, held, start = [], [], [], 0, time.monotonic()
    budget_bytes = 0.3 * torch.cuda.mem_get_info()[0]  # inputs kept alive until their batch is profiled

    def flush():
        nonlocal held
        for row, cols in zip(batch, profile_kernels(calls, num_sm)):
            rows.append({**row, **cols})
        batch.clear(), calls.clear()
        held = 0
        torch.cuda.empty_cache()

    for i, (op, shape) in enumerate(tqdm(work, desc="profile", unit="shape", file=sys.stderr)):
        if max_seconds and time.monotonic() - start > max_seconds:
            print(f"stopping after {max_seconds} s: {i} of {len(work)} shapes done", file=sys.stderr)
            break
        need = footprint_bytes(op, shape)
        if calls and (len(calls) >= chunk or held + need > budget_bytes):
            flush()
        free_bytes = torch.cuda.mem_get_info()[0]
        if need > 0.8 * free_bytes:
            print(f"skip {op} {shape}: needs {need / 1e9:.1f} GB, {free_bytes / 1e9:.1f} GB free",
                  file=sys.stderr)
            continue
        try:
            fn = build_op(op, shape, device="cuda", seed=seed)
            latency = time_op(fn, warmup, repeat)
        except torch.cuda.OutOfMemoryError:
            print(f"skip {op} {shape}: out of GPU memory", file=sys.stderr)
            torch.cuda.empty_cache()
            continue
        batch.append({"OPName": op, "Latency": latency, **fixed, **dict(zip(dims, shape))})
        calls.append(fn)
        held += need
    if calls:
        flush()
    out = write_rows(rows, dims, output)
    if device_json is not None:
        device_json.parent.mkdir(parents=True, exist_ok=True)
        device_json.write_text(json.dumps(device_spec(torch), indent=4) + "\n")
    print(f"{out}: {len(rows)} rows on {name}", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lib.profile", description=__doc__.splitlines()[0])
    ap.add_argument("--ops", required=True, help=f"comma-separated, from {','.join(ALL_OPS)}")
    ap.add_argument("--dims", required=True, help="'train', 'test' (the dataset's lists) or a B;M;N;K / B;H file")
    ap.add_argument("--output", required=True, type=Path)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--sample", type=int, default=None, help="random subset of N shapes per op")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-seconds", type=float, default=None, help="stop (and write) after this long")
    ap.add_argument("--device-json", type=Path, default=None, help="also write the GPU's spec JSON here")
    a = ap.parse_args(argv)
    try:
        ops = [o.strip() for o in a.ops.split(",") if o.strip()]
        for op in ops:
            dims_of(op)
        if a.repeat < 1 or a.warmup < 0:
            raise ProfileError("--repeat must be >= 1 and --warmup >= 0")
        collect(ops, a.dims, a.output, a.warmup, a.repeat, a.sample, a.seed, a.device_json,
                max_seconds=a.max_seconds)
    except ProfileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
