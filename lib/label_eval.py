"""End-to-end forecasts scored against the labels (notebook 05): every label forecast by its GPU's spec (one
lib.forecast.forecast_sweep per model, sequence, mode and option), its APE, and the label-by-label comparisons built on
it (a change before and after, the training seeds, the training GPUs forecast as if never trained on).
"""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from . import paths
from .devices import load_device
from .forecast import METHODS, forecast_sweep


def evaluate_labels(labels: pd.DataFrame, methods=METHODS, tiles: str = "spec",
                    cfg_by_class: dict | None = None, habitat_cfg: dict | None = None,
                    calibrated: bool = False, seed: int = 0) -> pd.DataFrame:
    """Labels (lib.labels.load_labels rows) + `<method>_ms` and `<method>_ape` per method.

    option 'fusion' rows are forecast with fused kernels (lib.fusion.fuse_elementwise); each label reads only
    its GPU's spec JSON (and, for li, that GPU's own kernel measurements, NaN where none exist).
    calibrated=True adds `neusight_cal_ms/_ape` (NeuSight scaled by the training-GPU calibration).
    seed: the training seed of NeuSight's default models (lib.kernels.predict_kernels; 0: the committed ones).
    A label's forecast is forecast's for its GPU and setting up to float32 last bits, which can depend on the other
    labels forecast in the same call (forecast_sweep).
    """
    from tqdm import tqdm
    from .labels import device_file_of_folder
    from .metrics import ape
    if calibrated and seed:
        raise ValueError("calibrated=True scales by factors fitted on the seed-0 models: use seed=0")
    out = labels.copy().reset_index(drop=True)
    names = [*methods, *(["neusight_cal"] if calibrated else [])]
    preds = {m: np.full(len(out), np.nan) for m in names}
    devices = {gpu: load_device(device_file_of_folder(gpu)) for gpu in out["gpu"].unique()}
    # the labels of one model, sequence, mode and option: one forecast_sweep over their GPUs and batches per method
    # (each model run once for all of them; combinations no label measured are forecast too, and left unread)
    groups = out.groupby(["model", "seq", "mode", out["option"] == "fusion"], sort=False).indices
    for (model, seq, mode, fusion), rows in tqdm(groups.items(), desc="label groups", file=sys.stderr):
        these = out.iloc[rows]
        gpus, batches = list(these["gpu"].unique()), [int(b) for b in these["batch"].unique()]
        # each label's row in the sweep, whose rows run over GPUs, then batches
        at = [gpus.index(g) * len(batches) + batches.index(b) for g, b in zip(these["gpu"], these["batch"])]
        for m in names:
            sweep = forecast_sweep(paths.MODEL_CONFIGS / f"{model}.json", [devices[g] for g in gpus], batches, int(seq),
                                   mode, fusion=bool(fusion), tiles=tiles, cfg_by_class=cfg_by_class,
                                   **({"calibrate": True} if m == "neusight_cal" else
                                      {"method": m, "habitat_cfg": habitat_cfg, "seed": seed}))
            preds[m][rows] = sweep["latency_ms"].to_numpy()[at]
    for m in names:
        out[f"{m}_ms"] = preds[m]
        out[f"{m}_ape"] = ape(preds[m], out["e2e_ms"])
    return out


def label_kind(labels: pd.DataFrame) -> np.ndarray:
    """Per label: 'fused inference' (option 'fusion'), else its mode, 'inference' or 'training' (notebook 05)."""
    return np.where(labels["option"] == "fusion", "fused inference", labels["mode"])


# One change to the forecast, label by label (notebook 05's amendment and correction tables): both runs' ms and APE,
#   kind = label_kind,  gpus = 'training GPUs' if the label's GPU is one, else 'other GPUs'
def before_after(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Two evaluate_labels runs of the same labels, one row per label: ms_/ape_before, ms_/ape_after, kind, gpus."""
    from .devices import TRAIN_GPUS_NVIDIA
    keys = ["gpu", "device", "model", "mode", "batch", "seq", "option", "e2e_ms"]
    cols = keys + ["neusight_ms", "neusight_ape"]
    t = before[cols].merge(after[cols], on=keys, suffixes=("_before", "_after"), validate="one_to_one")
    t.columns = [c.replace("neusight_", "") for c in t.columns]
    return t.assign(kind=label_kind(t),
                    gpus=np.where(t["device"].isin(TRAIN_GPUS_NVIDIA), "training GPUs", "other GPUs"))


def seed_label_ape(labels: pd.DataFrame, seeds, cfg_by_class: dict | None = None) -> pd.DataFrame:
    """evaluate_labels' NeuSight columns per training seed of its models, long format, with each label's kind
    ('inference', 'training' or 'fused inference'; notebook 05). cfg_by_class: as evaluate_labels', seeded too."""
    from .selection import seeded
    frames = []
    for seed in seeds:
        cfg, arg = seeded(cfg_by_class, seed)
        ev = evaluate_labels(labels, methods=["neusight"], cfg_by_class=cfg, seed=arg)
        frames.append(ev.assign(seed=seed, kind=label_kind(ev)))
    return pd.concat(frames, ignore_index=True)


def held_out_label_ape(labels: pd.DataFrame, cfg_by_class: dict | None = None) -> pd.DataFrame:
    """evaluate_labels' NeuSight columns for the labels of the training GPUs, each GPU's forecast by models trained
    without its rows (lib.selection.held_out_configs: as if never trained on), with each label's kind (notebook 05)."""
    from .devices import TRAIN_GPUS_NVIDIA
    from .selection import held_out_configs
    frames = [evaluate_labels(labels[labels["device"] == gpu], methods=["neusight"],
                              cfg_by_class=held_out_configs(gpu, cfg_by_class))
              for gpu in TRAIN_GPUS_NVIDIA if (labels["device"] == gpu).any()]
    if not frames:
        return labels.iloc[:0].assign(neusight_ms=np.nan, neusight_ape=np.nan, kind="")
    ev = pd.concat(frames, ignore_index=True)
    return ev.assign(kind=label_kind(ev))
