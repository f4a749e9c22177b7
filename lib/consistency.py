"""Are the label CSVs' GEMM latencies consistent with the kernel dataset's, shape for shape? (notebook 05).

A label CSV measures every fx node of one model run; the kernel dataset measures GEMMs one at a
time. Where a label's FC or BMM node has a shape that the kernel dataset also measured on the same
GPU, both are measurements of the same kernel, so
    ratio = label_fw_ms / kernel_ms
should be ~1. Where it is not, no predictor trained on the kernel dataset can match that label:
the disagreement is a floor under the end-to-end error on that GPU.
Shapes, in the dataset's naming (lib.data):
    FC  (nn.Linear module, addmm, linear): x [..., N] -> out [..., K];  B = 1, M = prod(out[:-1])
    BMM (matmul, bmm, baddbmm):  a [..., M, N] @ b [..., N, K] -> out [..., M, K];  B = prod(out[:-2])
Also: how far our forecast of the matched shapes is from the kernel dataset (matched_forecast), does a label agree
with the sum of its own nodes (node_sum_table), and does a larger batch take less time per sample
(per_sample_ratio)? A whole forecast with the dataset's kernels taken as measured: lib.dataset_priced; what a short
kernel costs alone and inside a run: lib.short_kernels.
"""
from __future__ import annotations

import ast
import math

import numpy as np
import pandas as pd

from .calibration import fx_function, label_nodes, python_only

# Op class -> op name of the kernel dataset.
DATASET_OP = {"FC": "linear", "BMM": "bmm"}
# Ratios inside this band count as consistent (a 10% run-to-run/setup difference).
BAND = (0.9, 1.1)
# Functions whose GEMM operands are input_shapes[1:3] (input_shapes[0] is the added bias/input).
_ADD_FIRST = ("addmm", "baddbmm")
COLUMNS = ["device", "gpu", "model", "mode", "batch", "seq", "name", "part", "weight", "op_class",
           "B", "M", "N", "K", "label_fw_ms", "kernel_ms", "ratio"]


def _base(op: str, target: str) -> str:
    """Function name of an fx node ('module' for call_module)."""
    if op == "call_module":
        return "module"
    return fx_function(target)


def gemm_shape(op_class: str, op: str, target: str, input_shapes, output_shape) -> tuple | None:
    """(B, M, N, K) of an FC/BMM fx node in the dataset's naming, or None if its shapes cannot be read."""
    try:
        ins = ast.literal_eval(str(input_shapes))
        out = ast.literal_eval(str(output_shape))
    except (ValueError, SyntaxError):
        return None
    if not (isinstance(ins, list) and isinstance(out, tuple) and len(out) >= 2
            and all(isinstance(s, int) for s in out)):
        return None
    ins = ins[1:] if _base(op, target) in _ADD_FIRST else ins
    if not ins or not all(isinstance(s, list) and s and all(isinstance(d, int) for d in s) for s in ins):
        return None
    if op_class == "FC":
        # FC: B = 1, M = rows = prod(out[:-1]), N = in features = x[-1], K = out features = out[-1].
        rows = math.prod(out[:-1])
        if math.prod(ins[0][:-1]) != rows:
            return None
        return 1, rows, ins[0][-1], out[-1]
    if op_class == "BMM" and len(ins) >= 2 and len(ins[0]) >= 2 and len(ins[1]) >= 2:
        a, b = ins[0], ins[1]
        # BMM: a [..., M, N] @ b [..., N, K] -> out [..., M, K]; B = prod(out[:-2]) (1 for 2-D).
        if a[-1] != b[-2] or (a[-2], b[-1]) != tuple(out[-2:]):
            return None
        return math.prod(out[:-2]), a[-2], a[-1], b[-1]
    return None


def _default_labels() -> pd.DataFrame:
    """NVIDIA labels that have a node CSV."""
    from .labels import load_labels
    labels = load_labels()
    return labels[(labels["vendor"] == "nvidia") & (labels["csv"] != "")].reset_index(drop=True)


def _label_rows(r, op_classes) -> list:
    """Matchable GEMM nodes of one label CSV (before the kernel-dataset lookup)."""
    nodes = label_nodes(r.csv)
    nodes = nodes[nodes["cls"].isin(op_classes) & (nodes["fw_latency_ms"] > 0)]
    rows = []
    for n in nodes.itertuples():
        shape = gemm_shape(n.cls, n.op, n.target, n.input_shapes, n.output_shape)
        if shape is None:
            continue
        # weight: how often the node runs in the whole model (layer nodes once per layer).
        weight = max(int(r.num_layer), 1) if n.part == "layer" else 1
        rows.append((r.device, r.gpu, r.model, r.mode, int(r.batch), int(r.seq), n.Name, n.part, weight,
                     n.cls, *map(float, shape), float(n.fw_latency_ms)))
    return rows


def matched_nodes(labels: pd.DataFrame | None = None, op_classes=("FC", "BMM"),
                  kernels: pd.DataFrame | None = None) -> pd.DataFrame:
    """Label FC/BMM nodes whose shape the kernel dataset measured on the same GPU, with ratio = label / kernel."""
    if labels is None:
        labels = _default_labels()
    bad = set(op_classes) - set(DATASET_OP)
    if bad:
        raise ValueError(f"op_classes: {sorted(bad)} not GEMM classes (use {sorted(DATASET_OP)})")
    need = {"device", "gpu", "model", "mode", "batch", "seq", "csv", "num_layer"}
    if missing := need - set(labels.columns):
        raise ValueError(f"labels frame: missing columns {sorted(missing)} (use lib.labels.load_labels())")
    if kernels is None:
        from .data import load_kernels
        kernels = load_kernels(ops=[DATASET_OP[c] for c in op_classes])
    # Kernel dataset: median latency per (device, op class, B, M, N, K) over every split.
    kern = kernels[kernels["op"].isin([DATASET_OP[c] for c in op_classes])]
    kern = kern.assign(op_class=kern["op"].map({v: k for k, v in DATASET_OP.items()}))
    kern = kern.groupby(["device", "op_class", "B", "M", "N", "K"], as_index=False)["latency_ms"].median()
    labels = labels[(labels["csv"] != "") & labels["device"].isin(kern["device"].unique())]
    rows = [row for r in labels.itertuples() for row in _label_rows(r, op_classes)]
    nodes = pd.DataFrame(rows, columns=COLUMNS[:-2])
    out = nodes.merge(kern.rename(columns={"latency_ms": "kernel_ms"}),
                      on=["device", "op_class", "B", "M", "N", "K"], how="inner")
    out["ratio"] = out["label_fw_ms"] / out["kernel_ms"]
    return out[COLUMNS].reset_index(drop=True)


def _summary(matched: pd.DataFrame, by: list) -> pd.DataFrame:
    """labels, nodes, median ratio and % of ratios outside BAND per group of matched nodes."""
    m = matched.assign(label=matched[["model", "mode", "batch", "seq"]].astype(str).agg("-".join, axis=1),
                       outside=(~matched["ratio"].between(*BAND)) * 100.0)
    return m.groupby(by).agg(labels=("label", "nunique"), nodes=("ratio", "size"),
                             median_ratio=("ratio", "median"), outside_pct=("outside", "mean")).reset_index()


def consistency_table(matched: pd.DataFrame) -> pd.DataFrame:
    """Per device (model 'ALL') and per device x model: labels, nodes, median ratio over the nodes, % outside [0.9, 1.1]."""
    cols = ["device", "model", "labels", "nodes", "median_ratio", "outside_pct"]
    if matched.empty:
        return pd.DataFrame(columns=cols)
    t = pd.concat([_summary(matched, ["device"]).assign(model="ALL"), _summary(matched, ["device", "model"])],
                  ignore_index=True)
    t["_all"] = t["model"] != "ALL"
    t = t.sort_values(["device", "_all", "model"])
    return t[cols].reset_index(drop=True)


def kernel_floor_ape(matched: pd.DataFrame) -> pd.DataFrame:
    """Per device: APE (%) of the matched GEMMs' forward time if predicted EXACTLY as the kernel dataset measured them."""
    # A perfect predictor of the kernel dataset predicts kernel_ms for every matched node, so per label
    #   floor_ape_pct = |sum_i w_i kernel_ms_i - sum_i w_i label_fw_ms_i| / sum_i w_i label_fw_ms_i * 100
    # (w_i = num_layer for nodes of the layer, 1 for prologue/epilogue: the whole model's forward GEMM
    # time over the matched nodes), and per label from its median ratio r = median(label / kernel):
    #   median_floor_ape_pct = |1 / r - 1| * 100   (the APE of predicting label_fw_ms / r).
    # Both are averaged over the device's labels. This is the error on the GEMM part alone; the
    # end-to-end error also weighs in the other ops and, for training, the backward pass.
    # median_label_ratio: the median over the device's labels of each label's median node ratio (not the
    # median over all its nodes, consistency_table's median_ratio: a GPU with many nodes in a few labels differs).
    cols = ["device", "labels", "median_label_ratio", "floor_ape_pct", "median_floor_ape_pct"]
    if matched.empty:
        return pd.DataFrame(columns=cols)
    m = matched.assign(wk=matched["weight"] * matched["kernel_ms"], wl=matched["weight"] * matched["label_fw_ms"])
    per_label = m.groupby(["device", "model", "mode", "batch", "seq"]).agg(
        wk=("wk", "sum"), wl=("wl", "sum"), median_ratio=("ratio", "median")).reset_index()
    per_label["floor_ape_pct"] = np.abs(per_label["wk"] - per_label["wl"]) / per_label["wl"] * 100
    per_label["median_floor_ape_pct"] = np.abs(1 / per_label["median_ratio"] - 1) * 100
    out = per_label.groupby("device").agg(labels=("model", "size"), median_label_ratio=("median_ratio", "median"),
                                          floor_ape_pct=("floor_ape_pct", "mean"),
                                          median_floor_ape_pct=("median_floor_ape_pct", "mean")).reset_index()
    return out[cols]


def repeat_spread(matched: pd.DataFrame) -> pd.DataFrame:
    """Per device: how much one label CSV disagrees with itself on matched nodes of the same GEMM shape (notebook 05)."""
    # For every (label, op class, B, M, N, K) measured >= 2 times in one CSV (e.g. BERT's query/key/value):
    #   spread = max(label_fw_ms) / min(label_fw_ms);  per device: how many such groups, median and max spread.
    keys = ["device", "model", "mode", "batch", "seq", "op_class", "B", "M", "N", "K"]
    g = matched.groupby(keys)["label_fw_ms"].agg(["size", "max", "min"]).reset_index()
    g = g[g["size"] >= 2].assign(spread=lambda d: d["max"] / d["min"])
    return g.groupby("device").agg(groups=("spread", "size"), median_spread=("spread", "median"),
                                   max_spread=("spread", "max")).reset_index()


def split_throughput(kernels: pd.DataFrame, min_gflop: float = 100.0) -> pd.DataFrame:
    """Per training GPU: median GEMM throughput of large kernels in the train vs test_id split (notebook 05)."""
    # Both splits measure the same kind of kernel on the same GPU; for kernels of >= min_gflop
    #   tflops = 2 B M N K / latency_ms / 1e9,  ratio = median tflops(train) / median tflops(test_id)
    # A ratio far below 1 means the training rows were measured slower (e.g. a throttled GPU).
    k = kernels[kernels["split"].isin(["train", "test_id"])]
    gflop = 2 * k["B"] * k["M"] * k["N"] * k["K"] / 1e9
    k = k.assign(tflops=gflop / k["latency_ms"])[gflop >= min_gflop]
    out = k.pivot_table(index="device", columns="split", values="tflops", aggfunc="median")
    out = out.rename(columns={"train": "train_tflops", "test_id": "test_id_tflops"}).reset_index()
    out["ratio"] = out["train_tflops"] / out["test_id_tflops"]
    return out[["device", "train_tflops", "test_id_tflops", "ratio"]]


def node_sum_table(labels: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per label with a node CSV: its end-to-end time beside the sum of its own nodes' times, and of those that can
    launch a kernel (notebook 05)."""
    # A label JSON's fw_ms / bw_ms time the whole pass; its CSV times every fx node of the prologue,
    # ONE layer and the epilogue. Summing the CSV over the model (layer nodes x num_layer):
    #   node_fw_ms = sum_i w_i fw_latency_ms_i,  node_bw_ms = sum_i w_i bw_latency_ms_i
    #   node_sum_ape_pct = |node_fw_ms + node_bw_ms - e2e_ms| / e2e_ms * 100
    # node_sum_ape_pct is the end-to-end error of a forecast that got every node of the CSV exactly right
    # (summing kernels is how NeuSight forecasts a model): the part of the error no kernel predictor can remove.
    # A CSV times its parameters' gradient accumulation apart from the backward (column acc_latency):
    #   node_acc_ms = sum_i w_i acc_latency_ms_i,  bw_acc_ratio = (node_bw_ms + node_acc_ms) / bw_ms
    # A CSV also times the nodes that run python only (lib.calibration.python_only: size, getattr, view ...), which no
    # sum of kernels has; over the others, the nodes that can launch a kernel:
    #   node_python_ms = sum_{i python only} w_i (fw_latency_ms_i + bw_latency_ms_i)
    #   kernel_node_sum_ape_pct = |node_fw_ms + node_bw_ms - node_python_ms - e2e_ms| / e2e_ms * 100
    cols = ["device", "gpu", "model", "mode", "batch", "seq", "e2e_ms", "fw_ms", "bw_ms", "node_fw_ms",
            "node_bw_ms", "node_acc_ms", "node_python_ms", "fw_ratio", "bw_ratio", "bw_acc_ratio", "node_sum_ape_pct",
            "kernel_node_sum_ape_pct"]
    if labels is None:
        labels = _default_labels()
    rows = []
    for r in labels[labels["csv"] != ""].itertuples():
        n = label_nodes(r.csv)
        w = np.where(n["part"] == "layer", max(int(r.num_layer), 1), 1)
        fw_ms = n["fw_latency_ms"].fillna(0.0).to_numpy() * w
        bw_ms = n["bw_latency_ms"].fillna(0.0).to_numpy() * w if "bw_latency_ms" in n else np.zeros(len(n))
        acc = float((n["acc_latency_ms"].fillna(0.0) * w).sum()) if "acc_latency_ms" in n else 0.0
        python = float((fw_ms + bw_ms)[python_only(n)].sum())
        rows.append((r.device, r.gpu, r.model, r.mode, int(r.batch), int(r.seq), float(r.e2e_ms), float(r.fw_ms),
                     float(r.bw_ms), float(fw_ms.sum()), float(bw_ms.sum()), acc, python))
    out = pd.DataFrame(rows, columns=cols[:13])
    out["fw_ratio"] = out["node_fw_ms"] / out["fw_ms"]
    out["bw_ratio"] = (out["node_bw_ms"] / out["bw_ms"]).where(out["bw_ms"] > 0)
    out["bw_acc_ratio"] = ((out["node_bw_ms"] + out["node_acc_ms"]) / out["bw_ms"]).where(out["bw_ms"] > 0)
    node_ms = out["node_fw_ms"] + out["node_bw_ms"]
    out["node_sum_ape_pct"] = np.abs(node_ms - out["e2e_ms"]) / out["e2e_ms"] * 100
    out["kernel_node_sum_ape_pct"] = np.abs(node_ms - out["node_python_ms"] - out["e2e_ms"]) / out["e2e_ms"] * 100
    return out[cols].reset_index(drop=True)


# ---------------------------------------------------------------- our forecast of the matched shapes

# Per label, over its matched nodes (w as in kernel_floor_ape; pred_ms = our forecast of each node's shape):
#   kernel_ms, pred_ms, label_ms = sum w kernel_ms, sum w pred_ms, sum w label_fw_ms
#   kernel_over_pred = kernel_ms / pred_ms       (> 1: we forecast these kernels faster than measured alone)
#   label_over_kernel = label_ms / kernel_ms     (the label against the kernel dataset; no forecast in it)
#   matched_share = label_ms / e2e_ms            (how much of the label the matched nodes time)
#   exact_ms = neusight_ms + kernel_ms - pred_ms  (our forecast with those kernels as measured alone)
#   exact_ape_pct = |exact_ms - e2e_ms| / e2e_ms * 100
# only = some op classes: their nodes alone are taken as measured (w = 0 for the others), over the same labels as
# the whole match, so a label without such a node keeps its forecast (exact_ms = neusight_ms) instead of dropping out.
def matched_forecast(matched: pd.DataFrame, pred_ms, forecasts: pd.DataFrame, only=None) -> pd.DataFrame:
    """Per label: our forecast of its matched GEMM nodes against the kernel dataset, and its end-to-end error
    with those nodes (or `only` those op classes' nodes) taken as measured alone (a diagnosis that reads the
    target's measurements; notebook 05)."""
    keys = ["device", "model", "mode", "batch", "seq"]
    taken = np.ones(len(matched), bool) if only is None else matched["op_class"].isin(list(only)).to_numpy()
    w = matched["weight"].to_numpy(float) * taken
    m = matched[keys].assign(kernel_ms=w * matched["kernel_ms"], pred_ms=w * np.asarray(pred_ms, float),
                             label_ms=w * matched["label_fw_ms"], nodes=taken.astype(int))
    per = m.groupby(keys, as_index=False).sum()
    per = per.merge(forecasts[keys + ["e2e_ms", "neusight_ms"]], on=keys, how="inner", validate="one_to_one")
    per["kernel_over_pred"] = per["kernel_ms"] / per["pred_ms"]
    per["label_over_kernel"] = per["label_ms"] / per["kernel_ms"]
    per["matched_share"] = per["label_ms"] / per["e2e_ms"]
    per["exact_ms"] = per["neusight_ms"] + per["kernel_ms"] - per["pred_ms"]
    per["neusight_ape"] = np.abs(per["neusight_ms"] - per["e2e_ms"]) / per["e2e_ms"] * 100
    per["exact_ape_pct"] = np.abs(per["exact_ms"] - per["e2e_ms"]) / per["e2e_ms"] * 100
    return per


def matched_forecast_by_device(per_label: pd.DataFrame) -> pd.DataFrame:
    """matched_forecast per device and mode: ratios of sums over its labels, mean shares and APEs (notebook 05)."""
    g = per_label.groupby(["device", "mode"])
    return pd.DataFrame({"labels": g.size(), "matched_share": g["matched_share"].mean(),
                         "kernel_over_pred": g["kernel_ms"].sum() / g["pred_ms"].sum(),
                         "label_over_kernel": g["label_ms"].sum() / g["kernel_ms"].sum(),
                         "neusight_ape": g["neusight_ape"].mean(), "exact_ape_pct": g["exact_ape_pct"].mean()})


# ---------------------------------------------------------------- batch scaling

# per_sample_ratio = (e2e_ms / batch) / (e2e_ms_0 / batch_0), where batch_0 is the smallest batch measured
# in the same setting (device, model, mode, seq, option). A larger batch spreads fixed costs over more
# samples, so the ratio is at most about 1; well above 1 (> BAND[1]), the larger batch ran slower per sample
# than the smaller one (a lower clock, a power limit or another run setup), which a sum of kernels,
# each forecast the same way at every batch, cannot follow.
def per_sample_ratio(labels: pd.DataFrame) -> pd.Series:
    """Per label: time per sample over that of the smallest batch measured in the same setting (notebook 05)."""
    keys = ["device", "model", "mode", "seq", "option"]
    df = labels[keys + ["batch", "e2e_ms"]].reset_index(drop=True)
    df["per_sample_ms"] = df["e2e_ms"] / df["batch"]
    base = df.loc[df.groupby(keys, dropna=False)["batch"].idxmin(), keys + ["per_sample_ms"]]
    at_base = df[keys].merge(base, on=keys, how="left")["per_sample_ms"].to_numpy()
    return pd.Series(df["per_sample_ms"].to_numpy() / at_base, index=labels.index, name="per_sample_ratio")
