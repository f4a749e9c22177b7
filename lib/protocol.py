"""The selection protocol's evidence, training GPUs only: LOGO folds, selection curves and scores, tile rules,
size extrapolation and the checks of amendments 5 and 6 (notebook 04; the choices they led to are in lib.selection).

Every function here trains or loads predictors of the five training GPUs and scores them on those GPUs'
own rows; none reads an OOD GPU.
"""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from tqdm import tqdm  # text bars on stderr (tqdm.auto warns in notebooks without ipywidgets)

from .data import load_kernels
from .features import add_features
from .metrics import ape, mape


def logo_table(op_class: str, cfg: dict, holdouts=None, spec_tiles: bool = False) -> pd.DataFrame:
    """Leave-one-GPU-out validation of one predictor config: per held-out training GPU, MAPE (%)
    on all of its training-split rows, of a model trained on the other training GPUs and early
    stopped on the held-out one. Oracle tiles (the held-out GPU's own kernel names, as in
    training); spec_tiles=True adds the spec-only (autotuned) GEMM tiles. Never reads OOD GPUs.
    """
    from .devices import TRAIN_GPUS_NVIDIA
    from .predictors import train_predictor, training_table
    from .tile_choice import autotune_tiles
    cfg = dict(cfg or {})
    feat = training_table(op_class, cfg.get("max_rows"), cfg.get("seed", 0))
    raw_cols = set(load_kernels(ops=op_class, splits="train").columns)    # before add_features
    rows = []
    for gpu in holdouts or TRAIN_GPUS_NVIDIA:
        p = train_predictor(op_class, {**cfg, "validation": gpu})
        held = feat[(feat["device"] == gpu).to_numpy()]
        row = {"op_class": op_class, "held_out": gpu, "rows": len(held), "best_epoch": p.info["best_epoch"],
               "mape_oracle": mape(p.predict(held), held["latency_ms"])}
        row["mape_spec"] = np.nan         # spec-only tiles: GEMMs only (vector ops need no choice)
        if spec_tiles and op_class in ("BMM", "FC"):
            _, _, pred = autotune_tiles(_raw(held, raw_cols), p.predict)
            row["mape_spec"] = mape(pred, held["latency_ms"].to_numpy())
        rows.append(row)
    return pd.DataFrame(rows)


def hold_mem_evidence(candidates: dict, choice: dict, classes=("EW", "SOFTMAX", "LN"),
                      fold: str = "Tesla P100-PCIE-16GB") -> pd.DataFrame:
    """Amendment 5's evidence (lib.selection): per class, MAPE (%) on `fold`'s training rows of the chosen
    candidate trained without that GPU, with f_mem's memory term as is and held to the other GPUs' range.
    On the P100 fold the hold does not act (P100 lies inside the other four GPUs' range), so both MAPEs are equal; it
    would act only on the P4 and V100 folds, the range's ends. Never reads OOD GPUs."""
    from .predictors import train_predictor, training_table
    rows = []
    for c in classes:
        cfg = {**candidates[c][choice[c][0]], "validation": fold}
        feat = training_table(c, cfg.get("max_rows"), cfg.get("seed", 0))
        held = feat[(feat["device"] == fold).to_numpy()]
        row = {"op_class": c, "config": choice[c][0], "fold": fold, "rows": len(held)}
        for hold, col in ((False, "mape_as_is"), (True, "mape_held")):
            row[col] = mape(train_predictor(c, {**cfg, "hold_mem": hold}).predict(held), held["latency_ms"])
        rows.append(row)
    out = pd.DataFrame(rows)
    return out.assign(adopt=out["mape_held"] <= out["mape_as_is"])


# lib.selection records each criterion's winner as the committed run recomputed it. A run whose matmuls sum
# another way (another BLAS fingerprint) trains other weights and can recompute another winner; notebook 04 then says which
# (table 04-recorded-choices) and goes on with the recorded choice, which its figures and the CLI use.
def choice_check(protocol_name: str, recorded: dict, recomputed: dict) -> pd.DataFrame:
    """Per op class, the choice lib.selection records beside the one this run recomputed (notebook 04)."""
    rows = [{"protocol": protocol_name, "op_class": c, "recorded": str(recorded[c]), "recomputed": str(v),
             "reproduced": recorded[c] == v} for c, v in recomputed.items()]
    return pd.DataFrame(rows, columns=["protocol", "op_class", "recorded", "recomputed", "reproduced"])


def stage_winners(selection: pd.DataFrame, configs) -> dict:
    """{op_class: config} with the lowest score among `configs` in a selection table (notebook 04: amendment 1's)."""
    rows = selection[selection["config"].isin(configs)].sort_values(["op_class", "score"], kind="stable")
    best = rows.groupby("op_class", sort=False).head(1)
    return dict(zip(best["op_class"], best["config"]))


def winner_choices(winners: pd.DataFrame) -> dict:
    """{op_class: (config, epochs)} of a table of winners indexed by op class, with plain Python values."""
    return {c: (str(w["config"]), int(w["epochs"])) for c, w in winners.iterrows()}


def envelope_evidence(unseen: dict, known: dict, classes, holdouts=None) -> pd.DataFrame:
    """Amendment 6's evidence (lib.selection, lib.envelope): per class x LOGO fold, the held-out GPU's MAPE (%) on
    its training rows (spec-only tiles) forecast by the fold's unseen-GPU model (`unseen[class]`), without and with
    the cap by the fold's known-GPU model (`known[class]`) on the training GPUs it dominates. Never reads OOD GPUs."""
    from .devices import TRAIN_GPUS_NVIDIA, device_by_name
    from .envelope import dominates
    from .kernels import _with_spec
    from .ops import GEMM_OPS
    from .predictors import train_predictor
    from .tile_choice import autotune_tiles

    def forecast(raw, p):   # spec-only tiles for GEMMs, as a default forecast
        if raw["op"].isin(GEMM_OPS).all():
            return autotune_tiles(raw, p.predict)[2]
        return p.predict(add_features(raw.assign(tile_m=np.nan, tile_n=np.nan), tiles="given"))

    rows = []
    for c in classes:
        train = load_kernels(ops=c, splits="train")
        for gpu in holdouts or TRAIN_GPUS_NVIDIA:
            refs = [g for g in TRAIN_GPUS_NVIDIA if dominates(device_by_name(gpu), device_by_name(g))]
            held = train[(train["device"] == gpu).to_numpy()].reset_index(drop=True)
            y = held["latency_ms"].to_numpy()
            base = forecast(held, train_predictor(c, {**unseen[c], "validation": gpu}))
            capped = base
            if refs:
                p_known = train_predictor(c, {**known[c], "validation": gpu})
                for g in refs:
                    capped = np.fmin(capped, forecast(_with_spec(held, device_by_name(g)), p_known))
            rows.append({"op_class": c, "held_out": gpu, "dominated": ", ".join(refs), "rows": len(held),
                         "mape_as_is": mape(base, y), "mape_capped": mape(capped, y),
                         "capped_pct": 100 * float(np.mean(capped < base))})
    return pd.DataFrame(rows)


def envelope_adoption(evidence: pd.DataFrame) -> pd.DataFrame:
    """Amendment 6's rule per class: mean over the folds of an envelope_evidence table; adopt iff capped is lower."""
    out = evidence.groupby("op_class", sort=False)[["mape_as_is", "mape_capped"]].mean()
    return out.assign(adopt=out["mape_capped"] < out["mape_as_is"]).reset_index()


def _raw(feat: pd.DataFrame, raw_cols) -> pd.DataFrame:
    """The kernel-table columns of a featured table (what the tile rules start from)."""
    return feat[[c for c in feat.columns if c in raw_cols]].reset_index(drop=True)


# The tile rules under the selection protocol's own criterion (training GPUs only): per run of the
# chosen unseen-GPU config -- each LOGO fold (its held-out GPU's training rows) and the held-out-shapes
# run (lib.train.fit's shapes split) -- every rule forecasts the run's held-out rows with that run's
# model (best-validation weights); the classifier is fitted without those rows. Per rule:
#   score = (mean over the LOGO folds of MAPE + held-out-shape MAPE) / 2
TILE_RULES = ("oracle", "autotune", "classifier", "hybrid", "ranged", "hedged")


def tile_rule_table(op_class: str, cfg: dict, holdouts=None) -> pd.DataFrame:
    """MAPE (%) and median predicted / measured latency per run x tile rule (notebook 04)."""
    from .devices import TRAIN_GPUS_NVIDIA
    from .predictors import make_config, shape_groups, train_predictor, training_table
    from .tile_choice import autotune_tiles, classify_tiles, fit_tile_classifier, narrow_gemms, within_range
    from .ops import GEMM_OPS
    from .train import split_indices
    cfg = dict(cfg or {})
    feat = training_table(op_class, cfg.get("max_rows"), cfg.get("seed", 0))
    raw_cols = set(load_kernels(ops=op_class, splits="train").columns)
    gemm = load_kernels(ops=list(GEMM_OPS), splits="train")
    gemm_keys = pd.MultiIndex.from_frame(gemm[["op", "B", "M", "N", "K"]])
    tc = make_config(cfg)[0]
    shapes = np.zeros(len(feat), bool)
    shapes[split_indices(shape_groups(feat), tc.val_fraction, tc.seed)[1]] = True
    runs = {gpu: (feat["device"] == gpu).to_numpy() for gpu in (holdouts or TRAIN_GPUS_NVIDIA)}
    runs["shapes"] = shapes
    rows = []
    for run, held_mask in tqdm(runs.items(), desc=f"tile rules {op_class}", file=sys.stderr, leave=False):
        p = train_predictor(op_class, {**cfg, "validation": run})
        held = feat[held_mask].reset_index(drop=True)
        raw = _raw(held, raw_cols)
        # the classifier must not see the run's held-out rows: its GPU, or its shapes
        unseen = (gemm["device"] == run).to_numpy() if run != "shapes" else \
            gemm_keys.isin(pd.MultiIndex.from_frame(held[["op", "B", "M", "N", "K"]]))
        tiles = classify_tiles(raw, fit_tile_classifier(gemm[~unseen]))
        pred = {"oracle": p.predict(held), "autotune": autotune_tiles(raw, p.predict)[2],
                "classifier": p.predict(add_features(raw.assign(tile_m=tiles[0], tile_n=tiles[1]), tiles="given"))}
        pred["hybrid"] = np.where(narrow_gemms(raw), pred["classifier"], pred["autotune"])   # amendment 8
        # amendment 9: the hybrid within the spec range of the GPUs the run's classifier was fitted on
        within = within_range(raw, [g for g in TRAIN_GPUS_NVIDIA if g != run])
        pred["ranged"] = np.where(within, pred["hybrid"], pred["autotune"])
        # amendment 10: beyond that range a narrow GEMM takes the geometric mean of both tiles' forecasts
        pred["hedged"] = np.where(within | ~narrow_gemms(raw), pred["ranged"],
                                  np.sqrt(pred["classifier"] * pred["autotune"]))
        y = held["latency_ms"].to_numpy()
        rows += [{"op_class": op_class, "run": run, "rule": rule, "rows": len(held),
                  "mape_pct": mape(v, y), "median_ratio": float(np.median(v / y))}
                 for rule, v in pred.items()]
    return pd.DataFrame(rows)


def tile_rule_scores(table: pd.DataFrame) -> pd.DataFrame:
    """Per class x rule of a tile_rule_table: LOGO mean MAPE, held-out-shape MAPE and their mean, score (notebook 04)."""
    logo = table[table["run"] != "shapes"].groupby(["op_class", "rule"])["mape_pct"].mean().rename("logo_mape")
    shapes = table[table["run"] == "shapes"].set_index(["op_class", "rule"])["mape_pct"].rename("shapes_mape")
    out = pd.concat([logo, shapes], axis=1)
    out["score"] = (out["logo_mape"] + out["shapes_mape"]) / 2
    return out.reset_index()


def selection_curves(op_class: str, cfg: dict, holdouts=None, shapes: bool = True) -> pd.DataFrame:
    """Per-epoch validation MAPE (%) of one config, for the selection protocol of lib.selection:
    one run per held-out training GPU (leave-one-GPU-out) plus, if shapes, one run early-stopped
    on held-out shapes of the five training GPUs (lib.train.fit's 'shapes' split, inside the
    training split, never test_id rows). Ensembles: one row per seed. Never reads OOD GPUs.
    Columns: op_class, run ('shapes' or the held-out GPU), seed, epoch (1-based), val_mape.
    """
    from .devices import TRAIN_GPUS_NVIDIA
    from .predictors import training_info
    cfg = dict(cfg or {})
    n, seed0 = cfg.pop("ensemble", 1), cfg.get("seed", 0)
    rows = []
    for run in [*(TRAIN_GPUS_NVIDIA if holdouts is None else holdouts), *(["shapes"] if shapes else [])]:
        for s in range(seed0, seed0 + n):
            info = training_info(op_class, {**cfg, "seed": s, "validation": run})   # the history, not the weights
            rows += [{"op_class": op_class, "run": run, "seed": s, "epoch": h["epoch"] + 1,
                      "val_mape": 100 * h["val_loss"]} for h in info["history"]]
    return pd.DataFrame(rows)


# Epoch candidates (E): the median over the LOGO folds of the best epoch, the best epoch on held-out
# shapes, and their geometric mean (rounded). Per E:
#   logo_mape(E)   = mean over folds of the seed-mean held-out-GPU MAPE after E epochs
#   shapes_mape(E) = seed-mean held-out-shape MAPE after E epochs
#   score(E)       = (logo_mape(E) + shapes_mape(E)) / 2
# A run that stopped before E counts with its last epoch (selection runs use patience >= epochs).
def combined_scores(curves: pd.DataFrame) -> pd.DataFrame:
    """One row per epoch candidate of one config's selection_curves: epochs, logo_mape, shapes_mape, score."""
    mean = curves.groupby(["run", "epoch"])["val_mape"].mean().unstack("run").sort_index().ffill()
    folds = [c for c in mean.columns if c != "shapes"]
    if not folds or "shapes" not in mean.columns:
        raise ValueError("combined_scores: curves need LOGO folds and a 'shapes' run")
    logo_best = int(round(float(np.median([mean[f].idxmin() for f in folds]))))
    shapes_best = int(mean["shapes"].idxmin())
    cands = {"logo_median_best": logo_best, "shapes_best": shapes_best,
             "geometric_mean": int(round(np.sqrt(logo_best * shapes_best)))}
    rows = [{"candidate": k, "epochs": e, "logo_mape": float(mean.loc[e, folds].mean()),
             "shapes_mape": float(mean.loc[e, "shapes"])} for k, e in cands.items()]
    out = pd.DataFrame(rows)
    out["score"] = (out["logo_mape"] + out["shapes_mape"]) / 2
    return out


def selection_table(candidates: dict, holdouts=None) -> pd.DataFrame:
    """combined_scores of every candidate config: {op_class: {name: cfg}} -> one row per
    (op_class, config, epoch candidate), best (lowest score) first within each class."""
    frames = []
    for op_class, cands in candidates.items():
        for name, cfg in tqdm(cands.items(), desc=f"selection {op_class}", file=sys.stderr, leave=False):
            t = combined_scores(selection_curves(op_class, cfg, holdouts))
            frames.append(t.assign(op_class=op_class, config=name))
    out = pd.concat(frames, ignore_index=True)
    out = out[["op_class", "config", "candidate", "epochs", "logo_mape", "shapes_mape", "score"]]
    return out.sort_values(["op_class", "score"], kind="stable").reset_index(drop=True)


# Forecasts ON a training GPU (lib.selection, second protocol): such a GPU's own training rows are
# training data, so its model may learn one efficiency per GPU (device_factors) and is judged on
# held-out shapes of the five training GPUs alone. Per candidate config (with device factors):
#   shapes_mape(E) = seed-mean held-out-shape MAPE after E epochs;  score = min over E of shapes_mape(E)
def known_gpu_selection_table(candidates: dict) -> pd.DataFrame:
    """Best epoch and held-out-shape MAPE (%) of every candidate {op_class: {name: cfg}} trained with
    device factors; one row per (op_class, config), best (lowest shapes_mape) first within each class."""
    rows = []
    for op_class, cands in candidates.items():
        for name, cfg in tqdm(cands.items(), desc=f"known-GPU selection {op_class}", file=sys.stderr, leave=False):
            curves = selection_curves(op_class, {**cfg, "device_factors": True}, holdouts=())
            mean = curves.groupby("epoch")["val_mape"].mean()
            rows.append({"op_class": op_class, "config": name, "epochs": int(mean.idxmin()),
                         "shapes_mape": float(mean.min())})
    return pd.DataFrame(rows).sort_values(["op_class", "shapes_mape"], kind="stable").reset_index(drop=True)


# Size extrapolation, training GPUs only: most held-out OOD softmax kernels are larger than every
# training one, so how a model carries over to larger kernels matters. Per class, a model is trained
# without each training GPU's largest rows (lib.predictors.largest_rows) and scored on them, once
# with its inputs clipped to the training range (what NeuSightPredictor.predict does) and once not
# (the MLP extrapolating linearly in the log features).
CLIPPED, UNCLIPPED = "clipped to the training range (default)", "not clipped"   # size_extrapolation's `inputs`


def size_extrapolation(op_class: str, cfg: dict) -> pd.DataFrame:
    """MAPE (%) on the training GPUs' largest rows, inputs clipped vs not: one row per variant (notebook 04)."""
    from dataclasses import replace
    from .predictors import largest_rows, train_predictor, training_table

    def unclipped(p):
        return replace(p, lo=np.full_like(p.lo, -np.inf), hi=np.full_like(p.hi, np.inf),
                       members=tuple(unclipped(m) for m in p.members))
    cfg = dict(cfg or {})
    p = train_predictor(op_class, {**cfg, "validation": "largest"})
    feat = training_table(op_class, cfg.get("max_rows"), cfg.get("seed", 0))
    held = feat[largest_rows(feat)]
    rows = []
    for inputs, q in ((CLIPPED, p), (UNCLIPPED, unclipped(p))):
        err = pd.Series(ape(q.predict(held), held["latency_ms"]), index=held.index)
        rows.append({"op_class": op_class, "inputs": inputs, "rows": len(held), "mape_pct": err.mean(),
                     **err.groupby(held["device"]).mean().to_dict()})
    return pd.DataFrame(rows)
