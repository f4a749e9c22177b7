"""End-to-end forecasts scored against the labels (notebook 05): every label forecast by its GPU's spec (one
lib.forecast.forecast_sweep per model, sequence, mode and option), its APE, and the label-by-label comparisons built on
it (a change before and after, the training seeds, the training GPUs forecast as if never trained on), and
those two summarized per kind of label and GPU.
"""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from . import paths
from .devices import load_device
from .forecast import METHODS, forecast_sweep
from .labels import E2E_KINDS, LABEL_KEYS
from .metrics import ape, never_trained_table


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


def on_paper_labels(per_seed: pd.DataFrame, tables: dict) -> np.ndarray:
    """Per row of a seed_label_ape table: does the paper's table of its kind ({kind: notebook 05's e2e_inference or
    e2e_training table}) have a cell (paper_neusight) for its label? (notebook 05)"""
    keys = ["kind", "gpu", "model", "batch", "seq"]
    cells = pd.concat([t.loc[t["paper_neusight"].notna(), keys[1:]].assign(kind=kind) for kind, t in tables.items()])
    cells = set(cells[keys].astype({"model": str}).itertuples(index=False, name=None))
    return np.array([key in cells for key in per_seed[keys].astype({"model": str}).itertuples(index=False, name=None)])


def e2e_seed_table(per_seed: pd.DataFrame, paper: pd.Series | None = None) -> pd.DataFrame:
    """Mean NeuSight APE (%) per kind, device ('ALL': every label of the kind) and seed of seed_label_ape's
    table, the least and largest over the seeds, the mean APE of the seeds' mean forecast, and the paper's mean on the
    labels its tables have where `paper` (indexed by kind and device) has it; where per_seed flags those labels
    (bool column `paper_label`), also our least and largest over the seeds on them alone, the range to set beside
    the paper's (notebook 05)."""
    def mean_by(df, col, keys=()):      # mean of col per kind (device 'ALL') and per kind and device, [x keys]
        everyone = df.groupby(["kind", *keys], sort=False)[col].mean().to_frame().assign(device="ALL")
        return pd.concat([everyone.set_index("device", append=True).reorder_levels(["kind", "device", *keys]),
                          df.groupby(["kind", "device", *keys], sort=False)[col].mean().to_frame()])[col]
    out = mean_by(per_seed, "neusight_ape", ["seed"]).unstack("seed")
    out.columns = [f"seed{s}_pct" for s in out.columns]
    out["min_pct"], out["max_pct"] = out.min(axis=1), out.max(axis=1)
    if "paper_label" in per_seed:
        on_paper = mean_by(per_seed[per_seed["paper_label"].astype(bool)], "neusight_ape", ["seed"]).unstack("seed")
        on_paper = on_paper.reindex(out.index)
        out["paper_labels_min_pct"], out["paper_labels_max_pct"] = on_paper.min(axis=1), on_paper.max(axis=1)
    # mean_forecast_pct: each label's forecast averaged over the seeds, then the mean APE,
    #   mean over labels of 100 |mean_s pred_s - measured| / measured
    one = per_seed.groupby([*LABEL_KEYS, "kind", "device"], sort=False).agg(pred=("neusight_ms", "mean"),
                                                                             meas=("e2e_ms", "first")).reset_index()
    one["ape"] = ape(one["pred"], one["meas"])
    out["mean_forecast_pct"] = mean_by(one, "ape").reindex(out.index)
    if paper is not None:
        out["paper_pct"] = paper.reindex(out.index).to_numpy()
    out = out.reset_index()
    # kinds in E2E_KINDS' order, 'ALL' first within each, then devices by name
    rank = out["kind"].map({k: i for i, k in enumerate(E2E_KINDS)}).fillna(len(E2E_KINDS))
    order = np.lexsort((out["device"].to_numpy(), (out["device"] != "ALL").to_numpy(), rank.to_numpy()))
    return out.iloc[order].reset_index(drop=True)


def e2e_held_out_table(held: pd.DataFrame, committed: pd.DataFrame) -> pd.DataFrame:
    """lib.metrics.never_trained_table per kind of label (notebook 05): the training GPUs' labels as
    lib.label_eval.held_out_label_ape forecast them (beside `committed`'s NeuSight forecast of the same labels) and
    the other GPUs' labels as `committed` (evaluate_labels, kind added) forecasts them; n = labels."""
    from .devices import TRAIN_GPUS_NVIDIA
    both = held.merge(committed[[*LABEL_KEYS, "neusight_ms"]], on=LABEL_KEYS, suffixes=("", "_trained"), validate="1:1")
    ood = committed[~committed["device"].isin(TRAIN_GPUS_NVIDIA)]
    out = never_trained_table(
        pd.DataFrame({"device": both["device"], "kind": both["kind"], "pred": both["neusight_ms"],
                      "meas": both["e2e_ms"], "trained": both["neusight_ms_trained"]}),
        pd.DataFrame({"device": ood["device"], "kind": ood["kind"], "pred": ood["neusight_ms"], "meas": ood["e2e_ms"]}),
        "kind").rename(columns={"n": "labels"})
    rank = out["kind"].map({k: i for i, k in enumerate(E2E_KINDS)})
    return out.iloc[np.lexsort((np.arange(len(out)), rank.to_numpy()))].reset_index(drop=True)


# Per label: sector_ms = what pricing its strided element-wise calls by the sectors they move adds to its forecast
# (lib.traffic.sector_read_ms); without_ms = neusight_ms - sector_ms, the forecast had they been priced by their
# contiguous bytes
def sector_read_labels(evaluated: pd.DataFrame, cfg_by_class: dict | None = None) -> pd.DataFrame:
    """evaluate_labels rows (neusight_ms made with the same cfg_by_class) with `strided` (the captured graph has such a
    call), sector_ms, without_ms, without_ape and kind; only strided settings are priced again (notebook 05)."""
    from .forecast import forecast_table
    from .graph import capture
    from .graph_ops import STRIDED_READ
    from .labels import device_file_of_folder
    from .traffic import sector_read_ms
    keys = ["model", "mode", "batch", "seq"]
    strided = {s: capture(paths.MODEL_CONFIGS / f"{s[0]}.json", s[2], s[3], s[1])["aten"].str.endswith(STRIDED_READ).any()
               for s in evaluated[keys].drop_duplicates().itertuples(index=False, name=None)}
    out = evaluated[["gpu", "device", *keys, "option", "e2e_ms", "neusight_ms", "neusight_ape"]].copy()
    out["strided"] = [strided[s] for s in out[keys].itertuples(index=False, name=None)]
    out["sector_ms"] = [
        sector_read_ms(forecast_table(paths.MODEL_CONFIGS / f"{r.model}.json", load_device(device_file_of_folder(r.gpu)),
                                      r.batch, r.seq, r.mode, fusion=r.option == "fusion", cfg_by_class=cfg_by_class))
        if r.strided else 0.0 for r in out.itertuples()]
    out["without_ms"] = out["neusight_ms"] - out["sector_ms"]
    return out.assign(without_ape=ape(out["without_ms"], out["e2e_ms"]), kind=label_kind(out))
