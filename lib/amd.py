"""AMD GPUs: NeuSight's predictors trained on AMD Instinct MI100 + MI210, forecasting the MI250 (notebook 06).

The protocol (DESIGN.md): train on MI100 and MI210; the MI250 is out of distribution, forecast from its spec JSON.
The dataset measures no MI250 kernel, only its end-to-end labels, and it measures GEMMs on the MI100 and MI210 only
for the held-out shape lists (dataset_amd/test/collect/{bmm,linear}), so the AMD models learn GEMMs from those rows.
Each class's model takes the config of NVIDIA's unseen-GPU default (lib.selection.DEFAULT_CONFIGS), chosen on the
NVIDIA training GPUs, so nothing here is tuned on AMD data. It leaves out amendments 5 and 6 (memory hold, spec
envelope), which read the NVIDIA training GPUs. The MLPs are fitted by the function that fits the NVIDIA models
(lib.predictors._fit_state), fed the AMD rows featured the same way: GEMM tiles from the Tensile kernel names,
vector ops by PyTorch's CUDA launch rules (lib.tiles), which ROCm's kernels need not follow.
Variants, by the rows a model learns from:
    'all'       every row of both GPUs: the models that forecast (the MI250, and any AMD device JSON)
    'shapes'    both GPUs without a seeded share of the shapes (HELD_OUT_SHAPE_SHARE), scored on those
    <GPU name>  that GPU's rows alone: the other one is forecast as a GPU never trained on
"""
from __future__ import annotations

from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd

from . import paths
from . import predictors as predictors_mod
from . import train as train_mod
from .data import OP_CLASSES, fingerprint, load_kernels
from .devices import TRAIN_GPUS_AMD
from .features import EXTRA_FEATURES, FEATURES, add_features
from .labels import PAPER_MODELS, PAPER_SEQ, LabelError, _blocks, _paper_device
from .predictor_config import make_config
from .predictors import (CODE, TABLE_CODE, NeuSightPredictor, PredictorError, _code_text, _own_code, ensemble,
                         ensemble_members, from_state, shape_groups)
from .selection import DEFAULT_CONFIGS
from .tiles import GEMM_TILE_CANDIDATES_AMD
from .utilization import input_names

# NVIDIA's unseen-GPU configs without the two amendments that read NVIDIA's training GPUs
NVIDIA_ONLY_KEYS = ("hold_mem", "envelope")
AMD_CONFIGS = {c: {k: v for k, v in cfg.items() if k not in NVIDIA_ONLY_KEYS} for c, cfg in DEFAULT_CONFIGS.items()}
HELD_OUT_SHAPE_SHARE = 0.2   # 'shapes': the share of each class's distinct shapes left out of training
SPLIT_SEED = 0
VARIANTS = ("all", "shapes", *TRAIN_GPUS_AMD)
# summary/amd_*.csv names the GPUs MI100, MI210, MI250; their label folders are AMD_Instinct_<name>
PAPER_GPU_FOLDER = "AMD_Instinct_{}"


def amd_rows(op_class: str) -> pd.DataFrame:
    """Every MI100 and MI210 row of one class (train and test shape lists), featured with oracle tiles (notebook 06)."""
    df = load_kernels(ops=op_class, devices=list(TRAIN_GPUS_AMD), vendor="amd")
    if df.empty:
        raise PredictorError(f"no AMD rows for op class {op_class}")
    feat = add_features(df.reset_index(drop=True), tiles="oracle")
    ok = np.isfinite(feat[list(FEATURES + EXTRA_FEATURES) + ["num_waves", "flops_per_tile", "bound_gflops"]]).all(axis=1)
    ok &= feat["latency_ms"] > 0
    return feat[ok.to_numpy()].reset_index(drop=True)


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


def train_amd(op_class: str, variant: str = "all", cfg: dict | None = None) -> NeuSightPredictor:
    """The AMD model of one class and variant (cfg: a predictor config, default AMD_CONFIGS), trained or loaded from
    figures/predictors/ or build/predictors/ (lib.train.cached) (notebook 06)."""
    cfg = AMD_CONFIGS[op_class] if cfg is None else cfg
    parsed = make_config(cfg)
    if cfg.get("ensemble", 1) != 1:
        return ensemble([train_amd(op_class, variant, member) for member in ensemble_members(cfg)])
    train_cfg, max_rows, features, validation, device_factors, overhead, hold_mem, held_out = parsed
    if (validation, device_factors, overhead, hold_mem, held_out) != ("none", False, None, False, None):
        raise PredictorError("AMD configs train on every row of a variant: validation 'none', no device_factors, "
                             "overhead, hold_mem or held_out_gpu")
    names = input_names(op_class, features)
    key = train_mod.cache_key("neusight-amd", op_class, train_cfg, max_rows, names, variant, fingerprint("amd"),
                              *[_code_text(c) for c in (*CODE, *TABLE_CODE)], *_own_code(),
                              *[_code_text(f) for f in (amd_rows, held_out_shapes, variant_rows, _rows_for_fit)],
                              HELD_OUT_SHAPE_SHARE, SPLIT_SEED)
    short = variant if variant in ("all", "shapes") else "only" + variant.split()[-1]   # 'onlyMI100'
    name = f"neusight-amd-{op_class}-{train_cfg.layers}x{train_cfg.width}-{short}"

    # _fit_state reads its rows from lib.predictors.training_table. A table parameter there would change _fit_state's
    # code text, which every NVIDIA model's cache key holds (about 3 h 40 min of retraining), so the AMD rows are
    # swapped in for the one call instead.
    def fit():
        with mock.patch.object(predictors_mod, "training_table", _rows_for_fit(op_class, variant)):
            return predictors_mod._fit_state(op_class, train_cfg, max_rows, features, names, "none", 0, None, None)
    state, info = train_mod.cached(name, key, fit)
    return from_state(op_class, state, info, parsed, 0, tile_candidates=tuple(sorted(GEMM_TILE_CANDIDATES_AMD)))


def amd_predictors(variant: str = "all", cfg: dict | None = None) -> dict[str, NeuSightPredictor]:
    """{op class: AMD model} for lib.kernels / lib.forecast's cfg_by_class; cfg: one config for every class (the
    smoke run's), None = AMD_CONFIGS (notebook 06)."""
    return {c: train_amd(c, variant, cfg) for c in OP_CLASSES}


def paper_amd_table(mode: str, path: Path | None = None) -> pd.DataFrame:
    """The paper's AMD table (summary/amd_inf.csv or amd_train.csv: NeuSight's APE % per GPU, model and batch) as
    rows gpu (label folder), device, mode, model, batch, seq (PAPER_SEQ), paper_ape_pct; empty cells NaN."""
    if mode not in ("inference", "training"):
        raise LabelError(f"mode must be 'inference' or 'training' (got {mode!r})")
    path = Path(path) if path else paths.SUMMARY / ("amd_inf.csv" if mode == "inference" else "amd_train.csv")
    lines = [ln.split(",") for block in _blocks(path) for ln in block]
    if len(lines) < 3 or not lines[1][0].strip().startswith("Batch"):
        raise LabelError(f"{path}: expected a row of models, a 'Batch Size' row, then one row per GPU")
    models, cur = [], None
    for c in lines[0][1:]:
        cur = c.strip() or cur
        models.append(cur)
    rows = []
    for cells in lines[2:]:
        gpu = PAPER_GPU_FOLDER.format(cells[0].strip())
        device = _paper_device(gpu, cells[0].strip())
        for model, batch, val in zip(models, lines[1][1:], cells[1:]):
            if model not in PAPER_MODELS:
                raise LabelError(f"{path}: unknown model {model!r}")
            val = val.strip().rstrip("%")
            rows.append(dict(gpu=gpu, device=device, mode=mode, model=PAPER_MODELS[model], batch=int(batch),
                             seq=PAPER_SEQ[PAPER_MODELS[model]], paper_ape_pct=float(val) if val else np.nan))
    return pd.DataFrame(rows)


# The per-op comparison of notebook 06, one row per kernel and setting:
#   'held-out shapes'        both GPUs' rows of the shapes 'shapes' left out, forecast by the 'shapes' models
#   'GPU never trained on'   each GPU's rows, forecast by the models of the other GPU's rows alone
# with one column per forecast: the AMD models with spec-only and oracle tiles, NVIDIA's defaults (trained on the
# NVIDIA training GPUs, to which both AMD GPUs are unseen: what lib.kernels gives an AMD device JSON) and roofline.
AMD_METHODS = {"amd_spec": "NeuSight, AMD-trained (spec-only tiles)", "amd_oracle": "NeuSight, AMD-trained (oracle tiles)",
               "nvidia_spec": "NeuSight, NVIDIA-trained (spec-only tiles)", "roofline": "roofline"}
SETTINGS = ("held-out shapes", "GPU never trained on")


def kernel_forecasts(cfg: dict | None = None, nvidia_cfg: dict | None = None) -> pd.DataFrame:
    """Every AMD kernel of both settings with its forecasts (AMD_METHODS columns, ms); cfg as amd_predictors', nvidia_cfg
    as lib.kernels' cfg_by_class for the NVIDIA-trained column (None: the defaults) (notebook 06)."""
    from .kernels import predict_by_device
    frames = []
    for op_class in OP_CLASSES:
        rows = amd_rows(op_class)
        raw = rows[list(load_kernels(ops=op_class, devices=list(TRAIN_GPUS_AMD), vendor="amd").columns)]
        held = held_out_shapes(rows)
        parts = [("held-out shapes", "shapes", held)]
        parts += [("GPU never trained on", gpu, (rows["device"] != gpu).to_numpy()) for gpu in TRAIN_GPUS_AMD]
        for setting, variant, mask in parts:
            these = raw[mask].reset_index(drop=True)
            models = {op_class: train_amd(op_class, variant, cfg)}
            out = these[["op", "B", "M", "N", "K", "H", "device", "latency_ms"]].assign(
                op_class=op_class, setting=setting, trained_on=variant,
                amd_spec=predict_by_device(these, tiles="spec", cfg_by_class=models),
                amd_oracle=predict_by_device(these, tiles="oracle", cfg_by_class=models),
                nvidia_spec=predict_by_device(these, tiles="spec", cfg_by_class=nvidia_cfg),
                roofline=predict_by_device(these, method="roofline"))
            frames.append(out)
    return pd.concat(frames, ignore_index=True)


# The features tile element-wise, softmax and layernorm kernels by PyTorch's CUDA launch rule (lib.tiles.vec_tile).
# For these kernels the AMD traces count grid_x in blocks, not in work-items as for the Tensile GEMMs (lib.tiles.
# grid_blocks): a layernorm launches one block per row, grid_x = B. Per row:
#   ratio = grid_x * grid_y * grid_z / num_tiles(CUDA rule)
# with softmax split at SOFTMAX_WARP_MAX_H, where CUDA's rule turns from its warp kernel to one block per row.
def vector_launch_agreement() -> pd.DataFrame:
    """Per op class, op, softmax row kind (long_rows: H > SOFTMAX_WARP_MAX_H; False for the other ops) and AMD GPU:
    the rows, the share whose measured blocks equal the CUDA rule's (rule_share), and the median ratio (notebook 06)."""
    from .ops import GEMM_OPS
    from .tiles import SOFTMAX_WARP_MAX_H, add_tiles
    df = load_kernels(devices=list(TRAIN_GPUS_AMD), vendor="amd")
    t = add_tiles(df[~df["op"].isin(GEMM_OPS)])
    blocks = (t["grid_x"] * t["grid_y"] * t["grid_z"]).to_numpy(float)
    t = t.assign(match=np.isclose(blocks, t["num_tiles"]), ratio=blocks / t["num_tiles"],
                 long_rows=(t["op"] == "softmax") & (t["H"] > SOFTMAX_WARP_MAX_H))
    return (t.groupby(["op_class", "op", "long_rows", "device"])
             .agg(rows=("match", "size"), rule_share=("match", "mean"), median_ratio=("ratio", "median")).reset_index())
