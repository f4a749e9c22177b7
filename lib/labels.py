"""End-to-end labels of the dataset and the paper's end-to-end tables, as tidy frames (notebook 05).

Labels: data/neusight/label/<GPU folder>/<model>-<inf|train>-<seq>-<batch>[-<option>].json with
`e2e_latency`, `fw_latency`, `bwall_latency` (ms) and `num_layer`; option '' (plain), 'fusion'
(element-wise ops fused), or a distributed layout (dp4, tp4, pp4_1). A `.csv` beside a plain label
lists the torch.fx nodes of the prologue, ONE layer and the epilogue with per-node fw/bw latencies.
Paper tables: summary/nvidia_inf.csv, nvidia_train.csv (per GPU block: rows Roofline, Habitat,
Li et al., NeuSight; columns model x batch; cells = APE %) and fusion_inf.csv.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from . import paths
from .devices import DeviceError, load_device

# Paper's model names -> dataset config names (DLmodel_configs/<name>.json).
PAPER_MODELS = {"BERT-Large": "bert_large", "BERT": "bert_large", "GPT2-Large": "gpt2_large",
                "GPT3-XL": "gpt3_xl", "OPT-1.3B": "opt_13", "GPT3-2.7B": "gpt3_27",
                "SwitchTrans": "switchxl4"}
MODEL_ORDER = ["bert_large", "gpt2_large", "gpt3_xl", "opt_13", "gpt3_27", "switchxl4"]
# The paper's end-to-end tables give one cell per GPU, model and batch, with no sequence length. Every label of a
# model has this one (tests/test_forecast.py checks it), but for A100-PCIE-40GB's SwitchTransformer inference, also
# measured at 2,048 tokens: those two labels have no cell in the paper's table.
PAPER_SEQ = {"bert_large": 512, "gpt2_large": 1024, "gpt3_xl": 2048, "opt_13": 2048, "gpt3_27": 2048,
             "switchxl4": 512}
PAPER_METHODS = {"Roofline": "roofline", "Habitat": "habitat", "Li et al.": "li", "NeuSight": "neusight"}
# fusion_inf.csv names GPUs by short names; these are the label folders they stand for.
# The fusion table's GPU headers -> label folders (a full upstream copy also has L4 columns; any other header that
# names no folder keeps its own name as the device)
PAPER_FUSION_GPUS = {"A100-40GB": "NVIDIA_A100-PCIE-40GB", "H100": "NVIDIA_H100_80GB_HBM3", "L4": "NVIDIA_L4"}
MODES = {"inf": "inference", "train": "training"}

LABEL_FILE = re.compile(r"^(?P<model>[a-z0-9_]+)-(?P<mode>inf|train)-(?P<seq>\d+)-(?P<batch>\d+)"
                        r"(?:-(?P<option>[a-z0-9_]+))?$")


class LabelError(ValueError):
    """A label or paper table that cannot be read; the message names the file."""


def device_file_of_folder(folder: str) -> Path:
    """Path of the device JSON describing a label folder's GPU."""
    for d in (paths.DEVICE_CONFIGS, paths.DEVICES_ADDED):
        if (d / f"{folder}.json").exists():
            return d / f"{folder}.json"
    raise DeviceError(f"label folder {folder}: no device JSON named {folder}.json")


def _paper_device(folder: str, header: str) -> str:
    """Device name of a paper table's GPU column: its label folder's device, else the table's own header."""
    try:
        return device_of_folder(folder)[0]
    except DeviceError:
        return header


def device_of_folder(folder: str) -> tuple[str, str]:
    """(Device name, vendor) of a label folder, read from the device JSON of the same stem."""
    dev = load_device(device_file_of_folder(folder))
    return dev.name, dev.vendor


def _read_json(path: Path) -> dict:
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise LabelError(f"{path}: not valid JSON ({e.msg})") from None
    for k in ("e2e_latency", "fw_latency", "bwall_latency", "num_layer"):
        if k not in raw:
            raise LabelError(f"{path}: missing field '{k}'")
    return raw


LABEL_COLUMNS = ["gpu", "device", "vendor", "model", "mode", "seq", "batch", "option", "e2e_ms", "fw_ms", "bw_ms",
                 "num_layer", "csv", "json"]
LABEL_KEYS = ["gpu", "model", "mode", "batch", "seq", "option"]   # what tells one label from another
# The kinds of label the end-to-end tables score apart (lib.label_eval.label_kind), in their order
E2E_KINDS = ("inference", "training", "fused inference")


def load_labels(root: Path | None = None) -> pd.DataFrame:
    """One row per label JSON: gpu, device, vendor, model, mode, seq, batch, option, e2e/fw/bw_ms, ..."""
    root = Path(root) if root is not None else paths.LABELS
    if not root.is_dir():
        raise LabelError(f"{root}: no such label folder (one folder per GPU, each with <model>-<mode>-<seq>-<batch>.json)")
    rows, names = [], {}
    for f in sorted(root.glob("*/*.json")):
        m = LABEL_FILE.match(f.stem)
        if m is None:
            continue
        gpu = f.parent.name
        if gpu not in names:
            names[gpu] = device_of_folder(gpu)
        raw = _read_json(f)
        csv = f.with_suffix(".csv")
        rows.append(dict(gpu=gpu, device=names[gpu][0], vendor=names[gpu][1], model=m["model"],
                         mode=MODES[m["mode"]], seq=int(m["seq"]), batch=int(m["batch"]),
                         option=m["option"] or "", e2e_ms=float(raw["e2e_latency"]),
                         fw_ms=float(raw["fw_latency"]), bw_ms=float(raw["bwall_latency"]),
                         num_layer=int(raw["num_layer"] or 0), csv=str(csv) if csv.exists() else "",
                         json=str(f)))
    return pd.DataFrame(rows, columns=LABEL_COLUMNS)


def _blocks(path: Path) -> list[list[str]]:
    """Non-empty lines of a CSV split into blocks at blank lines."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise LabelError(f"{path}: paper table not found") from None
    blocks, cur = [], []
    for line in text.splitlines():
        if line.strip(", \t"):
            cur.append(line)
        elif cur:
            blocks.append(cur)
            cur = []
    if cur:
        blocks.append(cur)
    return blocks


def paper_e2e_table(mode: str, path: Path | None = None) -> pd.DataFrame:
    """Paper's NVIDIA inference or training table: gpu, device, mode, model, paper_model, batch, seq (PAPER_SEQ),
    method, paper_ape_pct."""
    if mode not in ("inference", "training"):
        raise LabelError(f"mode must be 'inference' or 'training' (got {mode!r})")
    path = Path(path) if path else paths.SUMMARY / ("nvidia_inf.csv" if mode == "inference" else "nvidia_train.csv")
    rows = []
    for block in _blocks(path):
        gpu = block[0].split(",")[0].strip()
        cells = [ln.split(",") for ln in block[1:]]
        if len(cells) < 2 or cells[0][0] != "Model" or cells[1][0] != "Batch":
            raise LabelError(f"{path}: block '{gpu}' does not start with Model and Batch rows")
        models, cur = [], None
        for c in cells[0][1:]:
            cur = c.strip() or cur
            models.append(cur)
        batches = cells[1][1:]
        device = _paper_device(gpu, gpu)
        for row in cells[2:]:
            method = PAPER_METHODS.get(row[0].strip())
            if method is None:
                raise LabelError(f"{path}: unknown method row {row[0]!r} in block '{gpu}'")
            for model, batch, val in zip(models, batches, row[1:]):
                if model not in PAPER_MODELS:
                    raise LabelError(f"{path}: unknown model {model!r}")
                rows.append(dict(gpu=gpu, device=device, mode=mode, model=PAPER_MODELS[model],
                                 paper_model=model, batch=int(batch), seq=PAPER_SEQ[PAPER_MODELS[model]], method=method,
                                 paper_ape_pct=float(val) if val.strip() else np.nan))
    return pd.DataFrame(rows)


_PRED_CELL = re.compile(r"^\s*(?P<ms>[\d.]+)\s*\((?P<ape>[\d.]+)%\)\s*$")


def paper_fusion_table(path: Path | None = None) -> pd.DataFrame:
    """Paper's fusion table: gpu, device, model, batch, fused (bool), paper_meas_ms, paper_pred_ms, paper_ape_pct."""
    path = Path(path) if path else paths.SUMMARY / "fusion_inf.csv"
    lines = [ln.split(",") for block in _blocks(path) for ln in block]
    gpus = []
    for c in lines[0][3:]:                 # a GPU's header spans its columns: blanks repeat the last name
        gpus.append(c.strip() or (gpus[-1] if gpus else ""))
    if not gpus or not gpus[0]:
        raise LabelError(f"{path}: the first row names no GPU above the first value column")
    variants = [c.strip() for c in lines[1][3:]]
    rows = []
    for meas, pred in zip(lines[2::2], lines[3::2]):
        model = PAPER_MODELS.get(meas[0].strip())
        m = re.match(r"batch=(\d+)", meas[1].strip())
        if model is None or m is None:
            raise LabelError(f"{path}: cannot read model/batch from {meas[:2]}")
        for gpu, var, mv, pv in zip(gpus, variants, meas[3:], pred[3:]):
            cell = _PRED_CELL.match(pv)
            if cell is None:
                raise LabelError(f"{path}: cannot read prediction cell {pv!r}")
            folder = PAPER_FUSION_GPUS.get(gpu, gpu)
            rows.append(dict(gpu=folder, device=_paper_device(folder, gpu), model=model,
                             batch=int(m[1]), fused=(var == "Fused"), paper_meas_ms=float(mv),
                             paper_pred_ms=float(cell["ms"]), paper_ape_pct=float(cell["ape"])))
    return pd.DataFrame(rows)
