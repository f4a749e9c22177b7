"""NeuSight's per-op-class utilization predictors (notebook 04; their scaling in notebook 03).

One MLP per op class (BMM, FC, EW, SOFTMAX, LN) maps features of lib.features (the paper's five, log-scaled,
optionally f_wave_l2, for GEMMs f_fill, for softmax f_vec or f_softmax_block, these three shares rather than logs;
plus a one-hot of the op for EW) to two numbers z_a, z_b; then
    alpha = sigmoid(z_a),  beta = alpha * sigmoid(z_b)        (so 0 < beta < alpha < 1)
    utilization = alpha - beta / num_waves                     (in (0, 1) for any num_waves >= 1;
                                                                the model for the training GPUs multiplies it by
                                                                a learned efficiency per GPU, lib.utilization)
    latency_ms = num_waves * flops_per_tile / (bound_per_sm * utilization) * 1e3
with bound_per_sm = bound_gflops * 1e9 / num_sm [FLOP/s] (lib.roofline). Writing beta as a
fraction of alpha keeps utilization positive at one wave; the paper's formula is otherwise kept.
Trained on split == 'train' rows only (the five training GPUs) with lib.train.fit (relative
error, AdamW), loaded from the committed figures/predictors/ or cached under build/predictors/ by a hash of data,
config and code. Configs are
chosen on the training GPUs only (lib.selection; lib.predictor_config reads a config's keys):
DEFAULT_CONFIGS forecast GPUs never trained on; KNOWN_CONFIGS, whose models also learn one efficiency per training GPU (device_efficiency),
forecast the training GPUs themselves. Config key `overhead` (lib.overhead) adds a learned fixed
time per kernel to the formula: a variant kept beside the defaults, not one of them. Config key `hold_mem`
(amendment 5, on in DEFAULT_CONFIGS for EW, SOFTMAX, LN) holds f_mem's memory-per-SM term at prediction time
inside the range of the GPUs the model learned from (lib.utilization.hold_mem_term).
"""
from __future__ import annotations

import contextlib
import functools
import os
import time
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch
from torch import nn

from . import features as features_mod
from . import ops as ops_mod
from . import reference_weights
from . import roofline as roofline_mod
from . import tiles as tiles_mod
from . import train as train_mod
from . import waves as waves_mod
from .data import MIGRATE_ENV, OP_CLASS, OP_CLASSES, fingerprint, load_kernels, migration_source
from .devices import TRAIN_GPUS_NVIDIA
from .features import EXTRA_FEATURES, FEATURES, add_features
from .overhead import OverheadMLP, overhead_predict_ms
from .predictor_config import LARGEST_SHARE, VALIDATIONS, largest_rows, make_config  # noqa: F401 (re-exported)
from .selection import (CANDIDATES, DEFAULT_CONFIGS, KNOWN_CONFIGS, KNOWN_SELECTED, LOGO_CONFIGS,  # noqa: F401
                        LOGO_ONLY_CONFIGS, LOGO_SELECTED, SELECTED, spread_seed)
from .train import TrainConfig
from .utilization import (PredictorError, UtilizationMLP, _predict_ms, _tensors,  # noqa: F401 (re-exported)
                          alpha_beta, device_efficiency, device_index, hold_mem_term, input_names, latency_ms,
                          learned_mem_per_sm_gb, model_inputs, utilization)

SHAPE_COLS = ("op", "B", "M", "N", "K", "H")


@dataclass
class NeuSightPredictor:
    """A trained utilization MLP of one op class; predict(feat) -> latency_ms array."""
    op_class: str
    cfg: TrainConfig
    features: tuple    # the lib.features columns the model reads
    model: nn.Module
    mean: np.ndarray   # of the training rows' inputs (one-hot columns: mean 0, std 1)
    std: np.ndarray
    lo: np.ndarray     # training range of each input: predictions clip inputs to it
    hi: np.ndarray
    info: dict
    members: tuple = ()   # further predictors (other seeds) of an ensemble: latencies averaged
    overhead: str | None = None   # lib.overhead: 'isolated' adds the learned t0, 'hidden' leaves it out
    mem_per_sm_gb: tuple | None = None   # amendment 5: f_mem's memory term held to this range (GB per SM)
    tile_candidates: tuple | None = None   # GEMMs: the (tile_m, tile_n) spec-only tiles are chosen among (lib.tile_choice;
                                           # None: the NVIDIA training GPUs', lib.tiles.GEMM_TILE_CANDIDATES)
    tile_forest: object = None   # GEMMs: a classifier over tile_candidates that chooses the spec-only tiles in place
                                 # of autotune (lib.tile_choice.fit_tile_classifier; lib.amd, amendment A2)
    tile_gpus: tuple | None = None   # GEMMs: the GPUs tile_forest was fitted on, whose spec range amendment 9 trusts it
                                     # in (lib.tile_choice.within_range; None: the NVIDIA training GPUs)
    feature_rule: object = None   # a function of a featured table that puts a vendor's launch facts in place of
                                  # lib.features' before the inputs are read (lib.rocm_softmax.rocm_softmax_vec, amendment A3)
    envelope: bool = False   # amendment 6 for a predictor given as the config (lib.measured_training): lib.envelope caps it

    def inputs(self, feat: pd.DataFrame) -> np.ndarray:
        """Standardized model inputs, each clipped to its training range first.

        Outside the training range a ReLU MLP extrapolates linearly; clipping instead keeps the
        utilization of the nearest trained kernels (e.g. the largest ones, whose utilization
        has saturated), which is what the wave model expects of ever larger kernels.
        """
        if self.feature_rule is not None:
            feat = self.feature_rule(feat)
        if self.mem_per_sm_gb is not None and "f_mem" in self.features:
            feat = hold_mem_term(feat, self.mem_per_sm_gb)
        x = np.clip(model_inputs(feat, self.op_class, self.features), self.lo, self.hi)
        return ((x - self.mean) / self.std).astype(np.float32)

    def alpha_beta(self, feat: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """(alpha, beta) per row of a featured table."""
        x = torch.from_numpy(self.inputs(feat))
        with torch.inference_mode():
            a, b = alpha_beta(self.model(x))
        return a.numpy().astype(float), b.numpy().astype(float)

    def predict(self, feat: pd.DataFrame, batch_rows: int = 1 << 16) -> np.ndarray:
        """Latency (ms) of every row of a table that went through add_features (ensemble: mean)."""
        own = self._predict_one(feat, batch_rows)
        if not self.members:
            return own
        return np.mean([own, *[m.predict(feat, batch_rows) for m in self.members]], axis=0)

    def _predict_one(self, feat: pd.DataFrame, batch_rows: int) -> np.ndarray:
        if len(feat) == 0:
            return np.zeros(0)
        x = self.inputs(feat)
        t = _tensors(feat, x)
        out = []
        with torch.inference_mode():
            for i in range(0, len(x), batch_rows):
                out.append(_predict_ms(self.model, {k: v[i:i + batch_rows] for k, v in t.items()}))
        t0_ms = self.model.t0_ms() if self.overhead == "isolated" else 0.0
        return torch.cat(out).numpy().astype(np.float64) + t0_ms


def training_table(op_class: str, max_rows: int | None = None, seed: int = 0) -> pd.DataFrame:
    """split == 'train' rows of one class (NVIDIA training GPUs), featured with oracle tiles."""
    df = load_kernels(ops=op_class, splits="train")
    if df.empty:
        raise PredictorError(f"no training rows for op class {op_class}")
    if max_rows is not None and max_rows < len(df):
        df = df.sample(n=int(max_rows), random_state=seed).sort_index()
    feat = add_features(df.reset_index(drop=True), tiles="oracle")
    ok = np.isfinite(feat[list(FEATURES + EXTRA_FEATURES) + ["num_waves", "flops_per_tile", "bound_gflops"]]).all(axis=1)
    ok &= feat["latency_ms"] > 0
    return feat[ok.to_numpy()].reset_index(drop=True)


def shape_groups(df: pd.DataFrame) -> np.ndarray:
    """One label per (op, shape): validation holds out whole shapes on every training GPU."""
    return df.groupby(list(SHAPE_COLS), sort=True, dropna=False).ngroup().to_numpy()


# The code a trained model depends on (its code_text, source without comments or docstrings, with the values of the
# module constants a function reads, is part of the cache key): whole modules here, single functions below.
CODE = (features_mod, tiles_mod, waves_mod, roofline_mod, *train_mod.FIT_CODE)
# What turns the cached kernel table into training rows, named in the key beside the data fingerprint so that a
# cache migration (lib.data.MIGRATE_ENV), which vouches for the cached table only, cannot skip an edit to them:
# load_kernels' filters after its cache, and lib.ops, whose constants the CODE modules import (FP32_BYTES, GEMM_OPS).
TABLE_CODE = (load_kernels, ops_mod)


@functools.cache
def _code_text(obj) -> str:
    """train.code_text once per object and process: a cold forecast builds the keys of 11 predictors."""
    return train_mod.code_text(obj)


def _own_code() -> list[str]:
    """code_text of the functions that shape a trained model (lib.utilization's and this module's; not whole files)."""
    return [_code_text(f) for f in (input_names, model_inputs, UtilizationMLP, alpha_beta,
                                    utilization, latency_ms, _predict_ms, _tensors, device_index,
                                    device_efficiency, training_table, shape_groups, _model_kind, _fit_state)]


def _short(gpu: str) -> str:
    """A GPU's name in a cache file name: its last 12 letters and digits."""
    return "".join(ch for ch in gpu if ch.isalnum())[-12:]


def _cache_name(op_class: str, cfg: TrainConfig, validation: str, overhead: str | None = None,
                held_out: str | None = None) -> str:
    fold = ("" if validation in ("shapes", "none") else "-largest" if validation == "largest"
            else "-logo" + _short(validation))
    return (f"neusight-{op_class}-{cfg.layers}x{cfg.width}{fold}{'-t0' if overhead else ''}"
            + (f"-without{_short(held_out)}" if held_out else ""))


def _model_kind(overhead: str | None) -> tuple:
    """(model class, its predict_ms): 'isolated' and 'hidden' train the same model, they differ only in what predict adds."""
    return (OverheadMLP, overhead_predict_ms) if overhead else (UtilizationMLP, _predict_ms)


def _fit_state(op_class: str, cfg: TrainConfig, max_rows, features: tuple, names: list, validation: str,
               n_devices: int, overhead: str | None, held_out: str | None) -> tuple[dict, dict]:
    """(state, info) of one utilization MLP trained as train_predictor's config says (notebook 04)."""
    model_cls, predict_ms = _model_kind(overhead)
    feat = training_table(op_class, max_rows, cfg.seed)
    if held_out:   # a GPU the model must not learn from: none of its rows, not even for validation
        feat = feat[feat["device"] != held_out].reset_index(drop=True)
    if validation == "largest":
        feat = feat[~largest_rows(feat)].reset_index(drop=True)
    x_all = model_inputs(feat, op_class, features)
    # validation rows: None = held-out shapes (inside fit), all False = none, else one GPU's rows
    val_mask = (None if validation == "shapes" else np.zeros(len(feat), bool) if validation in ("none", "largest")
                else (feat["device"] == validation).to_numpy())
    x = x_all if val_mask is None else x_all[~val_mask]      # what the model may learn from
    target = feat["latency_ms"].to_numpy(np.float64)
    mean, std = x.mean(axis=0), x.std(axis=0)
    onehot = np.array([n.startswith("op_") for n in names])
    mean[onehot], std[onehot] = 0.0, 1.0
    std = np.where(std > 1e-8, std, 1.0)
    train_mod.set_seed(cfg.seed)
    model = model_cls(len(names), cfg.layers, cfg.width, n_devices)
    if n_devices:   # the GPUs whose rows the model learns from (not a LOGO fold's held-out GPU)
        seen = np.unique(device_index(feat["device"])[np.ones(len(feat), bool) if val_mask is None else ~val_mask])
        model.trained[seen[seen >= 0]] = True
    inputs = _tensors(feat, ((x_all - mean) / std).astype(np.float32))
    start = time.perf_counter()
    hist = train_mod.fit(model, predict_ms, inputs, torch.from_numpy(target.astype(np.float32)),
                         shape_groups(feat), cfg, desc=f"NeuSight {op_class}", val_mask=val_mask)
    vals = [h["val_loss"] for h in hist["history"]]
    best_epoch = int(np.nanargmin(vals)) + 1 if np.isfinite(vals).any() else len(vals)
    info = {"train_seconds": time.perf_counter() - start, "epochs": hist["epochs_run"],
            "best_epoch": best_epoch, "best_val_loss": hist["best_val_loss"], "validation": validation,
            "train_rows": len(x), "history": hist["history"]}
    scaling = {k: torch.from_numpy(np.asarray(v, np.float32)) for k, v in
               {"mean": mean, "std": std, "x_min": x.min(axis=0), "x_max": x.max(axis=0)}.items()}
    return {"model": model.state_dict(), **scaling}, info


@functools.cache
def _migration_source_for(env_value: str, data_fingerprint: str) -> str | None:
    """lib.data.migration_source for this variable's value and the current fingerprint (both only key the memo)."""
    return migration_source("nvidia")


def _migration_source() -> str | None:
    """lib.data.migration_source, checked once per value of its variable and data fingerprint."""
    env_value = os.environ.get(MIGRATE_ENV, "").strip()
    return _migration_source_for(env_value, fingerprint("nvidia")) if env_value else None


def _saved_model(op_class: str, cfg, force: bool = False, weights: bool = True) -> tuple:
    """(state, info, make_config(cfg), input names, n_devices) of one single-seed config, from lib.train.cached
    (state None: weights=False found a model committed without weights)."""
    parsed = make_config(cfg)
    cfg, max_rows, features, validation, device_factors, overhead, hold_mem, held_out = parsed
    names = input_names(op_class, features)
    n_devices = len(TRAIN_GPUS_NVIDIA) if device_factors else 0
    # The key names everything the training table is made from (the dataset's fingerprint, the
    # loader and feature code) instead of the table itself, so a cache hit loads no data. The
    # overhead variant adds its own code, so the keys of every other config stay as they were.
    key_at = lambda data_fingerprint: train_mod.cache_key(
        "neusight", op_class, cfg, max_rows, names, validation, n_devices, data_fingerprint,
        *[_code_text(c) for c in (*CODE, *TABLE_CODE)], *_own_code(),
        *([_code_text(c) for c in (OverheadMLP, overhead_predict_ms)] if overhead else []),
        *([_code_text(largest_rows), LARGEST_SHARE] if validation == "largest" else []),
        *([f"held_out_gpu={held_out}"] if held_out else []))
    key = key_at(fingerprint("nvidia"))
    name = _cache_name(op_class, cfg, validation, overhead, held_out)
    if force:
        train_mod.cache_path(name, key).unlink(missing_ok=True)
    elif not train_mod.saved(name, key) and (previous := _migration_source()):
        train_mod.copy_cached(name, key_at(previous), key)   # the same table under the previous fingerprint

    with reference_weights.disabled() if force else contextlib.nullcontext():   # force: not the committed weights
        state, info = train_mod.cached(name, key, functools.partial(
            _fit_state, op_class, cfg, max_rows, features, names, validation, n_devices, overhead, held_out),
            weights=weights)
    return state, info, parsed, names, n_devices


def training_info(op_class: str, cfg) -> dict:
    """info of one single-seed config's model (its per-epoch history, train_seconds, ...), trained or loaded as
    train_predictor would, without its weights: all a selection run reads (lib.protocol.selection_curves), so the
    committed copy of such a model holds none (lib.reference_weights.sync) (notebook 04)."""
    if isinstance(cfg, dict) and cfg.get("ensemble", 1) != 1:
        raise ValueError("training_info: one seed at a time (ensemble 1)")
    return _saved_model(op_class, cfg, weights=False)[1]


def train_predictor(op_class: str, cfg=None, force: bool = False) -> NeuSightPredictor:
    """Train (or load from figures/predictors/ or build/predictors/) the utilization MLP of one op class.

    cfg: TrainConfig, or a dict of its fields plus `max_rows` (seeded subsample of training rows);
    None = DEFAULT_CONFIGS[op_class]. force=True retrains even when a cached model exists.
    `ensemble: n` (dict configs) trains seeds seed..seed+n-1 and averages their latencies.
    """
    cfg = DEFAULT_CONFIGS[op_class] if cfg is None else cfg
    if isinstance(cfg, dict) and cfg.get("ensemble", 1) != 1:
        make_config(cfg)                                   # validates every key, ensemble included
        return ensemble([train_predictor(op_class, member, force) for member in ensemble_members(cfg)])
    state, info, parsed, names, n_devices = _saved_model(op_class, cfg, force)
    _, _, _, validation, _, _, hold_mem, held_out = parsed
    return from_state(op_class, state, info, parsed, n_devices,
                      mem_per_sm_gb=learned_mem_per_sm_gb(validation, held_out) if hold_mem else None,
                      **(held_out_tiles(held_out) if held_out and op_class in ("BMM", "FC") else {}))


def held_out_tiles(gpu: str) -> dict:
    """The tile fields of a GEMM model trained without `gpu`'s rows: a classifier fitted without them, trusted within
    the other training GPUs' spec range (lib.tile_choice.held_out_classifier; notebook 04)."""
    from .tile_choice import held_out_classifier
    return {"tile_forest": held_out_classifier(gpu), "tile_gpus": tuple(g for g in TRAIN_GPUS_NVIDIA if g != gpu)}


def ensemble_members(cfg: dict) -> list[dict]:
    """The single-seed configs of an `ensemble: n` config: seeds seed..seed+n-1 (notebook 04)."""
    return [{**cfg, "ensemble": 1, "seed": cfg.get("seed", 0) + i} for i in range(cfg["ensemble"])]


def ensemble(ps: list) -> NeuSightPredictor:
    """One predictor averaging the latencies of trained single-seed predictors (notebook 04)."""
    info = {**ps[0].info, "train_seconds": sum(p.info["train_seconds"] for p in ps),
            "best_epoch": float(np.median([p.info["best_epoch"] for p in ps])),
            "cached": all(p.info["cached"] for p in ps), "ensemble": len(ps)}
    return replace(ps[0], info=info, members=tuple(ps[1:]))


def from_state(op_class: str, state: dict, info: dict, parsed: tuple, n_devices: int, **fields) -> NeuSightPredictor:
    """The predictor of a saved (state, info), parsed = make_config(its config); fields: NeuSightPredictor's optional
    ones (notebook 04)."""
    cfg, _, features, _, _, overhead, _, _ = parsed
    model = _model_kind(overhead)[0](len(input_names(op_class, features)), cfg.layers, cfg.width, n_devices)
    model.load_state_dict(state["model"])
    model.eval()
    mean, std, x_min, x_max = (state[k].numpy() for k in ("mean", "std", "x_min", "x_max"))
    return NeuSightPredictor(op_class, cfg, features, model, mean, std, x_min, x_max, info, overhead=overhead, **fields)


_LOADED: dict = {}


def get_predictor(op_class: str, cfg=None) -> NeuSightPredictor:
    """train_predictor with a module-level cache: each (class, config) is loaded once per process; a predictor given
    as the config (lib.amd's) is returned as it is."""
    if isinstance(cfg, NeuSightPredictor):
        return cfg
    cfg = DEFAULT_CONFIGS.get(op_class) if cfg is None else cfg
    key = (op_class, repr(make_config(cfg)), repr(cfg.get("ensemble", 1) if isinstance(cfg, dict) else 1))
    if key not in _LOADED:
        _LOADED[key] = train_predictor(op_class, cfg)
    return _LOADED[key]


def default_config(op_class: str, known_gpu: bool, seed: int = 0) -> dict:
    """The default config of a class: KNOWN_CONFIGS on a training GPU, DEFAULT_CONFIGS on any other; `seed`
    other than 0 trains run `seed` of the seed spread of notebooks 04 and 05 instead (lib.selection.spread_seed)."""
    cfg = (KNOWN_CONFIGS if known_gpu else DEFAULT_CONFIGS)[op_class]
    return {**cfg, "seed": spread_seed(cfg, seed)} if seed else cfg


# Every NeuSight forecast exceeds the roofline time over the device efficiency:
#   latency_ms = num_waves * flops_per_tile / (bound_per_sm * utilization) / e
#             >= roofline_ms / (utilization * e) > roofline_ms / e,
# as num_waves * num_sm >= num_tiles, flops_per_tile = flops / num_tiles and 0 < utilization < 1
# (alpha, beta / alpha: sigmoids; num_waves >= 1); a fixed time per kernel (lib.overhead) only adds.
def forecast_floor_ms(feat: pd.DataFrame, cfg_by_class: dict | None = None, seed: int = 0) -> np.ndarray:
    """Per row of a table with roofline_ms and device: roofline_ms / e, below any predict_featured forecast; NaN for an
    op of no class, as predict_featured gives (lib.envelope)."""
    cfg_by_class = cfg_by_class or {}
    out = np.full(len(feat), np.nan)
    cls = op_class_of(feat["op"])
    codes, names = pd.factorize(feat["device"], use_na_sentinel=False)
    idx = device_index(names)[codes]   # per distinct device, then spread to its rows
    roofline_ms = feat["roofline_ms"].to_numpy(float)
    for op_class in set(pd.unique(cls)) & set(OP_CLASSES):
        of_class = cls == op_class
        for i in np.unique(idx[of_class]):
            rows = of_class & (idx == i)
            p = get_predictor(op_class, cfg_by_class.get(op_class) or default_config(op_class, i >= 0, seed))
            with torch.inference_mode():
                e = max(float(torch.as_tensor(device_efficiency(m.model, torch.tensor([i])))) for m in (p, *p.members))
            out[rows] = roofline_ms[rows] / e
    return out


def train_all(cfg_by_class: dict | None = None, force: bool = False) -> dict:
    """Train (or load) every class's predictors; {op_class: training seconds (as recorded)}.

    cfg_by_class maps op class -> config (see train_predictor); a class it does not name gets both
    default models, DEFAULT_CONFIGS (unseen GPUs) and KNOWN_CONFIGS (training GPUs), seconds summed.
    With force=True every predictor is retrained, so the seconds are measured by this call.
    """
    cfg_by_class = cfg_by_class or {}
    unknown = sorted(set(cfg_by_class) - set(OP_CLASSES))
    if unknown:
        raise PredictorError(f"train_all: unknown op class(es) {unknown}")
    out = {}
    for op_class in OP_CLASSES:
        cfgs = [cfg_by_class[op_class]] if op_class in cfg_by_class else [DEFAULT_CONFIGS[op_class], KNOWN_CONFIGS[op_class]]
        out[op_class] = float(sum(train_predictor(op_class, cfg, force=force).info["train_seconds"] for cfg in cfgs))
    return out


def op_class_of(op) -> np.ndarray:
    """Op class per op name (NaN-free object array); unknown ops -> ''."""
    inv, uniq = pd.factorize(pd.Series(op), use_na_sentinel=False)   # each distinct name once (hashing, not sorting)
    return np.array([OP_CLASS.get(o, "") for o in uniq], dtype=object)[inv]


def predict_featured(feat: pd.DataFrame, cfg_by_class: dict | None = None, seed: int = 0) -> np.ndarray:
    """NeuSight latency (ms) per row of a featured table holding any mix of op classes and devices.

    A class named in cfg_by_class uses that config on every row. Otherwise rows of a training GPU
    use KNOWN_CONFIGS (its own efficiency learned from its training rows) and rows of any other
    GPU use DEFAULT_CONFIGS (lib.selection: the two protocols), trained from `seed` (default_config).
    """
    cfg_by_class = cfg_by_class or {}
    out = np.full(len(feat), np.nan)
    cls = op_class_of(feat["op"])
    known = feat["device"].isin(TRAIN_GPUS_NVIDIA).to_numpy()   # device_index >= 0, without its per-row map
    for op_class in OP_CLASSES:
        for on_known in (False, True):
            rows = np.flatnonzero((cls == op_class) & (known == on_known))
            if len(rows):
                cfg = cfg_by_class.get(op_class) or default_config(op_class, on_known, seed)
                out[rows] = get_predictor(op_class, cfg).predict(feat.iloc[rows])
    return out
