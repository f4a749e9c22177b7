"""Training on several GPUs: data, tensor or pipeline parallel, or several combined, in one server or across servers
(notebook 07).

    python -m lib.distributed --model MODEL_CONFIG.json --device DEVICE.json --batch B --seq S
        --layout dp4|tp4|pp4_1|tp4xdp2 [--nodes N] [--recompute]
    python -m lib.distributed ... --layout all --gpus G [--nodes N]     (every layout of G GPUs, as a CSV table)

prints {"latency_ms", "compute_ms", "communication_ms", "model_state_gb", "activation_gb", "memory_gb"}. A layout is
the dataset's label option: dp<n>, tp<n> or pp<n>_<m> (n GPUs, m micro-batches), or several joined by x; B is the
global batch. Each GPU's
kernels are forecast by the single-GPU predictors (lib.forecast), and the collectives by the link's bandwidth from
data/devices/interconnect.csv (spec sheets, one source per row). The layouts follow Megatron-LM, which measured the
labels (megatron_configs/):
- dp<n>: each GPU trains B/n sequences, then the fp32 gradients (4 bytes per parameter) are all-reduced, after the
  backward pass (no overlap):      t = T(B/n) + allreduce(4 P)
- tp<n>: each GPU holds 1/n of the attention heads, of the MLP's inner width (of each expert's)
  and of the (padded) vocabulary; its kernels are captured from a model sharded that way (lib.sharding), and each
  block all-reduces its [B, S, h] activations twice forward and twice backward, the embedding and the LM head once
  each:
                                   t = T_shard(B) + 2 (2 L + 1) allreduce(4 B S h)
  (SwitchTransformer: 2 (2 L_enc + 3 L_dec + 2), its decoder blocks also after their cross-attention, see
  ALLREDUCES_PER_BLOCK).
- pp<n>_<m> (one stack of blocks: not SwitchTransformer's encoder and decoder): stage i of n runs L/n blocks (the first also the embedding, the last the final norm and LM head) on
  micro-batches of B/m sequences, with a GPipe / 1F1B schedule; each stage boundary sends the [B/m, S, h]
  activations forward and their gradient back, and the first and last stages all-reduce a tied embedding's gradient:
                                   t = sum_i t_i + (m - 1) max_i t_i + 2 (n - 1) p2p(4 B/m S h) + allreduce_2(4 V h)
  with t_i = forward + backward of stage i on one micro-batch.
- Several kinds joined by x (tp4xdp2, tp2xpp2_4xdp2: Megatron's 3D parallelism; the GPUs are tp x pp x dp): each
  GPU runs a tp shard of its pipeline stage on micro-batches of B/(dp m) sequences. Each stage's time t_i takes in
  its tp all-reduces, each boundary sends 1/tp of a micro-batch's activations per tp rank, and the dp all-reduce of
  the gradients covers one GPU's share of the parameters, about P / (tp pp); each term as above. The groups are placed
  as Megatron orders the GPUs, tp innermost, then dp, then pp (lib.distributed.place): a tp group stays inside a
  server, and a dp group or a stage boundary that spans servers takes the network.
The collectives' times come from lib.network (NCCL's ring; across servers hierarchical: inside each server, then
across). --recompute: Megatron-LM's full activation recomputation (granularity full, method uniform, one block at a
time): each block keeps only its input [B', S, h] for the backward pass and runs its forward (and, under tp, its
forward all-reduces) once more before its backward.
model_state_gb: fp32 weights, gradients and Adam's two moments, 16 bytes per parameter, divided by the GPUs that
share them (tp, pp). activation_gb: the tensors autograd saves for the backward pass on one GPU, counted on the meta
device (lib.sharding): its share of the batch, its shard, or for pp the busiest stage, which holds its L/n blocks and
everything outside the blocks for min(m, n) micro-batches under 1F1B; with --recompute, the blocks' inputs instead
of their saved tensors, plus one block's saved tensors. memory_gb = model_state_gb +
activation_gb, a lower bound of the peak (no workspace, no transient gradients).
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, replace
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
# tp: all-reduces per block and pass (Megatron's g forward, f backward), per stack: after the attention and after the
# MLP, and in Switch's decoder after its cross-attention too (default 2). Outside the blocks, per pass: one (the
# embedding's output forward, the LM head's input gradient backward), Switch two (the encoder's and the decoder's
# embedding forward; backward, the LM head's and the encoder output's gradient, which the decoder's cross-attentions
# each add to before one all-reduce)
ALLREDUCES_PER_BLOCK = {"switch_transformers": (2, 3)}
ALLREDUCES_OUTSIDE = {"switch_transformers": 2}


class DistributedError(ValueError):
    """A layout, link table or model the distributed forecast cannot take; the message names what."""


KINDS = ("tp", "pp", "dp")     # a combined layout's parts, in Megatron-LM's order of GPUs: tp innermost, then dp, pp


@dataclass(frozen=True)
class Layout:
    """How a training step is split over GPUs: tensor, pipeline and data parallel degrees (Megatron-LM's tp, pp, dp),
    micro-batches per step (pp), and the servers the GPUs are spread over."""
    tp: int = 1
    pp: int = 1
    dp: int = 1
    micro_batches: int = 1
    nodes: int = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def kind(self) -> str:
        """'dp', 'tp' or 'pp' where at most one degree exceeds 1 (the labels' layouts), else 'hybrid'."""
        split = [k for k in KINDS if getattr(self, k) > 1]
        return "hybrid" if len(split) > 1 else (split or ["dp"])[0]

    @property
    def name(self) -> str:
        parts = [k for k in KINDS if getattr(self, k) > 1] or ["dp"]
        return "x".join(f"{k}{getattr(self, k)}" + (f"_{self.micro_batches}" if k == "pp" else "") for k in parts)


def parse_layout(option: str, nodes: int = 1) -> Layout:
    """A label option ('dp4', 'tp4', 'pp4_1'), or several joined by 'x' ('tp4xdp2', 'tp2xpp2_4'), as a Layout
    (notebook 07); DistributedError names a bad one."""
    parts = [LAYOUT.match(p) for p in str(option).split("x")]
    if not all(parts) or any(m["micro"] and m["kind"] != "pp" for m in parts):
        raise DistributedError(f"layout {option!r}: expected dp<n>, tp<n> or pp<n>_<micro-batches>, e.g. dp4, tp4, "
                               "pp4_1, or several joined by x, e.g. tp4xdp2")
    kinds = [m["kind"] for m in parts]
    if len(set(kinds)) < len(kinds):
        raise DistributedError(f"layout {option!r}: each of dp, tp and pp at most once")
    if not (isinstance(nodes, int) and nodes >= 1):
        raise DistributedError(f"nodes must be a positive integer (got {nodes!r})")
    degrees = {m["kind"]: int(m["degree"]) for m in parts}
    micro = next((int(m["micro"] or 1) for m in parts if m["kind"] == "pp"), 1)
    layout = Layout(**degrees, micro_batches=micro, nodes=nodes)
    place(layout, option)
    return layout


def place(layout: Layout, option=None) -> dict:
    """Where a layout's groups run, in Megatron-LM's order of GPUs (tp innermost, then dp, then pp) over its servers:
    {"gpus_per_node", "dp_in_node" (a data-parallel group's GPUs in one server), "dp_nodes" (the servers it spans),
    "pp_crossings" (stage boundaries between servers)}; DistributedError where a group would straddle servers
    unevenly, or a tensor-parallel group span them (notebook 07)."""
    what = f"layout {option or layout.name!r} over {layout.nodes} servers"
    if layout.gpus % layout.nodes:
        raise DistributedError(f"{what}: {layout.gpus} GPUs do not split evenly over {layout.nodes} servers")
    per_node = layout.gpus // layout.nodes
    if per_node % layout.tp:
        raise DistributedError(f"{what}: a tensor-parallel group of {layout.tp} would span servers of {per_node} GPUs; "
                               f"tensor parallelism stays inside a server here")
    slots = per_node // layout.tp            # tp groups per server, filled with dp ranks first, then pp stages
    if slots % layout.dp and layout.dp % slots:
        raise DistributedError(f"{what}: data-parallel groups of {layout.dp} do not align with servers of {slots} "
                               f"tensor-parallel groups")
    dp_in_node = min(layout.dp, slots)
    stages_per_node = max(1, slots // layout.dp)
    return {"gpus_per_node": per_node, "dp_in_node": dp_in_node, "dp_nodes": layout.dp // dp_in_node,
            "pp_crossings": layout.pp // stages_per_node - 1}


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
    if gpus % (tp * pp):
        raise DistributedError(f"{path}: {gpus} GPUs do not split into tp {tp} x pp {pp} groups")
    return Layout(tp, pp, gpus // (tp * pp), micro if pp > 1 else 1)


def _sizes(cfg) -> tuple[int, int]:
    """(hidden width, vocabulary) of a model config."""
    from .sharding import config_field
    return int(cfg.raw[config_field(cfg, "hidden_size")]), int(cfg.raw["vocab_size"])


def _check_stages(cfg, stages: int) -> None:
    """DistributedError unless the model's blocks split into `stages` pipeline stages: one stack, evenly."""
    if stages > 1 and len(cfg.num_layers) != 1:
        raise DistributedError(f"{cfg.path}: pipeline stages split one stack of blocks here; this model has "
                               f"{len(cfg.num_layers)} (an encoder and a decoder)")
    if sum(cfg.num_layers) % stages:
        raise DistributedError(f"{cfg.path}: {sum(cfg.num_layers)} blocks do not split evenly into {stages} pipeline "
                               f"stages")


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
                    links=INTERCONNECT, recompute: bool = False) -> dict:
    """One training step of `layout` on `device` GPUs: latency_ms = compute_ms + communication_ms, and the memory
    per GPU (module docstring); recompute: full activation recomputation (module docstring) (notebook 07)."""
    from .forecast import summarize
    from .graph import capture, parameter_count
    from .model_config import load_config
    cfg = load_config(config_path)
    width, vocab = _sizes(cfg)
    t, p, d, m = layout.tp, layout.pp, layout.dp, layout.micro_batches
    where = place(layout)
    if batch % (d * m):
        split = " x ".join(([f"{d} data-parallel GPUs"] if d > 1 else []) + ([f"{m} micro-batches"] if m > 1 else []))
        raise DistributedError(f"batch {batch} does not split over {split}")
    layers = sum(cfg.num_layers)
    _check_stages(cfg, p)
    node = link_of(device.name, "node", links)
    network = link_of(device.name, "network", links) if layout.nodes > 1 else node
    params = parameter_count(config_path)
    micro = batch // (d * m)                  # sequences per micro-batch on one GPU
    kernels = tp_capture(config_path, micro, seq, t) if t > 1 else capture(config_path, micro, seq, "training")
    table = _predicted(kernels, device, cfg_by_class)
    blocks = layers // p                      # blocks per stage
    # tp: each stage's blocks all-reduce their activations per pass (ALLREDUCES_PER_BLOCK), the first stage also
    # outside the blocks (ALLREDUCES_OUTSIDE); a recomputed forward all-reduces again
    in_blocks = sum(n * k for n, k in zip(cfg.num_layers, ALLREDUCES_PER_BLOCK.get(cfg.model_type, (2,)))) // p
    outside = ALLREDUCES_OUTSIDE.get(cfg.model_type, 1)
    tp_ms = [(2 * (in_blocks + outside * (i == 0)) + (in_blocks if recompute else 0))
             * allreduce_ms(FP32_BYTES * micro * seq * width, t, node) for i in range(p)]
    # recompute: each stage runs its blocks' forward once more, in the backward pass
    again_ms = (table[(table["layer"] == "layer") & (table["phase"] == "fw")]["total_ms"].sum() / layers * blocks
                if recompute else 0.0)
    if p == 1:
        compute, comm = summarize(table)["latency_ms"] + again_ms, tp_ms[0]
    else:
        stages = _pp_stages(table, p, layers)
        kernel_ms = (stages["fw_ms"] + stages["bw_ms"]).to_numpy() + again_ms
        busiest = int((kernel_ms + tp_ms).argmax())
        compute = float(kernel_ms.sum() + (m - 1) * kernel_ms[busiest])
        # each stage boundary sends a micro-batch's activations forward and their gradient back, 1/tp per tp rank
        sent = FP32_BYTES * micro * seq * width / t
        crossings = where["pp_crossings"]
        comm = (sum(tp_ms) + (m - 1) * tp_ms[busiest] + 2 * (p - 1 - crossings) * p2p_ms(sent, node)
                + 2 * crossings * p2p_ms(sent, network))
        tied = cfg.raw.get("tie_word_embeddings", cfg.model_type in TIED_BY_DEFAULT)
        if tied:
            comm += allreduce_ms(FP32_BYTES * vocab * width / t, 2, network)   # the first and last stages
    # dp: the gradients of one GPU's share of the parameters (about P / (tp pp)), a ring inside each server, then one
    # across the servers the group spans
    comm += hierarchical_allreduce_ms(FP32_BYTES * params / (t * p), where["dp_in_node"], where["dp_nodes"], node,
                                      network)
    state = MODEL_STATE_BYTES * params / (t * p)
    saved = activation_bytes(config_path, micro, seq, tp=t)
    if recompute:   # each block keeps only its input; one block's saved tensors are rebuilt at a time
        kept = {"outside": saved["outside"], "per_block": FP32_BYTES * micro * seq * width}
        act = min(m, p) * saved_bytes_of(kept, blocks) + saved["per_block"]
    else:
        act = saved_bytes_of(saved, layers) if p == 1 else min(m, p) * saved_bytes_of(saved, blocks)
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


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def candidate_layouts(config_path, gpus: int, nodes: int, batch: int) -> list[Layout]:
    """Every layout of `gpus` GPUs on `nodes` servers that the model and the global batch admit: tp a divisor of a
    server's GPUs that the model splits over (lib.sharding.check_split), pp a divisor of its blocks (one stack of
    them), dp the rest and a
    divisor of the batch, for pp every micro-batch count that divides dp's share, and groups that place() can put on
    the servers (notebook 07)."""
    from .model_config import load_config
    from .sharding import check_split
    cfg = load_config(config_path)
    _sizes(cfg)
    if not (gpus >= 1 and nodes >= 1 and gpus % nodes == 0):
        raise DistributedError(f"{gpus} GPUs do not split evenly over {nodes} servers")
    out = []
    for tp in _divisors(gpus // nodes):
        try:
            if tp > 1:
                check_split(cfg, tp)
        except ShardError:
            continue
        for pp in _divisors(gpus // tp):
            try:
                _check_stages(cfg, pp)
            except DistributedError:
                continue
            dp = gpus // (tp * pp)
            if batch % dp:
                continue
            for m in _divisors(batch // dp) if pp > 1 else [1]:
                layout = Layout(tp, pp, dp, m, nodes)
                try:
                    place(layout)
                except DistributedError:
                    continue
                out.append(layout)
    return out


SEARCH_COLUMNS = ["layout", "tp", "pp", "dp", "micro_batches", "latency_ms", "compute_ms", "communication_ms",
                  "model_state_gb", "activation_gb", "memory_gb", "fits_memory"]


def search_layouts(config_path, device, gpus: int, nodes: int, batch: int, seq: int, *, cfg_by_class=None,
                   recompute: bool = False, links=INTERCONNECT) -> pd.DataFrame:
    """Every candidate layout (candidate_layouts) forecast by forecast_layout, one row each: those whose memory bound
    fits the GPU's memory first, then the others, each group fastest first (notebook 07)."""
    from tqdm import tqdm
    rows = []
    for layout in tqdm(candidate_layouts(config_path, gpus, nodes, batch), desc="layouts", file=sys.stderr,
                       disable=None):
        f = forecast_layout(config_path, device, batch, seq, layout, cfg_by_class=cfg_by_class, links=links,
                            recompute=recompute)
        rows.append({"layout": layout.name, "tp": layout.tp, "pp": layout.pp, "dp": layout.dp,
                     "micro_batches": layout.micro_batches, **f, "fits_memory": f["memory_gb"] <= device.mem_gb})
    table = pd.DataFrame(rows, columns=SEARCH_COLUMNS)
    return table.sort_values(["fits_memory", "latency_ms"], ascending=[False, True], kind="stable").reset_index(drop=True)


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
            layout = replace(layout, micro_batches=micro_batches)
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
                   help="Hugging Face config.json, or a known config's name")
    p.add_argument("--device", required=True, type=device_arg,
                   help="device spec JSON (dataset format), or a known GPU's name (H100, NVIDIA_H200)")
    p.add_argument("--batch", type=int, required=True, help="global batch: sequences per step over all GPUs")
    p.add_argument("--seq", type=int, required=True, help="tokens per sequence")
    p.add_argument("--layout", required=True, help="dp<n>, tp<n> or pp<n>_<micro-batches>, as the labels name them, "
                                                    "or several joined by x (tp4xdp2, tp2xpp2_4xdp2); 'all': every "
                                                    "layout of --gpus GPUs, as a CSV table, fastest that fits first")
    p.add_argument("--gpus", type=int, help="GPUs in all (required with --layout all)")
    p.add_argument("--nodes", type=int, default=1, help="servers the GPUs are spread over (a tp group stays in one)")
    p.add_argument("--recompute", action="store_true",
                   help="full activation recomputation: each block keeps only its input and runs its forward again")
    args = p.parse_args(argv)
    try:
        if args.batch < 1 or args.seq < 1:
            raise DistributedError(f"--batch and --seq must be positive integers (got {args.batch}, {args.seq})")
        if args.layout == "all" and args.gpus is None:
            raise DistributedError("--layout all needs --gpus, the GPUs in all")
        layout = None if args.layout == "all" else parse_layout(args.layout, args.nodes)
        if layout is not None and args.gpus is not None and args.gpus != layout.gpus:
            raise DistributedError(f"layout {args.layout!r} takes {layout.gpus} GPUs, not --gpus {args.gpus}")
        from .kernels import vendor_models
        device = load_device(args.device)
        models = vendor_models(device, "neusight")
        if layout is None:
            return _print_search(search_layouts(args.model, device, args.gpus, args.nodes, args.batch, args.seq,
                                                cfg_by_class=models, recompute=args.recompute), device)
        result = forecast_layout(args.model, device, args.batch, args.seq, layout, cfg_by_class=models,
                                 recompute=args.recompute)
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


def _print_search(table: pd.DataFrame, device) -> int:
    """search_layouts' table as CSV on stdout, and which layout is fastest among those that fit on stderr."""
    from .caveats import extrapolation_note, spec_notes
    from .cli import stdout_failed
    if table.empty:
        print("error: no layout of these GPUs splits this model and batch", file=sys.stderr)
        return 2
    best = table.iloc[0]
    summary = (f"fastest that fits: {best['layout']}, {best['latency_ms']:.1f} ms, {best['memory_gb']:.1f} GB per GPU"
               if best["fits_memory"] else
               f"warning: no layout fits the GPU's {device.mem_gb:g} GB; the least memory: "
               f"{table.loc[table['memory_gb'].idxmin(), 'layout']}, {table['memory_gb'].min():.1f} GB per GPU")
    for note in (extrapolation_note(device), *spec_notes(device)):
        if note:
            print(f"warning: {note}", file=sys.stderr)
    print(summary, file=sys.stderr)
    try:
        sys.stdout.write(table.to_csv(index=False))
        sys.stdout.flush()
    except OSError as e:
        stdout_failed(e)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
