"""Per-op evaluation tables: every method on the held-out kernels, MAPE per class x split (notebook 04).

Splits (DESIGN.md): test_id = held-out shapes on the training GPUs; test_ood = GPUs never
trained on. Li et al. is fitted on the target's own training-shape measurements, so it has no
OOD predictions in this dataset (NaN).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from . import paths
from .data import OP_CLASSES, load_kernels
from .devices import TRAIN_GPUS_NVIDIA, device_by_name
from .features import add_features
from .kernels import predict_by_device, predict_kernels
from .metrics import ape, mape_ci_table, never_trained_table
from .tiles import GEMM_TILE_CANDIDATES, gemm_tile_from_name

# column -> (label, method, tiles)
VARIANTS = {
    "pred_neusight": ("NeuSight (spec-only tiles)", "neusight", "spec"),
    "pred_neusight_general": ("NeuSight (spec-only tiles, unseen-GPU model on every GPU)", "neusight", "spec"),
    "pred_neusight_autotune": ("NeuSight (autotuned tiles)", "neusight", "autotune"),
    "pred_neusight_classifier": ("NeuSight (classifier tiles)", "neusight", "classifier"),
    "pred_neusight_hybrid": ("NeuSight (hybrid tiles, amendment 8)", "neusight", "hybrid"),
    "pred_neusight_oracle": ("NeuSight (oracle tiles, target's kernel names)", "neusight", "oracle"),
    "pred_roofline": ("Roofline", "roofline", "spec"),
    "pred_habitat": ("Habitat-style MLP", "habitat", "spec"),
    "pred_li": ("Li et al. (fits target measurements)", "li", "spec"),
}
SPLIT_LABEL = {"test_id": "in-distribution", "test_ood": "OOD"}
PAPER_METHODS = {"Roofline": "Roofline", "Habitat": "Habitat-style MLP", "Li et al.": "Li et al. (fits target measurements)",
                 "NeuSight": "NeuSight (oracle tiles, target's kernel names)"}
PAPER_CLASS = {"BMM": "BMM", "FC": "FC", "EW": "EW", "Softmax": "SOFTMAX", "LN": "LN"}


def test_table(max_rows_per_class: int | None = None, seed: int = 0) -> pd.DataFrame:
    """Held-out kernels (test_id + test_ood), optionally a seeded subsample per op class and split."""
    df = load_kernels(splits=["test_id", "test_ood"])
    if max_rows_per_class is not None:
        shuffled = df.sample(frac=1.0, random_state=seed)
        df = shuffled[shuffled.groupby(["op_class", "split"]).cumcount() < max_rows_per_class]
    return df.sort_index().reset_index(drop=True)


def predict_all(df: pd.DataFrame, columns=tuple(VARIANTS), cfg_by_class: dict | None = None,
                habitat_cfg: dict | None = None) -> pd.DataFrame:
    """df plus one pred_* column per variant (see VARIANTS), each predicted device by device."""
    from .selection import DEFAULT_CONFIGS
    out = df.copy()
    for col in columns:
        _, method, tiles = VARIANTS[col]
        # the general variant: the unseen-GPU configs on training GPUs too (no known-GPU model)
        cfg = (cfg_by_class or DEFAULT_CONFIGS) if col == "pred_neusight_general" else cfg_by_class
        out[col] = predict_by_device(df, method, tiles, cfg, habitat_cfg)
    return out


def mape_table(df: pd.DataFrame, columns) -> pd.DataFrame:
    """MAPE (%) with rows = method label, columns = (split label, op class); NaN where no prediction."""
    rows = {}
    for col in columns:
        err = pd.Series(ape(df[col], df["latency_ms"]), index=df.index)
        rows[VARIANTS[col][0]] = err.groupby([df["split"].map(SPLIT_LABEL), df["op_class"]]).mean()
    tab = pd.DataFrame(rows).T
    order = [(s, c) for s in SPLIT_LABEL.values() for c in OP_CLASSES if (s, c) in tab.columns]
    return tab[order]


def spec_whatif_mape(df: pd.DataFrame, column: str, device_name: str, field: str, values, rows=None,
                     cfg_by_class: dict | None = None) -> pd.DataFrame:
    """What-if of one spec field: MAPE (%) per (split, op class) (rows) x value of `field` (columns) of the
    predictions in `column` when `device_name`'s spec field is set to each value; `rows` (a mask, default all
    of that device's rows) are forecast again, every other row keeps its prediction (notebook 04)."""
    import dataclasses
    from .devices import device_by_name
    from .kernels import predict_kernels
    _, method, tiles = VARIANTS[column]
    mask = (df["device"] == device_name).to_numpy() & (np.ones(len(df), bool) if rows is None else np.asarray(rows))
    out = {}
    for value in values:
        device = dataclasses.replace(device_by_name(device_name), **{field: value})
        p = df.copy()
        p.loc[mask, column] = predict_kernels(p[mask], device, method, tiles, cfg_by_class)
        out[value] = mape_table(p, [column]).iloc[0]
    return pd.DataFrame(out).rename_axis(columns=field)


def mape_ci(df: pd.DataFrame, columns, paper: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per method x split x op class: rows, MAPE (%), its bootstrap 95% interval and, beside it, the
    paper's NeuSight number with where the interval lies ('below', 'above' or 'spans' the paper)."""
    frames = []
    for col in columns:
        t = mape_ci_table(df.assign(split=df["split"].map(SPLIT_LABEL)), col, ["split", "op_class"])
        frames.append(t.assign(method=VARIANTS[col][0]))
    out = pd.concat(frames, ignore_index=True)[["method", "split", "op_class", "rows", "mape_pct",
                                                "ci_low_pct", "ci_high_pct"]]
    if paper is not None:
        ref = paper.loc[f"paper: {PAPER_METHODS['NeuSight']}"]
        out["paper_pct"] = [ref.get((s, c), np.nan) for s, c in zip(out["split"], out["op_class"])]
        out["vs_paper"] = np.select([out["ci_high_pct"] < out["paper_pct"], out["ci_low_pct"] > out["paper_pct"],
                                     out["paper_pct"].notna()], ["below", "above", "spans"], "")
    return out


def seed_forecasts(df: pd.DataFrame, seeds, cfg_by_class: dict | None = None) -> pd.DataFrame:
    """The default NeuSight forecast (spec-only tiles) of every row, one column per training seed: the same configs,
    trained from each seed (notebook 04). cfg_by_class: as predict_all's, seeded too."""
    from tqdm import tqdm  # text bars on stderr (tqdm.auto warns in notebooks without ipywidgets)
    from .selection import seeded
    out = {}
    for seed in tqdm(seeds, desc="seeds"):
        cfg, arg = seeded(cfg_by_class, seed)
        out[seed] = predict_by_device(df, "neusight", "spec", cfg, seed=arg)
    return pd.DataFrame(out, index=df.index)


def neusight_mape(df: pd.DataFrame, pred) -> pd.Series:
    """MAPE (%) per (split, op class) of one NeuSight forecast of df's rows, as mape_table scores it (notebook 04)."""
    return mape_table(df.assign(pred_neusight=pred), ["pred_neusight"]).iloc[0].rename("mape_pct").rename_axis(
        ["split", "op_class"])


def seed_mape(df: pd.DataFrame, forecasts: pd.DataFrame) -> pd.DataFrame:
    """MAPE (%) per training seed (a column of seed_forecasts' table), split and op class, long format (notebook 04)."""
    frames = [neusight_mape(df, forecasts[seed]).reset_index().assign(seed=seed) for seed in forecasts.columns]
    out = pd.concat(frames, ignore_index=True)[["seed", "split", "op_class", "mape_pct"]]
    return out.sort_values(["seed", "split", "op_class"], kind="stable").reset_index(drop=True)


def seed_spread(per_seed: pd.DataFrame, paper: pd.DataFrame, mean_forecast: pd.Series | None = None) -> pd.DataFrame:
    """Per split and op class of seed_mape's table: the first seed's MAPE, the least, mean and largest over
    the seeds, the MAPE of the seeds' mean forecast where `mean_forecast` (neusight_mape's series) gives it, and the
    paper's NeuSight beside them with where the seeds lie ('below', 'above' or 'spans')."""
    first = per_seed["seed"].iloc[0]
    g = per_seed.groupby(["split", "op_class"], sort=False)["mape_pct"]
    out = pd.DataFrame({"seeds": g.size(), f"seed{first}_pct": g.first(), "min_pct": g.min(), "mean_pct": g.mean(),
                        "max_pct": g.max()})
    if mean_forecast is not None:
        out["mean_forecast_pct"] = mean_forecast.reindex(out.index)
    out = out.reset_index()
    ref = paper.loc[f"paper: {PAPER_METHODS['NeuSight']}"]
    out["paper_pct"] = [ref.get((s, c), np.nan) for s, c in zip(out["split"], out["op_class"])]
    out["vs_paper"] = np.select([out["max_pct"] < out["paper_pct"], out["min_pct"] > out["paper_pct"],
                                 out["paper_pct"].notna()], ["below", "above", "spans"], "")
    return out


def held_out_gpu_forecasts(df: pd.DataFrame, gpus=None, cfg_by_class: dict | None = None) -> np.ndarray:
    """Per test_id row of a training GPU in `gpus` (None: all five): NeuSight's spec-only forecast by models trained
    without that GPU's rows (lib.selection.held_out_configs), as if it were never trained on; NaN on other rows
    (notebook 04)."""
    from tqdm import tqdm  # text bars on stderr (tqdm.auto warns in notebooks without ipywidgets)
    from .selection import held_out_configs
    out, present = np.full(len(df), np.nan), set(df["device"])
    for gpu in tqdm([g for g in (gpus or TRAIN_GPUS_NVIDIA) if g in present], desc="held-out GPUs"):
        rows = np.flatnonzero(((df["device"] == gpu) & (df["split"] == "test_id")).to_numpy())
        out[rows] = predict_kernels(df.iloc[rows], device_by_name(gpu), "neusight", "spec",
                                    held_out_configs(gpu, cfg_by_class))
    return out


def never_trained_rows(df: pd.DataFrame, held_out_col: str, trained_col: str = "pred_neusight") -> tuple:
    """(held, ood): each kernel forecast by a model that never saw its GPU, as device, op_class, pred, meas. held: the
    training GPUs' rows (held_out_col), with `trained` (trained_col on the same rows); ood: the OOD GPUs' rows
    (trained_col: they are never trained on anyway) (notebook 04)."""
    held = df[df[held_out_col].notna()]
    ood = df[df["split"] == "test_ood"]
    return (pd.DataFrame({"device": held["device"], "op_class": held["op_class"], "pred": held[held_out_col],
                          "meas": held["latency_ms"], "trained": held[trained_col]}),
            pd.DataFrame({"device": ood["device"], "op_class": ood["op_class"], "pred": ood[trained_col],
                          "meas": ood["latency_ms"]}))


def held_out_gpu_mape(df: pd.DataFrame, held_out_col: str, trained_col: str = "pred_neusight") -> pd.DataFrame:
    """lib.metrics.never_trained_table per op class over never_trained_rows; n = kernels (notebook 04)."""
    held, ood = never_trained_rows(df, held_out_col, trained_col)
    return never_trained_table(held, ood, "op_class").rename(columns={"n": "kernels"})


def paper_table() -> pd.DataFrame:
    """The paper's per-op MAPE (%) from summary/perop.csv, shaped like mape_table."""
    raw = pd.read_csv(paths.SUMMARY / "perop.csv", header=None, dtype=str, names=range(12))
    # two header rows: the split ('In Distribution' / 'Out of Distribution', spanning), the class
    split = raw.iloc[0, 1:].ffill()
    cols = [(("in-distribution" if str(s).startswith("In") else "OOD"), PAPER_CLASS[c])
            for s, c in zip(split, raw.iloc[1, 1:]) if c in PAPER_CLASS]
    keep = [i + 1 for i, c in enumerate(raw.iloc[1, 1:]) if c in PAPER_CLASS]
    body = raw.iloc[2:, keep].astype(float)
    body.columns = pd.MultiIndex.from_tuples(cols)
    body.index = [f"paper: {PAPER_METHODS.get(m, m)}" for m in raw.iloc[2:, 0]]
    return body


def long_table(ours: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """One row per (source, method, split, op class, mape_pct), ours and the paper's, for save_table."""
    frames = []
    for source, tab in (("ours", ours), ("paper", paper)):
        t = tab.stack([0, 1], future_stack=True).rename("mape_pct").reset_index()
        t.columns = ["method", "split", "op_class", "mape_pct"]
        t.insert(0, "source", source)
        frames.append(t)
    return pd.concat(frames, ignore_index=True)


def error_by(df: pd.DataFrame, col: str, by: str) -> pd.DataFrame:
    """MAPE (%) and row count of one prediction column per group: 'device', 'waves' or 'size' (notebook 04).

    'size' is the quintile of the kernel's size within its op class (FLOPs for GEMMs, bytes otherwise),
    held-out rows of both splits pooled: Q1 the smallest fifth of that class's rows, Q5 the largest.
    """
    err = pd.Series(ape(df[col], df["latency_ms"]), index=df.index)
    if by == "device":
        key = df["device"]
    elif by == "waves":
        key = pd.cut(add_features(df)["num_waves"], [0, 1, 4, 16, 64, 256, np.inf], right=True)
    elif by == "size":
        feat = add_features(df)
        size = feat["flops"].where(df["op_class"].isin(["BMM", "FC"]), feat["bytes"])
        # rank first, so equal sizes cannot collapse a quintile's edges
        rank = size.groupby(df["op_class"]).rank(method="first", pct=True)
        key = pd.cut(rank, np.linspace(0, 1, 6), labels=[f"Q{i}" for i in range(1, 6)])
    else:
        raise ValueError(f"error_by: by must be device, waves or size, got {by!r}")
    return (pd.DataFrame({"ape": err, "key": key, "op_class": df["op_class"], "split": df["split"]})
            .groupby(["split", "op_class", "key"], observed=True)["ape"].agg(mape_pct="mean", rows="size")
            .reset_index().rename(columns={"key": by}))


TILE_GROUPS = ("one the rule can choose", "another tile", "no tile in its name")


def error_by_tile_choice(df: pd.DataFrame, columns) -> pd.DataFrame:
    """MAPE (%) and error share per OOD GPU, GEMM class and kind of the kernel's own tile, TILE_GROUPS (notebook 04)."""
    gemm = df[df["op_class"].isin(["BMM", "FC"]) & (df["split"] == "test_ood")]
    missing = [col for col in columns if gemm[col].isna().any()]
    if missing:
        raise ValueError(f"error_by_tile_choice: {', '.join(missing)} has no prediction for some OOD GEMM rows")
    # the kernel's own tile, as the oracle variant reads it from its name; the rule's candidates are NVIDIA's
    tile = gemm["kernel_name"].map(gemm_tile_from_name)
    group = np.where(tile.isna(), TILE_GROUPS[2],
                     np.where(tile.map(lambda t: t in GEMM_TILE_CANDIDATES), TILE_GROUPS[0], TILE_GROUPS[1]))
    err = pd.DataFrame({col: ape(gemm[col], gemm["latency_ms"]) for col in columns}, index=gemm.index)
    keys = [gemm["device"], gemm["op_class"], pd.Series(group, index=gemm.index, name="tile")]
    out = err.groupby(keys).agg(["mean", "sum"])
    table = pd.DataFrame({"rows": gemm.groupby(keys).size()})
    for col in columns:
        table[f"mape_pct_{col}"] = out[(col, "mean")]
        # share of all the class's OOD error (every GPU) that this group carries
        table[f"error_share_{col}"] = out[(col, "sum")] / out[(col, "sum")].groupby(level="op_class").transform("sum")
    return table.reset_index()


# a class's MAPE over some of error_by_tile_choice's groups: sum(mape x rows) / sum(rows) over those groups
def tile_choice_class_mape(table: pd.DataFrame, col: str, groups=TILE_GROUPS) -> pd.Series:
    """MAPE (%) per GEMM class of column col over the OOD rows in `groups` of error_by_tile_choice (notebook 04)."""
    t = table[table["tile"].isin(groups)]
    return (t[f"mape_pct_{col}"] * t["rows"]).groupby(t["op_class"]).sum() / t.groupby("op_class")["rows"].sum()
