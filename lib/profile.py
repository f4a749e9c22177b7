"""Kernel-latency collector: time the dataset's ops on this GPU, write its CSV schema (notebook 01).

  python -m lib.profile --ops bmm,linear --dims train|test|DIMS.csv --output OUT.csv
                        [--repeat 30] [--warmup 10] [--sample N] [--seed 0] [--max-seconds S]
                        [--device-json OUT.json] [--overwrite] [--flush-l2 | --gpu-busy] [--dtype fp32|fp16]

The ops, shape lists, timing and kernel-trace parsing live in lib.profile_ops (re-exported here);
this module holds the collection loop, the dataset-schema CSV, the device JSON and the CLI.
"""
from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path

from . import paths
from .cli import Parser
from .measured import FLUSH_L2_FOLDER, GPU_BUSY_FOLDER, kernel_folder  # noqa: F401  (the reader's folder names)
from .profile_ops import (ALL_OPS, DIMS_LIST, DTYPE_BYTES, EW_OPS, FLUSH_L2_FACTOR, GEMM_DIMS,  # noqa: F401
                          GEMM_OPS, GPU_BUSY_CYCLES, KEEP_FRACTION, LABEL, SCALAR, SLOW_MS, VEC_DIMS, VEC_OPS,
                          ProfileError, build_op, check_dtype, dataset_dims_file, dims_of, fastest_mean,
                          footprint_bytes, gpu_spinner, kernel_columns, kernels_by_label, l2_flusher, profile_kernels,
                          read_dims, time_op)

# The dataset's CSV columns, in its order; the op's dims follow.
SCHEMA = ("OPName", "Latency", "Device", "Torch Version", "CUDNN Version", "Kernel Name",
          "Warps per SM", "Blocks per SM", "Grid x", "Grid y", "Grid z",
          "Block x", "Block y", "Block z", "CUDA Version", "Kernels")

# FP32 cores per SM by compute capability (the CUDA samples' helper_cuda.h _ConvertSMVer2Cores).
CORES_PER_SM = {(6, 0): 64, (6, 1): 128, (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64,
                (8, 6): 128, (8, 7): 128, (8, 9): 128, (9, 0): 128, (10, 0): 128, (12, 0): 128}


def write_rows(rows: list[dict], dims: tuple[str, ...], output: Path | str) -> Path:
    """Write rows in the dataset's CSV schema (SCHEMA then the dims columns), atomically."""
    output = Path(output)
    columns = list(SCHEMA) + list(dims)
    for i, row in enumerate(rows):
        missing = [c for c in ("OPName", "Latency", "Device", *dims) if c not in row]
        if missing:
            raise ProfileError(f"row {i}: missing {', '.join(missing)}")

    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore", restval="")
            w.writeheader()
            w.writerows(rows)
    output.parent.mkdir(parents=True, exist_ok=True)
    return paths.write_atomic(output, write)


def refuse_existing(path: Path, overwrite: bool) -> None:
    """ProfileError if `path` exists and overwrite is False: a rerun never replaces a measurement unasked (a folder:
    never)."""
    if Path(path).is_dir():
        raise ProfileError(f"{path} is a folder; give the path of a file to write")
    if not overwrite and Path(path).exists():
        raise ProfileError(f"{path} exists: delete it, or pass overwrite=True (--overwrite) to measure again")


def gpu_folder(name: str) -> str:
    """A GPU's name as a folder: 'NVIDIA H200' -> 'NVIDIA_H200' (the dataset's label folders)."""
    return name.replace(" ", "_").replace("/", "_")


def software_folder(torch) -> str:
    """'torch2.13.0_cuda12.8': the software a measurement ran on (notebook 01; data/measured/README.md)."""
    return f"torch{torch.__version__.split('+')[0]}_cuda{torch.version.cuda}"


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


def run_folder(torch, index: int = 0) -> str:
    """One folder per GPU and software: 'NVIDIA_H200_torch2.13.0_cuda12.8' (notebook 01; data/measured/README.md)."""
    return f"{gpu_folder(torch.cuda.get_device_name(index))}_{software_folder(torch)}"


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


def write_device_json(torch, path: Path) -> Path:
    """Write GPU 0's spec JSON (device_spec) to `path`, atomically (notebook 01)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return paths.write_atomic(path, lambda tmp: tmp.write_text(json.dumps(device_spec(torch), indent=4) + "\n"))


def sample_shapes(op: str, dims_arg: str, sample: int | None = None, seed: int = 0) -> list[tuple[int, ...]]:
    """The shapes collect() times for one op: its list ('train', 'test' or a file), or a seeded sample of N of them."""
    src = dataset_dims_file(op, dims_arg) if dims_arg in ("train", "test") else Path(dims_arg)
    shapes = read_dims(src, dims_of(op))
    if sample and sample < len(shapes):
        import random
        shapes = random.Random(seed).sample(shapes, sample)
    return shapes


# A GPU idles at a low clock (an H200 at 345 MHz) and needs a moment of load to reach its boost clock, longer than
# the warm-up calls of one small kernel, so the first shapes timed would run slow without a sign. Before anything is
# timed, fp32 GEMMs of 4096 x 4096 keep it busy for WARM_UP_S seconds of wall clock (a few ms each on a current GPU).
WARM_UP_S = 1.0
WARM_UP_N = 4096


def warm_up_clocks(torch, seconds: float = WARM_UP_S, clock=time.monotonic) -> int:
    """Keep GPU 0 busy with fp32 GEMMs for `seconds`, so its clocks are up before timing; returns how many ran (notebook 01)."""
    a = torch.randn(WARM_UP_N, WARM_UP_N, device="cuda")
    runs, end = 0, clock() + seconds
    while clock() < end:
        for _ in range(8):
            a @ a
        torch.cuda.synchronize()
        runs += 8
    return runs


# A kernel fails alone: an error in one (op, shape) is reported and skipped. The CSV is rewritten after every
# profiled batch, and an error the loop cannot survive (or Ctrl-C) first writes every latency timed so far, so
# only a killed process loses anything: the batch in flight.
def collect(ops: list[str], dims_arg: str, output: Path, warmup: int = 10, repeat: int = 30,
            sample: int | None = None, seed: int = 0, device_json: Path | None = None,
            chunk: int = 100, max_seconds: float | None = None, overwrite: bool = False,
            warm_up_s: float = 0.0, flush_l2: bool = False, dtype: str = "fp32", gpu_busy: bool = False) -> Path:
    """Measure every (op, shape) on GPU 0 and write one dataset-schema CSV, after warm_up_s seconds of
    warm_up_clocks; flush_l2: the L2 flushed before every timed call (l2_flusher), gpu_busy: the GPU kept busy
    before it (gpu_spinner), and dtype fp16 (GEMMs only), each unlike the dataset (notebook 01)."""
    for op in ops:
        check_dtype(op, dtype)
    check_before(flush_l2, gpu_busy)
    refuse_existing(output, overwrite)
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
    work = [(op, s) for op in ops for s in sample_shapes(op, dims_arg, sample, seed)]
    before = (l2_flusher(torch, torch.cuda.get_device_properties(0).L2_cache_size) if flush_l2
              else gpu_spinner(torch) if gpu_busy else None)
    if warm_up_s > 0:
        warm_up_clocks(torch, warm_up_s)
    rows, batch, calls, held, start = [], [], [], 0, time.monotonic()
    budget_bytes = 0.3 * torch.cuda.mem_get_info()[0]  # inputs kept alive until their batch is profiled

    def usable_bytes() -> int:
        """Free GPU memory, counting what torch's caching allocator holds but no tensor uses."""
        return torch.cuda.mem_get_info()[0] + torch.cuda.memory_reserved() - torch.cuda.memory_allocated()

    def flush():
        nonlocal held
        try:
            columns = profile_kernels(calls, num_sm)
        except RuntimeError as e:   # the latencies stand without kernel names
            print(f"kernel names of {len(calls)} shapes not recorded: {error_line(e)}", file=sys.stderr)
            columns = [{}] * len(calls)
        rows.extend({**row, **cols} for row, cols in zip(batch, columns))
        batch.clear(), calls.clear()
        held = 0
        torch.cuda.empty_cache()
        write_rows(rows, dims, output)

    try:
        for i, (op, shape) in enumerate(tqdm(work, desc="profile", unit="shape", file=sys.stderr)):
            if max_seconds and time.monotonic() - start > max_seconds:
                print(f"stopping after {max_seconds} s: {i} of {len(work)} shapes done", file=sys.stderr)
                break
            need = footprint_bytes(op, shape, dtype)
            if calls and (len(calls) >= chunk or held + need > budget_bytes):
                flush()
            if need > 0.8 * usable_bytes():
                print(f"skip {op} {shape}: needs {need / 1e9:.1f} GB, {usable_bytes() / 1e9:.1f} GB usable",
                      file=sys.stderr)
                continue
            fn = failed = None
            try:
                fn = build_op(op, shape, device="cuda", seed=seed, dtype=dtype)
                latency = time_op(fn, warmup, repeat, before=before)
            except RuntimeError as e:   # out of memory, a cuBLAS or launch error: this shape only
                print(f"skip {op} {shape}: {error_line(e)}", file=sys.stderr)
                if not isinstance(e, torch.cuda.OutOfMemoryError):
                    try:                 # an error that broke the CUDA context fails every later call: stop
                        torch.cuda.synchronize()
                    except RuntimeError:
                        raise e from None
                failed = True
            if failed:                   # outside the except: its traceback no longer holds the shape's tensors
                fn = None
                torch.cuda.empty_cache()
                continue
            batch.append({"OPName": op, "Latency": latency, **fixed, **dict(zip(dims, shape))})
            calls.append(fn)
            held += need
        if calls:
            flush()
    except BaseException:          # keep what was timed, kernel names or not, then stop as asked
        rows.extend(batch)
        if rows:
            write_rows(rows, dims, output)
            print(f"{output}: {len(rows)} rows kept after the error below", file=sys.stderr)
        raise
    tf32 = sorted({r["Kernel Name"] for r in rows if "tf32" in str(r.get("Kernel Name", "")).lower()})
    if tf32:
        print(f"warning: {len(tf32)} kernels ran in TF32, not fp32 as the dataset (e.g. {tf32[0]})", file=sys.stderr)
    out = write_rows(rows, dims, output)
    if device_json is not None:
        write_device_json(torch, device_json)
    print(f"{out}: {len(rows)} rows on {name}", file=sys.stderr)
    return out


def check_before(flush_l2: bool, gpu_busy: bool) -> None:
    """Refuse a flush and a busy GPU together: the flush keeps the GPU busy too, and the pair names no single effect."""
    if flush_l2 and gpu_busy:
        raise ProfileError("--flush-l2 and --gpu-busy exclude each other: a flush also keeps the GPU busy "
                           "(time one, then the other)")


def error_line(e: BaseException) -> str:
    """'OutOfMemoryError: CUDA out of memory. ...': the type and the first line of an error's message."""
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m lib.profile", description=__doc__.splitlines()[0])
    ap.add_argument("--ops", required=True, help=f"comma-separated, from {','.join(ALL_OPS)}")
    ap.add_argument("--dims", required=True, help="'train', 'test' (the dataset's lists) or a B;M;N;K / B;H file")
    ap.add_argument("--output", required=True, type=Path)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--sample", type=int, default=None, help="random subset of N shapes per op")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-seconds", type=float, default=None, help="stop (and write) after this long")
    ap.add_argument("--device-json", type=Path, default=None, help="also write the GPU's spec JSON here")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    ap.add_argument("--flush-l2", action="store_true",
                    help=f"overwrite {FLUSH_L2_FACTOR} x the L2's size before every timed call (the dataset did not)")
    ap.add_argument("--gpu-busy", action="store_true",
                    help=f"keep the GPU busy for {GPU_BUSY_CYCLES:,} cycles before every timed call, so the call is "
                         "queued and its launch gap untimed; the L2 is left as it was (the dataset did neither)")
    ap.add_argument("--dtype", default="fp32", choices=tuple(DTYPE_BYTES),
                    help="fp16: GEMMs on tensor cores (the dataset: fp32, TF32 off)")
    a = ap.parse_args(argv)
    try:
        ops = [o.strip() for o in a.ops.split(",") if o.strip()]
        for op in ops:
            dims_of(op)
        if a.repeat < 1 or a.warmup < 0:
            raise ProfileError("--repeat must be >= 1 and --warmup >= 0")
        collect(ops, a.dims, a.output, a.warmup, a.repeat, a.sample, a.seed, a.device_json,
                max_seconds=a.max_seconds, overwrite=a.overwrite, warm_up_s=WARM_UP_S, flush_l2=a.flush_l2,
                dtype=a.dtype, gpu_busy=a.gpu_busy)
    except ProfileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
