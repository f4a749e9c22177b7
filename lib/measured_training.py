"""A sixth training GPU: the unseen-GPU models also learn from a GPU this project measured (notebook 04).

The default models learn from the dataset's five training GPUs, none newer than the A100. We measured one H200
(data/measured/), a GPU of the H100's generation that the dataset never timed. The question a user with one new
GPU at hand asks: does measuring it help forecast its siblings? The variant retrains the unseen-GPU models
(lib.selection.DEFAULT_CONFIGS, the same configs, seeds and epochs) on the five GPUs' training rows plus every kernel
of one measured run timed the dataset's way (GEMM rows with the tile their kernel name gives, as the dataset's), and
changes nothing else but what the new GPU's spec widens:
  - amendment 5's memory hold takes the six GPUs' range of memory per SM (the H200's lies beyond the five's);
  - the tile classifier of amendment 8's narrow GEMMs is fitted on the six GPUs' GEMM rows, and amendment 9 trusts it
    within the six GPUs' spec range;
  - amendment 6's envelope caps FC and EW by the five training GPUs a GPU dominates, forecast by the variant's own
    models (the default caps with its known-GPU models).
The H100's and A100-80GB's own measurements are never read: they score the variant, as they score the default.
A variant, reported beside the default and never the default: it was proposed after every number had been seen.
"""
from __future__ import annotations

import functools
import hashlib
from unittest import mock

import numpy as np
import pandas as pd

from . import paths
from . import predictors as predictors_mod
from . import train as train_mod
from .data import fingerprint, load_kernels
from .devices import TRAIN_GPUS_NVIDIA, device_by_name
from .measured import MeasuredError, measured_kernels
from .metrics import ape
from .ops import GEMM_OPS
from .predictor_config import make_config
from .predictors import (CODE, TABLE_CODE, NeuSightPredictor, _code_text, _own_code, ensemble, ensemble_members,
                         from_state)
from .tile_choice import forest_path, saved_forest
from .utilization import input_names

RUN = "NVIDIA_H200_torch2.11.0_cuda13.0"   # data/measured/<RUN>/: our H200, PyTorch 2.11 (data/measured/README.md)
FOREST_SEED = 0   # lib.tile_choice.tile_classifier's, as the default forecasts use it


@functools.cache
def measured_rows(run: str = RUN) -> pd.DataFrame:
    """The run's kernels (its top folder: timed the dataset's way) as rows of lib.data.load_kernels' table: the GPU's
    spec JSON merged in (data/devices/, not the collector's device.json), split 'train'; MeasuredError if none."""
    df = measured_kernels()
    df = df[df["run"] == run]
    if df.empty:
        raise MeasuredError(f"{paths.MEASURED / run}: no kernel CSVs of that run")
    devices = df["device"].unique()
    if len(devices) != 1:
        raise MeasuredError(f"{paths.MEASURED / run}: one GPU per run, found {sorted(devices)}")
    spec = device_by_name(devices[0]).spec_columns()
    rows = df.drop(columns="run").assign(split="train", source=f"data/measured/{run}", **spec)
    return rows.reindex(columns=load_kernels(ops="BMM", splits="train").columns).reset_index(drop=True)


def run_hash(run: str = RUN) -> str:
    """sha256 of the run's kernel CSVs (its top folder), for the variant's cache keys."""
    h = hashlib.sha256()
    for f in sorted((paths.MEASURED / run).glob("*.csv")):
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:16]


def trained_gpus(run: str = RUN) -> tuple[str, ...]:
    """The five training GPUs' names and the run's GPU's: what the variant learns from, and the spec range its tile
    classifier is trusted in (amendment 9, lib.tile_choice.within_range)."""
    return (*TRAIN_GPUS_NVIDIA, measured_rows(run)["device"].iloc[0])


def mem_per_sm_gb(run: str = RUN) -> tuple[float, float]:
    """(min, max) memory per SM (GB) of the five training GPUs and the run's GPU: amendment 5's hold, widened."""
    gpus = [device_by_name(g) for g in trained_gpus(run)]
    per_sm = [d.mem_gb / d.num_sm for d in gpus]
    return min(per_sm), max(per_sm)


def _with_run(run: str):
    """A stand-in for lib.data.load_kernels inside lib.predictors.training_table: the training rows plus the run's."""
    def loader(ops=None, devices=None, splits=None, vendor="nvidia"):
        own = measured_rows(run)
        own = own[own["op"].isin([ops]) | own["op_class"].isin([ops])]
        return pd.concat([load_kernels(ops=ops, devices=devices, splits=splits, vendor=vendor), own],
                         ignore_index=True)
    return loader


@functools.cache
def tile_forest(run: str = RUN):
    """lib.tile_choice's classifier fitted on the five training GPUs' GEMM rows and the run's (saved under build/cache
    as the default's is, lib.tile_choice.saved_forest)."""
    def rows():
        own = measured_rows(run)
        return pd.concat([load_kernels(ops=list(GEMM_OPS), splits="train"), own[own["op"].isin(GEMM_OPS)]],
                         ignore_index=True)
    path = forest_path(FOREST_SEED, None, "measured", run, run_hash(run),
                       *[_code_text(f) for f in (measured_rows, measured_kernels)])
    return saved_forest(path, rows, FOREST_SEED)


def train_with_run(op_class: str, cfg: dict, run: str = RUN) -> NeuSightPredictor:
    """The unseen-GPU model of one class and config, trained on the five GPUs' rows and the run's (lib.train.cached:
    committed weights or build/predictors/, else trained)."""
    if cfg.get("ensemble", 1) != 1:
        return ensemble([train_with_run(op_class, member, run) for member in ensemble_members(cfg)])
    parsed = make_config(cfg)
    train_cfg, max_rows, features, validation, device_factors, overhead, hold_mem, held_out = parsed
    if (validation, device_factors, overhead, held_out) != ("none", False, None, None):
        raise predictors_mod.PredictorError("the measured-GPU variant trains unseen-GPU configs: validation 'none', "
                                            "no device_factors, overhead or held_out_gpu")
    names = input_names(op_class, features)
    key = train_mod.cache_key("neusight-measured", op_class, train_cfg, max_rows, names, fingerprint("nvidia"),
                              run, run_hash(run), *[_code_text(c) for c in (*CODE, *TABLE_CODE)], *_own_code(),
                              *[_code_text(f) for f in (measured_rows, measured_kernels, _with_run)])
    gpu = run.split("_torch")[0].split("_")[-1]   # 'H200' of 'NVIDIA_H200_torch2.11.0_cuda13.0'
    name = f"neusight-plus{gpu}-{op_class}-{train_cfg.layers}x{train_cfg.width}-s{train_cfg.seed}"

    def fit():
        with mock.patch.object(predictors_mod, "load_kernels", _with_run(run)):
            return predictors_mod._fit_state(op_class, train_cfg, max_rows, features, names, "none", 0, None, None)
    state, info = train_mod.cached(name, key, fit)
    return from_state(op_class, state, info, parsed, 0, mem_per_sm_gb=mem_per_sm_gb(run) if hold_mem else None,
                      tile_forest=tile_forest(run) if op_class in ("BMM", "FC") else None,
                      tile_gpus=trained_gpus(run) if op_class in ("BMM", "FC") else None,
                      envelope=bool(cfg.get("envelope", False)))


def predictors_with_run(cfg_by_class: dict, run: str = RUN) -> dict[str, NeuSightPredictor]:
    """{op class: the variant's model} for lib.kernels / lib.forecast's cfg_by_class, from unseen-GPU configs
    (DEFAULT_CONFIGS, or the smoke run's); their spec-only tiles are amendment 9's rule with the six-GPU classifier,
    trusted within the six GPUs' spec range (lib.kernels)."""
    return {c: train_with_run(c, cfg, run) for c, cfg in cfg_by_class.items()}


SHAPE_KEYS = ["op", "B", "M", "N", "K", "H"]


def shapes_measured(rows: pd.DataFrame, run: str = RUN) -> np.ndarray:
    """Whether each kernel's shape (op, B, M, N, K, H) is among the run's: the run timed the dataset's held-out shape
    lists, so the variant learns on the H200 the very shapes it is scored on for other GPUs."""
    def key(d):
        return pd.MultiIndex.from_frame(d[SHAPE_KEYS].astype({k: float for k in SHAPE_KEYS[1:]}).fillna(-1.0))
    return np.asarray(key(rows).isin(key(measured_rows(run))))


def kernel_comparison(rows: pd.DataFrame, default_ms: np.ndarray, variant_ms: np.ndarray,
                      run: str = RUN) -> pd.DataFrame:
    """Per op class and GPU (and 'all GPUs'): kernels, share of shapes the run measured, MAPE (%) of the default and
    of the variant, each forecast against latency_ms, on every kernel and on those whose shape the run did not measure
    (`*_unmeasured`: what learning the run's GPU does without its shapes) (notebook 04)."""
    t = rows.assign(default_ape=ape(default_ms, rows["latency_ms"]), variant_ape=ape(variant_ms, rows["latency_ms"]),
                    measured_shape=shapes_measured(rows, run))
    t = t.assign(default_ape_unmeasured=t["default_ape"].where(~t["measured_shape"]),
                 variant_ape_unmeasured=t["variant_ape"].where(~t["measured_shape"]))
    agg = dict(kernels=("latency_ms", "size"), shapes_run_measured=("measured_shape", "mean"),
               default_mape=("default_ape", "mean"), variant_mape=("variant_ape", "mean"),
               default_mape_unmeasured=("default_ape_unmeasured", "mean"),
               variant_mape_unmeasured=("variant_ape_unmeasured", "mean"))
    per_gpu = t.groupby(["op_class", "device"]).agg(**agg).reset_index()
    pooled = t.groupby("op_class").agg(**agg).reset_index().assign(device="all GPUs")
    return pd.concat([per_gpu, pooled], ignore_index=True).sort_values(["op_class", "device"], ignore_index=True)
