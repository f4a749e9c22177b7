"""Fused kernels: chains of element-wise kernels merged, and folded into a following reduction (notebook 05).

`fuse_elementwise(table)` turns a captured kernel table (lib.graph.capture) into the fused variant the
`-fusion` labels measured; lib.traffic.traffic_scale prices the side inputs a fused softmax/layernorm reads.
"""
from __future__ import annotations

import ast
import math

import pandas as pd

from .ops import FP32_BYTES
from .roofline import EW_BINARY

# Fused chain op: the costliest transcendental member if any, else binary 'add' if any member
# reads two tensors, else unary 'addu'. The fused kernel costs one kernel of that op over B x H (binary: two reads +
# one write; unary: one read + one write), not the sum over the chain.
_TRANSCENDENTAL = ("gelu", "tanh", "pow", "powu")
_FUSE_KEYS = ("phase", "layer", "count", "B", "H")
# A chain (or single fusable kernel) directly before a softmax or layernorm of the same phase, layer,
# count and B x H runs inside that kernel, as a fusing compiler (torch.compile's inductor, for one)
# emits a pointwise prologue of a reduction: its result never reaches memory; only its side inputs
# (every input but the one tensor it transforms: a residual, a broadcast attention mask) are read on top:
#     extra_bytes = sum over the chain's kernels of 4 * (numel of inputs - numel of the largest input)
_REDUCTIONS = ("softmax", "ln")


def side_bytes(r: dict) -> float:
    """fp32 bytes of a kernel's inputs beyond the one tensor it transforms, from its `shapes` text."""
    try:
        ins = ast.literal_eval(str(r["shapes"]).split("->")[0])
        numels = [math.prod(s) for s in ins if math.prod(s) > 1]
    except (KeyError, ValueError, SyntaxError, TypeError):
        # no shapes: a binary op reads one more tensor of its own size
        return FP32_BYTES * r["B"] * r["H"] if r["op"] in EW_BINARY else 0.0
    return float(FP32_BYTES * (sum(numels) - max(numels, default=0)))


# A kernel that moves one number at most (a 0-dim constant, as GPT-2's attention fills torch.full([], finfo.min)
# between its division and its `where`) does not break a chain: a fusing compiler folds the constant into the
# kernel that reads it. Such records are kept, before the chain they sat in.
SCALAR_BYTES = 8


def _is_scalar(r: dict) -> bool:
    return r["op"] == "mem" and r.get("bytes", math.nan) <= SCALAR_BYTES


def _fuse_chains(records: list) -> list:
    """Merge each run of adjacent fusable records (same phase, layer, count, B x H) into one; a scalar
    record inside a run (`_is_scalar`) does not end it."""
    out, run, held = [], [], []

    def flush():
        out.extend(held)
        held.clear()
        if not run:
            return
        if len(run) == 1:
            out.append(run[0])
        else:
            ops = [r["op"] for r in run]
            op = next((o for o in _TRANSCENDENTAL if o in ops), None)
            if op is None:
                op = "add" if any(o in EW_BINARY for o in ops) else "addu"
            fused = dict(run[0], op=op, aten="fused(" + ",".join(r["aten"] for r in run) + ")")
            fused["fused"] = sum(r["fused"] for r in run)
            fused["side_bytes"] = sum(r["side_bytes"] for r in run)
            out.append(fused)
        run.clear()

    for r in records:
        if run and _is_scalar(r):
            held.append(r)
            continue
        if r["fusable"] and run and all(r[k] == run[-1][k] for k in _FUSE_KEYS):
            run.append(r)
            continue
        flush()
        if r["fusable"]:
            run.append(r)
        else:
            out.append(r)
    flush()
    return out


def _absorb_into_reductions(records: list) -> list:
    """Fold each fusable record into the softmax/layernorm record right after it (same keys)."""
    out = []
    for r in records:
        prev = out[-1] if out else None
        if (r["op"] in _REDUCTIONS and prev is not None and prev["fusable"]
                and all(prev[k] == r[k] for k in _FUSE_KEYS)):
            out.pop()
            r = dict(r, aten="fused(" + prev["aten"] + "," + r["aten"] + ")", fused=prev["fused"] + r["fused"],
                     extra_bytes=prev["side_bytes"])
        out.append(r)
    return out


def fuse_elementwise(df: pd.DataFrame, into_reductions: bool = True) -> pd.DataFrame:
    """Fused kernels: adjacent element-wise chains merged, then (into_reductions) folded into a following
    softmax/layernorm; into_reductions=False is the chains-only rule of the paper."""
    records = [dict(r, fused=r.get("fused", 1), extra_bytes=r.get("extra_bytes", 0.0),
                    side_bytes=side_bytes(r) if r["fusable"] else 0.0) for r in df.to_dict("records")]
    out = _fuse_chains(records)
    if into_reductions:
        out = _absorb_into_reductions(out)
    extra = [c for c in ("fused", "extra_bytes") if c not in df]
    return pd.DataFrame(out, columns=list(df.columns) + extra)

