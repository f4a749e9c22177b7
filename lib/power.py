"""Board power per unit of fp32 peak: a spec-sheet number the forecasts do not read (notebook 04).

A long GEMM keeps every FP32 unit busy; a board whose power limit is small for its nominal peak cannot hold the
boost clock the peak is quoted at, so it reaches a smaller share of that peak. Board powers are vendor figures
with their sources in data/devices/board-power.csv (the dataset's device JSONs carry none).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from . import paths
from .metrics import mape

BOARD_POWER = paths.DEVICES_ADDED / "board-power.csv"


class PowerError(ValueError):
    """A board-power table that cannot be read; the message names the file and the row or column."""


def load_board_power(path: Path | str = BOARD_POWER) -> pd.Series:
    """Board power (W) per device name, from a CSV with device, board_power_w and source columns."""
    path = Path(path)
    table = paths.read_table(path, "board-power table", PowerError, ("device", "board_power_w", "source"))
    watts = pd.to_numeric(table["board_power_w"], errors="coerce")
    bad = table.index[~(watts > 0) | table["source"].isna() | table["device"].isna()]
    if len(bad):
        raise PowerError(f"{path}: row {bad[0] + 2}: needs a device, a positive board_power_w and a source")
    if table["device"].duplicated().any():
        raise PowerError(f"{path}: device {table['device'][table['device'].duplicated()].iloc[0]!r} listed twice")
    return pd.Series(watts.to_numpy(), index=table["device"], name="board_power_w")


# watts per TFLOP/s of nominal fp32 peak = board_power_w / (peak_gflops / 1000)
def power_per_peak(peaks: pd.Series, peak_gflops: pd.Series, board_power_w: pd.Series) -> pd.DataFrame:
    """Per device with all three: board power, nominal peak, W per peak TFLOP/s and the share of peak reached."""
    t = pd.concat([board_power_w.rename("board_power_w"), peak_gflops.rename("peak_gflops"),
                   peaks.rename("peak_reached")], axis=1, join="inner")
    return t.assign(w_per_peak_tflops=t["board_power_w"] / (t["peak_gflops"] / 1000)).sort_values("w_per_peak_tflops")


# A power derating of the forecasts for GPUs never trained on (notebook 04's trial, not adopted). Per op class:
#   log(median forecast / measured) of each training GPU, forecast by the model that never saw it,
#     = a + b * log(W per peak TFLOP/s)                        (least squares over the training GPUs)
#   derated forecast = forecast / exp(a + b * log(target's W per peak TFLOP/s))
# A training GPU held out is derated by the fit over the other training GPUs; a GPU never trained on, by all.
def derating_fit(bias: pd.Series, w_per_peak_tflops: pd.Series) -> tuple[float, float]:
    """(a, b) of log(bias) = a + b * log(W per peak TFLOP/s), least squares over the GPUs in `bias` (notebook 04)."""
    x = np.log(w_per_peak_tflops.reindex(bias.index).to_numpy(dtype=float))
    if len(bias) < 2 or not np.isfinite(x).all() or np.ptp(x) == 0:
        raise PowerError("a derating fit needs two or more GPUs with different board power per peak, "
                         f"got {list(bias.index)}")
    b, a = np.polyfit(x, np.log(bias.to_numpy(dtype=float)), 1)
    return float(a), float(b)


def power_derated(rows: pd.DataFrame, w_per_peak_tflops: pd.Series, training_gpus) -> pd.Series:
    """pred / the derating of its GPU and op class; rows: device, op_class, pred, meas of GPUs never trained on (notebook 04).

    The fit reads the training GPUs' rows only, and never the rows of the GPU it derates. A GPU with fewer than two
    other training GPUs to fit on stays NaN (left out of the trial)."""
    bias = (rows["pred"] / rows["meas"]).groupby([rows["op_class"], rows["device"]]).median()
    out = pd.Series(np.nan, index=rows.index, name="pred_derated")
    for (op_class, device), idx in rows.groupby(["op_class", "device"]).groups.items():
        others = bias[op_class].drop(device, errors="ignore")
        others = others[others.index.isin(list(training_gpus))]
        if len(others) >= 2:
            a, b = derating_fit(others, w_per_peak_tflops)
            out[idx] = rows.loc[idx, "pred"] / np.exp(a + b * np.log(w_per_peak_tflops[device]))
    return out


def derating_table(rows: pd.DataFrame, training_gpus) -> pd.DataFrame:
    """Kernels, MAPE (%) and median forecast / measured before and after the derating: per GPU and op class, then
    pooled over the training GPUs held out and over the GPUs never trained on; rows the trial left out are dropped
    (notebook 04)."""
    training = set(training_gpus)
    rows = rows[rows["pred_derated"].notna()]
    rows = rows.assign(group=np.where(rows["device"].isin(training), "training GPUs, each held out", "OOD GPUs"))

    def stats(d: pd.DataFrame) -> pd.Series:
        return pd.Series({"kernels": len(d), "mape_pct": mape(d["pred"], d["meas"]),
                          "derated_mape_pct": mape(d["pred_derated"], d["meas"]),
                          "median_ratio": float(np.median(d["pred"] / d["meas"])),
                          "derated_median_ratio": float(np.median(d["pred_derated"] / d["meas"]))})
    per_gpu = [stats(d).rename((g, c)) for (g, c), d in rows.groupby(["device", "op_class"])]
    pooled = [stats(d).rename((g, c)) for (g, c), d in rows.groupby(["group", "op_class"])]
    table = pd.DataFrame(per_gpu + pooled)
    table.index = pd.MultiIndex.from_tuples(table.index, names=["group", "op_class"])
    return table.reset_index().astype({"kernels": int})
