"""Map one recorded aten call to a kernel row of the predictors' op kinds (used by lib.graph, notebook 05).

Op kinds: 'bmm' and 'linear' (GEMMs, upstream naming [B,M,N] @ [B,N,K] -> [B,M,K], N reduced),
element-wise lib.ops.EW_OPS over [B, H] (H = last dim of the output, B = numel / H), 'softmax' and 'ln'
(forward and backward: the backward kernels keep the class, phase 'bw'), and 'mem' for everything
else that launches a kernel (embedding and its backward, gathers/scatters, copies, fills,
reductions, dropout), costed by `bytes` read + written (a gather reads only the rows it picks). View-like ops and allocations launch no
kernel and are dropped. Pure python: importing it does not import torch.
"""
from __future__ import annotations

import math

COLUMNS = ["aten", "phase", "op", "B", "M", "N", "K", "H", "bytes", "count", "layer", "fusable",
           "shapes"]

# Ops that alias their input or only allocate: no kernel.
NO_KERNEL = {
    "view", "_unsafe_view", "reshape", "_reshape_alias", "expand", "permute", "transpose", "t",
    "slice", "select", "unsqueeze", "squeeze", "detach", "alias", "as_strided", "split",
    "split_with_sizes", "unbind", "chunk", "narrow", "lift_fresh", "empty", "empty_like",
    "empty_strided", "new_empty", "new_empty_strided", "_to_copy_noop", "unfold", "diagonal",
    "view_as", "expand_as", "_local_scalar_dense", "sym_size", "sym_stride", "sym_numel",
    "is_same_size", "resize_", "set_",
}

# aten base name -> EW op kind (binary kind; the unary 'u' variant is chosen when only one
# input is a tensor of more than one element, e.g. x * 0.5 -> 'mulu').
EW_BINARY = {"add": "add", "sub": "add", "rsub": "add", "mul": "mul", "div": "div", "pow": "pow"}
EW_UNARY = {"relu": "relu", "gelu": "gelu", "tanh": "tanh"}
# Backward element-wise kernels read (grad, saved tensor) and write one tensor: binary 'mul'-like.
EW_BACKWARD = {"gelu_backward", "tanh_backward", "threshold_backward", "sigmoid_backward", "silu_backward"}
# Other point-wise kernels: costed like 'add' (two or more tensor inputs) or 'addu' (one).
EW_OTHER = {"neg", "exp", "log", "sqrt", "rsqrt", "sigmoid", "abs", "where", "masked_fill",
            "clamp", "clamp_min", "clamp_max", "minimum", "maximum", "reciprocal", "sin", "cos",
            "erf", "silu", "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and",
            "bitwise_not", "bitwise_and", "bitwise_or", "sign", "square", "lerp", "addcmul",
            "addcdiv"}
# Gathers read only the rows they pick (plus their indices), not the whole source (an embedding table):
#     bytes = index bytes + 2 * output bytes (the picked rows read, then written)
GATHER = {"embedding", "index", "index_select", "gather"}
SOFTMAX = {"_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data"}
LAYERNORM = {"native_layer_norm", "native_layer_norm_backward"}


def _base(aten: str) -> str:
    """'aten.add_.Tensor' -> 'add' (in-place suffix stripped)."""
    name = aten.split(".")[1] if aten.startswith("aten.") else aten
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def _numel(shape) -> int:
    return math.prod(shape) if shape else 1


def _vec_dims(shape) -> tuple:
    """[B, H] view of a tensor: H = last dim, B = numel / H."""
    h = shape[-1] if shape else 1
    return _numel(shape) // max(h, 1), h


def classify(r: dict) -> dict | None:
    """One recorded aten call -> kernel row dict, or None when it launches no kernel."""
    aten, name = r["aten"], _base(r["aten"])
    ins, outs = r["ins"], r["outs"]
    if r["is_view"] or name in NO_KERNEL or not outs and not ins:
        return None
    row = dict(aten=aten, phase=r["phase"], op="mem", B=math.nan, M=math.nan, N=math.nan,
               K=math.nan, H=math.nan, bytes=math.nan, count=1, layer=r["layer"], fusable=False,
               shapes=str([s for s, _, _ in ins]) + "->" + str([s for s, _, _ in outs]),
               stack=r["stack"], block=r["block"])
    big_ins = [s for s, _, _ in ins if _numel(s) > 1]
    out_shape = outs[0][0] if outs else ins[0][0]
    # GEMMs. mm/addmm: [M,N] @ [N,K]; a bias-free mm is costed as 'linear' too (B = 1).
    if name in ("mm", "addmm"):
        a, b = (ins[0][0], ins[1][0]) if name == "mm" else (ins[1][0], ins[2][0])
        row.update(op="linear", B=1, M=a[0], N=a[1], K=b[1])
        return row
    if name in ("bmm", "baddbmm"):
        a, b = (ins[0][0], ins[1][0]) if name == "bmm" else (ins[1][0], ins[2][0])
        row.update(op="bmm", B=a[0], M=a[1], N=a[2], K=b[2])
        return row
    if name in SOFTMAX | LAYERNORM:
        # vector kernels over rows of the (first) input: B rows of H elements
        b, h = _vec_dims(ins[0][0])
        row.update(op="softmax" if name in SOFTMAX else "ln", B=b, H=h)
        return row
    kind = None
    if name in EW_BINARY and out_shape and _numel(out_shape) > 1:
        kind = EW_BINARY[name] if len(big_ins) >= 2 else EW_BINARY[name] + "u"
    elif name in EW_UNARY:
        kind = EW_UNARY[name]
    elif name in EW_BACKWARD:
        kind = "mul"
    elif name in EW_OTHER and out_shape and _numel(out_shape) > 1:
        kind = "add" if len(big_ins) >= 2 else "addu"
    if kind is not None:
        b, h = _vec_dims(out_shape)
        row.update(op=kind, B=b, H=h, fusable=True)
        return row
    # Everything else is memory-bound: bytes read (storage-backed inputs) + bytes written.
    # (in-place ops: the output aliases an input and is counted once read, once written)
    out_bytes = sum(n for _, n, _ in outs)
    read_bytes = sum(n for _, n, _ in ins[1:]) + out_bytes if name in GATHER else sum(n for _, n, _ in ins)
    row["bytes"] = read_bytes + out_bytes
    return row
