"""Ops, shapes, timing and kernel-trace parsing of the kernel-latency collector lib.profile (notebook 01), and of a
whole model's kernels (kernels_by_op, lib.profile_model --kernels-out).

Ops and their dims follow the dataset (upstream naming): bmm [B,M,N] @ [B,N,K]; linear feeds
[B,M,N] through Linear(N, K) with bias; element-wise ops, ln and softmax take [B,H] tensors.
Latency = mean of the fastest `KEEP_FRACTION` of `repeat` single calls, each timed with CUDA
events after `warmup` calls (the dataset README's method). Kernel names and launch geometry come
from the PyTorch profiler's trace (kernel events' args: grid, block, warps/blocks per SM).
"""
from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

from . import paths
from .ops import EW_OPS, FP32_BYTES, GEMM_DIMS, GEMM_OPS, VEC_DIMS
from .model_kernels import OP_KERNEL_COLUMNS   # the columns notebook 05 reads back (lib.model_kernels)
from .precision import FP16_BYTES, FP16_OPS

VEC_OPS = EW_OPS + ("ln", "softmax")
# Kernels a training pass runs that the dataset never timed, from a dims file only: the backward kernels of softmax,
# layernorm (aten._softmax_backward_data, aten.native_layer_norm_backward with every gradient) and dropout
# (aten.native_dropout_backward), and dropout itself (aten.native_dropout, p = DROPOUT_P).
BACKWARD_OPS = ("softmax_bw", "ln_bw", "dropout_bw")
MODEL_OPS = BACKWARD_OPS + ("dropout",)
DROPOUT_P = 0.1   # the dropout probability of the dataset's model configs
ALL_OPS = GEMM_OPS + VEC_OPS + MODEL_OPS
KEEP_FRACTION = 0.5  # latency = mean of the fastest half of the timed calls
SLOW_MS = 50.0       # a second call slower than this gets at most 2 warmup and 6 timed calls
SCALAR = 1.5         # the scalar operand of the 'u' ops (x + 1.5, x * 1.5, x / 1.5, x ** 1.5)

LABEL = "lib.profile:"  # record_function label prefix of one profiled call: LABEL + index

# Dataset shape lists per op: data/neusight/data/dataset/dims/<split>_<list>.csv
DIMS_LIST = {"bmm": ("bmm", "bmm"), "linear": ("linear", "linear"), "ln": ("ln", "vec"),
             **{op: ("vec", "vec") for op in EW_OPS + ("softmax",)}}


class ProfileError(RuntimeError):
    """Bad arguments or input files; the message names the file/field."""


def dims_of(op: str) -> tuple[str, ...]:
    """The dims columns of an op: B,M,N,K for GEMMs, B,H for the rest."""
    if op not in ALL_OPS:
        raise ProfileError(f"unknown op '{op}'; known: {', '.join(ALL_OPS)}")
    return GEMM_DIMS if op in GEMM_OPS else VEC_DIMS


def read_dims(path: Path | str, dims: tuple[str, ...]) -> list[tuple[int, ...]]:
    """Shapes from a dims file (`B;M;N;K` or `B;H` per line, an optional first line naming the dims; commas too)."""
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
    if op not in DIMS_LIST:
        raise ProfileError(f"{op}: the dataset has no shape list for it; give --dims a B;H file")
    train_list, test_list = DIMS_LIST[op]
    name = train_list if split == "train" else test_list
    return paths.NVIDIA_DATASET / "dims" / f"{split}_{name}.csv"


# Bytes per element of the precisions the collector times: fp32 as the dataset, and fp16 for GEMMs on tensor cores
# (the kernels lib.precision forecasts; the dataset's own fp16 rows are nine H100 BMMs).
DTYPE_BYTES = {"fp32": FP32_BYTES, "fp16": FP16_BYTES}


def check_dtype(op: str, dtype: str) -> None:
    """ProfileError unless the collector times `op` in `dtype` (fp32: every op; fp16: the GEMMs) (notebook 01)."""
    if dtype not in DTYPE_BYTES:
        raise ProfileError(f"unknown dtype '{dtype}'; known: {', '.join(DTYPE_BYTES)}")
    if dtype != "fp32" and op not in FP16_OPS:
        raise ProfileError(f"{op}: {dtype} is timed for GEMMs only ({', '.join(FP16_OPS)}), on tensor cores")


def footprint_bytes(op: str, shape: tuple[int, ...], dtype: str = "fp32") -> int:
    """Bytes an op's inputs, weights and output occupy (DTYPE_BYTES per element)."""
    size = DTYPE_BYTES[dtype]
    if op in GEMM_OPS:
        B, M, N, K = shape
        weights = N * K + K if op == "linear" else B * N * K
        return size * (B * M * N + weights + B * M * K)
    # binary ops read two tensors, backward ops y (or x, or the mask) and dy, and each writes one; dropout writes its
    # output and its mask (a bool mask counted as a whole tensor: an upper bound)
    B, H = shape
    return size * B * H * (3 if op in ("add", "mul", "div", "pow") + MODEL_OPS else 2)


def build_op(op: str, shape: tuple[int, ...], device="cpu", seed: int = 0, dtype: str = "fp32"):
    """A zero-argument callable running one op on random tensors of `shape`, fp32 (or fp16 for a GEMM: check_dtype)."""
    import torch
    import torch.nn.functional as F

    dims_of(op)
    check_dtype(op, dtype)
    torch_dtype = {"fp32": torch.float32, "fp16": torch.float16}[dtype]
    g = torch.Generator(device=device).manual_seed(seed)
    # in [0, 1): pow stays real; drawn in fp32, so an fp16 run times the same values rounded
    rand = lambda *s: torch.rand(*s, generator=g, device=device).to(torch_dtype)  # noqa: E731
    if op == "bmm":
        B, M, N, K = shape
        a, b = rand(B, M, N), rand(B, N, K)
        return lambda: torch.bmm(a, b)
    if op == "linear":
        B, M, N, K = shape
        layer = torch.nn.Linear(N, K, bias=True, device=device, dtype=torch_dtype)
        x = rand(B, M, N)
        return lambda: layer(x)
    B, H = shape
    x = rand(B, H)
    y = rand(B, H) + 0.5 if op in ("add", "mul", "div", "pow") else None  # second operand
    if op == "ln":
        norm = torch.nn.LayerNorm(H, device=device)
        return lambda: norm(x)
    if op == "softmax_bw":   # dx = y * (dy - rowsum(dy * y)), y = softmax(x)
        y, dy = torch.softmax(x, dim=-1), rand(B, H)
        return lambda: torch.ops.aten._softmax_backward_data(dy, y, -1, torch.float32)
    if op == "ln_bw":        # dx, dgamma, dbeta from dy and the forward's x, mean and rstd (eps 1e-5, LayerNorm's)
        weight, bias, dy = torch.ones(H, device=device), torch.zeros(H, device=device), rand(B, H)
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, [H], weight, bias, 1e-5)
        return lambda: torch.ops.aten.native_layer_norm_backward(dy, x, [H], mean, rstd, weight, bias,
                                                                 [True, True, True])
    if op == "dropout":      # output and its bool mask, one fused kernel on CUDA
        return lambda: torch.native_dropout(x, DROPOUT_P, True)
    if op == "dropout_bw":   # dx = dy * mask / (1 - p)
        dy, (_, mask) = rand(B, H), torch.native_dropout(x, DROPOUT_P, True)
        return lambda: torch.ops.aten.native_dropout_backward(dy, mask, 1 / (1 - DROPOUT_P))
    table = {
        "add": lambda: x + y, "addu": lambda: x + SCALAR,
        "mul": lambda: x * y, "mulu": lambda: x * SCALAR,
        "div": lambda: x / y, "divu": lambda: x / SCALAR,
        "pow": lambda: torch.pow(x, y), "powu": lambda: torch.pow(x, SCALAR),
        "relu": lambda: torch.relu(x), "gelu": lambda: F.gelu(x), "tanh": lambda: torch.tanh(x),
        "softmax": lambda: torch.softmax(x, dim=-1),
    }
    return table[op]


def time_op(fn, warmup: int = 10, repeat: int = 30, before=None) -> float:
    """Latency (ms): mean of the fastest KEEP_FRACTION of `repeat` CUDA-event-timed calls; `before()`, if given, runs
    ahead of each timed call outside its events (l2_flusher's flush)."""
    import torch

    fn()                     # the first call also loads the kernel and sets up cuBLAS: the slow test times the next
    torch.cuda.synchronize()
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
        if before is not None:
            before()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return fastest_mean([s.elapsed_time(e) for s, e in zip(starts, ends)])


# An L2 flush: writing a buffer of FLUSH_L2_FACTOR x the L2's size between timed calls evicts every line the calls
# before left there, so each timed call reads its inputs from DRAM (Triton's do_bench zeroes a 256 MB buffer alike).
# The dataset timed without a flush: inputs smaller than the L2 ran cache-hot (data/measured/README.md).
FLUSH_L2_FACTOR = 2


def l2_flusher(torch, l2_bytes: int, device: str = "cuda"):
    """A no-argument function that overwrites FLUSH_L2_FACTOR x l2_bytes of `device` memory (notebook 01)."""
    if l2_bytes <= 0:
        raise ProfileError(f"L2 cache size {l2_bytes} bytes: cannot size an L2 flush")
    return torch.empty(FLUSH_L2_FACTOR * l2_bytes, dtype=torch.uint8, device=device).zero_


# A busy GPU instead of a flush: the timed call's launches, issued while the GPU still spins on GPU_BUSY_CYCLES clock
# cycles, wait in its queue, so its events time the kernel and not the host's launch gap; the L2 is left as it was.
# 200,000 cycles at the H200's 1.98 GHz boost clock are 101 us, several times the launch gap of a lone call: no vector
# kernel of the dataset was timed under 24 us, nor one of the H200 under 19.5 us, yet flushed (which also keeps the GPU
# busy) the H200's fastest took 3.3 us (notebook 04, data/measured/README.md).
GPU_BUSY_CYCLES = 200_000


def gpu_spinner(torch, cycles: int = GPU_BUSY_CYCLES):
    """A no-argument function that keeps the current GPU busy for `cycles` clock cycles, its memory untouched
    (notebook 01)."""
    return lambda: torch.cuda._sleep(cycles)


def fastest_mean(times_ms: list[float], keep: float = KEEP_FRACTION) -> float:
    """Mean of the fastest ceil(keep * n) values."""
    if not times_ms:
        raise ValueError("no timings")
    n = max(1, math.ceil(keep * len(times_ms)))
    return float(sum(sorted(times_ms)[:n]) / n)


def kernels_by_label(trace: dict, prefix: str = LABEL) -> dict[str, list[dict]]:
    """GPU kernels of each record_function(label) range in a chrome trace, in launch order.

    A kernel belongs to the label whose CPU range holds the runtime call that launched it
    (kernel and launch share args['correlation']).
    """
    events = trace.get("traceEvents", [])
    ranges = [(e["ts"], e["ts"] + e.get("dur", 0), e["name"]) for e in events
              if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(prefix)]
    launch_ts = {c: e["ts"] for c, e in _launches(events).items()}
    out: dict[str, list[dict]] = {name: [] for _, _, name in ranges}
    for k in sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"]):
        ts = launch_ts.get(k.get("args", {}).get("correlation"))
        for lo, hi, name in ranges:
            if ts is not None and lo <= ts <= hi:
                out[name].append(k)
                break
    return out


def _launches(events: list[dict]) -> dict:
    """correlation id -> the runtime or driver call that launched a GPU kernel, memcpy or memset."""
    return {e["args"]["correlation"]: e for e in events
            if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}


GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")   # trace events that take GPU time


def kernels_by_op(trace: dict, phases=("fw", "bw")) -> "pd.DataFrame":
    """GPU kernels (memcpy and memset too) of a chrome trace, added up per phase, launching op, its input dims and
    kernel name: count, total_us, mean_us (lib.profile_model --kernels-out).

    A kernel's launching op is the innermost aten op (category cpu_op) on the launching thread whose range holds the
    runtime call that launched it (kernel and launch share args['correlation']); its phase, the record_function range
    named in `phases` that holds that call, on any thread (autograd runs the backward on threads of its own). Either is
    '' where none holds it."""
    import pandas as pd
    events = trace.get("traceEvents", [])
    ranges = [(e["ts"], e["ts"] + e.get("dur", 0), e["name"]) for e in events
              if e.get("cat") == "user_annotation" and e.get("name") in phases]
    launches = _launches(events)
    # per thread, ops and launches in time order (an op before a launch at its start, the longer of two ops first):
    # the open ops form a stack whose top is the innermost op holding the launch
    launching_op = {}
    by_thread: dict = {}
    for e in events:
        if e.get("cat") == "cpu_op":
            by_thread.setdefault(e.get("tid"), []).append((e["ts"], 0, -e.get("dur", 0), e))
    for c, e in launches.items():
        by_thread.setdefault(e.get("tid"), []).append((e["ts"], 1, 0, c))
    for items in by_thread.values():
        stack = []
        for ts, kind, _, item in sorted(items, key=lambda t: t[:3]):
            while stack and stack[-1]["ts"] + stack[-1].get("dur", 0) < ts:
                stack.pop()
            if kind == 0:
                stack.append(item)
            else:
                launching_op[item] = stack[-1] if stack else None
    rows = []
    for k in events:
        if k.get("cat") not in GPU_CATEGORIES:
            continue
        c = k.get("args", {}).get("correlation")
        launch = launches.get(c)
        op = launching_op.get(c)
        phase = next((name for lo, hi, name in ranges if launch is not None and lo <= launch["ts"] <= hi), "")
        rows.append((phase, op["name"] if op else "", str(op.get("args", {}).get("Input Dims", "")) if op else "",
                     k.get("name", ""), float(k.get("dur", 0))))
    df = pd.DataFrame(rows, columns=["phase", "op", "input_dims", "kernel", "us"])
    out = (df.groupby(["phase", "op", "input_dims", "kernel"], sort=False)["us"].agg(count="size", total_us="sum")
           .reset_index())
    out["mean_us"] = out["total_us"] / out["count"]
    return out[OP_KERNEL_COLUMNS]


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
            with record_function(f"{LABEL}{i}"):
                fn()
            torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        trace_path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(trace_path))
        trace = json.loads(trace_path.read_text())
    found = kernels_by_label(trace)
    return [kernel_columns(found.get(f"{LABEL}{i}", []), num_sm) for i in range(len(calls))]
