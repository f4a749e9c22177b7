"""Short kernels: what a tiny kernel costs measured alone (the kernel dataset) and inside a model run (the label
CSVs), and a forecast's share of them (notebook 05).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .calibration import _numel, label_nodes, python_only

# short_share = sum_{k: pred_ms_k < threshold} count_k * pred_ms_k / sum_k count_k * pred_ms_k
def short_kernel_share(table: pd.DataFrame, threshold_ms: float = 0.05) -> dict:
    """Kernels predicted shorter than threshold_ms in a predicted table (lib.forecast.forecast_table):
    their count, predicted ms and share of the predicted total (notebook 05)."""
    short = (table["pred_ms"] < threshold_ms).to_numpy()
    total = float(table["total_ms"].sum())
    short_ms = float(table.loc[short, "total_ms"].sum())
    return {"short_kernels": int(table.loc[short, "count"].sum()), "short_ms": short_ms,
            "short_share": short_ms / total if total > 0 else float("nan")}


def isolated_floor_ms(kernels: pd.DataFrame, max_elems: float = 2 ** 16, q: float = 0.5) -> pd.Series:
    """Per device: the q-quantile of the kernel dataset's latency over element-wise kernels of fewer than
    max_elems elements, i.e. what one tiny kernel costs when measured on its own (notebook 05)."""
    ew = kernels[(kernels["op_class"] == "EW") & (kernels["B"] * kernels["H"] < max_elems)]
    return ew.groupby("device")["latency_ms"].quantile(q).rename("isolated_floor_ms")


def label_small_ew_ms(labels: pd.DataFrame, min_elems: float = 2 ** 8, max_elems: float = 2 ** 16) -> pd.Series:
    """Per device: median measured forward latency of the label CSVs' element-wise nodes whose output has
    min_elems..max_elems elements, i.e. what one tiny kernel costs inside a model run (notebook 05)."""
    rows = []
    for r in labels[labels["csv"] != ""].itertuples():
        nodes = label_nodes(r.csv)
        elems = nodes["output_shape"].map(_numel).to_numpy()
        keep = (nodes["cls"] == "EW").to_numpy() & (elems >= min_elems) & (elems < max_elems)
        rows += [(r.device, ms) for ms in nodes.loc[keep, "fw_latency_ms"]]
    out = pd.DataFrame(rows, columns=["device", "ms"])
    return out.groupby("device")["ms"].median().rename("label_small_ew_ms")


def label_python_node_ms(labels: pd.DataFrame) -> pd.Series:
    """Per device: median measured forward latency of the label CSVs' python-only nodes (lib.calibration.python_only:
    size, getattr, view ...), i.e. what timing one node costs in a label when it launches no kernel (notebook 05)."""
    rows = []
    for r in labels[labels["csv"] != ""].itertuples():
        nodes = label_nodes(r.csv)
        timed = python_only(nodes) & (nodes["fw_latency_ms"] > 0).to_numpy()   # placeholders and attributes: 0
        rows += [(r.device, ms) for ms in nodes.loc[timed, "fw_latency_ms"]]
    out = pd.DataFrame(rows, columns=["device", "ms"])
    return out.groupby("device")["ms"].median().rename("label_python_node_ms")


# what-if: latency_ms = sum_k count_k * max(pred_ms_k - overhead_ms, 0)
def minus_overhead_ms(table: pd.DataFrame, overhead_ms: float) -> float:
    """A predicted table's total with a fixed per-kernel overhead taken off every kernel (notebook 05)."""
    return float((np.maximum(table["pred_ms"] - overhead_ms, 0.0) * table["count"]).sum())
