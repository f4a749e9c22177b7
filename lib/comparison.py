"""Comparing two GPUs: spec dominance, spec twins, and how forecasts rank GPUs against measurements (notebooks 04-05).

A forecast that reads spec sheets alone should agree with them (a GPU with more of everything is not slower) and
with measurements (the GPU measured faster on a shape is forecast faster).
"""
from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pandas as pd

from .data import OP_CLASSES
from .metrics import ape

# A GPU with at least as much of every spec resource as another, and the same architecture, cannot run a
# kernel slower; a spec-only forecast should not say it does. Checked by raising one spec field of a base
# GPU at a time to a target's value (H100 -> H200: bandwidth, then memory capacity) and comparing forecasts.
# A launch counts as forecast slower when its prediction exceeds the base's by more than this share.
SLOWER_TOLERANCE = 1e-3
SPEC_FIELDS = ("num_sm", "cores_per_sm", "freq_mhz", "peak_gflops", "peak_vec_gflops", "mem_bw_gbps", "l2_mb",
               "mem_gb")


def spec_steps(base, target) -> dict:
    """{name: Device}: base, base with each spec field in which target differs raised to target's value
    ('+field'), and target; an error unless target has at least base's value in every field (notebooks 04-05)."""
    fields = [f for f in SPEC_FIELDS if getattr(target, f) != getattr(base, f)]
    lower = [f for f in fields if getattr(target, f) < getattr(base, f)]
    if lower:
        raise ValueError(f"{target.name} does not dominate {base.name}: lower {lower}")
    steps = {f"+{f}": dataclasses.replace(base, name=f"{base.name} +{f}", **{f: getattr(target, f)}) for f in fields}
    return {base.name: base, **steps, target.name: target}


def dominance_table(tables: dict, base: str) -> pd.DataFrame:
    """Per op class and overall ('ALL') of predicted kernel tables {step: table} of the same kernels
    (lib.forecast.forecast_table): kernel launches, predicted ms, % change against `base`, % of the launches
    forecast slower than on `base` by more than SLOWER_TOLERANCE, and the largest per-kernel ratio (notebooks 04-05)."""
    from .calibration import CLASSES, kernel_class
    ref = tables[base]
    cls = pd.Series(kernel_class(ref["op"]), index=ref.index)
    rows = []
    for step, t in tables.items():
        ratio = t["pred_ms"].to_numpy() / ref["pred_ms"].to_numpy()
        slower = ratio > 1 + SLOWER_TOLERANCE
        for c in (*[c for c in CLASSES if (cls == c).any()], "ALL"):
            m = (cls == c).to_numpy() if c != "ALL" else np.ones(len(ref), bool)
            base_ms, step_ms = ref["total_ms"][m].sum(), t["total_ms"][m].sum()
            rows.append({"step": step, "op_class": c, "launches": int(ref["count"][m].sum()),
                         "base_ms": base_ms, "step_ms": step_ms,
                         "change_pct": 100 * (step_ms / base_ms - 1),
                         "slower_launch_pct": 100 * (ref["count"][m] * slower[m]).sum() / ref["count"][m].sum(),
                         "max_ratio": ratio[m].max()})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- spec twins and rankings

def spec_twins(devices, candidates) -> dict:
    """{device: twin}: a candidate GPU with the same SM count and fp32 peak as `device` (notebook 04)."""
    out = {}
    for d in devices:
        same = [c for c in candidates if c.name != d.name and c.num_sm == d.num_sm and c.peak_gflops == d.peak_gflops]
        if same:
            out[d.name] = same[0].name
    return out


SHAPE_KEYS = ["op_class", "op", "B", "M", "N", "K", "H"]


def matched_medians(df: pd.DataFrame, target: str, twin: str, cols=("latency_ms",)) -> pd.DataFrame:
    """Shapes measured on both GPUs: the median of `cols` per shape and GPU, suffixed _target and _twin (notebook 04)."""
    dims = SHAPE_KEYS[2:]
    per = {name: df[df["device"] == name].fillna({c: -1.0 for c in dims}).groupby(SHAPE_KEYS)[list(cols)].median()
           for name in (target, twin)}
    both = per[target].join(per[twin], lsuffix="_target", rsuffix="_twin", how="inner").reset_index()
    return both.replace({c: {-1.0: np.nan} for c in dims})


# Ranking two GPUs per shape: the forecast agrees with the measurements when
#     (pred_target < pred_twin) == (meas_target < meas_twin)
def _ratios(both: pd.DataFrame, pred_target, pred_twin) -> pd.DataFrame:
    """Per matched shape: measured and forecast latency ratios target / twin, and whether they rank alike."""
    meas = (both["latency_ms_target"] / both["latency_ms_twin"]).to_numpy(float)
    pred = np.asarray(pred_target, float) / np.asarray(pred_twin, float)
    return pd.DataFrame({"op_class": both["op_class"].to_numpy(), "meas_ratio": meas, "pred_ratio": pred,
                         "meas_faster": meas < 1, "pred_faster": pred < 1, "pred_equal": pred == 1,
                         "agree": (meas < 1) == (pred < 1)})


def pair_ranking(both: pd.DataFrame, pred_target, pred_twin) -> pd.DataFrame:
    """Per op class of matched shapes (matched_medians): % measured faster on the target, % forecast faster, % forecast
    exactly equal, % ranked as measured, and the median measured and forecast latency ratios target / twin (notebook 04)."""
    t = _ratios(both, pred_target, pred_twin)
    out = t.groupby("op_class").agg(shapes=("agree", "size"), measured_faster_pct=("meas_faster", "mean"),
                                    forecast_faster_pct=("pred_faster", "mean"), forecast_equal_pct=("pred_equal", "mean"),
                                    ranked_as_measured_pct=("agree", "mean"),
                                    median_measured_ratio=("meas_ratio", "median"),
                                    median_forecast_ratio=("pred_ratio", "median"))
    out[[c for c in out if c.endswith("_pct")]] *= 100
    return out.reindex([c for c in OP_CLASSES if c in out.index])


# A pair of GPUs within this latency ratio of each other on a shape is a close call.
CLOSE_RATIO = 1.2


def ranking_by_pair(df: pd.DataFrame, pred_col: str) -> pd.DataFrame:
    """Every pair of GPUs of `df` (rows with device, shape, latency_ms and pred_col) on the shapes measured on
    both: % of shapes the forecast ranks as measured, overall and for close calls (measured ratio within
    CLOSE_RATIO), and the median measured and forecast latency ratios first / second GPU (notebook 04)."""
    rows = []
    for a, b in itertools.combinations(sorted(df["device"].unique()), 2):
        both = matched_medians(df, a, b, ("latency_ms", pred_col))
        if both.empty:
            continue
        t = _ratios(both, both[f"{pred_col}_target"], both[f"{pred_col}_twin"])
        close = (t.meas_ratio < CLOSE_RATIO) & (t.meas_ratio > 1 / CLOSE_RATIO)
        rows.append({"gpu_a": a, "gpu_b": b, "shapes": len(t), "ranked_as_measured_pct": 100 * t.agree.mean(),
                     "close_shapes": int(close.sum()),
                     "close_ranked_as_measured_pct": 100 * t.agree[close].mean() if close.any() else np.nan,
                     "median_measured_ratio": t.meas_ratio.median(), "median_forecast_ratio": t.pred_ratio.median()})
    return pd.DataFrame(rows)


# A twin forecast predicts the target GPU's latency of a shape with the twin GPU's measurement of
# the same shape:   raw:      t_pred = t_twin
#                   roofline: t_pred = t_twin * roofline_ms(target) / roofline_ms(twin)
def twin_table(df: pd.DataFrame, target: str, twin: str) -> pd.DataFrame:
    """Per op class, shapes measured on both GPUs: rows, median latency ratio target/twin and the MAPE (%)
    of the raw and roofline-scaled twin forecasts (needs roofline_ms, lib.roofline.add_roofline; notebook 04)."""
    both = matched_medians(df, target, twin, ("latency_ms", "roofline_ms"))
    ratio = both["latency_ms_target"] / both["latency_ms_twin"]
    raw = both["latency_ms_twin"]
    scaled = raw * both["roofline_ms_target"] / both["roofline_ms_twin"]
    t = pd.DataFrame({"op_class": both["op_class"], "ratio": ratio, "raw": ape(raw, both["latency_ms_target"]),
                      "scaled": ape(scaled, both["latency_ms_target"])})
    out = t.groupby("op_class").agg(shapes=("ratio", "size"), median_ratio=("ratio", "median"),
                                    twin_mape_pct=("raw", "mean"), scaled_twin_mape_pct=("scaled", "mean"))
    return out.reindex([c for c in OP_CLASSES if c in out.index])
