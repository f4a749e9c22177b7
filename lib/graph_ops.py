"""Map one recorded aten call to a kernel row of the predictors' op kinds (used by lib.graph, notebook 05).

Op kinds: 'bmm' and 'linear' (GEMMs, upstream naming [B,M,N] @ [B,N,K] -> [B,M,K], N reduced), element-wise
lib.ops.EW_OPS over [B, H] (H = last dim of the output, B = numel / H), 'softmax' and 'ln' (forward and backward: the
backward kernels keep the class, phase 'bw'), and 'mem' for everything else that launches a kernel (embedding and its
backward, gathers/scatters, copies, fills, reductions, dropout, a layernorm backward's column sums, an element-wise
call that reads an input out of order), costed by `bytes` read + written (a gather reads only the rows it picks, a
fill reads nothing). View-like ops and allocations launch no kernel and are dropped.
`kernel_rows` gives every kernel of a call, `classify` its first. Pure python: importing it does not import torch.
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
# Fills and random fills write their output and read no tensor (a `like` op reads only its input's shape):
#     bytes = output bytes
FILL = {"zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full",
        "fill", "zero", "scalar_tensor", "arange", "uniform", "normal", "rand", "rand_like", "randn", "randn_like"}
# In-place scatters (self[index] = src, or += src) write, and for the accumulating ones first read, only the rows
# they touch, not the whole of self:   bytes = index and src bytes + (1 or 2) * src bytes
# (their out-of-place forms copy self first, so their traffic is the whole of self: counted as the default.)
SCATTER_INPLACE = {"index_put": 1, "index_copy": 1, "scatter": 1, "index_add": 2, "scatter_add": 2}
SOFTMAX = {"_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data"}
LAYERNORM = {"native_layer_norm", "native_layer_norm_backward"}
LAYERNORM_BACKWARD = "native_layer_norm_backward"
COLUMN_SUMS = "[dgamma,dbeta]"     # ends the aten name of a layernorm backward's second kernel (kernel_rows)
SOFTMAX_BACKWARD = "_softmax_backward_data"
GRAD_TIMES_OUTPUT = "[grad*output]"   # ends the aten name of a softmax backward's element-wise kernel (kernel_rows)
GRAD_SUM = "[sum of grads]"   # ends the aten name of a kernel with which autograd sums two gradients (kernel_rows)
DROPOUT_BACKWARD = "native_dropout_backward"
# end the aten names of the three kernels of a dropout's backward as the labels show it (kernel_rows)
MASK_TO_FLOAT, MASK_TIMES_SCALE, GRAD_TIMES_MASK = "[mask->float]", "[mask*scale]", "[grad*mask]"

# An element-wise kernel walks its output in memory order. An input whose elements lie `stride` apart along that
# innermost dimension (the capture's read_strides: T5's and Switch's relative position bias, a permuted view of
# [query, key, head]) is read uncoalesced, by PyTorch's indexed, non-vectorized path: neighbouring threads read
# elements stride x element bytes apart, and the memory moves whole 32-byte sectors, so each such element costs a
# sector unless neighbours share one, once per output element (a bias broadcast over the batch is read again for each
# batch row). That kernel is priced as a memory-bound 'mem' kernel:
#     bytes = outputs + contiguous or broadcast inputs
#             + sum over strided inputs of output numel x min(|stride| x element bytes, SECTOR_BYTES)
SECTOR_BYTES = 32
STRIDED_READ = "[strided read]"   # ends the aten name of such a kernel (lib.traffic.sector_read_ms)


def _in_place(aten: str) -> bool:
    """'aten.index_add_.default' -> True: the op writes into its first input."""
    name = aten.split(".")[1] if aten.startswith("aten.") else aten
    return name.endswith("_") and not name.endswith("__")


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


def _strided_read_bytes(r: dict) -> float | None:
    """Bytes an element-wise call reads when an input is strided along the innermost dimension (SECTOR_BYTES above),
    else None."""
    reads, strided = 0.0, False
    out_numel = _numel(r["outs"][0][0]) if r["outs"] else _numel(r["ins"][0][0])
    for (shape, nbytes, _), stride in zip(r["ins"], r.get("read_strides") or [None] * len(r["ins"])):
        numel = _numel(shape)
        if stride is None or abs(stride) <= 1 or numel <= 1:
            reads += nbytes
        else:
            reads += out_numel * min(abs(stride) * nbytes / numel, SECTOR_BYTES)
            strided = True
    return reads if strided else None


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
        strided = _strided_read_bytes(r)
        if strided is not None:
            row.update(aten=aten + STRIDED_READ, bytes=strided + sum(n for _, n, _ in outs))
            return row
        b, h = _vec_dims(out_shape)
        row.update(op=kind, B=b, H=h, fusable=True)
        return row
    # Everything else is memory-bound: bytes read (storage-backed inputs) + bytes written.
    # (in-place ops: the output aliases an input and is counted once read, once written)
    out_bytes = sum(n for _, n, _ in outs)
    if name in FILL:
        row["bytes"] = out_bytes
    elif name in SCATTER_INPLACE and _in_place(aten) and len(ins) >= 2:
        row["bytes"] = sum(n for _, n, _ in ins[1:]) + SCATTER_INPLACE[name] * ins[-1][1]
    else:
        read_bytes = sum(n for _, n, _ in ins[1:]) + out_bytes if name in GATHER else sum(n for _, n, _ in ins)
        row["bytes"] = read_bytes + out_bytes
    return row


# PyTorch's CUDA layernorm backward is two kernels: one computes dx row by row (the 'ln' row: reads dy and x, writes
# dx; lib.traffic prices its extra tensor), and where gamma or beta needs a gradient a second one sums the columns
# for dgamma = sum over rows of dy * (x - mean) * rstd and dbeta = sum over rows of dy. That one reads dy and x (and
# the per-row mean and rstd) again and writes the two H-vectors, a memory-bound 'mem' kernel:
#     bytes = dy + x + mean + rstd (the inputs before gamma) + dgamma + dbeta (the outputs after dx)
# PyTorch's CUDA softmax backward is two kernels as well (softmax_backward_cuda_out: tmp = grad * output, then the row kernel
# dx = tmp - output * rowsum(tmp)): an element-wise 'mul' of two B x H tensors (the dataset's mul op, at the row
# kernel's B and H), then the 'softmax' row (reads tmp and y, writes dx; lib.traffic prices its extra tensor). Every
# profiler trace of one aten._softmax_backward_data call on the H200 shows both kernels (data/measured/README.md).
# A dropout's backward, as the labels show it, is three kernels. A plain loss.backward() runs native_dropout_backward as
# one (masked_scale: reads grad and the bool mask, writes dx). But autograd takes another derivative of native_dropout
# when grad mode is on during the backward (create_graph=True), infinitely_differentiable_native_dropout_backward:
#     dx = grad * (mask.type_as(grad) * scale)
#     cast      mask (1 byte per element) -> float: a 'mem' kernel, bytes = mask bytes + grad bytes
#     scale     mask_float * scale: the dataset's 'mulu' over grad's B x H
#     product   grad * scaled mask: the dataset's 'mul' over grad's B x H
# 25 bytes per fp32 element against masked_scale's 9. Every label CSV with both nodes times the backward of the
# attention probabilities' dropout at 2.8-3.8 times the backward of the division of the scores of the same size (one
# kernel of 8 bytes per element), as 25 / 8 = 3.1 says and 9 / 8 does not (notebook 05).
# Where a tensor feeds several ops (a residual stream feeds the next block's layernorm and the residual add, GPT-2's
# gelu reads its input three times), the autograd engine adds the gradients that come back from each, an element-wise
# add the capture marks (lib.graph_capture, record field grad_sum). It runs in no op's backward, and the label CSVs'
# add nodes, whose backward runs no kernel, do not time it (notebook 05): kernel_rows tags its row's aten name with
# GRAD_SUM, which lib.calibration keeps out of the one-layer comparison with the labels' nodes. A forecast prices it
# as any add.
def kernel_rows(r: dict) -> list[dict]:
    """One recorded aten call -> the kernel rows it launches (classify's row, and a layernorm or softmax backward's
    second; a dropout backward's three; a gradient sum's row tagged GRAD_SUM)."""
    row = classify(r)
    if row is None:
        return []
    if r.get("grad_sum"):
        return [dict(row, aten=r["aten"] + GRAD_SUM)]
    if _base(r["aten"]) == SOFTMAX_BACKWARD:
        return [row, dict(row, op="mul", aten=r["aten"] + GRAD_TIMES_OUTPUT)]
    if _base(r["aten"]) == DROPOUT_BACKWARD:
        (grad_shape, grad_bytes, _), (_, mask_bytes, _) = r["ins"][:2]
        b, h = _vec_dims(grad_shape)
        return [dict(row, bytes=mask_bytes + grad_bytes, aten=r["aten"] + MASK_TO_FLOAT),
                dict(row, op="mulu", B=b, H=h, bytes=math.nan, aten=r["aten"] + MASK_TIMES_SCALE),
                dict(row, op="mul", B=b, H=h, bytes=math.nan, aten=r["aten"] + GRAD_TIMES_MASK)]
    if _base(r["aten"]) != LAYERNORM_BACKWARD or len(r["outs"]) < 2:
        return [row]
    reads = sum(n for _, n, _ in r["ins"][:4])
    writes = sum(n for _, n, _ in r["outs"][1:])
    sums = dict(row, op="mem", B=math.nan, H=math.nan, bytes=reads + writes, aten=r["aten"] + COLUMN_SUMS)
    return [row, sums]
