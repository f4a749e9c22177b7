"""What one GPU of a model split over several runs and holds: the kernels of a tensor-parallel shard, as Megatron-LM
splits the model, and the activations autograd saves for the backward pass (notebook 07).

A tp-way shard keeps 1/tp of the attention heads, of the MLP's inner width (of every expert's, for Mixtral) and of
the padded vocabulary (TP_SPLITS); its kernel table is lib.graph.capture of the model so sharded on the meta device
(`tp_capture`). The saved
activations are the distinct tensors autograd keeps for backward in one training forward, weights excluded, counted
on the meta device for one and two periods of each stack of blocks (`activation_bytes`); both are cached beside the
graphs.
"""
from __future__ import annotations

import copy
import hashlib
import json
import math
from pathlib import Path
from unittest import mock

import pandas as pd

from . import paths


class ShardError(ValueError):
    """A model or split this module cannot take; the message names the config file and field."""


# Megatron pads the vocabulary to a multiple of 128 x tp (make-vocab-size-divisible-by 128), so each shard is whole
VOCAB_MULTIPLE = 128
# Megatron's split of a block over tp GPUs, by module name (suffixes of Hugging Face's module names): a column-parallel
# layer keeps 1/tp of its outputs (the q, k, v projections: 1/tp of the heads), a row-parallel one 1/tp of its inputs
# (its output is then all-reduced; a bias stays whole, added after); the token embedding and the LM head keep 1/tp of
# the padded vocabulary. A fused projection (GPT-2's c_attn, Phi-3's qkv_proj and gate_up_proj, NeoX's
# query_key_value) is column-parallel as a whole: Megatron orders its rows so that each GPU's 1/tp holds 1/tp of each
# part. Mixtral's experts are one module of 3D weights [experts, out, in]: with expert tensor parallelism, Megatron's
# default, every expert keeps 1/tp of its inner width ("dims": module -> {parameter: the dimension split}); Switch's
# experts are Linear layers, split as the dense MLP's, and its relative position bias [buckets, heads] keeps 1/tp of
# the heads. Switch's decoder splits its cross-attention as its self-attention.
_LLAMA_ATTENTION = {"column": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"), "row": ("self_attn.o_proj",),
                    "embedding": "model.embed_tokens"}
_LLAMA_SPLITS = {**_LLAMA_ATTENTION, "column": (*_LLAMA_ATTENTION["column"], "mlp.gate_proj", "mlp.up_proj"),
                 "row": (*_LLAMA_ATTENTION["row"], "mlp.down_proj")}
TP_SPLITS = {"gpt2": {"column": ("attn.c_attn", "mlp.c_fc"), "row": ("attn.c_proj", "mlp.c_proj"),
                      "embedding": "transformer.wte"},
             "opt": {"column": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "fc1"),
                     "row": ("self_attn.out_proj", "fc2"), "embedding": "model.decoder.embed_tokens"},
             "bert": {"column": ("attention.self.query", "attention.self.key", "attention.self.value",
                                 "intermediate.dense"),
                      "row": ("attention.output.dense", "output.dense"), "embedding": "bert.embeddings.word_embeddings"},
             "llama": _LLAMA_SPLITS, "mistral": _LLAMA_SPLITS, "qwen2": _LLAMA_SPLITS, "gemma": _LLAMA_SPLITS,
             "phi3": {"column": ("self_attn.qkv_proj", "mlp.gate_up_proj"), "row": ("self_attn.o_proj", "mlp.down_proj"),
                      "embedding": "model.embed_tokens"},
             "gpt_neox": {"column": ("attention.query_key_value", "mlp.dense_h_to_4h"),
                          "row": ("attention.dense", "mlp.dense_4h_to_h"), "embedding": "gpt_neox.embed_in"},
             "mixtral": {**_LLAMA_ATTENTION, "dims": {"experts": {"gate_up_proj": 1, "down_proj": 2}}},
             "switch_transformers": {"column": tuple(f"{a}.{p}" for a in ("SelfAttention", "EncDecAttention")
                                                     for p in "qkv") + (".wi",),
                                     "row": ("SelfAttention.o", "EncDecAttention.o", ".wo"),
                                     "dims": {"relative_attention_bias": {"weight": 1}}, "embedding": "shared"}}

# the MLP's inner width, which a shard keeps 1/tp of (GPT-2's default, 4 x n_embd, splits when the heads do)
INNER_FIELDS = {"gpt2": "n_inner", "opt": "ffn_dim", "switch_transformers": "d_ff"}


def config_field(cfg, name: str) -> str:
    """The field a model's config names Hugging Face's common `name` by ('hidden_size' is GPT-2's 'n_embd', Switch's
    'd_model'; lib.model_config.ALIASES) (notebook 07)."""
    from .model_config import ALIASES
    return ALIASES.get(cfg.model_type, {}).get(name, name)


def padded_vocab(vocab: int, tp: int) -> int:
    """Megatron's vocabulary, padded to a multiple of 128 x tp (notebook 07)."""
    multiple = VOCAB_MULTIPLE * tp
    return math.ceil(vocab / multiple) * multiple


def shard(model, cfg, tp: int) -> None:
    """Shard a built Hugging Face model in place as Megatron's tensor parallelism splits it over tp GPUs (TP_SPLITS)."""
    import torch
    split = TP_SPLITS[cfg.model_type]

    def new(shape, like):
        return torch.nn.Parameter(torch.empty(shape, device=like.device))

    def kept(name, width):
        if width % tp:
            raise ShardError(f"{cfg.path}: {name} ({width} wide) does not split over {tp} GPUs")
        return width // tp

    for name, mod in model.named_modules():
        for side in ("column", "row"):
            if not name.endswith(split.get(side, ())):
                continue
            # the weight's input dimension: nn.Linear stores [out, in], GPT-2's Conv1D [in, out]
            in_dim = 1 if isinstance(mod, torch.nn.Linear) else 0
            dim = in_dim if side == "row" else 1 - in_dim            # the dimension this GPU keeps 1/tp of
            shape = list(mod.weight.shape)
            shape[dim] = kept(name, shape[dim])
            mod.weight = new(shape, mod.weight)
            if side == "column" and mod.bias is not None:
                mod.bias = new(shape[1 - in_dim], mod.bias)
            if hasattr(mod, "nf"):         # Conv1D's output width
                mod.nf = shape[1]
        for suffix, dims in split.get("dims", {}).items():
            if name.endswith(f".{suffix}"):
                for param, dim in dims.items():
                    shape = list(getattr(mod, param).shape)
                    shape[dim] = kept(f"{name}.{param}", shape[dim])
                    setattr(mod, param, new(shape, getattr(mod, param)))
        if hasattr(mod, "split_size"):     # GPT2Attention splits its fused q, k, v by width
            mod.split_size //= tp
        if hasattr(mod, "num_heads") and hasattr(mod, "q_proj"):   # OPTAttention reshapes by its head count
            mod.num_heads //= tp
        if hasattr(mod, "qkv_proj"):       # Phi3Attention slices its fused q, k, v by the config's head counts
            mod.config = copy.copy(mod.config)
            mod.config.num_attention_heads //= tp
            mod.num_key_value_heads //= tp
        if hasattr(mod, "key_value_proj_dim"):   # Switch's attention: its zero position bias takes n_heads
            mod.n_heads //= tp
            mod.inner_dim //= tp
    emb = model.get_submodule(split["embedding"])
    head = model.get_output_embeddings()   # None: no LM head (a BERT built for inference)
    vocab = padded_vocab(emb.weight.shape[0], tp) // tp
    whole = emb.weight
    emb.weight = new((vocab, whole.shape[1]), whole)
    # the modules tied to the embedding (Switch's stacks embed with its shared weight; a tied LM head) take its shard
    tied = [m for m in model.modules() if m is not emb and getattr(m, "weight", None) is whole]
    for m in (emb, *tied):
        m.weight = emb.weight
        if isinstance(m, torch.nn.Embedding):
            m.num_embeddings = vocab
            if m.padding_idx is not None and m.padding_idx >= vocab:   # a pad token in another GPU's part (Phi-3's)
                m.padding_idx = None
    if head is not None:
        if head not in tied:
            head.weight = new((vocab, head.weight.shape[1]), head.weight)
        if head.bias is not None:          # BERT's LM head adds a bias per token of the vocabulary
            head.bias = new(vocab, head.bias)


def _code_hash() -> str:
    """Hash of this module's source: the shard and the counting decide every cached table here."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def check_split(cfg, tp: int) -> None:
    """ShardError, naming the config and field, unless a model config splits over tp GPUs: its type in TP_SPLITS, its
    heads, key/value heads and MLP inner width multiples of tp (notebook 07)."""
    if cfg.model_type not in TP_SPLITS:
        raise ShardError(f"{cfg.path}: tensor parallelism is split here for model_type "
                         f"{', '.join(sorted(TP_SPLITS))} (got {cfg.model_type!r})")
    for field in (config_field(cfg, "num_attention_heads"), "num_key_value_heads",
                  INNER_FIELDS.get(cfg.model_type, "intermediate_size")):
        if cfg.raw.get(field) and cfg.raw[field] % tp:
            raise ShardError(f"{cfg.path}: field '{field}' ({cfg.raw[field]}) does not split over {tp} GPUs")


def tp_capture(config_path, batch: int, seq: int, tp: int, mode: str = "training", use_cache: bool = True):
    """Kernel table of ONE GPU of a tp-way tensor-parallel model: lib.graph.capture of the sharded model, cached
    (notebook 07)."""
    from . import graph, model_config
    cfg = model_config.load_config(config_path)
    check_split(cfg, tp)
    model_config.check_args(cfg, batch, seq, mode)
    key = hashlib.sha256(f"{graph.cache_key(cfg, int(batch), int(seq), mode)}-{tp}-{_code_hash()}".encode()).hexdigest()
    cache = graph.GRAPH_CACHE / f"{cfg.name}-{mode}-{batch}-{seq}-tp{tp}-{key[:16]}.pkl"
    if use_cache and cache.exists():
        return pd.read_pickle(cache)
    from . import graph_capture

    def sharded(cfg_, mode_, depths, batch_, device="meta"):
        model = build(cfg_, mode_, depths, batch_, device)
        shard(model, cfg_, tp)
        return model

    build = graph_capture.build_model
    with mock.patch.object(graph_capture, "build_model", sharded):
        df = graph.capture(config_path, batch, seq, mode, use_cache=False)
    if use_cache:
        cache.parent.mkdir(parents=True, exist_ok=True)
        paths.write_atomic(cache, df.to_pickle)
    return df


def _saved_bytes(cfg, batch: int, seq: int, depths: tuple, tp: int) -> int:
    """Bytes of the distinct tensors autograd saves in one training forward of `depths` blocks per stack (weights
    excluded)."""
    import torch
    from . import graph_capture
    model = graph_capture.build_model(cfg, "training", depths, batch)
    if tp > 1:
        shard(model, cfg, tp)
    seen = {}

    def pack(t):
        storage = t.untyped_storage()      # views share one: counted once
        seen[storage._cdata] = storage.nbytes()
        return t

    ids = torch.zeros(batch, seq, dtype=torch.long, device="meta")
    inputs = {"input_ids": ids, **({"decoder_input_ids": ids} if len(depths) == 2 else {})}   # as lib.graph's capture
    # under the capture's dispatch mode, as lib.graph.capture runs it (Hugging Face's masks then skip data checks)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), graph_capture.as_measured(cfg.model_type), \
            graph_capture.Recorder():
        model(**inputs, return_dict=True)
    weights = {p.untyped_storage()._cdata for p in model.parameters()}
    return sum(n for k, n in seen.items() if k not in weights)


# Blocks repeat, so short models give the rest. With one period of each stack (a period: 1 block; Switch: a sparse
# step, lib.model_config.stack_periods) saving s_1, and one more period of stack k saving s_k:
#     per period of stack k = s_k - s_1,    outside the blocks = s_1 - sum_k per period of k,
# and the whole model saves  outside + sum_k (L_k / p_k) per period of k  =  outside + L per_block,  per_block being
# the mean over its L blocks (for one stack of single-block periods, each block's).
def activation_bytes(config_path, batch: int, seq: int, tp: int = 1, use_cache: bool = True) -> dict:
    """{"outside", "per_block"}: bytes autograd saves for backward outside the blocks and per block (the mean over
    the model's blocks), on one GPU of a tp-way shard (notebook 07); cached beside the graphs."""
    from . import graph, model_config
    cfg = model_config.load_config(config_path)
    model_config.check_args(cfg, batch, seq, "training")
    key = hashlib.sha256(f"{graph.cache_key(cfg, int(batch), int(seq), 'training')}-{tp}-{_code_hash()}".encode())
    cache = graph.GRAPH_CACHE / f"{cfg.name}-saved-{batch}-{seq}-tp{tp}-{key.hexdigest()[:16]}.json"
    if use_cache and cache.exists():
        return json.loads(cache.read_text())
    one = _saved_bytes(cfg, int(batch), int(seq), cfg.periods, tp)
    per_period = [_saved_bytes(cfg, int(batch), int(seq), tuple(p * (1 + (j == k)) for j, p in enumerate(cfg.periods)),
                               tp) - one for k in range(len(cfg.periods))]
    blocks = sum(n // p * x for n, p, x in zip(cfg.num_layers, cfg.periods, per_period))
    layers = sum(cfg.num_layers)
    out = {"outside": one - sum(per_period), "per_block": blocks // layers if blocks % layers == 0 else blocks / layers}
    if use_cache:
        cache.parent.mkdir(parents=True, exist_ok=True)
        paths.write_atomic(cache, lambda tmp: tmp.write_text(json.dumps(out)))
    return out


def saved_bytes_of(saved: dict, blocks: int) -> float:
    """Bytes a model of `blocks` blocks saves for backward, from activation_bytes' {"outside", "per_block"}: outside +
    blocks * per_block (notebooks 05 and 07)."""
    return saved["outside"] + blocks * saved["per_block"]
