"""End-to-end latency collector: time a Hugging Face model on this GPU as the dataset's labels did (notebook 01).

  python -m lib.profile_model --model MODEL_CONFIG.json --batch B --seq S --mode inference|training
                              [--out-dir data/measured/labels] [--warmup 3] [--repeat 10] [--overwrite]
                              [--grad-mode] [--kernels-out [KERNELS.csv]]

The model is the one lib.graph captures for the forecast (lib.graph_capture.build_model: the labels' model class,
fp32, eager attention as transformers 4.x ran it, random weights, full depth), built on the GPU. Inference: one
forward pass over batch x seq in eval mode without autograd. Training: a forward pass in train mode (dropout on),
then the backward pass from the logits (seeded with ones, as the capture does); no optimizer step, as measured.
That backward is a plain one (no create_graph): each dropout's backward runs one kernel there, where the labels'
backward ran the three of autograd's grad mode (lib.graph_ops.kernel_rows, notebook 05). `--grad-mode` runs it with
grad mode on (create_graph=True), which runs those three but keeps far more memory than the labels' GPUs had, and
writes under <software>-grad-mode, so both can be timed on one GPU.
Each latency is the mean of the fastest half of `repeat` CUDA-event-timed passes after `warmup` passes
(lib.profile_ops.fastest_mean, the kernel collector's method). The result is written as a label JSON
(<out-dir>/torch<v>_cuda<v>/<GPU folder>/<model>-<inf|train>-<seq>-<batch>.json: e2e_latency, fw_latency,
bwall_latency, num_layer), so lib.labels.load_labels(<out-dir>/torch<v>_cuda<v>) reads it like the dataset's labels.
`--kernels-out` runs one more pass under the PyTorch profiler and writes every kernel it ran (memcpy and memset too),
added up per phase (fw, bw), launching aten op, its input dims and kernel name (lib.profile_ops.kernels_by_op): what a
model run spends per kernel, to set beside the forecast's kernel table (lib.forecast --kernels-out). Without a path it
writes <profiles>/torch<v>_cuda<v>/<GPU folder>/<model>-<inf|train>-<seq>-<batch>.csv (lib.model_kernels.PROFILES),
where notebook 05 reads profiles back.
"""
from __future__ import annotations

import gc
import json
import sys
import tempfile
import time
import warnings
from contextlib import nullcontext
from pathlib import Path

from . import paths
from .cli import Parser
from .measured import GRAD_MODE_SUFFIX
from .model_config import GraphError, check_args, load_config
from .profile import gpu_folder, refuse_existing, software_folder
from .model_kernels import OP_KERNEL_COLUMNS, PROFILES
from .profile_ops import ProfileError, fastest_mean, kernels_by_op

LABEL_MODES = {"inference": "inf", "training": "train"}
DEFAULT_PROFILE = "<model-kernels>"   # kernels_out: the profile's place under lib.model_kernels.PROFILES (no file is named so)


def label_path(out_dir: Path, software: str, gpu_name: str, model: str, batch: int, seq: int, mode: str) -> Path:
    """<out_dir>/<software>/<GPU folder>/<model>-<inf|train>-<seq>-<batch>.json: the dataset's layout below <software>."""
    return Path(out_dir) / software / gpu_folder(gpu_name) / f"{model}-{LABEL_MODES[mode]}-{seq}-{batch}.json"


def profile_path(software: str, gpu_name: str, model: str, batch: int, seq: int, mode: str, root: Path = PROFILES) -> Path:
    """Where --kernels-out without a path writes a profile: label_path's layout under lib.model_kernels.PROFILES, .csv."""
    return label_path(root, software, gpu_name, model, batch, seq, mode).with_suffix(".csv")


def _input_ids(torch, cfg, batch: int, seq: int, device: str) -> dict:
    """Random token ids (the encoder's and, for Switch, the decoder's), batch x seq."""
    g = torch.Generator(device="cpu").manual_seed(0)
    ids = torch.randint(0, cfg.raw["vocab_size"], (batch, seq), generator=g).to(device)
    return {"input_ids": ids, **({"decoder_input_ids": ids} if cfg.model_type == "switch_transformers" else {})}


def time_passes(torch, model, inputs: dict, mode: str, warmup: int, repeat: int, device: str,
                grad_mode: bool = False, annotate: bool = False) -> tuple[float, float]:
    """(forward ms, backward ms; 0 for inference), each the mean of the fastest half of `repeat` timed passes;
    grad_mode: the backward with autograd's grad mode on (create_graph=True), whose dropout backward runs the
    three kernels of the dataset's labels (not their memory: notebook 05);
    annotate: each forward and backward in a profiler range named fw / bw (profile_pass)."""
    from .graph_capture import logits_and_seeds    # imports torch: only when timing
    phase = (lambda name: torch.profiler.record_function(name)) if annotate else (lambda name: nullcontext())

    def stamp():
        if device == "cpu":
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def ms(start, end) -> float:
        if device == "cpu":
            return (end - start) * 1e3
        torch.cuda.synchronize()
        return start.elapsed_time(end)

    fw, bw = [], []
    for i in range(warmup + repeat):
        model.zero_grad(set_to_none=True)
        with (torch.enable_grad() if mode == "training" else torch.no_grad()):
            t0 = stamp()
            with phase("fw"):
                out = model(**inputs, return_dict=True)
            t1 = stamp()
            if mode == "training":
                logits, seeds = logits_and_seeds(out)
                t2 = stamp()
                with warnings.catch_warnings():
                    # grad mode ties each parameter to its gradient in a reference cycle; every pass (and the end
                    # of this function) sets the gradients to None, which breaks it, so torch's warning says nothing
                    warnings.filterwarnings("ignore", message=r"Using backward\(\) with create_graph=True")
                    with phase("bw"):
                        torch.autograd.backward(logits, seeds, create_graph=grad_mode)
                t3 = stamp()
        if i >= warmup:
            fw.append(ms(t0, t1))
            if mode == "training":
                bw.append(ms(t2, t3))
        out = logits = seeds = None          # free the activations and the logits before the next pass
    model.zero_grad(set_to_none=True)
    return fastest_mean(fw), fastest_mean(bw) if bw else 0.0


def profile_pass(torch, model, inputs: dict, mode: str, device: str, grad_mode: bool = False):
    """One more pass under the PyTorch profiler: its GPU kernels per phase, launching op, input dims and kernel name
    (lib.profile_ops.kernels_by_op)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        time_passes(torch, model, inputs, mode, 0, 1, device, grad_mode, annotate=True)
    with tempfile.TemporaryDirectory() as tmp:
        trace_path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(trace_path))
        return kernels_by_op(json.loads(trace_path.read_text()))


def measure(config_path, batch: int, seq: int, mode: str, out_dir: Path | None = None, warmup: int = 3,
            repeat: int = 10, device: str = "cuda", overwrite: bool = False, grad_mode: bool = False,
            kernels_out: Path | str | None = None, profiles: Path = PROFILES) -> dict:
    """Time one model setting on `device` (cuda: GPU 0) and write its label JSON under out_dir (notebook 01);
    grad_mode: the backward with grad mode on (time_passes), under <software>-grad-mode;
    kernels_out: also write the kernels of one profiled pass there (profile_pass), a GPU's only; DEFAULT_PROFILE:
    under `profiles` (lib.model_kernels.PROFILES), laid out as the labels are (label_path)."""
    cfg = load_config(config_path)
    check_args(cfg, batch, seq, mode)
    if grad_mode and mode != "training":
        raise ProfileError(f"--grad-mode changes the backward, which only a training pass runs (got mode {mode!r})")
    import torch

    from .graph_capture import as_measured, build_model
    if device not in ("cuda", "cpu"):
        raise ProfileError(f"device must be 'cuda' or 'cpu' (got {device!r})")
    if device == "cuda" and not torch.cuda.is_available():
        raise ProfileError(f"no CUDA GPU: torch {torch.__version__} sees no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False     # fp32, as the labels were measured
    torch.backends.cudnn.allow_tf32 = False
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    software = software_folder(torch) + (GRAD_MODE_SUFFIX if grad_mode else "")
    path = label_path(out_dir, software, gpu, cfg.name, batch, seq, mode) if out_dir is not None else None
    if path is not None:
        refuse_existing(path, overwrite)
    if kernels_out is not None:
        if device != "cuda":
            raise ProfileError(f"--kernels-out lists the GPU kernels of a pass: it needs device 'cuda' (got {device!r})")
        if kernels_out == DEFAULT_PROFILE:
            kernels_out = profile_path(software, gpu, cfg.name, batch, seq, mode, profiles)
        refuse_existing(Path(kernels_out), overwrite)
    if device == "cuda":
        # what an earlier setting left once its error was dropped (an out-of-memory error's traceback holds a pass's
        # tensors; a grad-mode backward cut short leaves parameter <-> gradient cycles only the collector frees)
        gc.collect()
        torch.cuda.empty_cache()
    torch.manual_seed(0)
    kernels = None
    model = None
    try:
        model = build_model(cfg, mode, cfg.num_layers, batch, device=device)
        with as_measured(cfg.model_type):
            inputs = _input_ids(torch, cfg, batch, seq, device)
            fw_ms, bw_ms = time_passes(torch, model, inputs, mode, warmup, repeat, device, grad_mode)
            if kernels_out is not None:
                kernels = profile_pass(torch, model, inputs, mode, device, grad_mode)
    except torch.cuda.OutOfMemoryError as e:
        raise ProfileError(f"{cfg.name} {mode} batch {batch} seq {seq}: out of GPU memory ({str(e).splitlines()[0]})") from None
    finally:
        if model is not None:
            model.zero_grad(set_to_none=True)   # a pass cut short by an error leaves grad mode's cycles behind
        del model                   # the next setting gets the whole GPU
        if device == "cuda":
            gc.collect()
            torch.cuda.empty_cache()
    from importlib.metadata import version
    label = {"num_layer": int(sum(cfg.num_layers)), "e2e_latency": fw_ms + bw_ms, "fw_latency": fw_ms,
             "bwall_latency": bw_ms, "torch_version": torch.__version__, "cuda_version": torch.version.cuda,
             "transformers_version": version("transformers")}
    if mode == "training":
        label["backward"] = "grad mode" if grad_mode else "plain"
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        paths.write_atomic(path, lambda tmp: tmp.write_text(json.dumps(label, indent=4) + "\n"))
        label["path"] = str(path)
    if kernels is not None:
        Path(kernels_out).parent.mkdir(parents=True, exist_ok=True)
        paths.write_atomic(kernels_out, lambda tmp: kernels[OP_KERNEL_COLUMNS].to_csv(tmp, index=False))
        label["kernels_path"] = str(kernels_out)
    return {"device": gpu, "model": cfg.name, "mode": mode, "batch": batch, "seq": seq, **label}


def label_settings(limit: int | None = None) -> list[tuple[str, str, int, int]]:
    """(model, mode, batch, seq) of the dataset's plain labels, each once, sorted; the first `limit` (notebook 01)."""
    from .labels import load_labels
    plain = load_labels().query("option == ''")
    settings = sorted(set(zip(plain["model"], plain["mode"], plain["batch"].astype(int), plain["seq"].astype(int))))
    return settings if limit is None else settings[:limit]


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m lib.profile_model", description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, type=Path, help="a Hugging Face config.json (DLmodel_configs/)")
    ap.add_argument("--batch", required=True, type=int)
    ap.add_argument("--seq", required=True, type=int)
    ap.add_argument("--mode", required=True, choices=tuple(LABEL_MODES))
    ap.add_argument("--out-dir", type=Path, default=paths.MEASURED / "labels")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--overwrite", action="store_true", help="replace an existing label file")
    ap.add_argument("--grad-mode", action="store_true",
                    help="run the backward with grad mode on (create_graph=True), whose dropout backward runs the "
                         "three kernels of the dataset's labels")
    ap.add_argument("--kernels-out", nargs="?", const=DEFAULT_PROFILE,
                    help="also write the GPU kernels of one profiled pass to this CSV (no path: under "
                         "data/measured/model-kernels/, where notebook 05 reads them)")
    a = ap.parse_args(argv)
    try:
        if a.repeat < 1 or a.warmup < 0:
            raise ProfileError("--repeat must be >= 1 and --warmup >= 0")
        print(json.dumps(measure(a.model, a.batch, a.seq, a.mode, a.out_dir, a.warmup, a.repeat, overwrite=a.overwrite,
                                 grad_mode=a.grad_mode, kernels_out=a.kernels_out)))
    except (ProfileError, GraphError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
