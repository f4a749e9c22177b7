"""Per-layer diagnosis of forecasts against the label CSVs, and calibrations fitted on training GPUs only (notebook 05).

A label CSV lists the torch.fx nodes of the prologue, ONE transformer layer and the epilogue with
their measured forward and backward latencies. Each node gets an op class (FC, BMM, EW, SOFTMAX,
LN, MEM, or NONE for python-level nodes that launch no kernel: size, getitem, view ...), so the
measured time of one layer per (phase, class) can be set beside the forecast's:
    predicted_layer_ms[phase, class] = sum over captured rows in the layer stack of
                                       pred_ms * count / num_layer.
Calibrations read only the training GPUs' labels (lib.devices.TRAIN_GPUS_NVIDIA); the set of
devices a fit read is returned with it, so a test can check that no target GPU was used.
"""
from __future__ import annotations

import ast
import math
import re

import numpy as np
import pandas as pd

from .data import OP_CLASS
from .graph_ops import DROPOUT_BACKWARD, GRAD_SUM, LAYERNORM_BACKWARD, SOFTMAX_BACKWARD

CLASSES = ("FC", "BMM", "EW", "SOFTMAX", "LN", "MEM")
# kernel_node_class of autograd's gradient sums (lib.graph_ops.GRAD_SUM): they run in no op's backward, and the labels'
# add nodes do not time them (notebook 05), so the one-layer comparison (predicted_layer, which keeps CLASSES) leaves
# them out
UNTIMED = "GRAD_SUM"
_FC_MODULES = re.compile(r"^(dense|classifier|decoder|fc\d+|[qkv]_proj|query|key|value|out_proj|"
                         r"lm_head|seq_relationship|c_attn|c_proj|c_fc|w[io]|[qkvo])$")
_LN_MODULES = re.compile(r"(LayerNorm|layer_norm|^ln_\w+|^ln\d*$)")
_MEM_MODULES = re.compile(r"(dropout|^drop$|embed|^wte$|^wpe$)")
_EW_MODULES = re.compile(r"^(activation|activation_fn|act|gelu|relu|intermediate_act_fn)$")
# (torch.max of two tensors: OPT's clamp of the attention scores at finfo.min, element-wise)
_EW_FUNCS = ("add", "sub", "mul", "truediv", "pow", "tanh", "gelu", "where", "masked_fill", "relu", "max")
# Nodes that are part of the transformer layer repeated num_layer times (layer 0 in the CSV).
_LAYER0 = re.compile(r"(?:layer|_h|layers|block)_0_")


def _numel(shape_text) -> int:
    """Elements of an fx output shape written as '(1, 1024, 1280)'."""
    try:
        shape = ast.literal_eval(str(shape_text))
    except (ValueError, SyntaxError):
        return 0
    if isinstance(shape, int):
        return shape
    return math.prod(shape) if isinstance(shape, tuple) and all(isinstance(s, int) for s in shape) else 0


def fx_function(target) -> str:
    """Function name of a call_function / call_method fx target as the label CSVs print it."""
    return re.sub(r" of type object.*| at 0x.*|<built-in (function|method) |<function |>", "", str(target)).strip()


def node_class(op: str, target: str, output_shape) -> str:
    """Op class of one fx node of a label CSV (NONE: launches no kernel of its own)."""
    target = str(target)
    if op == "call_module":
        name = target.split(".")[-1]
        for cls, pat in (("LN", _LN_MODULES), ("MEM", _MEM_MODULES), ("FC", _FC_MODULES),
                         ("EW", _EW_MODULES)):
            if pat.search(name):
                return cls
        return "NONE"
    if op not in ("call_function", "call_method"):
        return "NONE"
    base = fx_function(target)
    if base in ("matmul", "bmm", "baddbmm"):
        return "BMM"
    if base in ("addmm", "linear"):
        return "FC"
    if base == "softmax":
        return "SOFTMAX"
    if _numel(output_shape) <= 1:
        return "NONE"
    if base in ("dropout", "embedding", "contiguous", "cumsum"):
        return "MEM"
    if base.rstrip("_") in _EW_FUNCS:
        return "EW"
    return "NONE"


# NONE nodes that make or convert a tensor (a fill, an arange, a cast, a comparison, a reshape that copies), and so
# may launch a kernel; every other NONE node (size, getattr, getitem, view, permute, python arithmetic ...) runs python
# only, which a label CSV times all the same (a few microseconds each)
TENSOR_MAKERS = frozenset({"full", "tensor", "ones", "zeros", "arange", "lt", "bool", "long", "reshape", "to", "type",
                           "type_as"})


def python_only(nodes: pd.DataFrame) -> np.ndarray:
    """True for the nodes of a label CSV (label_nodes) that launch no kernel: NONE nodes, TENSOR_MAKERS excepted
    (notebook 05)."""
    function = nodes["target"].astype(str).map(lambda t: fx_function(t).split(".")[-1])
    return ((nodes["cls"] == "NONE") & ~function.isin(TENSOR_MAKERS)).to_numpy()


def label_nodes(csv_path) -> pd.DataFrame:
    """Nodes of a label CSV with `cls` (op class) and `part` (prologue | layer | epilogue)."""
    from .graph import label_layer_nodes
    nodes = label_layer_nodes(csv_path)
    nodes["cls"] = [node_class(o, t, s) for o, t, s in
                    zip(nodes["op"], nodes["target"], nodes["output_shape"])]
    idx = np.flatnonzero(nodes["Name"].astype(str).str.contains(_LAYER0).to_numpy())
    part = np.array(["prologue"] * len(nodes), dtype=object)
    if len(idx):
        # fx names function nodes by function, not by block: a block's closing dropout and residual add
        # (GPT-2, OPT) follow its last named node, and belong to it while they launch kernels
        end = idx[-1] + 1
        while (end < len(nodes) and nodes["op"].iloc[end] in ("call_function", "call_method")
               and nodes["cls"].iloc[end] in ("EW", "MEM")):
            end += 1
        part[idx[0]:end] = "layer"
        part[end:] = "epilogue"
    nodes["part"] = part
    return nodes


def measured_layer(csv_path) -> pd.DataFrame:
    """Measured ms of ONE layer per (phase, cls) from a label CSV (NONE nodes dropped)."""
    n = label_nodes(csv_path)
    n = n[(n["part"] == "layer") & (n["cls"] != "NONE")]
    fw = n.groupby("cls")["fw_latency_ms"].sum()
    bw = n.groupby("cls")["bw_latency_ms"].sum()
    out = pd.concat([fw.rename("fw"), bw.rename("bw")], axis=1).reindex(CLASSES).fillna(0.0)
    return out.stack().rename("meas_ms").rename_axis(["cls", "phase"]).reset_index()


def kernel_class(op) -> np.ndarray:
    """Op class per captured kernel row ('mem' -> MEM)."""
    return np.array([OP_CLASS.get(o, "MEM") for o in op], dtype=object)


def kernel_node_class(table: pd.DataFrame) -> np.ndarray:
    """Op class of the label node each kernel row belongs to: kernel_class, except that a layernorm backward's
    column-sum kernel (priced as 'mem', lib.graph_ops.kernel_rows) belongs to its layernorm node, LN, a softmax
    backward's element-wise kernel (priced as 'mul') to its softmax node, SOFTMAX, and a dropout backward's
    element-wise kernels to its dropout node, MEM; autograd's gradient sums, which run in no op's backward, are
    UNTIMED."""
    cls = kernel_class(table["op"])
    aten = table["aten"].astype(str)
    base = aten.str.split(".").str[1]
    cls[(base == LAYERNORM_BACKWARD).to_numpy()] = "LN"
    cls[(base == SOFTMAX_BACKWARD).to_numpy()] = "SOFTMAX"
    cls[(base == DROPOUT_BACKWARD).to_numpy()] = "MEM"
    cls[aten.str.endswith(GRAD_SUM).to_numpy()] = UNTIMED
    return cls


def untimed_layer_ms(table: pd.DataFrame, num_layer: int) -> float:
    """Predicted ms of ONE layer's UNTIMED kernels (autograd's gradient sums), which predicted_layer leaves out
    (notebook 05)."""
    t = table[table["layer"] == "layer"]
    return float(t["total_ms"].to_numpy(float)[kernel_node_class(t) == UNTIMED].sum() / max(num_layer, 1))


def class_shares(table: pd.DataFrame) -> pd.Series:
    """% of a predicted kernel table's time per op class, in CLASSES order (notebook 05's breakdowns)."""
    ms = table["total_ms"].groupby(kernel_class(table["op"])).sum()
    return (ms / ms.sum() * 100).reindex(list(CLASSES)).fillna(0.0)


def predicted_layer(table: pd.DataFrame, num_layer: int) -> pd.DataFrame:
    """Predicted ms of ONE layer per (phase, cls) from a predicted kernel table (lib.forecast.predict_table): the
    kernels of the label nodes' classes (CLASSES), so not the UNTIMED ones."""
    t = table[table["layer"] == "layer"]
    t = t.assign(cls=kernel_node_class(t), ms=t["total_ms"] / max(num_layer, 1))
    out = t.groupby(["cls", "phase"])["ms"].sum().rename("pred_ms")
    idx = pd.MultiIndex.from_product([CLASSES, ["fw", "bw"]], names=["cls", "phase"])
    return out.reindex(idx).fillna(0.0).reset_index()


# ------------------------------------------------------------------ end-to-end calibration

# Groups of a kernel table that get one factor each: forward kernels by op class, all backward
# kernels together (the training GPUs have only three training labels, too few for more).
GROUPS = (*CLASSES, "bw")
# Ridge weight pulling every factor toward 1 (no correction) in the fit below.
RIDGE = 0.1
FACTOR_BOUNDS = (0.2, 5.0)


def calibration_group(table: pd.DataFrame) -> np.ndarray:
    """Group per kernel row: 'bw' for backward rows, else the forward row's op class."""
    return np.where(table["phase"].to_numpy() == "bw", "bw", kernel_class(table["op"]))


def group_totals(table: pd.DataFrame) -> np.ndarray:
    """Predicted ms of a whole pass per calibration group (order of GROUPS)."""
    g = calibration_group(table)
    tot = table["total_ms"].to_numpy(float)
    return np.array([tot[g == k].sum() for k in GROUPS])


# The fit: factors 0.2 <= f_g <= 5 (FACTOR_BOUNDS) minimizing, over the training GPUs' plain end-to-end labels l,
#     sum_l (sum_g f_g * pred_lg / meas_l - 1)^2  +  RIDGE * sum_g (f_g - 1)^2
# (relative error of the calibrated forecast, the metric of the tables, shrunk toward 1).
def fit_factors(pred_by_group: np.ndarray, meas_ms: np.ndarray, ridge: float = RIDGE) -> np.ndarray:
    """Calibration factors (one per group) from predicted group totals (labels x groups) and measurements."""
    from scipy.optimize import lsq_linear
    n = pred_by_group.shape[1]
    a = np.vstack([pred_by_group / meas_ms[:, None], np.sqrt(ridge) * np.eye(n)])
    b = np.concatenate([np.ones(len(meas_ms)), np.sqrt(ridge) * np.ones(n)])
    return lsq_linear(a, b, bounds=FACTOR_BOUNDS).x


def training_labels() -> pd.DataFrame:
    """Plain (non-fused, single-GPU) end-to-end labels of the NVIDIA training GPUs only."""
    from .devices import TRAIN_GPUS_NVIDIA
    from .labels import load_labels
    labels = load_labels()
    keep = labels["device"].isin(TRAIN_GPUS_NVIDIA) & (labels["option"] == "")
    return labels[keep].reset_index(drop=True)


def fit_e2e_calibration(method: str = "neusight", tiles: str = "spec", cfg_by_class: dict | None = None,
                        ridge: float = RIDGE) -> dict:
    """{"factors": {group: f}, "devices": [names read], "labels": n, "ridge": r} fitted on training-GPU labels only."""
    from .forecast import predict_table
    from .graph import capture
    from .labels import device_file_of_folder
    from .devices import load_device
    from . import paths
    labels = training_labels()
    rows = []
    for r in labels.itertuples():
        kernels = capture(paths.MODEL_CONFIGS / f"{r.model}.json", r.batch, r.seq, r.mode)
        table = predict_table(kernels, load_device(device_file_of_folder(r.gpu)), method, tiles, cfg_by_class)
        rows.append(group_totals(table))
    f = fit_factors(np.array(rows), labels["e2e_ms"].to_numpy(float), ridge)
    return {"factors": dict(zip(GROUPS, map(float, f))), "devices": sorted(labels["device"].unique()),
            "labels": int(len(labels)), "ridge": ridge}


def layer_diagnosis(labels: pd.DataFrame, method: str = "neusight", tiles: str = "spec",
                    cfg_by_class: dict | None = None) -> pd.DataFrame:
    """Measured vs predicted ms of ONE layer per (label, phase, cls) for labels that have a CSV."""
    from . import paths
    from .devices import load_device
    from .forecast import forecast_table
    from .labels import device_file_of_folder
    rows = []
    for r in labels[labels["csv"] != ""].itertuples():
        table = forecast_table(paths.MODEL_CONFIGS / f"{r.model}.json", load_device(device_file_of_folder(r.gpu)),
                               r.batch, r.seq, r.mode, method=method, tiles=tiles, cfg_by_class=cfg_by_class)
        d = measured_layer(r.csv).merge(predicted_layer(table, r.num_layer), on=["cls", "phase"])
        rows.append(d.assign(device=r.device, model=r.model, mode=r.mode, batch=r.batch, seq=r.seq))
    out = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
    return out[(out["meas_ms"] > 0) | (out["pred_ms"] > 0)].reset_index(drop=True) if len(out) else out
