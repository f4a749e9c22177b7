"""Training on several GPUs: data, tensor or pipeline parallel in a server, data parallel across servers (notebook 07).

    python -m lib.distributed --model MODEL_CONFIG.json --device DEVICE.json --batch B --seq S --layout dp4|tp4|pp4_1
        [--nodes N]

prints {"latency_ms", "compute_ms", "communication_ms", "model_state_gb", "activation_gb", "memory_gb"}. A layout is
the dataset's label option: dp<n>, tp<n> or pp<n>_<m> (n GPUs, m micro-batches); B is the global batch. Each GPU's
kernels are forecast by the single-GPU predictors (lib.forecast), and the collectives by the link's bandwidth from
data/devices/interconnect.csv (spec sheets, one source per row). The layouts follow Megatron-LM, which measured the
labels (megatron_configs/):
- dp<n>: each GPU trains B/n sequences, then the fp32 gradients (4 bytes per parameter) are all-reduced, after the
  backward pass (no overlap):      t = T(B/n) + allreduce(4 P)
- tp<n>: each GPU holds 1/n of the attention heads, of the MLP's inner width
  and of the (padded) vocabulary; its kernels are captured from a model sharded that way (lib.sharding), and each
  block all-reduces its [B, S, h] activations twice forward and twice backward, the embedding and the LM head once
  each:
                                   t = T_shard(B) + 2 (2 L + 1) allreduce(4 B S h)
- pp<n>_<m>: stage i of n runs L/n blocks (the first also the embedding, the last the final norm and LM head) on
  micro-batches of B/m sequences, with a GPipe / 1F1B schedule; each stage boundary sends the [B/m, S, h]
  activations forward and their gradient back, and the first and last stages all-reduce a tied embedding's gradient:
                                   t = sum_i t_i + (m - 1) max_i t_i + 2 (n - 1) p2p(4 B/m S h) + allreduce_2(4 V h)
  with t_i = forward + backward of stage i on one micro-batch.
The collectives' times come from lib.network (NCCL's ring; across servers, data parallel only, hierarchical).
model_state_gb: fp32 weights, gradients and Adam's two moments, 16 bytes per parameter, divided by the GPUs that
share them (tp, pp). activation_gb: the tensors autograd saves for the backward pass on one GPU, counted on the meta
device (lib.sharding): its share of the batch, its shard, or for pp the busiest stage, which holds its L/n blocks and
everything outside the blocks for min(m, n) micro-batches under 1F1B. memory_gb = model_state_gb +
activation_gb, a lower bound of the peak (no workspace, no transient gradients).
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from . import paths
from .network import INTERCONNECT, NetworkError, allreduce_ms, hierarchical_allreduce_ms, link_of, p2p_ms
from .sharding import ShardError, activation_bytes, saved_bytes_of, tp_capture

LAYOUT = re.compile(r"^(?P<kind>dp|tp|pp)(?P<degree>[1-9]\d*)(?:_(?P<micro>[1-9]\d*))?$")
FP32_BYTES = 4
MODEL_STATE_BYTES = 16       # fp32 weight + gradient + Adam's two moments, per parameter
# Hugging Face ties the LM head to the token embedding unless the config says otherwise, for these (not Llama's family;
# Gemma's yes; tests/test_distributed.py compares with each config class's default)
TIED_BY_DEFAULT = ("gpt2", "opt", "bert", "gemma", "switch_transformers")
ALLREDUCES_PER_BLOCK = 2     # tp: per block and pass, after the attention and after the MLP


class DistributedError(ValueError):
    """A layout, link table or model the distributed forecast cannot take; the message names what."""


@dataclass(frozen=True)
class Layout:
    """How a training step is split: kind 'dp' / 'tp' / 'pp', GPUs, micro-batches (pp), servers (dp)."""
    kind: str
    degree: int
    micro_batches: int = 1
    nodes: int = 1

    @property
    def name(self) -> str:
        return f"{self.kind}{self.degree}" + (f"_{self.micro_batches}" if self.kind == "pp" else "")


def parse_layout(option: str, nodes: int = 1) -> Layout:
    """A label option ('dp4', 'tp4', 'pp4_1') as a Layout (notebook 07); DistributedError names a bad one."""
    m = LAYOUT.match(str(option))
    if m is None or (m["micro"] and m["kind"] != "pp"):
        raise DistributedError(f"layout {option!r}: expected dp<n>, tp<n> or pp<n>_<micro-batches>, e.g. dp4, tp4, "
                               "pp4_1")
    if not (isinstance(nodes, int) and nodes >= 1):
        raise DistributedError(f"nodes must be a positive integer (got {nodes!r})")
    if nodes > 1 and m["kind"] != "dp":
        raise DistributedError(f"layout {option!r} over {nodes} servers: only data parallel spans servers here")
    degree = int(m["degree"])
    if degree % nodes:
        raise DistributedError(f"layout {option!r}: {degree} GPUs do not split evenly over {nodes} servers")
    return Layout(m["kind"], degree, int(m["micro"] or 1), nodes)


def megatron_layout(path) -> Layout:
    """The layout of one of the dataset's Megatron-LM launch configs (megatron_configs/*.yaml) (notebook 07)."""
    import yaml
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
        cfg, gpus = raw["megatron_lm_config"], int(raw["num_processes"])
        tp, pp = int(cfg["megatron_lm_tp_degree"]), int(cfg["megatron_lm_pp_degree"])
        micro = int(cfg["megatron_lm_num_micro_batches"])
    except FileNotFoundError:
        raise DistributedError(f"{path}: launch config not found") from None
    except (yaml.YAMLError, KeyError, TypeError, ValueError) as e:
        raise DistributedError(f"{path}: not a Megatron-LM launch config ({type(e).__name__}: {e})") from None
    dp = gpus // (tp * pp)
    if (tp > 1) + (pp > 1) + (dp > 1) != 1:
        raise DistributedError(f"{path}: {gpus} GPUs as dp {dp} x tp {tp} x pp {pp}; one kind of parallelism expected")
    return Layout("tp", tp) if tp > 1 else Layout("pp", pp, micro) if pp > 1 else Layout("dp", dp)


def _sizes(cfg) -> tuple[int, int]:
    """(hidden width, vocabulary) of a model config."""
    from .model_config import HEAD_FIELDS
    if cfg.model_type not in HEAD_FIELDS:
        raise DistributedError(f"{cfg.path}: model_type {cfg.model_type!r}: distributed forecasts take one stack of "
                               f"blocks ({', '.join(sorted(HEAD_FIELDS))})")
    return int(cfg.raw[HEAD_FIELDS[cfg.model_type][0]]), int(cfg.raw["vocab_size"])


def _predicted(kernels: pd.DataFrame, device, cfg_by_class) -> pd.DataFrame:
    from .forecast import predict_table
    return predict_table(kernels, device, cfg_by_class=cfg_by_class)


def _pp_stages(table: pd.DataFrame, stages: int, layers: int) -> pd.DataFrame:
    """Forward and backward ms of each pipeline stage on one micro-batch: L/n blocks each, the prologue on the first
    stage, the epilogue on the last."""
    per_block = table[table["layer"] == "layer"].groupby("phase")["total_ms"].sum() / layers
    rows = []
    for i in range(stages):
        t = per_block * (layers // stages)
        for part, at in (("prologue", 0), ("epilogue", stages - 1)):
            if i == at:
                t = t.add(table[table["layer"] == part].groupby("phase")["total_ms"].sum(), fill_value=0.0)
        rows.append({"stage": i, "fw_ms": float(t.get("fw", 0.0)), "bw_ms": float(t.get("bw", 0.0))})
    return pd.DataFrame(rows)


def forecast_layout(config_path, device, batch: int, seq: int, layout: Layout, *, cfg_by_class=None,
                    links=INTERCONNECT) -> dict:
    """One training step of `layout` on `device` GPUs: latency_ms = compute_ms + communication_ms, and the memory
    per GPU (module docstring) (notebook 07)."""
    from .forecast import summarize
    from .graph import capture, parameter_count
    from .model_config import load_config
    cfg = load_config(config_path)
    width, vocab = _sizes(cfg)
    n, m = layout.degree, layout.micro_batches
    if layout.kind == "dp" and batch % n:
        raise DistributedError(f"batch {batch} does not split over {n} data-parallel GPUs")
    if layout.kind == "pp" and batch % m:
        raise DistributedError(f"batch {batch} does not split into {m} micro-batches")
    node = link_of(device.name, "node", links)
    params = parameter_count(config_path)
    layers = sum(cfg.num_layers)
    if layout.kind == "dp":
        compute = summarize(_predicted(capture(config_path, batch // n, seq, "training"), device,
                                       cfg_by_class))["latency_ms"]
        g = n // layout.nodes
        network = link_of(device.name, "network", links) if layout.nodes > 1 else node
        comm = hierarchical_allreduce_ms(FP32_BYTES * params, g, layout.nodes, node, network)
        state = MODEL_STATE_BYTES * params
        saved = activation_bytes(config_path, batch // n, seq)
        act = saved_bytes_of(saved, layers)
    elif layout.kind == "tp":
        table = _predicted(tp_capture(config_path, batch, seq, n), device, cfg_by_class)
        compute = summarize(table)["latency_ms"]
        comm = 2 * (ALLREDUCES_PER_BLOCK * layers + 1) * allreduce_ms(FP32_BYTES * batch * seq * width, n, node)
        state = MODEL_STATE_BYTES * params / n
        saved = activation_bytes(config_path, batch, seq, tp=n)
        act = saved_bytes_of(saved, layers)
    else:
        if len(cfg.num_layers) != 1 or layers % n:
            raise DistributedError(f"{cfg.path}: {layers} blocks do not split evenly into {n} pipeline stages")
        stages = _pp_stages(_predicted(capture(config_path, batch // m, seq, "training"), device, cfg_by_class),
                            n, layers)
        per_stage = stages["fw_ms"] + stages["bw_ms"]
        compute = float(per_stage.sum() + (m - 1) * per_stage.max())
        tied = cfg.raw.get("tie_word_embeddings", cfg.model_type in TIED_BY_DEFAULT)
        comm = (2 * (n - 1) * p2p_ms(FP32_BYTES * (batch // m) * seq * width, node)
                + (allreduce_ms(FP32_BYTES * vocab * width, 2, node) if tied and n > 1 else 0.0))
        state = MODEL_STATE_BYTES * params / n
        saved = activation_bytes(config_path, batch // m, seq)
        act = min(m, n) * saved_bytes_of(saved, layers // n)
    return {"latency_ms": compute + comm, "compute_ms": compute, "communication_ms": comm,
            "model_state_gb": state / 1e9, "activation_gb": act / 1e9, "memory_gb": (state + act) / 1e9}


def paper_distributed_table(path: Path | None = None) -> pd.DataFrame:
    """The paper's distributed table (summary/distributed.csv): model, batch, gpu (A100x4 / H100x4), layout,
    measured_ms and the paper's prediction and APE (notebook 07)."""
    path = Path(path) if path is not None else paths.SUMMARY / "distributed.csv"
    try:
        rows = list(pd.read_csv(path, header=None, dtype=str, keep_default_na=False).itertuples(index=False))
    except FileNotFoundError:
        raise DistributedError(f"{path}: paper table not found") from None
    gpus, kinds = list(rows[0]), list(rows[1])     # a GPU header spans its layout columns
    out, model, batch = [], None, None
    for r in rows[2:]:
        model = r[0] or model
        batch = int(r[1]) if r[1] else batch
        what = r[2]
        for j in range(3, len(r)):
            if not r[j]:
                continue
            gpu = next(g for g in reversed(gpus[:j + 1]) if g)
            cell = re.match(r"^\s*([\d.]+)\s*(?:\(([\d.]+)%\))?\s*$", r[j])
            if cell is None:
                raise DistributedError(f"{path}: cannot read cell {r[j]!r} ({model}, {what})")
            out.append({"model": model, "batch": batch, "gpus": gpu, "layout": kinds[j].lower(), "what": what,
                        "ms": float(cell[1]), "ape": float(cell[2]) if cell[2] else float("nan")})
    if not out:
        raise DistributedError(f"{path}: no rows read")
    t = pd.DataFrame(out)
    measured = t[t["what"].str.startswith("Measured")].drop(columns=["what", "ape"])
    measured = measured.rename(columns={"ms": "measured_ms"})
    paper = t[t["what"].str.contains("Prediction")].drop(columns="what").rename(columns={"ms": "paper_ms",
                                                                                     "ape": "paper_ape"})
    return measured.merge(paper, on=["model", "batch", "gpus", "layout"], how="outer")


# The paper's distributed table names its GPUs "A100x4" and "H100x4"; these are the label folders they stand for (its
# measured column equals these labels' e2e_latency, tests/test_distributed.py checks).
PAPER_GPUS = {"A100x4": "NVIDIA_A100-SXM4-40GB", "H100x4": "NVIDIA_H100_80GB_HBM3"}


def evaluate_labels(labels: pd.DataFrame, *, cfg_by_class=None, micro_batches: int | None = None) -> pd.DataFrame:
    """One row per distributed label (option dp/tp/pp): its layout, forecast (forecast_layout) and APE; micro_batches
    overrides the pipeline labels' own count (notebook 07)."""
    from .devices import load_device
    from .labels import device_file_of_folder
    rows = []
    for r in labels[labels["option"].str.match(LAYOUT)].itertuples(index=False):
        layout = parse_layout(r.option)
        if micro_batches is not None and layout.kind == "pp":
            layout = Layout("pp", layout.degree, micro_batches)
        device = load_device(device_file_of_folder(r.gpu))
        f = forecast_layout(paths.MODEL_CONFIGS / f"{r.model}.json", device, r.batch, r.seq, layout,
                            cfg_by_class=cfg_by_class)
        rows.append({"gpu": r.gpu, "device": r.device, "model": r.model, "batch": r.batch, "seq": r.seq,
                     "layout": layout.kind, "label": r.option, "micro_batches": layout.micro_batches,
                     "measured_ms": r.e2e_ms, **f, "ape": 100 * abs(f["latency_ms"] - r.e2e_ms) / r.e2e_ms,
                     "mem_gb": device.mem_gb})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    from .cli import Parser, device_arg, model_arg, stdout_failed
    from .devices import DeviceError, load_device
    from .model_config import GraphError
    p = Parser(prog="python -m lib.distributed", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, type=model_arg,
                   help="Hugging Face config.json (one stack of blocks: not SwitchTransformer), or a known config's "
                        "name")
    p.add_argument("--device", required=True, type=device_arg,
                   help="device spec JSON (dataset format), or a known GPU's name (H100, NVIDIA_H200)")
    p.add_argument("--batch", type=int, required=True, help="global batch: sequences per step over all GPUs")
    p.add_argument("--seq", type=int, required=True, help="tokens per sequence")
    p.add_argument("--layout", required=True, help="dp<n>, tp<n> or pp<n>_<micro-batches>, as the labels name them")
    p.add_argument("--nodes", type=int, default=1, help="servers the GPUs are spread over (data parallel only)")
    args = p.parse_args(argv)
    try:
        if args.batch < 1 or args.seq < 1:
            raise DistributedError(f"--batch and --seq must be positive integers (got {args.batch}, {args.seq})")
        from .kernels import vendor_models
        device = load_device(args.device)
        result = forecast_layout(args.model, device, args.batch, args.seq, parse_layout(args.layout, args.nodes),
                                 cfg_by_class=vendor_models(device, "neusight"))
    except (DistributedError, NetworkError, ShardError, DeviceError, GraphError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from .caveats import extrapolation_note, spec_notes
    state = (f"the model state and saved activations ({result['model_state_gb']:.1f} + "
             f"{result['activation_gb']:.1f} GB per GPU) exceed the GPU's {device.mem_gb:g} GB"
             ) if result["memory_gb"] > device.mem_gb else None
    for note in (extrapolation_note(device), *spec_notes(device), state):
        if note:
            print(f"warning: {note}", file=sys.stderr)
    try:
        print(json.dumps(result), flush=True)
    except OSError as e:
        stdout_failed(e)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
