"""A Hugging Face model config, read and checked before any model is built: which architectures lib.graph captures,
the fields that size a model, and the arguments of a capture (notebook 05).

Everything here reads the JSON alone (no torch, no transformers), and each bad field is a GraphError naming the file
and the field: a config that Hugging Face would fill with its own defaults, or build otherwise than it reads, is
refused.
"""
from __future__ import annotations

import json
import numbers
from dataclasses import dataclass, field
from pathlib import Path

MODES = ("inference", "training")


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
    # Gemma (a Llama-family decoder with a GeGLU MLP, its embedding scaled by sqrt(width)), Phi-3 (Llama's with fused
    # q, k, v and gate, up projections) and GPT-NeoX (Pythia: layernorm, partial rotary, fused q, k, v, attention and
    # MLP side by side from the same input), as their Hugging Face classes run them.
    "gemma": ("GemmaForCausalLM", "GemmaForCausalLM", ("num_hidden_layers",), "max_position_embeddings",
              ("model.layers",)),
    "phi3": ("Phi3ForCausalLM", "Phi3ForCausalLM", ("num_hidden_layers",), "max_position_embeddings",
             ("model.layers",)),
    "gpt_neox": ("GPTNeoXForCausalLM", "GPTNeoXForCausalLM", ("num_hidden_layers",), "max_position_embeddings",
                 ("gpt_neox.layers",)),
    # Mixtral: Mistral's blocks with a mixture of experts for the MLP (top-k of E SwiGLU experts per token), routed
    # evenly over the experts on the meta device (lib.graph_capture._mixtral_experts_forward)
    "mixtral": ("MixtralForCausalLM", "MixtralForCausalLM", ("num_hidden_layers",), "max_position_embeddings",
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
               "llama": _HF_SIZES, "mistral": _HF_SIZES, "qwen2": _HF_SIZES, "gemma": _HF_SIZES, "phi3": _HF_SIZES,
               "gpt_neox": _HF_SIZES, "mixtral": (*_HF_SIZES, "num_local_experts", "num_experts_per_tok"),
               "switch_transformers": ("d_model", "num_heads", "d_ff", "d_kv", "num_experts", "vocab_size")}

# Optional fields that size a model: where a config gives one (and not null), it must be a positive integer too, else
# Hugging Face builds an empty embedding or head (BERT's type_vocab_size 0) that the forecast would price without a word.
OPTIONAL_SIZE_FIELDS = {"bert": ("type_vocab_size", "num_labels"), "gpt2": ("n_inner",),
                        "opt": ("word_embed_proj_dim",), "llama": ("head_dim",), "mistral": ("head_dim",),
                        "qwen2": ("head_dim",), "gemma": ("head_dim",), "phi3": (), "gpt_neox": (),
                        "mixtral": ("head_dim",),
                        "switch_transformers": ()}


# Hugging Face's other names for a config field (each config class's `attribute_map`; a test compares): a config may
# give both, and Hugging Face then builds with one of the two values, so they must agree. load_config keeps one key.
ALIASES = {"gpt2": {"hidden_size": "n_embd", "max_position_embeddings": "n_positions", "num_attention_heads": "n_head",
                    "num_hidden_layers": "n_layer"},
           "switch_transformers": {"hidden_size": "d_model", "num_attention_heads": "num_heads",
                                   "num_hidden_layers": "num_layers"},
           "mixtral": {"num_experts": "num_local_experts"}}
# Attention heads split the width evenly (each model's attention asserts it), and grouped-query attention shares
# each key/value head among the same number of query heads:
#     width % heads == 0  (unless the config gives head_dim),   heads % num_key_value_heads == 0
HEAD_FIELDS = {"bert": ("hidden_size", "num_attention_heads"), "gpt2": ("n_embd", "n_head"),
               **{t: ("hidden_size", "num_attention_heads") for t in ("opt", "llama", "mistral", "qwen2", "gemma", "phi3",
                                                                      "gpt_neox", "mixtral")}}
# the model types whose attention shares key/value heads among query heads (num_key_value_heads)
GROUPED_QUERY = ("llama", "mistral", "qwen2", "gemma", "phi3", "mixtral")
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
    except IsADirectoryError:
        raise GraphError(f"{path}: a folder without a config.json, not a model config") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise GraphError(f"{path}: not valid JSON ({e})") from None
    except OSError as e:   # no permission, ...
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
    if model_type in GROUPED_QUERY and kv is not None:
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
