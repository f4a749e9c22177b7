"""Aten-level kernel graph of a Hugging Face model, captured on the meta device (notebook 05).

`capture(config_path, batch, seq, mode)` builds the model the labels measured (BERT-Large: sequence
classification for inference, pre-training heads for training; GPT-2/OPT: LM heads; Switch: seq2seq
with decoder input as long as the encoder input; beyond the labels, Llama-family decoders: Llama, Mistral,
Qwen2, with their LM heads) on the meta device (no weights, no GPU), runs one
forward (eval mode) or forward + backward (train mode, backward seeded with ones on every output
logit tensor, no loss kernels, as the labels' fx graphs end at the logits), and records every aten
kernel through a TorchDispatchMode. Only a reduced depth is run: 3 periods of each layer stack (a
period is 1 block; for Switch, a stack's sparse step: one sparse block per step, e.g. 2 when dense and
sparse blocks alternate, `stack_periods`); the middle period stands for all
middle ones through `count` (`_to_table`), so the table of a 32-layer model is as short as a 3-layer one.
Module hooks (forward) and tensor hooks (backward) tell which block an op belongs to.
Tables are cached in build/cache/graphs/ (a cache hit imports neither torch nor transformers).
"""
from __future__ import annotations

import hashlib
import json
import numbers
import re
import sys
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

import pandas as pd

from . import paths
from .graph_ops import COLUMNS, kernel_rows

GRAPH_CACHE = paths.CACHE / "graphs"
MODES = ("inference", "training")
# The cache is keyed by the source of the capture and op-mapping code, so an edit invalidates it.
CODE_FILES = ("graph.py", "graph_ops.py", "graph_capture.py")


def _code_hash() -> str:
    here = Path(__file__).parent
    return hashlib.sha256(b"".join((here / f).read_bytes() for f in CODE_FILES)).hexdigest()[:16]


class GraphError(ValueError):
    """Bad model config or arguments; the message names the file and field."""


# model_type -> (class for inference, class for training, layer-count fields, max-position field,
#                stacks: attribute paths of the nn.ModuleList of blocks)
# Classes follow the label CSVs: bert_large-inf uses a `classifier` head (sequence classification),
# bert_large-train uses `cls.predictions` + `cls.seq_relationship` (BertForPreTraining).
ARCHS = {
    "bert": ("BertForSequenceClassification", "BertForPreTraining", ("num_hidden_layers",),
             "max_position_embeddings", ("bert.encoder.layer",)),
    "gpt2": ("GPT2LMHeadModel", "GPT2LMHeadModel", ("n_layer",), "n_positions",
             ("transformer.h",)),
    "opt": ("OPTForCausalLM", "OPTForCausalLM", ("num_hidden_layers",), "max_position_embeddings",
            ("model.decoder.layers",)),
    # Beyond the paper's six (no label measures them): decoder-only models of the Llama family
    # (RMSNorm as element-wise kernels, rotary positions, SwiGLU MLP, grouped-query attention).
    "llama": ("LlamaForCausalLM", "LlamaForCausalLM", ("num_hidden_layers",), "max_position_embeddings",
              ("model.layers",)),
    "mistral": ("MistralForCausalLM", "MistralForCausalLM", ("num_hidden_layers",), "max_position_embeddings",
                ("model.layers",)),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2ForCausalLM", ("num_hidden_layers",), "max_position_embeddings",
              ("model.layers",)),
    "switch_transformers": ("SwitchTransformersForConditionalGeneration",
                            "SwitchTransformersForConditionalGeneration",
                            ("num_layers", "num_decoder_layers"), None,
                            ("encoder.block", "decoder.block")),
}

# Fields that size a model. A config must give each as a positive integer: Hugging Face would otherwise
# fill a missing one with its own default (bert-base's width for a BERT config) without a word.
_HF_SIZES = ("hidden_size", "num_attention_heads", "intermediate_size", "vocab_size")
SIZE_FIELDS = {"bert": _HF_SIZES, "gpt2": ("n_embd", "n_head", "vocab_size"),
               "opt": ("hidden_size", "num_attention_heads", "ffn_dim", "vocab_size"),
               "llama": _HF_SIZES, "mistral": _HF_SIZES, "qwen2": _HF_SIZES,
               "switch_transformers": ("d_model", "num_heads", "d_ff", "d_kv", "num_experts", "vocab_size")}

# Optional fields that size a model: where a config gives one (and not null), it must be a positive integer too, else
# Hugging Face builds an empty embedding or head (BERT's type_vocab_size 0) that the forecast would price without a word.
OPTIONAL_SIZE_FIELDS = {"bert": ("type_vocab_size", "num_labels"), "gpt2": ("n_inner",),
                        "opt": ("word_embed_proj_dim",), "llama": ("head_dim",), "mistral": ("head_dim",),
                        "qwen2": ("head_dim",), "switch_transformers": ()}


# Hugging Face's other names for a config field (each config class's `attribute_map`; a test compares): a config may
# give both, and Hugging Face then builds with one of the two values, so they must agree. load_config keeps one key.
ALIASES = {"gpt2": {"hidden_size": "n_embd", "max_position_embeddings": "n_positions", "num_attention_heads": "n_head",
                    "num_hidden_layers": "n_layer"},
           "switch_transformers": {"hidden_size": "d_model", "num_attention_heads": "num_heads",
                                   "num_hidden_layers": "num_layers"}}
# Attention heads split the width evenly (each model's attention asserts it), and grouped-query attention shares
# each key/value head among the same number of query heads:
#     width % heads == 0  (unless the config gives head_dim),   heads % num_key_value_heads == 0
HEAD_FIELDS = {"bert": ("hidden_size", "num_attention_heads"), "gpt2": ("n_embd", "n_head"),
               "opt": ("hidden_size", "num_attention_heads"), "llama": ("hidden_size", "num_attention_heads"),
               "mistral": ("hidden_size", "num_attention_heads"), "qwen2": ("hidden_size", "num_attention_heads")}
# Switch's saved configs also hold each stack's sparse step, which Hugging Face reads instead of computing it from
# num_sparse_*_layers (sparse_step below) when both are given.
STEP_FIELDS = ("encoder_sparse_step", "decoder_sparse_step")


def _positive_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


@dataclass
class ModelConfig:
    """A dataset model config (DLmodel_configs/*.json), validated without importing transformers."""
    path: Path
    raw: dict
    model_type: str
    num_layers: tuple          # blocks per stack (one entry per stack)
    max_positions: int | None  # longest sequence the position embeddings allow (None: relative)
    periods: tuple = ()        # blocks per repeating period, per stack (stack_periods)
    stacks: tuple = field(default_factory=tuple)

    @property
    def name(self) -> str:
        return self.path.stem


def load_config(path) -> ModelConfig:
    """Read and validate a model config JSON; GraphError names the file and the bad field."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise GraphError(f"{path}: model config not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise GraphError(f"{path}: not valid JSON ({e})") from None
    except OSError as e:   # a folder, no permission, ...
        raise GraphError(f"{path}: cannot read the model config ({e.strerror or e})") from None
    if not isinstance(raw, dict):
        raise GraphError(f"{path}: expected a JSON object")
    model_type = raw.get("model_type")
    if model_type not in ARCHS:
        raise GraphError(f"{path}: unknown architecture (architectures={raw.get('architectures')}, "
                         f"model_type={model_type!r}); supported model_type: {sorted(ARCHS)}")
    raw = _without_aliases(path, raw, model_type)
    _, _, layer_fields, pos_field, stacks = ARCHS[model_type]
    for f in (*layer_fields, *SIZE_FIELDS[model_type], *([pos_field] if pos_field else [])):
        if f not in raw:
            raise GraphError(f"{path}: field '{f}' is missing (a positive integer, as in Hugging Face's config.json)")
        if not _positive_int(raw[f]):
            raise GraphError(f"{path}: field '{f}' must be a positive integer (got {raw[f]!r})")
    for f in OPTIONAL_SIZE_FIELDS[model_type]:
        if raw.get(f) is not None and not _positive_int(raw[f]):
            raise GraphError(f"{path}: field '{f}' must be a positive integer where given (got {raw[f]!r})")
    # BERT is built with a classification head, whose labels Hugging Face counts from id2label where a config gives it
    if model_type == "bert" and "id2label" in raw and not (isinstance(raw["id2label"], dict) and raw["id2label"]):
        raise GraphError(f"{path}: field 'id2label' must be an object naming at least one label (got {raw['id2label']!r})")
    _check_heads(path, raw, model_type)
    layers = [raw[f] for f in layer_fields]
    max_pos = raw[pos_field] if pos_field else None
    return ModelConfig(path, raw, model_type, tuple(layers), max_pos, stack_periods(path, raw, model_type, layers),
                       stacks)


def _without_aliases(path, raw: dict, model_type: str) -> dict:
    """raw with each alias (ALIASES) renamed to the field it stands for; GraphError when the two disagree."""
    raw = dict(raw)
    for alias, name in ALIASES.get(model_type, {}).items():
        if alias in raw:
            if name in raw and raw[name] != raw[alias]:
                raise GraphError(f"{path}: fields '{alias}' ({raw[alias]!r}) and '{name}' ({raw[name]!r}) disagree; "
                                 f"Hugging Face reads '{alias}' as '{name}', so give both the same value, or drop one")
            raw[name] = raw.pop(alias)
    return raw


def _check_heads(path, raw: dict, model_type: str) -> None:
    """GraphError unless the heads split the width and the key/value heads the heads (HEAD_FIELDS, above)."""
    if model_type not in HEAD_FIELDS:
        return
    width_field, heads_field = HEAD_FIELDS[model_type]
    width, heads = raw[width_field], raw[heads_field]
    if raw.get("head_dim") is None and width % heads:
        raise GraphError(f"{path}: field '{width_field}' ({width}) must be a multiple of '{heads_field}' ({heads})")
    kv = raw.get("num_key_value_heads")
    if model_type in ("llama", "mistral", "qwen2") and kv is not None:
        if not _positive_int(kv):
            raise GraphError(f"{path}: field 'num_key_value_heads' must be a positive integer or null (got {kv!r})")
        if heads % kv:
            raise GraphError(f"{path}: field '{heads_field}' ({heads}) must be a multiple of 'num_key_value_heads' "
                             f"({kv})")


# Switch's sparse blocks, as Hugging Face places them (SwitchTransformersConfig, SwitchTransformersStack): in a
# stack of n blocks with s sparse ones (`num_sparse_*_layers`, default 3)
#     step = n // s  (s > 0; else n),   block i sparse  iff  step > 0 and (i % step == 1 or step == 1)
# so the blocks repeat with a period of `step` blocks (1 when step is 0: no block is sparse).
SPARSE_FIELDS = ("num_sparse_encoder_layers", "num_sparse_decoder_layers")
SPARSE_DEFAULT = 3


def sparse_step(n_blocks: int, n_sparse: int) -> int:
    """Hugging Face's sparse step of a Switch stack (above)."""
    return n_blocks // n_sparse if n_sparse > 0 else n_blocks


def stack_periods(path, raw: dict, model_type: str, layers) -> tuple:
    """Blocks per repeating period of each stack: 1, or Switch's sparse step (above); GraphError names a bad field."""
    if model_type != "switch_transformers":
        return tuple(1 for _ in layers)
    periods = []
    for f, step_field, n in zip(SPARSE_FIELDS, STEP_FIELDS, layers):
        s = raw.get(f, SPARSE_DEFAULT)
        if not (_positive_int(s) or s == 0 and type(s) is int):
            raise GraphError(f"{path}: field '{f}' must be a non-negative integer (got {s!r})")
        if step_field in raw and raw[step_field] != sparse_step(n, s):
            raise GraphError(f"{path}: field '{step_field}' ({raw[step_field]!r}) disagrees with '{f}' ({s}): "
                             f"{n} blocks with {s} sparse ones make a step of {sparse_step(n, s)}; Hugging Face would "
                             f"build with '{step_field}', so make the two agree")
        periods.append(sparse_step(n, s) or 1)
    return tuple(periods)


def check_args(cfg: ModelConfig, batch: int, seq: int, mode: str) -> None:
    """Raise GraphError for a bad batch/seq/mode (seq beyond the position embeddings included)."""
    if mode not in MODES:
        raise GraphError(f"mode must be one of {MODES} (got {mode!r})")
    for name, v in (("batch", batch), ("seq", seq)):   # numpy's integers too (a label row's batch), never a bool
        if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 1:
            raise GraphError(f"{name} must be a positive integer (got {v!r})")
    if cfg.max_positions is not None and seq > cfg.max_positions:
        field_name = ARCHS[cfg.model_type][3]
        raise GraphError(f"{cfg.path}: seq {seq} is longer than the model's maximum of "
                         f"{cfg.max_positions} positions ('{field_name}')")


def parameter_count(config_path, use_cache: bool = True) -> int:
    """Parameters of the full-depth inference model (ARCHS), built on meta (no weights); cached beside the graphs."""
    cfg = load_config(config_path)
    cache = GRAPH_CACHE / f"{cfg.name}-parameters-{cache_key(cfg, 1, 1, 'parameters')}.json"
    if use_cache and cache.exists():
        return int(json.loads(cache.read_text()))
    from .graph_capture import build_model  # imports torch + transformers (seconds)
    model = build_model(cfg, "inference", cfg.num_layers, batch=1)
    count = int(sum(p.numel() for p in model.parameters()))
    if use_cache:
        cache.parent.mkdir(parents=True, exist_ok=True)
        paths.write_atomic(cache, lambda tmp: tmp.write_text(json.dumps(count)))
    return count


def _reduced_depths(cfg: ModelConfig) -> tuple:
    """Blocks to build per stack: 3 periods (first, steady, last), or the full depth if not longer (or not a
    whole number of periods)."""
    return tuple(3 * p if (n > 3 * p and n % p == 0) else n for n, p in zip(cfg.num_layers, cfg.periods))


def cache_key(cfg: ModelConfig, batch: int, seq: int, mode: str, depths=None) -> str:
    """Hash of config, shapes, mode, library versions and the capture code's source."""
    blob = json.dumps({"cfg": cfg.raw, "batch": batch, "seq": seq, "mode": mode,
                       "depths": depths, "torch": version("torch"),
                       "transformers": version("transformers"), "code": _code_hash()},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def capture(config_path, batch: int, seq: int, mode: str, *, depths=None,
            use_cache: bool = True) -> pd.DataFrame:
    """Kernel table (one row per kernel, `count` = runs in the whole model) of one pass.

    depths: blocks to build per stack; None = 3 periods, multiplied out to the full depth. Any other
    depth builds and counts a model of exactly that depth (tests read one block this way).
    """
    cfg = load_config(config_path)
    check_args(cfg, batch, seq, mode)
    batch, seq = int(batch), int(seq)   # np.int64 -> int: the cache key is JSON
    if depths is None:
        depths = _reduced_depths(cfg)
    cache = GRAPH_CACHE / f"{cfg.name}-{mode}-{batch}-{seq}-{cache_key(cfg, batch, seq, mode, list(depths))}.pkl"
    if use_cache and cache.exists():
        return pd.read_pickle(cache)
    from .graph_capture import record  # imports torch + transformers (seconds)
    try:
        records = record(cfg, batch, seq, mode, depths)
    except Exception as e:   # transformers / torch rejecting a value of the config (an activation name, a size)
        # Hugging Face looks names up in its tables (activations, RoPE types): a KeyError holds only the value
        named = fields_with_value(cfg.raw, e.args[0]) if isinstance(e, KeyError) and e.args else []
        if named:
            raise GraphError(f"{cfg.path}: Hugging Face does not know the value {e.args[0]!r} of field "
                             f"{' / '.join(repr(n) for n in named)}; check its spelling against Hugging Face's "
                             f"documentation for this model_type ({cfg.model_type!r})") from None
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise GraphError(f"{cfg.path}: cannot build the model from this config at batch {batch}, "
                         f"sequence {seq} ({type(e).__name__}: {first})") from None
    df = _to_table(records, cfg, depths)
    if use_cache:
        cache.parent.mkdir(parents=True, exist_ok=True)
        paths.write_atomic(cache, df.to_pickle)
    return df


def fields_with_value(raw: dict, value, prefix: str = "") -> list:
    """Dotted names of the fields of a config (nested objects too) whose value is the string `value` (notebook 05)."""
    if not isinstance(value, str):
        return []
    names = []
    for k, v in raw.items():
        if isinstance(v, dict):
            names += fields_with_value(v, value, f"{prefix}{k}.")
        elif v == value:
            names.append(f"{prefix}{k}")
    return names


def _to_table(records: list, cfg: ModelConfig, depths) -> pd.DataFrame:
    """Records -> table; the middle captured period of a stack counts for all middle periods.

    The first period can differ (Switch: relative position bias lives in block 0) and so can the
    last one (backward: gradients of tensors shared by all blocks, e.g. Switch's position bias or
    the encoder output, are accumulated in every block but the last), hence 3 periods captured.
    count(middle) = n_full / p - 2, plus 1 for the first and/or last when they ran the same kernels.
    """
    rows = [row for r in records for row in kernel_rows(r)]
    df = pd.DataFrame(rows, columns=COLUMNS + ["stack", "block"])
    df["count"] = 1
    for s, (n_full, n_cap, p) in enumerate(zip(cfg.num_layers, depths, cfg.periods)):
        if n_cap == n_full or n_cap != _reduced_depths(cfg)[s]:
            continue      # the whole stack was built, or a depth of the caller's choosing: counted as built
        in_stack = (df["layer"] == "layer") & (df["stack"] == s)
        period = df["block"] // p
        mid = in_stack & (period == 1)
        count = n_full // p - 2
        for k in (0, 2):
            edge = in_stack & (period == k)
            if _same_ops(df[edge], df[mid]):
                count += 1
                df, in_stack, period, mid = df[~edge], in_stack[~edge], period[~edge], mid[~edge]
        df.loc[mid, "count"] = count
    return df.drop(columns=["block"]).reset_index(drop=True)


def _same_ops(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """True if two periods ran the same kernels with the same shapes, in the same order."""
    cols = ["aten", "phase", "shapes"]
    return len(a) == len(b) and (a[cols].to_numpy() == b[cols].to_numpy()).all()


# ----------------------------------------------------------------------------- label CSVs

def label_layer_nodes(label_csv) -> pd.DataFrame:
    """Label CSV (fx nodes of prologue, one layer, epilogue) -> tidy frame with latencies in ms."""
    path = Path(label_csv)
    try:
        raw = pd.read_csv(path)
    except FileNotFoundError:
        raise GraphError(f"{path}: label CSV not found") from None
    need = ["Name", "op", "target", "input_shapes", "output_shape", "fw_latency", "bw_latency"]
    missing = [c for c in need if c not in raw.columns]
    if missing:
        raise GraphError(f"{path}: missing columns {missing}")
    df = raw[need].rename(columns={"fw_latency": "fw_latency_ms", "bw_latency": "bw_latency_ms"})
    return df.reset_index(drop=True)


def summary(df: pd.DataFrame) -> dict:
    """Kernel counts and GEMM FLOPs of a captured table (FLOPs = 2 B M N K per GEMM)."""
    gemm = df["op"].isin(["bmm", "linear"])
    flops = (2 * df.B * df.M * df.N * df.K * df["count"])[gemm].sum()
    return {"rows": len(df), "kernels": int(df["count"].sum()), "gemm_flops": float(flops)}


LABEL_NAME = re.compile(r"^(?P<model>[a-z0-9_]+)-(?P<mode>inf|train)-(?P<seq>\d+)-(?P<batch>\d+)")


def label_shapes() -> list:
    """(model, mode, batch, seq) of every label file name (model-inf|train-SEQ-BATCH[-suffix])."""
    found = set()
    for f in paths.LABELS.rglob("*.json"):
        m = LABEL_NAME.match(f.stem)
        if m and (paths.MODEL_CONFIGS / f"{m['model']}.json").exists():
            mode = "inference" if m["mode"] == "inf" else "training"
            found.add((m["model"], mode, int(m["batch"]), int(m["seq"])))
    return sorted(found)


def warm_cache() -> int:
    """Capture (and cache) the graph of every label's model/mode/batch/seq; returns how many."""
    from tqdm import tqdm
    shapes = label_shapes()
    for model, mode, batch, seq in tqdm(shapes, desc="graphs", file=sys.stderr):
        capture(paths.MODEL_CONFIGS / f"{model}.json", batch, seq, mode)
    return len(shapes)


def main(argv=None) -> int:
    """`python -m lib.graph CONFIG.json BATCH SEQ MODE`: print the kernel table as CSV.

    `python -m lib.graph --warm` captures every label's graph into the cache (a forecast then imports no
    transformers and captures nothing: `make bench`'s forecast_cli_cold against forecast_cli_capture).
    """
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--warm"]:
        print(warm_cache(), "graphs cached", file=sys.stderr)
        return 0
    if len(argv) != 4:
        print("usage: python -m lib.graph CONFIG.json BATCH SEQ inference|training", file=sys.stderr)
        return 2
    try:
        df = capture(argv[0], int(argv[1]), int(argv[2]), argv[3])
    except (GraphError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    df.to_csv(sys.stdout, index=False)
    print(json.dumps(summary(df)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
