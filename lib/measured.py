"""This project's own measurements (data/measured/): kernels written by lib.profile, scored like the dataset's
held-out kernels (notebook 04), and whole-model labels written by lib.profile_model, scored like the dataset's
labels (notebook 05).

A measured GPU is forecast from its spec JSON (the dataset's or data/devices/, looked up by the name the GPU
reported) and the training GPUs' data, as any GPU never trained on: the collector's own device.json is written
beside the CSVs for checking the spec, never read by a forecast. The measurements only score the forecasts.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from . import paths
from .data import OP_CLASS, read_kernel_csv
from .devices import DeviceError, device_by_name, load_device
from .labels import LABEL_COLUMNS as DATASET_LABEL_COLUMNS
from .labels import LABEL_FILE, load_labels
from .metrics import ape
from .ops import FP32_BYTES

COLUMNS = ("run", "op", "op_class", "device", "B", "M", "N", "K", "H", "latency_ms", "kernel_name")
SETTING_KEYS = ["gpu", "device", "model", "mode", "seq", "batch", "option"]   # one measured setting on one GPU
LABEL_COLUMNS = ["software", *SETTING_KEYS, "e2e_ms", "dataset_e2e_ms", "ratio_to_dataset", "neusight_ms", "neusight_ape"]


class MeasuredError(ValueError):
    """A measured file that cannot be scored; the message names the file or folder."""


# Kernels timed unlike the dataset, with the L2 flushed (lib.profile.collect's flush_l2), behind a busy GPU (its
# gpu_busy) or in fp16 (its dtype), go to a subfolder of their run folder (kernel_folder), apart from the
# dataset-method CSVs that measured_kernels reads by default (data/measured/README.md).
FLUSH_L2_FOLDER = "flush-l2"
GPU_BUSY_FOLDER = "gpu-busy"


def kernel_folder(flush_l2: bool = False, dtype: str = "fp32", gpu_busy: bool = False) -> str:
    """The run folder's subfolder for kernels timed so: '' (the dataset's way), 'flush-l2', 'gpu-busy', 'fp16',
    'fp16-flush-l2', 'fp16-gpu-busy' (notebooks 01 and 04)."""
    parts = ("" if dtype == "fp32" else dtype, FLUSH_L2_FOLDER if flush_l2 else "", GPU_BUSY_FOLDER if gpu_busy else "")
    return "-".join(part for part in parts if part)


def measured_kernels(root: Path | str = paths.MEASURED, folder: str = "") -> pd.DataFrame:
    """Every kernel CSV under root/<run folder>/<folder>/ (kernel_folder: '' is the dataset's way of timing), one row
    per kernel with its run folder; empty if none (notebook 04)."""
    pattern = f"*/{folder}/*.csv" if folder else "*/*.csv"
    frames = [read_kernel_csv(f).assign(run=f.relative_to(root).parts[0]) for f in sorted(Path(root).glob(pattern))]
    if not frames:
        return pd.DataFrame(columns=list(COLUMNS))
    df = pd.concat(frames, ignore_index=True)
    df["op_class"] = df["op"].map(OP_CLASS)
    for col in ("M", "N", "K", "H", "kernel_name"):      # GEMM files lack H, vector files M, N, K
        if col not in df:
            df[col] = np.nan
    return df[list(COLUMNS)]


def forecast_measured(df: pd.DataFrame, predict) -> pd.DataFrame:
    """df with pred_ms, each run's GPU forecast from the spec JSON of its name; predict(rows, device) -> ms
    (notebook 04)."""
    parts = []
    for (run, device), d in df.groupby(["run", "device"], sort=True):
        try:
            spec = device_by_name(device)
        except DeviceError:
            raise MeasuredError(f"measured run {run}: no spec JSON for '{device}' (add one to "
                                f"{paths.DEVICES_ADDED}, with a source per number)") from None
        parts.append(d.assign(pred_ms=predict(d, spec)))
    return pd.concat(parts) if parts else df.assign(pred_ms=pd.Series(dtype=float))


def error_table(df: pd.DataFrame, by: str) -> pd.DataFrame:
    """Kernels, MAPE (%) and median forecast / measured per run, op class and `by` value of forecast_measured rows
    (notebook 04)."""
    g = df.assign(err=ape(df["pred_ms"], df["latency_ms"]), ratio=df["pred_ms"] / df["latency_ms"]).groupby(
        ["run", "op_class", by], sort=True, observed=True)
    return pd.DataFrame({"kernels": g.size(), "mape_pct": g["err"].mean(),
                         "median_ratio": g["ratio"].median()}).reset_index()


# One B x H fp32 tensor's size (MB), in bins around the L2 sizes: the training GPUs' largest L2 (the A100's 40 MB)
# and the H200's (60 MiB as its driver reports it) lie in 8-60 MB; from 240 MB, an op's tensors are four L2s or more.
TENSOR_MB_BINS = (0, 8, 60, 240, np.inf)


def tensor_megabytes(rows: pd.DataFrame) -> pd.Series:
    """MB of one B x H fp32 tensor of each vector-op row (notebook 04)."""
    return rows["B"] * rows["H"] * FP32_BYTES / 1e6


def tensor_mb(rows: pd.DataFrame) -> pd.Series:
    """The TENSOR_MB_BINS interval of each vector-op row's tensor_megabytes (notebook 04)."""
    return pd.cut(tensor_megabytes(rows), TENSOR_MB_BINS, right=False)


# A GEMM's time as the dataset's way timed it (us), in bins: under 50 us a lone call's launch gap (about 20 us on the
# H200, notebook 04) is a large share of it, from 5 ms on a small one
GEMM_TIME_US_BINS = (0, 50, 500, 5000, np.inf)


def gemm_time_us(rows: pd.DataFrame) -> pd.Series:
    """The GEMM_TIME_US_BINS interval of each row's latency_ms, in us (notebook 04)."""
    return pd.cut(rows["latency_ms"] * 1e3, GEMM_TIME_US_BINS, right=False)


SHAPE_KEYS = ["run", "op", "B", "M", "N", "K", "H"]   # one kernel shape of one run, timed one way or another


# time_ratio = other way's latency / base way's, of the same run, op and shape; each way's forecast is scored against
# its own measurement (the forecast is the same: it never reads how a kernel was timed)
def paired_timings(base: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """Shapes timed both ways (forecast_measured rows of each, matched by SHAPE_KEYS; a shape sampled twice first to
    first): base's rows with latency_ms_other, pred_ms_other and time_ratio (notebook 04)."""
    def numbered(df: pd.DataFrame) -> pd.DataFrame:
        return df.assign(nth=df.groupby(SHAPE_KEYS, dropna=False).cumcount())
    both = numbered(base).merge(numbered(other)[SHAPE_KEYS + ["nth", "latency_ms", "pred_ms"]],
                                on=SHAPE_KEYS + ["nth"], suffixes=("", "_other")).drop(columns="nth")
    return both.assign(time_ratio=both["latency_ms_other"] / both["latency_ms"])


def timing_change(base: pd.DataFrame, other: pd.DataFrame, by: str) -> pd.DataFrame:
    """Shapes timed both ways (paired_timings): kernels, median time_ratio and error_table's MAPE and median
    forecast / measured of each way, per run, op class and `by` value (notebook 04)."""
    both = paired_timings(base, other)
    keys = ["run", "op_class", by]
    ratio = both.groupby(keys, sort=True, observed=True)["time_ratio"].median()
    base_err = error_table(both, by).set_index(keys)
    other_err = error_table(both.assign(latency_ms=both["latency_ms_other"], pred_ms=both["pred_ms_other"]), by)
    return (base_err.assign(median_time_ratio=ratio)
            .join(other_err.set_index(keys).drop(columns="kernels"), rsuffix="_other").reset_index())


SCORE_COLUMNS = ["run", "device", "op_class", "kernels", "mape_pct", "median_ratio", "level_free_mape_pct"]


# level_free_mape_pct = MAPE of pred / median(pred / meas) per run and class: the error left once one level per GPU and
# class is taken out (a diagnosis that reads the measurements, as lib.metrics.never_trained_table's column)
def score_forecasts(pred: pd.DataFrame) -> pd.DataFrame:
    """SCORE_COLUMNS per run and op class of forecast_measured rows (notebook 04)."""
    level = (pred["pred_ms"] / pred["latency_ms"]).groupby([pred["run"], pred["op_class"]]).transform("median")
    out = error_table(pred, "device")
    free = error_table(pred.assign(pred_ms=pred["pred_ms"] / level), "device")
    return out.assign(level_free_mape_pct=free["mape_pct"].to_numpy())[SCORE_COLUMNS]


def score_measured(df: pd.DataFrame, predict) -> pd.DataFrame:
    """score_forecasts of forecast_measured(df, predict); predict(rows, device) -> ms (notebook 04)."""
    return score_forecasts(forecast_measured(df, predict))


# PyTorch 2.1 (the dataset's, and lib.tiles') runs softmax_warp_forward for H <= 1024 and cunn_SoftMaxForward above;
# later versions also run softmax_warp_forward up to H = 2048 and two more block kernels, ...Reg and ...Smem
SOFTMAX_FAMILIES = {"softmax_warp_forward": "warp", "cunn_SoftMaxForwardReg": "block, registers",
                    "cunn_SoftMaxForwardSmem": "block, shared memory", "cunn_SoftMaxForward<": "block"}


def softmax_family(rows: pd.DataFrame) -> pd.Series:
    """Which softmax kernel ran (SOFTMAX_FAMILIES, from kernel_name; 'other' if none matches), with ' (as lib.tiles
    assumes)' where PyTorch 2.1's choice by H was the same (notebook 04)."""
    names = rows["kernel_name"].fillna("")
    family = pd.Series("other", index=rows.index)
    for key, name in reversed(SOFTMAX_FAMILIES.items()):      # the plain block kernel's key last: the others contain it
        family = family.mask(names.str.contains(key, regex=False), name)
    assumed = np.where(rows["H"] <= 1024, "warp", "block")
    return family.where(family != assumed, family + " (as lib.tiles assumes)")


# A measured GPU whose twin the dataset measured: the same chip with other memory (data/devices/NVIDIA_H200.json's
# sources: the H100 SXM5's GH100, its SMs, clock and fp32 peak, with HBM3e at 4.8 TB/s and 141 GB against 3.35 and 80)
TWINS = {"NVIDIA H200": "NVIDIA H100 80GB HBM3"}
TWIN_COLUMNS = ["run", "device", "twin", "op_class", "shapes", "same_kernel_share", "twin_over_ours",
                "pred_over_meas", "twin_pred_over_meas", "pred_over_twin_pred"]


# twin_over_ours = twin's latency / ours of one op and shape; pred_over_twin_pred = our GPU's forecast / the twin's
# (medians per run and class): where twin_over_ours is 1 and pred_over_twin_pred is not, the forecast credits our GPU
# with spec differences these kernels do not use
def twin_table(df: pd.DataFrame, reference: pd.DataFrame, predict, twins: dict = TWINS) -> pd.DataFrame:
    """Measured kernels whose op and shape the dataset measured on the GPU's twin (`reference`: lib.data.load_kernels
    rows), per run and class: TWIN_COLUMNS (notebook 04)."""
    rows = []
    for (run, device), d in df.groupby(["run", "device"], sort=True):
        if device not in twins:
            continue
        theirs = reference[reference["device"] == twins[device]]
        theirs = theirs.groupby(["op", "B", "M", "N", "K", "H"], dropna=False, as_index=False).agg(
            twin_ms=("latency_ms", "median"), twin_kernel=("kernel_name", "first"))
        both = d.merge(theirs, on=["op", "B", "M", "N", "K", "H"], how="inner")
        if both.empty:
            continue
        both = both.assign(pred_ms=predict(both, device_by_name(device)),
                           twin_pred_ms=predict(both.assign(kernel_name=both["twin_kernel"]), device_by_name(twins[device])))
        for op_class, c in both.groupby("op_class", sort=True):
            rows.append({"run": run, "device": device, "twin": twins[device], "op_class": op_class, "shapes": len(c),
                         "same_kernel_share": float((c["kernel_name"] == c["twin_kernel"]).mean()),
                         "twin_over_ours": float(np.median(c["twin_ms"] / c["latency_ms"])),
                         "pred_over_meas": float(np.median(c["pred_ms"] / c["latency_ms"])),
                         "twin_pred_over_meas": float(np.median(c["twin_pred_ms"] / c["twin_ms"])),
                         "pred_over_twin_pred": float(np.median(c["pred_ms"] / c["twin_pred_ms"]))})
    return pd.DataFrame(rows, columns=TWIN_COLUMNS)


SPEC_FIELDS = ("mem_gb", "mem_bw_gbps", "num_sm", "cores_per_sm", "freq_mhz", "peak_gflops", "l2_mb")


# ratio = collector / spec JSON per field; the collector's Dev_Mem is GiB as the driver reports it, the spec's GB
def collector_specs(root: Path | str = paths.MEASURED) -> pd.DataFrame:
    """Each run's device.json (read from the driver by the collector) beside the spec JSON that its forecasts read,
    one row per run and SPEC_FIELDS field (notebook 04)."""
    rows = []
    for f in sorted(Path(root).glob("*/device.json")):
        read = load_device(f)
        spec = device_by_name(read.name)
        rows += [{"run": f.parent.name, "device": read.name, "field": field, "spec_json": getattr(spec, field),
                  "collector": getattr(read, field)} for field in SPEC_FIELDS]
    df = pd.DataFrame(rows, columns=["run", "device", "field", "spec_json", "collector"])
    return df.assign(ratio=df["collector"] / df["spec_json"])


# Training labels timed with autograd's grad mode on in the backward (lib.profile_model --grad-mode) lie under
# labels/<software>-grad-mode/, apart from the plain ones
GRAD_MODE_SUFFIX = "-grad-mode"


def measured_labels(root: Path | str = paths.MEASURED / "labels") -> pd.DataFrame:
    """lib.labels.load_labels rows of every root/<software>/<GPU folder>/*.json, software first; empty if none
    (notebook 05). A file named unlike a label, or of a model with no config in DLmodel_configs/, is an error."""
    root, frames = Path(root), []
    for software in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        for f in sorted(software.glob("*/*.json")):
            m = LABEL_FILE.match(f.stem)
            if m is None:
                raise MeasuredError(f"{f}: not named <model>-<inf|train>-<seq>-<batch>.json as a label is")
            if not (paths.MODEL_CONFIGS / f"{m['model']}.json").is_file():
                raise MeasuredError(f"{f}: model '{m['model']}' has no config in {paths.MODEL_CONFIGS}, so notebook 05 "
                                    f"cannot forecast it")
        try:
            df = load_labels(software)
        except DeviceError as e:
            raise MeasuredError(f"{software}: {e} (add one to {paths.DEVICES_ADDED}, with a source per number)") from None
        if len(df):
            frames.append(df.assign(software=software.name))
    if not frames:
        return pd.DataFrame(columns=["software", *DATASET_LABEL_COLUMNS])
    df = pd.concat(frames, ignore_index=True)
    return df[["software", *(c for c in df.columns if c != "software")]]


# ratio = e2e_ms / dataset_e2e_ms: our measurement of a setting over the dataset's label of it on the same GPU
def score_measured_labels(ev: pd.DataFrame, dataset: pd.DataFrame) -> pd.DataFrame:
    """Measured labels forecast by lib.label_eval.evaluate_labels (neusight columns) beside the dataset's label of the
    same GPU, setting and option (dataset_e2e_ms, NaN where it has none) (notebook 05)."""
    if ev.empty:
        return pd.DataFrame(columns=LABEL_COLUMNS)
    theirs = dataset[SETTING_KEYS + ["e2e_ms"]].rename(columns={"e2e_ms": "dataset_e2e_ms"})
    out = ev.merge(theirs, on=SETTING_KEYS, how="left", validate="many_to_one")
    return out.assign(ratio_to_dataset=out["e2e_ms"] / out["dataset_e2e_ms"])[LABEL_COLUMNS]


TWIN_LABEL_COLUMNS = ["software", "device", "twin", "model", "mode", "seq", "batch", "option", "e2e_ms", "twin_e2e_ms",
                      "twin_over_ours", "neusight_ms", "twin_neusight_ms", "pred_over_twin_pred", "ape_pct",
                      "twin_ape_pct"]


# twin_over_ours = the dataset's label on the twin GPU / our measurement of the same setting; pred_over_twin_pred = the
# forecast for our GPU / the forecast for the twin (both from their spec JSONs); ape_pct, twin_ape_pct: each forecast's
# APE against its own GPU's measurement
def twin_labels(own_e2e: pd.DataFrame, ev: pd.DataFrame, twins: dict = TWINS) -> pd.DataFrame:
    """Measured labels (score_measured_labels rows) beside the dataset's label and forecast of the same setting on the
    GPU's twin (`ev`: lib.label_eval.evaluate_labels rows with neusight_ms); TWIN_LABEL_COLUMNS (notebook 05)."""
    keys = ["model", "mode", "seq", "batch", "option"]
    mine = own_e2e[own_e2e["device"].isin(list(twins))].assign(twin=lambda d: d["device"].map(twins))
    theirs = ev[keys + ["device", "e2e_ms", "neusight_ms"]].rename(
        columns={"device": "twin", "e2e_ms": "twin_e2e_ms", "neusight_ms": "twin_neusight_ms"})
    both = mine.assign(option=mine["option"].fillna("")).merge(
        theirs.assign(option=theirs["option"].fillna("")), on=keys + ["twin"], how="inner", validate="many_to_one")
    return both.assign(twin_over_ours=both["twin_e2e_ms"] / both["e2e_ms"],
                       pred_over_twin_pred=both["neusight_ms"] / both["twin_neusight_ms"],
                       ape_pct=ape(both["neusight_ms"], both["e2e_ms"]),
                       twin_ape_pct=ape(both["twin_neusight_ms"], both["twin_e2e_ms"]))[TWIN_LABEL_COLUMNS]


RUN_KEYS = ["gpu", "device", "model", "mode", "seq", "batch"]   # one setting on one GPU, whatever run timed it


# ratio = second / first, per latency (e2e, fw, bw)
def pair_runs(first: pd.DataFrame, second: pd.DataFrame) -> pd.DataFrame:
    """Settings timed in two runs (measured_labels rows, option '' only), side by side: RUN_KEYS, then
    <e2e|fw|bw>_ms_<first|second> and <e2e|fw|bw>_ratio = second / first (notebook 05)."""
    cols = ["e2e_ms", "fw_ms", "bw_ms"]
    a, b = (d[d["option"].fillna("") == ""][RUN_KEYS + cols] for d in (first, second))
    both = a.merge(b, on=RUN_KEYS, suffixes=("_first", "_second"), validate="1:1")
    for c in cols:
        both[c.removesuffix("_ms") + "_ratio"] = both[f"{c}_second"] / both[f"{c}_first"].where(both[f"{c}_first"] > 0)
    return both


def grad_mode_labels(own: pd.DataFrame) -> pd.DataFrame:
    """The measured_labels rows timed with grad mode on in the backward (software ending GRAD_MODE_SUFFIX)."""
    return own[own["software"].str.endswith(GRAD_MODE_SUFFIX)]


PEAK_MEMORY = paths.MEASURED / "peak-memory.csv"
PEAK_COLUMNS = ["software", "gpu", "model", "mode", "seq", "batch", "backward", "peak_gib", "outcome"]
MEMORY_COLUMNS = ["model", "seq", "batch", "grad_mode_peak_gb", "grad_mode_outcome", "plain_peak_gb",
                  "dataset_gpus", "smallest_dataset_gpu_gb", "grad_mode_fits_there"]


def read_peak_memory(path: Path | str = PEAK_MEMORY) -> pd.DataFrame:
    """data/measured/peak-memory.csv (PEAK_COLUMNS; MeasuredError naming the file if a column is missing)."""
    df = pd.read_csv(path)
    if missing := [c for c in PEAK_COLUMNS if c not in df.columns]:
        raise MeasuredError(f"{path}: missing column(s) {missing}")
    return df[PEAK_COLUMNS]


# peak_gb = peak_gib * 2^30 / 1e9, against the spec JSON's Dev_Mem (GB) of every GPU whose label has the setting;
# a setting that ran out of memory reached at least its peak
def memory_against_dataset(peak: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
    """Each training setting's grad-mode (and plain, where timed) peak memory beside the smallest GPU on which the
    dataset measured it (lib.labels.load_labels rows): MEMORY_COLUMNS (notebook 05)."""
    peak = peak[peak["mode"] == "training"].assign(peak_gb=lambda d: d["peak_gib"] * 2**30 / 1e9)
    keys = ["model", "seq", "batch"]
    grad = peak[peak["backward"] == "grad mode"][keys + ["peak_gb", "outcome"]].rename(
        columns={"peak_gb": "grad_mode_peak_gb", "outcome": "grad_mode_outcome"})
    plain = peak[peak["backward"] == "plain"][keys + ["peak_gb"]].rename(columns={"peak_gb": "plain_peak_gb"})
    train = labels[(labels["mode"] == "training") & (labels["option"] == "")]
    mem = {d: device_by_name(d).mem_gb for d in train["device"].unique()}
    gpus = (train.assign(mem_gb=train["device"].map(mem)).groupby(keys)
            .agg(dataset_gpus=("device", lambda d: ", ".join(sorted(set(d)))), smallest_dataset_gpu_gb=("mem_gb", "min"))
            .reset_index())
    out = grad.merge(plain, on=keys, how="left").merge(gpus, on=keys, how="left", validate="1:1")
    out["grad_mode_fits_there"] = out["grad_mode_peak_gb"] <= out["smallest_dataset_gpu_gb"]
    return out[MEMORY_COLUMNS]
