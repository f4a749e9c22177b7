"""The kernel dataset in place of the predictor: a label's forecast with every kernel the dataset measured on its GPU
taken as measured alone (notebooks 05, 06).

Were the predictor to reproduce the kernel dataset exactly, a label's forecast would be dataset_ms; how far that is
from the label says how much of the end-to-end error no kernel predictor trained on the dataset could take out.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

SHAPE_KEY = ["op", "B", "M", "N", "K", "H"]


# Per row k of a predicted kernel table (lib.forecast.forecast_table) of one GPU:
#   kernel_ms_k = median latency the kernel dataset measured for the same op and shape on that GPU (any split),
#                 times the row's traffic scale (lib.traffic: a backward softmax or layernorm is priced from the
#                 forward kernel of its shape, as the forecast prices it); NaN where the dataset has no such kernel
def with_dataset_kernels(table: pd.DataFrame, kernels: pd.DataFrame) -> pd.DataFrame:
    """A predicted kernel table with `kernel_ms`: each kernel as the kernel dataset measured it alone on the
    table's GPU (`kernels`: that GPU's rows of lib.data.load_kernels), NaN where it did not (notebook 05)."""
    from .traffic import traffic_scale
    if kernels["device"].nunique() > 1:
        raise ValueError(f"kernels: rows of {kernels['device'].nunique()} GPUs; give the table's GPU's rows only")
    med = kernels.groupby(SHAPE_KEY, dropna=False)["latency_ms"].median().rename("kernel_ms").reset_index()
    key = table[SHAPE_KEY].fillna(-1.0)
    ms = key.merge(med.fillna({c: -1.0 for c in SHAPE_KEY[1:]}), on=SHAPE_KEY, how="left")["kernel_ms"]
    return table.assign(kernel_ms=ms.to_numpy() * traffic_scale(table))


# Over the rows with a kernel_ms (measured) of a table from with_dataset_kernels:
#   dataset_ms = sum_k count_k * (kernel_ms_k if measured else pred_ms_k)   (the forecast had its predictor
#                                                                          reproduced the kernel dataset exactly)
#   measured_share = sum_measured total_ms / sum total_ms
#   kernel_over_pred = sum_measured count * kernel_ms / sum_measured total_ms   (> 1: forecast faster than measured)
def dataset_priced(table: pd.DataFrame) -> dict:
    """{forecast_ms, dataset_ms, measured_share, kernel_over_pred} of a table from with_dataset_kernels (notebook 05)."""
    hit = table["kernel_ms"].notna().to_numpy()
    total = float(table["total_ms"].sum())
    pred = float(table.loc[hit, "total_ms"].sum())
    kernel = float((table.loc[hit, "kernel_ms"] * table.loc[hit, "count"]).sum())
    return {"forecast_ms": total, "dataset_ms": total - pred + kernel,
            "measured_share": pred / total if total > 0 else float("nan"),
            "kernel_over_pred": kernel / pred if pred > 0 else float("nan")}


PRICED_KEYS = ["device", "model", "mode", "batch", "seq"]


def dataset_priced_labels(evaluated: pd.DataFrame, kernels: pd.DataFrame, cfg_by_class: dict | None = None,
                          rtol: float = 1e-4) -> pd.DataFrame:
    """Per label of a GPU with kernels in `kernels` (lib.data.load_kernels rows): its forecast with every kernel the
    dataset measured on that GPU taken as measured (dataset_priced), whole and per phase, beside the measurement
    (notebooks 05, 06). `evaluated`: plain labels with their NeuSight forecast (lib.label_eval.evaluate_labels, made
    with the same cfg_by_class), which each kernel table must sum to within rtol."""
    from . import paths
    from .devices import load_device
    from .forecast import forecast_table
    from .labels import device_file_of_folder
    from .metrics import ape
    gpu_rows = dict(tuple(kernels.groupby("device")))
    rows = []
    for r in evaluated[evaluated["device"].isin(gpu_rows)].itertuples():
        table = forecast_table(paths.MODEL_CONFIGS / f"{r.model}.json", load_device(device_file_of_folder(r.gpu)),
                               r.batch, r.seq, r.mode, cfg_by_class=cfg_by_class)
        table = with_dataset_kernels(table, gpu_rows[r.device])
        whole = dataset_priced(table)
        if not np.isclose(whole["forecast_ms"], r.neusight_ms, rtol=rtol):
            raise ValueError(f"{r.device} {r.model} {r.mode} {r.batch} x {r.seq}: the kernel table sums to "
                             f"{whole['forecast_ms']:.4g} ms, the evaluated forecast is {r.neusight_ms:.4g} ms "
                             f"(another cfg_by_class?)")
        phases = {ph: dataset_priced(table[table["phase"] == ph]) for ph in ("fw", "bw")}   # a label times both
        rows.append({**{k: getattr(r, k) for k in PRICED_KEYS}, "e2e_ms": r.e2e_ms, "fw_ms": r.fw_ms, "bw_ms": r.bw_ms,
                     "neusight_ms": r.neusight_ms, "dataset_ms": whole["dataset_ms"],
                     "measured_share": whole["measured_share"], "kernel_over_pred": whole["kernel_over_pred"],
                     **{f"{what}_{ph}_ms": d[f"{what}_ms"] for ph, d in phases.items() for what in ("forecast", "dataset")}})
    out = pd.DataFrame(rows)
    if len(out):
        out["neusight_ape"] = ape(out["neusight_ms"], out["e2e_ms"])
        out["dataset_ape_pct"] = ape(out["dataset_ms"], out["e2e_ms"])
    return out


# Per group of dataset_priced_labels rows: labels; measured_share (mean); kernel_over_pred (median); neusight_ape and
# dataset_ape_pct (means); and per phase ph (fw, bw) the medians of forecast_ph_ms / ph_ms and dataset_ph_ms / ph_ms
# (bw: NaN for inference, which has no backward)
def dataset_priced_summary(priced: pd.DataFrame, by) -> pd.DataFrame:
    """dataset_priced_labels rows summed up per group `by` (notebooks 05, 06)."""
    ratios = pd.DataFrame({f"{what}_{ph}": priced[f"{what}_{ph}_ms"] / priced[f"{ph}_ms"].where(priced[f"{ph}_ms"] > 0)
                           for ph in ("fw", "bw") for what in ("forecast", "dataset")})
    g = priced.assign(**ratios).groupby(by)
    out = g.agg(labels=("e2e_ms", "size"), measured_share=("measured_share", "mean"),
                kernel_over_pred=("kernel_over_pred", "median"), neusight_ape=("neusight_ape", "mean"),
                dataset_ape_pct=("dataset_ape_pct", "mean"))
    return out.join(g[list(ratios.columns)].median())


# Does a label that runs longer measure slower against the kernel dataset's kernels (and against our forecast)?
#   per GPU and mode with at least min_labels labels: Spearman's rho of e2e_ms with e2e_ms / dataset_ms (rho_vs_dataset)
#   and with e2e_ms / neusight_ms (rho_vs_forecast);
#   pooled ('ALL', and 'ALL but SwitchTransformer'): each label's rank of e2e_ms within its GPU and mode (0-1) in place
#   of e2e_ms
def duration_offset(priced: pd.DataFrame, min_labels: int = 4) -> pd.DataFrame:
    """Run time against measured / forecast, Spearman's rho per GPU and mode and pooled (notebook 05)."""
    slow = priced.assign(vs_dataset=priced["e2e_ms"] / priced["dataset_ms"],
                         vs_forecast=priced["e2e_ms"] / priced["neusight_ms"],
                         within=priced.groupby(["device", "mode"])["e2e_ms"].rank(pct=True))
    rho = lambda f, by: {"labels": len(f), "rho_vs_dataset": f[by].corr(f["vs_dataset"], method="spearman"),
                         "rho_vs_forecast": f[by].corr(f["vs_forecast"], method="spearman")}
    rows = {k: rho(f, "e2e_ms") for k, f in slow.groupby(["device", "mode"]) if len(f) >= min_labels}
    rows[("ALL", "pooled")] = rho(slow, "within")
    rows[("ALL but SwitchTransformer", "pooled")] = rho(slow[slow["model"] != "switchxl4"], "within")
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index = pd.MultiIndex.from_tuples(out.index, names=["device", "mode"])
    return out
