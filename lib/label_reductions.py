"""The softmax and layernorm kernels of the label settings, forward and backward, at the shapes the models run, and
their dropouts; and the labels' own backward dropout set beside a backward division of its size, and their add
nodes' backward (notebook 05).

The kernel dataset timed forward softmax and layernorm kernels of up to about 16,400 rows; a label's attention
softmax runs 16,384 to 524,288 rows, and training runs their backward kernels, which no dataset row times, nor any
dropout. The collector (`python -m lib.profile --ops softmax,softmax_bw --dims FILE`, and ln or dropout alike) times
them at these shapes on a GPU we have (data/measured/README.md), and notebook 05 sets the measurements beside the
forecast of the same kernels.
"""
from __future__ import annotations

import ast
import math
from pathlib import Path

import pandas as pd

from . import paths
from .data import RENAME
from .devices import Device
from .forecast import predict_table
from .graph import capture
from .graph_ops import COLUMN_SUMS, GRAD_TIMES_OUTPUT
from .labels import load_labels

REDUCTION_OPS = ("softmax", "ln")
SHAPE_COLUMNS = ["model", "batch", "seq", "mode", "phase", "op", "aten", "B", "H"]
LABEL_SHAPES_FOLDER = "label-shapes"   # a run folder's subfolder of these measurements (gpu-busy: + "-gpu-busy")
LABEL_SETTING_KEYS = ["model", "batch", "seq", "mode"]
SECOND_KERNELS = (COLUMN_SUMS, GRAD_TIMES_OUTPUT)   # end the aten names of a backward's second kernel
KERNEL_KEYS = ["op", "phase", "B", "H"]
# the collector's op name of each (op, phase): lib.profile_ops.MODEL_OPS time those the dataset lacks
COLLECTOR_OP = {("softmax", "fw"): "softmax", ("softmax", "bw"): "softmax_bw", ("ln", "fw"): "ln", ("ln", "bw"): "ln_bw",
                ("dropout", "fw"): "dropout", ("dropout", "bw"): "dropout_bw"}
DROPOUT = "native_dropout"   # the aten op of a training pass's dropout (lib.graph_capture), priced as 'mem'
DIMS_OPS = REDUCTION_OPS + ("dropout",)   # the ops write_dims writes a collector dims file for


def label_settings(labels: pd.DataFrame | None = None) -> pd.DataFrame:
    """The distinct plain (model, batch, seq, mode) settings of the NVIDIA labels (notebook 05)."""
    labels = load_labels() if labels is None else labels
    plain = labels[(labels["vendor"] == "nvidia") & (labels["option"] == "")]
    return plain[LABEL_SETTING_KEYS].drop_duplicates().sort_values(LABEL_SETTING_KEYS).reset_index(drop=True)


def reduction_kernels(settings: pd.DataFrame) -> pd.DataFrame:
    """The captured kernel rows (lib.graph.capture) of every setting's softmax and layernorm kernels with the second
    kernel of a backward one (lib.graph_ops.kernel_rows: a layernorm's column sums, given its B and H, and a
    softmax's element-wise product), the setting's keys, and `call`, one number per aten call (notebook 05)."""
    rows = []
    for s in settings.itertuples(index=False):
        table = capture(paths.MODEL_CONFIGS / f"{s.model}.json", s.batch, s.seq, s.mode).reset_index(drop=True)
        second = table["aten"].astype(str).str.endswith(SECOND_KERNELS)
        owner = table.shift(1)[second]     # kernel_rows puts a call's second kernel right after its first
        if not owner["op"].isin(REDUCTION_OPS).all():
            raise ValueError(f"{s.model} {s.mode}: a backward's second kernel not right after its softmax / layernorm")
        table.loc[second, ["B", "H"]] = owner[["B", "H"]].to_numpy()
        keep = table["op"].isin(REDUCTION_OPS) | second
        rows.append(table[keep].assign(model=s.model, batch=s.batch, seq=s.seq, mode=s.mode, second=second[keep]))
    out = pd.concat(rows, ignore_index=True)
    return out.assign(call=(~out["second"]).cumsum())


def reduction_shapes(settings: pd.DataFrame) -> pd.DataFrame:
    """Every softmax and layernorm kernel (phase, aten op, B rows x H) the captured graph of each setting runs,
    one row per distinct kernel and setting (notebook 05)."""
    kernels = reduction_kernels(settings)
    out = kernels[~kernels["second"]][SHAPE_COLUMNS].astype({"B": int, "H": int}).drop_duplicates()
    return out.sort_values(SHAPE_COLUMNS).reset_index(drop=True)


def forecast_reductions(settings: pd.DataFrame, device: Device, cfg_by_class: dict | None = None) -> pd.DataFrame:
    """The forecast (ms) of one call of each distinct softmax and layernorm kernel of the settings on `device`,
    as a model forecast prices it (lib.forecast.predict_table: a backward kernel by its traffic, with its second
    kernel, `second_ms` of it), one row per KERNEL_KEYS (notebook 05)."""
    table = predict_table(reduction_kernels(settings).assign(count=1), device, cfg_by_class=cfg_by_class)
    calls = table[~table["second"]].set_index("call")[KERNEL_KEYS].astype({"B": int, "H": int})
    calls["pred_ms"] = table.groupby("call")["pred_ms"].sum()
    calls["second_ms"] = table[table["second"]].groupby("call")["pred_ms"].sum().reindex(calls.index, fill_value=0.0)
    return calls.drop_duplicates(KERNEL_KEYS).sort_values(KERNEL_KEYS).reset_index(drop=True)


def measured_reductions(root: Path | str = paths.MEASURED, gpu_busy: bool = False) -> pd.DataFrame:
    """The collector's timings of the label shapes (each run folder's LABEL_SHAPES_FOLDER, or its -gpu-busy twin),
    one row per run and KERNEL_KEYS with latency_ms and the number of kernels; empty if none (notebook 05)."""
    folder = LABEL_SHAPES_FOLDER + ("-gpu-busy" if gpu_busy else "")
    back = {name: key for key, name in COLLECTOR_OP.items()}
    frames = []
    for f in sorted(Path(root).glob(f"*/{folder}/*.csv")):   # not lib.data.read_kernel_csv: it knows no backward op
        df = pd.read_csv(f).rename(columns=RENAME)
        if missing := [c for c in ("op", "latency_ms", "device", "B", "H") if c not in df]:
            raise ValueError(f"{f}: missing column(s) {missing}")
        if unknown := sorted(set(df["op"]) - set(back)):
            raise ValueError(f"{f}: ops {unknown}, expected {sorted(back)}")
        keys = pd.DataFrame([back[op] for op in df["op"]], columns=["op", "phase"], index=df.index)
        # kernels: how many the call launched (the collector's Kernels column lists each name after a ';')
        kernels = df["Kernels"].fillna("").astype(str).str.count(";") if "Kernels" in df else float("nan")
        frames.append(df.drop(columns="op").join(keys).assign(run=f.relative_to(root).parts[0], kernels=kernels))
    columns = ["run", "device", *KERNEL_KEYS, "latency_ms", "kernels", "kernel_name"]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True).astype({"B": int, "H": int})[columns]


def label_node_times(labels: pd.DataFrame, cls: str = "SOFTMAX") -> pd.DataFrame:
    """Forward and backward ms of one layer's `cls` nodes in every training label's CSV, and backward / forward:
    the labels' own measure of what the collector's backward / forward ratio times (notebook 05)."""
    from .calibration import label_nodes
    train = labels[(labels["mode"] == "training") & (labels["option"] == "") & (labels["csv"] != "")]
    rows = []
    for r in train.itertuples():
        nodes = label_nodes(r.csv)
        nodes = nodes[(nodes["part"] == "layer") & (nodes["cls"] == cls)]
        rows.append({"device": r.device, "vendor": r.vendor, "model": r.model, "batch": r.batch, "seq": r.seq,
                     "fw_ms": nodes["fw_latency_ms"].sum(), "bw_ms": nodes["bw_latency_ms"].sum()})
    out = pd.DataFrame(rows, columns=["device", "vendor", "model", "batch", "seq", "fw_ms", "bw_ms"])
    return out.assign(bw_over_fw=out["bw_ms"] / out["fw_ms"])


# Bytes per fp32 element of the backward kernels below (lib.graph_ops.kernel_rows; the mask is a bool, 1 byte):
#     division of the scores by a number:  dx = grad / c                             read 4, write 4         =  8
#     dropout, plain backward:             dx = masked_scale(grad, mask)             read 4 + 1, write 4     =  9
#     dropout, grad mode on:               mask -> float; * scale; grad * that       (1 + 4) + (4 + 4) + (4 + 4 + 4) = 25
# Where both run at one bandwidth, backward dropout / backward division = 9 / 8 plainly, or 25 / 8 with grad mode on.
DIVISION_BYTES, PLAIN_DROPOUT_BYTES, GRAD_MODE_DROPOUT_BYTES = 8, 9, 25


def dropout_against_division(labels: pd.DataFrame) -> pd.DataFrame:
    """Per training label CSV: one layer's dropout node and the division node (Name truediv) of the same element
    count (the attention probabilities and scores), their forward and backward ms, backward dropout / backward
    division, and that ratio's two expected values (notebook 05)."""
    from .calibration import _numel, label_nodes
    train = labels[(labels["mode"] == "training") & (labels["option"] == "") & (labels["csv"] != "")]
    rows = []
    for r in train.itertuples():
        nodes = label_nodes(r.csv)
        nodes = nodes[(nodes["part"] == "layer") & (nodes["bw_latency_ms"] > 0)]
        numel = nodes["output_shape"].map(_numel)
        division = nodes[nodes["Name"].astype(str).str.fullmatch(r"truediv(_\d+)?")]
        dropout = nodes[(nodes["cls"] == "MEM") & nodes["Name"].astype(str).str.contains("drop")]
        for n in sorted(set(numel[division.index]) & set(numel[dropout.index])):
            d, q = division[numel[division.index] == n].iloc[0], dropout[numel[dropout.index] == n].iloc[0]
            rows.append({"device": r.device, "vendor": r.vendor, "model": r.model, "batch": r.batch, "seq": r.seq,
                         "elements": n, "division_fw_ms": d["fw_latency_ms"], "division_bw_ms": d["bw_latency_ms"],
                         "dropout_fw_ms": q["fw_latency_ms"], "dropout_bw_ms": q["bw_latency_ms"]})
    out = pd.DataFrame(rows, columns=["device", "vendor", "model", "batch", "seq", "elements", "division_fw_ms",
                                      "division_bw_ms", "dropout_fw_ms", "dropout_bw_ms"])
    return out.assign(bw_ratio=out["dropout_bw_ms"] / out["division_bw_ms"],
                      plain_ratio=PLAIN_DROPOUT_BYTES / DIVISION_BYTES,
                      grad_mode_ratio=GRAD_MODE_DROPOUT_BYTES / DIVISION_BYTES)


def add_node_times(labels: pd.DataFrame) -> pd.DataFrame:
    """Per training label CSV: one layer's add nodes of tensors (Name add or add_N), their elements and their
    forward and backward ms. An add's backward hands its gradient on to both inputs, without a kernel; where the engine then
    sums two gradients (lib.graph_ops.GRAD_SUM), a node whose backward holds that kernel would take the time of a
    forward add of its size (notebook 05)."""
    from .calibration import _numel, label_nodes
    train = labels[(labels["mode"] == "training") & (labels["option"] == "") & (labels["csv"] != "")]
    frames = []
    for r in train.itertuples():
        nodes = label_nodes(r.csv)
        adds = nodes[(nodes["part"] == "layer") & (nodes["cls"] == "EW")   # EW: tensors, not python numbers
                     & nodes["Name"].astype(str).str.fullmatch(r"add(_\d+)?")]
        frames.append(pd.DataFrame({"device": r.device, "vendor": r.vendor, "model": r.model, "batch": r.batch,
                                    "seq": r.seq, "node": adds["Name"].astype(str),
                                    "elements": adds["output_shape"].map(_numel),
                                    "fw_ms": adds["fw_latency_ms"], "bw_ms": adds["bw_latency_ms"]}))
    columns = ["device", "vendor", "model", "batch", "seq", "node", "elements", "fw_ms", "bw_ms"]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def dropout_shapes(settings: pd.DataFrame) -> pd.DataFrame:
    """The distinct B rows x H (H: the last dim) of every dropout the training settings run, as `op` 'dropout'
    (notebook 05)."""
    rows = set()
    for s in settings[settings["mode"] == "training"].itertuples(index=False):
        table = capture(paths.MODEL_CONFIGS / f"{s.model}.json", s.batch, s.seq, s.mode)
        for shapes in table.loc[table["aten"].astype(str).str.split(".").str[1] == DROPOUT, "shapes"]:
            first = ast.literal_eval(shapes.split("->")[0])[0]
            rows.add((math.prod(first) // first[-1], first[-1]))
    return pd.DataFrame(sorted(rows), columns=["B", "H"]).assign(op="dropout")


def write_dims(shapes: pd.DataFrame, op: str, path: Path | str) -> Path:
    """Write the distinct B;H shapes of one op (softmax, ln or dropout) as a collector dims file (lib.profile
    --dims)."""
    if op not in DIMS_OPS:
        raise ValueError(f"op '{op}': expected one of {', '.join(DIMS_OPS)}")
    dims = shapes.loc[shapes["op"] == op, ["B", "H"]].drop_duplicates().sort_values(["H", "B"])
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return paths.write_atomic(path, lambda tmp: tmp.write_text(
        "B;H\n" + "".join(f"{b};{h}\n" for b, h in dims.itertuples(index=False))))


def main(argv: list[str] | None = None) -> int:
    """python -m lib.label_reductions [FOLDER]: write softmax.csv, ln.csv and dropout.csv, the collector's dims files
    of the label settings' shapes (default build/label-shapes; data/measured/README.md)."""
    import argparse
    ap = argparse.ArgumentParser(prog="python -m lib.label_reductions", description=main.__doc__)
    ap.add_argument("folder", nargs="?", default=str(paths.BUILD / LABEL_SHAPES_FOLDER))
    settings = label_settings()
    shapes = pd.concat([reduction_shapes(settings), dropout_shapes(settings)])
    for op in DIMS_OPS:
        print(write_dims(shapes, op, Path(ap.parse_args(argv).folder) / f"{op}.csv"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
