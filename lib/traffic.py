"""Softmax and layernorm kernels that move more bytes than the forward kernels their predictors learned (notebook 05).

The softmax and layernorm predictors learned forward kernels only (the kernel dataset has no other): read x, write
y, one B x H tensor each. Two kinds of kernel in a model move more:
- a fused kernel that runs an element-wise chain as its prologue also reads the chain's side inputs
  (`extra_bytes`, lib.fusion.fuse_elementwise);
- a backward kernel reads one B x H tensor more: softmax's reads y and dy and writes dx, layernorm's reads x and
  dy and writes dx (its mean, rstd and gamma are rows or columns, not B x H; the dgamma / dbeta column sums run
  in a second kernel, a memory-bound row of their own: lib.graph_ops.kernel_rows).
A memory-bound kernel's time scales with its traffic, so each is priced from the forward kernel of its shape:
    latency = latency_forward(B, H) * (bytes_forward + extra_bytes) / bytes_forward
    extra_bytes(backward) = 4 * B * H        (fp32)
Also here: what a forecast would be had its backward kernels been priced otherwise (without the traffic rule, without
a backward's second kernel, with a plain backward's one dropout kernel), or its element-wise calls with a strided input
by their contiguous bytes, which notebook 05 sets beside the labels.
"""
from __future__ import annotations

import ast
import math

import numpy as np
import pandas as pd

from .graph_ops import COLUMN_SUMS, GRAD_TIMES_MASK, MASK_TIMES_SCALE, MASK_TO_FLOAT, STRIDED_READ
from .ops import FP32_BYTES
from .roofline import flops_and_bytes

REDUCTIONS = ("softmax", "ln")
BACKWARD_PHASE = "bw"


def backward_extra_bytes(table: pd.DataFrame) -> np.ndarray:
    """fp32 bytes of the one B x H tensor a backward softmax / layernorm kernel reads on top (0 elsewhere)."""
    if "phase" not in table:
        return np.zeros(len(table))
    rows = (table["phase"] == BACKWARD_PHASE).to_numpy() & table["op"].isin(REDUCTIONS).to_numpy()
    return np.where(rows, FP32_BYTES * table["B"].to_numpy(float) * table["H"].to_numpy(float), 0.0)


def traffic_scale(table: pd.DataFrame, backward: bool = True) -> np.ndarray:
    """Latency factor per row of a kernel table for the bytes a softmax / layernorm kernel moves beyond the
    forward kernel of its shape: a fused prologue's side inputs and (backward=True) a backward kernel's extra
    tensor; 1 elsewhere."""
    extra = backward_extra_bytes(table) if backward else np.zeros(len(table))
    if "extra_bytes" in table:
        extra = extra + table["extra_bytes"].fillna(0.0).to_numpy(dtype=float)
    scale = np.ones(len(table))
    rows = extra > 0
    if rows.any():
        _, own_bytes = flops_and_bytes(table[rows])
        scale[rows] = (own_bytes + extra[rows]) / own_bytes
    return scale


def without_backward_traffic_ms(table: pd.DataFrame) -> float:
    """A predicted kernel table's (lib.forecast.forecast_table) total ms had backward kernels been priced as the
    forward kernels of their shape, without their extra tensor: the forecast before this module (notebook 05)."""
    factor = traffic_scale(table, backward=False) / traffic_scale(table)
    return float((table["total_ms"].to_numpy(float) * factor).sum())


def second_kernel_ms(table: pd.DataFrame, suffix: str = COLUMN_SUMS) -> float:
    """A predicted kernel table's ms in the second kernels of a backward (lib.graph_ops.kernel_rows) whose aten name
    ends with `suffix`: COLUMN_SUMS, the layernorm's column sums, or GRAD_TIMES_OUTPUT, the softmax's element-wise
    product; 0.0 without any. What a forecast adds for them (notebook 05)."""
    rows = table["aten"].astype(str).str.endswith(suffix).to_numpy()
    return float(table["total_ms"].to_numpy(float)[rows].sum())


def grad_mode_dropout_ms(table: pd.DataFrame) -> float:
    """A predicted kernel table's ms that pricing each dropout backward as the three kernels of the labels' grad mode
    (lib.graph_ops.kernel_rows) adds over the one kernel of a plain backward (masked_scale); 0.0 without any
    (notebook 05)."""
    # masked_scale reads grad and the mask and writes dx; the three kernels' first, the mask's cast, reads the mask and
    # writes grad's bytes. Both are 'mem' rows, priced by bytes / bandwidth (lib.kernels), so
    #     plain_ms = cast_ms * (cast bytes + dx bytes) / cast bytes,   dx bytes = fp32 bytes of grad's shape
    #     added = sum of the three kernels' ms - sum of plain_ms
    aten = table["aten"].astype(str)
    cast = table[aten.str.endswith(MASK_TO_FLOAT)]
    grad_shapes = [ast.literal_eval(s.split("->")[0])[0] for s in cast["shapes"]]
    dx_bytes = np.array([FP32_BYTES * math.prod(s) for s in grad_shapes], dtype=float)
    cast_bytes = cast["bytes"].to_numpy(float)
    plain_ms = cast["total_ms"].to_numpy(float) * (cast_bytes + dx_bytes) / cast_bytes
    three = aten.str.endswith((MASK_TO_FLOAT, MASK_TIMES_SCALE, GRAD_TIMES_MASK)).to_numpy()
    return float(table["total_ms"].to_numpy(float)[three].sum() - plain_ms.sum())


def sector_read_ms(table: pd.DataFrame) -> float:
    """A predicted kernel table's ms that pricing element-wise calls with a strided input by the sectors they move
    (lib.graph_ops.SECTOR_BYTES) adds over the same 'mem' kernels priced by their contiguous bytes; 0.0 without any
    (notebook 05)."""
    # a 'mem' row costs bytes / bandwidth (lib.kernels), so at contiguous bytes it would cost
    #     contiguous_ms = total_ms * contiguous bytes / bytes,  contiguous bytes = fp32 bytes of every input and output
    #     added = sum of total_ms - contiguous_ms
    rows = table[table["aten"].astype(str).str.endswith(STRIDED_READ)]
    added = 0.0
    for shapes, nbytes, ms in zip(rows["shapes"], rows["bytes"].to_numpy(float), rows["total_ms"].to_numpy(float)):
        ins, outs = (ast.literal_eval(part) for part in shapes.split("->"))
        contiguous = FP32_BYTES * sum(math.prod(s) for s in [*ins, *outs])
        added += ms * (1 - contiguous / nbytes)
    return added
