"""Record the aten kernels of a Hugging Face model on the meta device (used by lib.graph, notebook 05).

A TorchDispatchMode sees every aten op below autograd, forward and backward, with input/output
shapes. Forward pre/post hooks on each block, and tensor hooks on block outputs for the backward
(autograd runs a block's backward after the gradient of its output is complete), say which block
(or prologue/epilogue) an op belongs to. View-like ops are recorded too; lib.graph_ops drops them.
Post hooks on every backward node mark the gradient sums: where a tensor feeds several ops, the autograd
engine adds the gradients that come back from each, after the node that returns the second one has finished.
"""
from __future__ import annotations

import contextlib
import copy
import os
import warnings

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402


def _tensor_info(t) -> tuple:
    """(shape, bytes actually backed by storage, dtype name) of a tensor (expanded views count once)."""
    nbytes = t.numel() * t.element_size()
    try:
        nbytes = min(nbytes, t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):
        pass
    return tuple(t.shape), int(nbytes), str(t.dtype).replace("torch.", "")


def _read_strides(tensors: list, out) -> list:
    """Each tensor's stride (elements) along the dimension an element-wise kernel walks innermost, the one in which
    `out` has its smallest stride (TensorIterator orders its loops by the output's strides); 0 where the tensor is
    broadcast along it, None where its shape cannot broadcast to `out`'s (a reduction's input, say)."""
    sized = [d for d in range(out.dim()) if out.shape[d] > 1]
    if not sized:
        return [0] * len(tensors)
    inner = min(sized, key=lambda d: (out.stride()[d], -d))
    strides = []
    for t in tensors:
        d = inner - (out.dim() - t.dim())
        if t.dim() > out.dim():
            strides.append(None)
        else:
            strides.append(0 if d < 0 or t.shape[d] == 1 else int(t.stride()[d]))
    return strides


class Recorder(TorchDispatchMode):
    """Append one record per aten call: op name, phase, region, block, tensor shapes and bytes."""

    def __init__(self):
        super().__init__()
        self.records = []
        self.phase = "fw"
        self.where = None          # (stack, block) while inside a block, else None
        self.seen_block = False    # a block has run in this phase (outside ops: prologue -> epilogue)
        self.on = True
        self.finished = None       # the backward node whose function has returned (its post hook ran)

    def enter(self, where):
        self.where = where
        self.seen_block = True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten._local_scalar_dense.default and args[0].is_meta:
            # .item() on meta has no value; answer the nominal case (checks like
            # `(mask == 0).all()` hold for plain unpacked, unpadded input): True / 0 / 0.0
            t = args[0]
            return True if t.dtype == torch.bool else (0.0 if t.is_floating_point() else 0)
        out = func(*args, **kwargs)
        if self.on:
            in_tensors = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
            out_tensors = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
            ins = [_tensor_info(a) for a in in_tensors]
            outs = [_tensor_info(o) for o in out_tensors]
            first_out = out_tensors[0] if out_tensors else in_tensors[0] if in_tensors else None
            if self.where is not None:
                region, stack, block = "layer", self.where[0], self.where[1]
            else:
                first, later = ("prologue", "epilogue") if self.phase == "fw" else ("epilogue", "prologue")
                region, stack, block = (later if self.seen_block else first), -1, -1
            # an op that the engine runs while the node that has returned is still the current one: a gradient sum
            # (torch._C._current_autograd_node: the backward node being run, None outside a backward; torch 2.x)
            node = torch._C._current_autograd_node()
            self.records.append({"aten": str(func), "is_view": bool(func.is_view), "phase": self.phase,
                                 "layer": region, "stack": stack, "block": block,
                                 "ins": ins, "outs": outs,
                                 "read_strides": [] if first_out is None else _read_strides(in_tensors, first_out),
                                 "grad_sum": node is not None and node is self.finished})
        return out


def _get(module, dotted: str):
    for part in dotted.split("."):
        module = getattr(module, part)
    return module


def _first_tensor(x):
    if isinstance(x, torch.Tensor):
        return x
    for v in tree_flatten(x)[0]:
        if isinstance(v, torch.Tensor):
            return v
    return None


def _install_hooks(model, stacks, rec: Recorder) -> None:
    """Forward: pre/post hooks set the block. Backward: tensor hooks on block outputs / first input."""
    for s, dotted in enumerate(stacks):
        for i, block in enumerate(_get(model, dotted)):
            where = (s, i)

            def pre(mod, args, kwargs, where=where):
                rec.enter(where)
                x = args[0] if args else kwargs.get("hidden_states")
                if where[1] == 0 and isinstance(x, torch.Tensor) and x.requires_grad:
                    x.register_hook(lambda g: setattr(rec, "where", None))  # leaving stack in bw

            def post(mod, args, kwargs, out, where=where):
                rec.where = None
                y = _first_tensor(out)
                if y is not None and y.requires_grad:
                    y.register_hook(lambda g, where=where: rec.enter(where))

            block.register_forward_pre_hook(pre, with_kwargs=True)
            block.register_forward_hook(post, with_kwargs=True)


def _switch_experts_forward(self, hidden_states, selected_experts, routing_weights):
    """Meta-friendly Switch expert dispatch: tokens split evenly, at most expert_capacity each.

    Upstream picks tokens with nonzero()/where() on the router mask (data-dependent, impossible on
    meta). We assume balanced routing: each expert gets n_e = min(ceil(tokens / E), capacity *
    batch) tokens, gathered, run through its MLP, scaled and index_add-ed back, as upstream does.
    """
    tokens, hidden = hidden_states.shape
    n_e = min(-(-tokens // self.num_experts), self._capacity_tokens)
    final = torch.zeros_like(hidden_states)
    for e in range(self.num_experts):
        top_x = torch.arange(n_e, device=hidden_states.device)
        current = hidden_states[top_x]
        current = self[f"expert_{e}"](current) * routing_weights[top_x]
        final.index_add_(0, top_x, current.to(hidden_states.dtype))
    return final


def _mixtral_experts_forward(self, hidden_states, top_k_index, top_k_weights):
    """Meta-friendly Mixtral expert dispatch: each token's top-k slots split evenly over the experts.

    Upstream finds each expert's tokens with one_hot/nonzero/where on the router's choice (data-dependent, impossible
    on meta; those few small kernels are left out here). We assume balanced routing: each expert gets
    n_e = ceil(tokens * top_k / E) tokens, gathered, run through its gate/up and down projections (SiLU-gated), scaled
    by their routing weights and index_add-ed back, as upstream does.
    """
    tokens = hidden_states.shape[0]
    n_e = min(-(-tokens * top_k_index.shape[1] // self.num_experts), tokens)
    final = torch.zeros_like(hidden_states)
    top_x = torch.arange(n_e, device=hidden_states.device)
    for e in range(self.num_experts):
        gate, up = torch.nn.functional.linear(hidden_states[top_x], self.gate_up_proj[e]).chunk(2, dim=-1)
        current = torch.nn.functional.linear(self.act_fn(gate) * up, self.down_proj[e])
        final.index_add_(0, top_x, (current * top_k_weights[top_x, 0, None]).to(final.dtype))
    return final


def _gpu_dropout(input, p=0.5, training=True, inplace=False):
    """F.dropout as CUDA runs it: one fused native_dropout kernel (meta/CPU would decompose it
    into bernoulli_ + div_ + mul); its backward is recorded as one native_dropout_backward call, which
    lib.graph_ops.kernel_rows prices as the three kernels the labels' backward ran."""
    if not training or p == 0.0:
        return input
    return torch.native_dropout(input, p, True)[0]


# ----------------------------------------------------------------------------- attention as measured
# The labels were measured with transformers 4.x, whose eager attention differs from the one of the
# pinned transformers 5 in a few kernels; the label CSVs' fx nodes of one layer show which. These
# functions replace the model file's `eager_attention_forward` during a capture so that the recorded
# kernels are the measured ones (the layer's fx nodes, in order, in each comment):
#   BERT  matmul, truediv (by sqrt(d)), add (extended mask [b,1,1,s], always added), softmax, dropout, matmul
#   GPT-2 matmul, truediv (by a 0-dim tensor), where (causal mask, finfo.min), softmax, dropout, matmul
#   OPT   contiguous q/k/v, bmm, add (causal mask), max (clamp at finfo.min), softmax, dropout, bmm
#   Switch matmul, add (position bias, the mask folded in once), softmax, dropout, matmul (no CSV: the 4.x source)
# (transformers 5 instead multiplies by the scale, OPT's and Switch's by 1.0, adds a mask for GPT-2 and none
# for BERT without padding, adds Switch's bias and mask in two kernels per layer, and drops OPT's clamp,
# whose backward is five kernels over the score tensor.)
# Masks whose values do not matter on meta are torch.empty: no kernel, as the 4.x masks were made
# once before the blocks. q, k, v arrive as [b, heads, s, d]; the output goes back as [b, s, heads, d].

def _bert_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers 4.x BertSelfAttention scores (the bert_large label CSVs)."""
    b, _, _, d = query.shape
    scores = torch.matmul(query, key.transpose(-1, -2)) / (d ** 0.5)
    if attention_mask is None:   # 4.x extends an all-ones padding mask and adds it in every layer
        attention_mask = torch.empty(b, 1, 1, key.shape[-2], dtype=scores.dtype, device=scores.device)
    probs = torch.nn.functional.dropout(torch.softmax(scores + attention_mask, dim=-1), p=dropout,
                                        training=module.training)
    return torch.matmul(probs, value).transpose(1, 2).contiguous(), probs


def _gpt2_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers 4.x GPT2Attention._attn (the gpt2_large, gpt3_xl, gpt3_27 label CSVs)."""
    scores = torch.matmul(query, key.transpose(-1, -2))
    scores = scores / torch.full([], value.size(-1) ** 0.5, dtype=scores.dtype, device=scores.device)
    q_len, k_len = query.shape[-2], key.shape[-2]
    causal = torch.empty(1, 1, q_len, k_len, dtype=torch.bool, device=scores.device)
    floor = torch.full([], torch.finfo(scores.dtype).min, dtype=scores.dtype, device=scores.device)
    probs = torch.softmax(torch.where(causal, scores, floor), dim=-1)
    probs = torch.nn.functional.dropout(probs, p=dropout, training=module.training)
    return torch.matmul(probs, value).transpose(1, 2), probs


def _opt_attention(module, query, key, value, attention_mask, scaling=1.0, dropout=0.0, **kwargs):
    """transformers 4.x OPTAttention (the opt_13 label CSVs); q was already scaled after q_proj."""
    b, h, s, d = query.shape
    query = query if scaling == 1.0 else query * scaling
    q, k, v = (t.contiguous().view(b * h, -1, d) for t in (query, key, value))   # 4.x _shape(): contiguous
    scores = torch.bmm(q, k.transpose(1, 2))
    if attention_mask is not None:
        scores = scores.view(b, h, s, -1) + attention_mask
        scores = torch.max(scores, torch.tensor(torch.finfo(scores.dtype).min, device=scores.device))
        scores = scores.view(b * h, s, -1)
    probs = torch.nn.functional.dropout(torch.softmax(scores, dim=-1), p=dropout, training=module.training)
    return torch.bmm(probs, v).view(b, h, s, d).transpose(1, 2).contiguous(), probs


def _switch_attention(module, query, key, value, attention_mask, scaling=1.0, dropout=0.0, position_bias=None,
                      **kwargs):
    """transformers 4.x SwitchTransformersAttention (T5-style: no scaling; no label CSV, read from the 4.x source)."""
    scores = torch.matmul(query, key.transpose(3, 2))
    # 4.x adds the mask into the position bias once, before the first block, then adds that bias in every layer
    bias = position_bias if position_bias is not None else attention_mask
    if bias is not None:
        scores += bias
    probs = torch.nn.functional.dropout(torch.softmax(scores, dim=-1), p=dropout, training=module.training)
    return torch.matmul(probs, value).transpose(1, 2).contiguous(), probs


MEASURED_ATTENTION = {"bert": _bert_attention, "gpt2": _gpt2_attention, "opt": _opt_attention,
                      "switch_transformers": _switch_attention}


def _attention_module(model_type: str):
    """The transformers module whose `eager_attention_forward` a capture of this model calls."""
    import importlib
    return importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")


def build_model(cfg, mode: str, depths, batch: int, device: str = "meta"):
    """The labels' model class for cfg.model_type, with `depths` blocks per stack, on `device` (random weights), fp32."""
    with warnings.catch_warnings():
        # transformers imports tqdm.auto, which warns in a notebook without ipywidgets (text bars work anyway)
        warnings.filterwarnings("ignore", message="IProgress not found")
        import transformers
        from transformers import CONFIG_MAPPING

    from .model_config import ARCHS
    inf_cls, train_cls, layer_fields, *_ = ARCHS[cfg.model_type]
    # a deep copy: Hugging Face edits nested fields in place (it adds 'rope_type' to a 'rope_scaling' giving 'type')
    raw = copy.deepcopy({k: v for k, v in cfg.raw.items() if k not in ("torch_dtype", "dtype", "_name_or_path")})
    for f, d in zip(layer_fields, depths):
        raw[f] = d
    if cfg.model_type == "switch_transformers":
        # keep each stack's sparse step (lib.model_config.stack_periods): a reduced stack of d blocks has d / step sparse ones
        from .model_config import SPARSE_DEFAULT, SPARSE_FIELDS, sparse_step
        for f, d, n in zip(SPARSE_FIELDS, depths, cfg.num_layers):
            step = sparse_step(n, cfg.raw.get(f, SPARSE_DEFAULT))
            if d != n:
                raw[f] = d // step if step else d + 1    # step 0 (more sparse blocks asked than blocks): none sparse
    hf_cfg = CONFIG_MAPPING[cfg.model_type].from_dict(raw)
    hf_cfg._attn_implementation = "eager"
    hf_cfg.use_cache = False
    cls = getattr(transformers, inf_cls if mode == "inference" else train_cls)
    with warnings.catch_warnings(), torch.device(device):
        warnings.simplefilter("ignore")
        model = cls(hf_cfg)
    model = model.float()
    model.train(mode == "training")
    if cfg.model_type == "switch_transformers":
        from transformers.models.switch_transformers import modeling_switch_transformers as m
        for mod in model.modules():
            if isinstance(mod, m.SwitchTransformersExperts):
                mod._capacity_tokens = hf_cfg.expert_capacity * batch
                mod.forward = _switch_experts_forward.__get__(mod)
    if cfg.model_type == "mixtral":
        from transformers.models.mixtral import modeling_mixtral as m
        for mod in model.modules():
            if isinstance(mod, m.MixtralExperts):
                mod.forward = _mixtral_experts_forward.__get__(mod)
    return model


def record(cfg, batch: int, seq: int, mode: str, depths) -> list:
    """Run the reduced-depth model on meta tensors and return the recorded aten calls."""
    model = build_model(cfg, mode, depths, batch)
    ids = torch.zeros(batch, seq, dtype=torch.long, device="meta")
    kwargs = {"input_ids": ids}
    if cfg.model_type == "switch_transformers":
        kwargs["decoder_input_ids"] = ids  # decoder input as long as the encoder input
    rec = Recorder()
    _install_hooks(model, cfg.stacks, rec)
    grad_ctx = torch.enable_grad() if mode == "training" else torch.no_grad()
    with as_measured(cfg.model_type):
        return _run(model, kwargs, mode, rec, grad_ctx)


@contextlib.contextmanager
def as_measured(model_type: str):
    """Run a model with the kernels the labels measured: CUDA's one-kernel dropout and 4.x eager attention."""
    dropout, torch.nn.functional.dropout = torch.nn.functional.dropout, _gpu_dropout
    attention = MEASURED_ATTENTION.get(model_type)
    if attention is not None:
        module = _attention_module(model_type)
        upstream, module.eager_attention_forward = module.eager_attention_forward, attention
    try:
        yield
    finally:
        torch.nn.functional.dropout = dropout
        if attention is not None:
            module.eager_attention_forward = upstream


def logits_and_seeds(out) -> tuple[list, list]:
    """The logits a training pass's backward starts from, and their seeds d(sum of logits)/d(logits) = ones
    (used by the capture and by lib.profile_model, so the forecast and the measurement run the same backward: a plain
    one, whose dropouts lib.graph_ops.kernel_rows prices as the labels ran them)."""
    logits = [v for k, v in out.items() if k.endswith("logits") and isinstance(v, torch.Tensor) and v.requires_grad]
    return logits, [torch.ones_like(t) for t in logits]


def backward_nodes(tensors) -> list:
    """Every autograd node the backward of `tensors` runs (their grad_fns and all nodes they reach)."""
    seen, todo = set(), [t.grad_fn for t in tensors]
    while todo:
        node = todo.pop()
        if node is not None and node not in seen:
            seen.add(node)
            todo.extend(nxt for nxt, _ in node.next_functions)
    return list(seen)


def _mark_gradient_sums(tensors, rec: Recorder) -> None:
    """A post hook on every backward node records that its function has returned: the engine then adds each
    gradient it returned to the one already waiting for the same input, if any (a gradient sum), before the next
    node starts."""
    for node in backward_nodes(tensors):
        node.register_hook(lambda grad_inputs, grad_outputs, node=node: setattr(rec, "finished", node))


def _run(model, kwargs, mode, rec, grad_ctx) -> list:
    """Forward (and backward) under the recorder."""
    with grad_ctx, rec:
        out = model(**kwargs, return_dict=True)
        if mode == "training":
            rec.on = False
            logits, seeds = logits_and_seeds(out)          # not recorded
            _mark_gradient_sums(logits, rec)
            rec.on, rec.phase, rec.where, rec.seen_block = True, "bw", None, False
            torch.autograd.backward(logits, seeds)
    return rec.records
