"""AMD GPUs: NeuSight's predictors trained on AMD Instinct MI100 + MI210, forecasting the MI250 (notebook 06).

The protocol (DESIGN.md): train on MI100 and MI210; the MI250 is out of distribution, forecast from its spec JSON.
The dataset measures no MI250 kernel, only its end-to-end labels, and it measures GEMMs on the MI100 and MI210 only
for the held-out shape lists (dataset_amd/test/collect/{bmm,linear}), so the AMD models learn GEMMs from those rows.
Each class's model takes the config of NVIDIA's unseen-GPU default (lib.selection.DEFAULT_CONFIGS), chosen on the
NVIDIA training GPUs, so no hyper-parameter is tuned on AMD data (A2, below, chooses a tile rule on AMD held-out
shapes, as notebook 04 chose NVIDIA's on NVIDIA's). It leaves out amendments 5 and 6 (memory hold, spec
envelope), which read the NVIDIA training GPUs. The MLPs are fitted by the function that fits the NVIDIA models
(lib.predictors._fit_state), fed the AMD rows featured the same way: GEMM tiles from the Tensile kernel names,
vector ops by PyTorch's CUDA launch rules (lib.tiles), which ROCm's kernels need not follow. Each model takes as
many optimizer steps as its config takes on NVIDIA's table (amendment A1, steps_matched): the AMD tables are smaller.
Spec-only GEMM tiles come from a classifier of the variant's own rows (amendment A2, AMD_SPEC_TILES, amd_tile_forest).
Softmax rows that ROCm's PyTorch runs with its shared-memory kernel read every element as a 4-vector (amendment A3),
and the softmax models are told which rows those are (amendment A4); lib.rocm_softmax holds both rules, and
lib.amd_eval scores the models.
Variants, by the rows a model learns from:
    'all'       every row of both GPUs: the models that forecast (the MI250, and any AMD device JSON)
    'shapes'    both GPUs without a seeded share of the shapes (HELD_OUT_SHAPE_SHARE), scored on those
    <GPU name>  that GPU's rows alone: the other one is forecast as a GPU never trained on
"""
from __future__ import annotations

import functools
import math
from dataclasses import replace
from unittest import mock

import numpy as np
import pandas as pd

from . import predictors as predictors_mod
from . import train as train_mod
from .data import OP_CLASSES, fingerprint, load_kernels
from .devices import TRAIN_GPUS_AMD
from .features import EXTRA_FEATURES, FEATURES, add_features
from .predictor_config import make_config
from .predictors import (CODE, TABLE_CODE, NeuSightPredictor, PredictorError, _code_text, _own_code, ensemble,
                         ensemble_members, from_state, shape_groups)
from .rocm_softmax import AMD_SMEM_INPUT, SMEM_FEATURE, rocm_softmax_inputs, rocm_softmax_vec, smem_softmax
from .selection import DEFAULT_CONFIGS
from .tile_choice import fit_tile_classifier
from .tiles import GEMM_TILE_CANDIDATES_AMD
from .utilization import input_names

# NVIDIA's unseen-GPU configs without the two amendments that read NVIDIA's training GPUs
NVIDIA_ONLY_KEYS = ("hold_mem", "envelope")
AMD_CONFIGS = {c: {k: v for k, v in cfg.items() if k not in NVIDIA_ONLY_KEYS} for c, cfg in DEFAULT_CONFIGS.items()}
# Amendment A2: what tiles='spec' means for the AMD GEMM models, chosen in notebook 06 on held-out shapes (in
# distribution) between autotune and a classifier of the variant's own rows (lib.amd_eval.spec_tile_choice; tests hold it there)
AMD_SPEC_TILES = "classifier"
GEMM_CLASSES = ("BMM", "FC")
HELD_OUT_SHAPE_SHARE = 0.2   # 'shapes': the share of each class's distinct shapes left out of training
SPLIT_SEED = 0
VARIANTS = ("all", "shapes", *TRAIN_GPUS_AMD)


def amd_rows(op_class: str) -> pd.DataFrame:
    """Every MI100 and MI210 row of one class (train and test shape lists), featured with oracle tiles (notebook 06)."""
    df = load_kernels(ops=op_class, devices=list(TRAIN_GPUS_AMD), vendor="amd")
    if df.empty:
        raise PredictorError(f"no AMD rows for op class {op_class}")
    feat = add_features(df.reset_index(drop=True), tiles="oracle")
    ok = np.isfinite(feat[list(FEATURES + EXTRA_FEATURES) + ["num_waves", "flops_per_tile", "bound_gflops"]]).all(axis=1)
    ok &= feat["latency_ms"] > 0
    return feat[ok.to_numpy()].reset_index(drop=True)


def as_loaded(rows: pd.DataFrame, op_class: str) -> pd.DataFrame:
    """amd_rows' rows with load_kernels' columns alone (what lib.kernels takes, features left out)."""
    return rows[list(load_kernels(ops=op_class, devices=list(TRAIN_GPUS_AMD), vendor="amd").columns)]


# 'shapes': a seeded draw of round(share x distinct shapes) shapes, each held out on both GPUs
def held_out_shapes(feat: pd.DataFrame, share: float = HELD_OUT_SHAPE_SHARE, seed: int = SPLIT_SEED) -> np.ndarray:
    """Per row: is its shape (lib.predictors.shape_groups) one of the held-out ones (notebook 06)?"""
    groups = shape_groups(feat)
    n = groups.max() + 1 if len(groups) else 0
    out = np.random.default_rng(seed).permutation(n) < round(share * n)
    return out[groups]


def variant_rows(op_class: str, variant: str) -> pd.DataFrame:
    """The rows a variant's model learns from (module docstring)."""
    if variant not in VARIANTS:
        raise PredictorError(f"AMD variant must be one of {VARIANTS}, got {variant!r}")
    feat = amd_rows(op_class)
    keep = (~held_out_shapes(feat) if variant == "shapes" else np.ones(len(feat), bool) if variant == "all"
            else (feat["device"] == variant).to_numpy())
    return feat[keep].reset_index(drop=True)


def _rows_for_fit(op_class: str, variant: str):
    """A stand-in for lib.predictors.training_table: the variant's rows, subsampled as it does."""
    def table(_op_class, max_rows=None, seed=0):
        feat = variant_rows(op_class, variant)
        return feat if max_rows is None or max_rows >= len(feat) else \
            feat.sample(n=int(max_rows), random_state=seed).sort_index().reset_index(drop=True)
    return table


# Amendment A1 (notebook 06; made after the AMD numbers had been seen, decided before its effect was computed): the
# AMD tables hold 2.4 to 19 times fewer rows per class than NVIDIA's training table (lib.predictors.training_table), so
# NVIDIA's epochs are far fewer optimizer steps here: the softmax default's 8 epochs are 80 steps on NVIDIA's 9,465
# rows and 32 on the MI100's and MI210's 3,830. A model takes the steps its config takes on NVIDIA's table, on a
# cosine schedule stretched alike:
#   epochs_amd = round(epochs x ceil(n_nvidia / batch_size) / ceil(n_amd / batch_size))   (schedule_epochs, patience alike)
def steps_matched(cfg: train_mod.TrainConfig, n_nvidia: int, n_amd: int) -> train_mod.TrainConfig:
    """cfg with epochs, schedule_epochs and patience stretched so that n_amd rows take the optimizer steps that n_nvidia
    rows take (notebook 06)."""
    if n_nvidia < 1 or n_amd < 1:
        raise PredictorError(f"steps_matched needs rows on both sides (NVIDIA {n_nvidia}, AMD {n_amd})")
    scale = math.ceil(n_nvidia / cfg.batch_size) / math.ceil(n_amd / cfg.batch_size)
    def stretch(epochs):
        return max(1, round(epochs * scale))
    return replace(cfg, epochs=stretch(cfg.epochs), patience=stretch(cfg.patience),
                   schedule_epochs=stretch(cfg.schedule_epochs or cfg.epochs))


@functools.cache
def _nvidia_rows(op_class: str, max_rows, seed: int) -> int:
    """The rows of NVIDIA's training table that a config with max_rows and seed learns from."""
    return len(predictors_mod.training_table(op_class, max_rows, seed))


AMD_TILES = np.array(sorted(GEMM_TILE_CANDIDATES_AMD), dtype=float)   # (C, 2): the tiles the AMD GEMM rows ran


@functools.cache
def amd_tile_forest(variant: str = "all"):
    """lib.tile_choice's classifier (GEMM shape + spec -> tile among AMD_TILES), fitted on the variant's BMM and FC
    rows with their Tensile tiles (notebook 06)."""
    rows = pd.concat([variant_rows(c, variant) for c in GEMM_CLASSES], ignore_index=True)
    return fit_tile_classifier(rows, SPLIT_SEED, AMD_TILES)


def train_amd(op_class: str, variant: str = "all", cfg: dict | None = None, match_steps: bool = True,
              spec_tiles: str | None = None, rocm_softmax: bool = True,
              smem_input: bool | None = None) -> NeuSightPredictor:
    """The AMD model of one class and variant (cfg: a predictor config, default AMD_CONFIGS; match_steps: amendment
    A1, False for the models before it), trained or loaded from figures/predictors/ or build/predictors/
    (lib.train.cached); a GEMM model carries the variant's tile classifier where spec_tiles (None: AMD_SPEC_TILES) is
    'classifier'; a softmax model learns and forecasts with ROCm's f_vec where rocm_softmax (amendment A3, False for
    the models before it), and with the input f_smem as well where smem_input (amendment A4, on top of A3 only; None:
    AMD_SMEM_INPUT) (notebook 06)."""
    cfg = AMD_CONFIGS[op_class] if cfg is None else cfg
    rule = spec_tiles or AMD_SPEC_TILES
    if rule not in ("autotune", "classifier"):
        raise PredictorError(f"AMD spec_tiles must be 'autotune' or 'classifier', got {spec_tiles!r}")
    parsed = make_config(cfg)
    if cfg.get("ensemble", 1) != 1:
        return ensemble([train_amd(op_class, variant, member, match_steps, spec_tiles, rocm_softmax, smem_input)
                         for member in ensemble_members(cfg)])
    # A3 changes the softmax rows alone, so only A3's softmax models add it to the key (the other classes' keep theirs);
    # A4 adds an input to A3's softmax models
    rule_rows = rocm_softmax and op_class == "SOFTMAX"
    a4 = rule_rows and (AMD_SMEM_INPUT if smem_input is None else smem_input)
    if a4:
        parsed = (*parsed[:2], (*parsed[2], SMEM_FEATURE), *parsed[3:])
    train_cfg, max_rows, features, validation, device_factors, overhead, hold_mem, held_out = parsed
    if (validation, device_factors, overhead, hold_mem, held_out) != ("none", False, None, False, None):
        raise PredictorError("AMD configs train on every row of a variant: validation 'none', no device_factors, "
                             "overhead, hold_mem or held_out_gpu")
    names = input_names(op_class, features)
    # A1's models add to the key what their epochs are computed from (NVIDIA's data and the rule), so that a cache hit
    # counts no rows; the models before it keep their keys.
    steps = ("steps-matched", fingerprint("nvidia"), _code_text(steps_matched)) if match_steps else ()
    a3 = ("rocm-softmax", _code_text(smem_softmax), _code_text(rocm_softmax_vec)) if rule_rows else ()
    a3 += ("smem-input", _code_text(rocm_softmax_inputs)) if a4 else ()
    row_rule = rocm_softmax_inputs if a4 else rocm_softmax_vec
    key = train_mod.cache_key("neusight-amd", op_class, train_cfg, max_rows, names, variant, fingerprint("amd"),
                              *[_code_text(c) for c in (*CODE, *TABLE_CODE)], *_own_code(),
                              *[_code_text(f) for f in (amd_rows, held_out_shapes, variant_rows, _rows_for_fit)],
                              HELD_OUT_SHAPE_SHARE, SPLIT_SEED, *steps, *a3)
    short = variant if variant in ("all", "shapes") else "only" + variant.split()[-1]   # 'onlyMI100'
    name = f"neusight-amd-{op_class}-{train_cfg.layers}x{train_cfg.width}-{short}"

    # _fit_state reads its rows from lib.predictors.training_table. A table parameter there would change _fit_state's
    # code text, which every NVIDIA model's cache key holds (about 3 h 40 min of retraining), so the AMD rows are
    # swapped in for the one call instead.
    def fit():
        rows = _rows_for_fit(op_class, variant)
        def table(*args, **kwargs):
            return row_rule(rows(*args, **kwargs)) if rule_rows else rows(*args, **kwargs)
        run_cfg = steps_matched(train_cfg, _nvidia_rows(op_class, max_rows, train_cfg.seed),
                                len(table(op_class, max_rows, train_cfg.seed))) if match_steps else train_cfg
        with mock.patch.object(predictors_mod, "training_table", table):
            return predictors_mod._fit_state(op_class, run_cfg, max_rows, features, names, "none", 0, None, None)
    state, info = train_mod.cached(name, key, fit)
    forest = amd_tile_forest(variant) if rule == "classifier" and op_class in GEMM_CLASSES else None
    return from_state(op_class, state, info, parsed, 0, tile_candidates=tuple(sorted(GEMM_TILE_CANDIDATES_AMD)),
                      tile_forest=forest, feature_rule=row_rule if rule_rows else None)


def amd_predictors(variant: str = "all", cfg: dict | None = None, match_steps: bool = True,
                   spec_tiles: str | None = None, rocm_softmax: bool = True,
                   smem_input: bool | None = None) -> dict[str, NeuSightPredictor]:
    """{op class: AMD model} for lib.kernels / lib.forecast's cfg_by_class; cfg: one config for every class (the
    smoke run's), None = AMD_CONFIGS; match_steps, spec_tiles, rocm_softmax and smem_input as train_amd's
    (notebook 06)."""
    return {c: train_amd(c, variant, cfg, match_steps, spec_tiles, rocm_softmax, smem_input) for c in OP_CLASSES}


def steps_table(cfg: dict | None = None) -> pd.DataFrame:
    """Per op class and variant: the rows NVIDIA's table and the variant hold, NVIDIA's optimizer steps, and the epochs
    and steps of the AMD model before and after amendment A1 (cfg as amd_predictors') (notebook 06)."""
    rows = []
    for op_class in OP_CLASSES:
        c = AMD_CONFIGS[op_class] if cfg is None else cfg
        train_cfg, max_rows = make_config(ensemble_members(c)[0] if c.get("ensemble", 1) != 1 else c)[:2]
        n_nvidia = _nvidia_rows(op_class, max_rows, train_cfg.seed)
        for variant in VARIANTS:
            n_amd = len(_rows_for_fit(op_class, variant)(op_class, max_rows, train_cfg.seed))
            batches = math.ceil(n_amd / train_cfg.batch_size)
            after = steps_matched(train_cfg, n_nvidia, n_amd).epochs
            rows.append(dict(op_class=op_class, variant=variant, nvidia_rows=n_nvidia, amd_rows=n_amd,
                             nvidia_steps=train_cfg.epochs * math.ceil(n_nvidia / train_cfg.batch_size),
                             epochs_before=train_cfg.epochs, steps_before=train_cfg.epochs * batches,
                             epochs_after=after, steps_after=after * batches))
    return pd.DataFrame(rows)


def own_rows_forecast(op_class: str, cfg: dict | None = None, match_steps: bool = True,
                      rocm_softmax: bool = True, smem_input: bool | None = None) -> pd.DataFrame:
    """Every MI100 and MI210 row of a class that the 'all' model learned from (load_kernels' columns), with pred_ms, that
    model's forecast with oracle tiles (cfg as amd_predictors'; match_steps, rocm_softmax, smem_input: train_amd's)
    (notebook 06)."""
    from .kernels import predict_by_device
    rows = amd_rows(op_class)
    raw = as_loaded(rows, op_class)
    model = train_amd(op_class, "all", cfg, match_steps, rocm_softmax=rocm_softmax, smem_input=smem_input)
    return raw.assign(pred_ms=predict_by_device(raw, tiles="oracle", cfg_by_class={op_class: model}))


def training_fit(cfg: dict | None = None, match_steps: bool = True, rocm_softmax: bool = True) -> pd.DataFrame:
    """Per op class: the 'all' model's MAPE on the rows it learned from (every MI100 and MI210 row under the full
    configs; oracle tiles): how well it fits, not how well it forecasts (match_steps, rocm_softmax: train_amd's)
    (notebook 06)."""
    from .metrics import ape
    fits = {c: own_rows_forecast(c, cfg, match_steps, rocm_softmax) for c in OP_CLASSES}
    return pd.DataFrame([dict(op_class=c, kernels=len(f), mape=float(ape(f["pred_ms"], f["latency_ms"]).mean()))
                         for c, f in fits.items()])

