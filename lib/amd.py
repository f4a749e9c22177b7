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
Softmax rows that ROCm's PyTorch runs with its shared-memory kernel read every element as a 4-vector (amendment A3,
rocm_softmax_vec), and the softmax models are told which rows those are (amendment A4, rocm_softmax_inputs).
Variants, by the rows a model learns from:
    'all'       every row of both GPUs: the models that forecast (the MI250, and any AMD device JSON)
    'shapes'    both GPUs without a seeded share of the shapes (HELD_OUT_SHAPE_SHARE), scored on those
    <GPU name>  that GPU's rows alone: the other one is forecast as a GPU never trained on
"""
from __future__ import annotations

import functools
import math
from dataclasses import replace
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
from .selection import DEFAULT_CONFIGS, spread_seed
from .tile_choice import fit_tile_classifier
from .tiles import GEMM_TILE_CANDIDATES_AMD, SOFTMAX_ILP, SOFTMAX_WARP_MAX_H, softmax_block_threads
from .utilization import input_names

# NVIDIA's unseen-GPU configs without the two amendments that read NVIDIA's training GPUs
NVIDIA_ONLY_KEYS = ("hold_mem", "envelope")
AMD_CONFIGS = {c: {k: v for k, v in cfg.items() if k not in NVIDIA_ONLY_KEYS} for c, cfg in DEFAULT_CONFIGS.items()}
# Amendment A2: what tiles='spec' means for the AMD GEMM models, chosen in notebook 06 on held-out shapes (in
# distribution) between autotune and a classifier of the variant's own rows (spec_tile_choice; tests hold it there)
AMD_SPEC_TILES = "classifier"
GEMM_CLASSES = ("BMM", "FC")
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


def _as_loaded(rows: pd.DataFrame, op_class: str) -> pd.DataFrame:
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


# Amendment A3 (notebook 06; made after every inference label's softmax had been seen forecast too slow, decided from
# the AMD training rows' kernel names and PyTorch's dispatch before its effect on any held-out kernel or label was
# computed, and the default whatever that effect): for rows over 1,024 elements ROCm's PyTorch runs
# cunn_SoftMaxForwardSmem wherever it can (host_softmax), which stages the row in shared memory through 4-vector loads
# alone. The dataset's NVIDIA PyTorch has no such kernel; lib.features' f_vec counts the 4-vector loads of
# cunn_SoftMaxForward, which it runs for every such row. The shared-memory kernel runs where (fp32, aligned pointers)
#   H > 1024,  H mod 4 = 0  and  H < (LDS bytes per block - 4 x threads / 64) / 4
# (threads: lib.tiles.softmax_block_threads; 64: ROCm's wavefront, C10_WARP_SIZE), and there
#   f_vec = 1
AMD_LDS_BYTES = 65536    # shared memory per block (sharedMemPerBlock) of the MI100, MI210 and MI250
ROCM_WARP_SIZE = 64


def smem_softmax(H) -> np.ndarray:
    """Per row length: does ROCm's PyTorch run softmax over it with cunn_SoftMaxForwardSmem (fp32; amendment A3)?"""
    H = np.asarray(H, dtype=float)
    max_elements = (AMD_LDS_BYTES - 4 * softmax_block_threads(H) / ROCM_WARP_SIZE) / 4
    return (H > SOFTMAX_WARP_MAX_H) & (np.mod(H, SOFTMAX_ILP) == 0) & (H < max_elements)


def rocm_softmax_kernel(H) -> np.ndarray:
    """Per row length: the softmax kernel ROCm's PyTorch runs (fp32): 'warp', 'smem' or 'block' (amendment A3)."""
    H = np.asarray(H, dtype=float)
    return np.where(H <= SOFTMAX_WARP_MAX_H, "warp", np.where(smem_softmax(H), "smem", "block"))


def rocm_softmax_vec(feat: pd.DataFrame) -> pd.DataFrame:
    """A featured table with f_vec = 1 on the softmax rows that run ROCm's shared-memory kernel (amendment A3;
    notebook 06)."""
    if "H" not in feat:
        return feat
    smem = (feat["op"].to_numpy() == "softmax") & smem_softmax(np.nan_to_num(feat["H"].to_numpy(float), nan=1.0))
    return feat.assign(f_vec=np.where(smem, 1.0, feat["f_vec"].to_numpy(float))) if smem.any() else feat


# Amendment A4, decided with its criterion before any A4 model was trained or scored: A3 put the shared-memory rows at
# f_vec = 1, the end of a feature whose other values belong to the block kernel, and the models fitted a smooth trend
# along it (f_vec_response), so they forecast those rows much as the block kernel's (softmax_twins). A4 gives the AMD
# softmax model one more input, on top of A3's, that names the kernel:
#   f_smem = 1 where ROCm's PyTorch runs cunn_SoftMaxForwardSmem (smem_softmax), else 0
# It is the AMD models' default (AMD_SMEM_INPUT) only if its softmax MAPE on the held-out shapes of both AMD GPUs,
# forecast by the 'shapes' models, is lower than A3's (smem_input_choice): no row of a GPU never trained on, no label.
# Notebook 06 made the choice (06-amd-a4-choice.csv, tests hold the constant to it): 6.3% against A3's 7.4%.
SMEM_FEATURE = "f_smem"
AMD_SMEM_INPUT = True


def rocm_softmax_inputs(feat: pd.DataFrame) -> pd.DataFrame:
    """rocm_softmax_vec's table with the column f_smem: 1 on the softmax rows that run ROCm's shared-memory kernel,
    else 0 (amendment A4; notebook 06)."""
    out = rocm_softmax_vec(feat)
    H = out["H"].to_numpy(float) if "H" in out else np.full(len(out), np.nan)
    smem = (out["op"].to_numpy() == "softmax") & smem_softmax(np.nan_to_num(H, nan=1.0))
    return out.assign(**{SMEM_FEATURE: smem.astype(float)})


# A3's evidence, from the AMD training rows' kernel names: per GPU and the kernel a row ran (warp: softmax_warp_forward,
# block: cunn_SoftMaxForward, smem: cunn_SoftMaxForwardSmem), the rows, the share whose kernel rocm_softmax_kernel names,
# lib.features' f_vec (CUDA's rule) and A3's, and the median time per element of the rows over LARGE_SOFTMAX_ELEMENTS:
#   ns_per_element = latency_ms x 1e6 / (B x H)
LARGE_SOFTMAX_ELEMENTS = 1e7


def softmax_rows() -> pd.DataFrame:
    """Every AMD training softmax row (load_kernels' columns) with the kernel it ran (from its name), whether
    rocm_softmax_kernel names it (agrees), f_vec by CUDA's rule and by A3's, elements (B x H) and ns_per_element
    (notebook 06)."""
    from .tiles import softmax_vector_share
    df = load_kernels(ops="softmax", devices=list(TRAIN_GPUS_AMD), vendor="amd")
    name = df["kernel_name"]
    kernel = np.where(name.str.contains("SoftMaxForwardSmem"), "smem",
                      np.where(name.str.contains("softmax_warp_forward"), "warp", "block"))
    cuda_vec = softmax_vector_share(df["H"])
    elements = df["B"] * df["H"]
    return df.assign(kernel=kernel, agrees=rocm_softmax_kernel(df["H"]) == kernel, f_vec_cuda=cuda_vec,
                     f_vec_a3=np.where(smem_softmax(df["H"]), 1.0, cuda_vec), elements=elements,
                     ns_per_element=df["latency_ms"] * 1e6 / elements)


def softmax_kernels(rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per AMD training GPU and softmax kernel (rows: softmax_rows(), the default): rows, rule_share
    (rocm_softmax_kernel names it), the range of f_vec by CUDA's rule and by A3's, and the large rows' count and median
    ns per element (notebook 06)."""
    t = softmax_rows() if rows is None else rows
    large = (t[t["elements"] > LARGE_SOFTMAX_ELEMENTS].groupby(["device", "kernel"])["ns_per_element"]
             .agg(large_rows="size", ns_per_element="median"))
    return (t.groupby(["device", "kernel"])
             .agg(rows=("agrees", "size"), rule_share=("agrees", "mean"), f_vec_cuda_min=("f_vec_cuda", "min"),
                  f_vec_cuda_max=("f_vec_cuda", "max"), f_vec_a3_min=("f_vec_a3", "min"), f_vec_a3_max=("f_vec_a3", "max"))
             .join(large).reset_index())


# Whether a model tells the two block kernels apart: twin softmax shapes, B rows of H elements (a multiple of 4, the
# shared-memory kernel) and of H - 1 (the block kernel), forecast on one AMD GPU's spec; per pair
#   smem_over_block = (forecast ms / (B x H)) / (forecast ms / (B x (H - 1)))      [time per element]
TWIN_LENGTHS = (1028, 1536, 2048, 3072, 4000)
TWIN_ROWS = (4096, 65536)


def softmax_twins(models: dict, device: str = TRAIN_GPUS_AMD[1]) -> pd.DataFrame:
    """Per twin pair (TWIN_ROWS x TWIN_LENGTHS): the forecast ns per element of the shared-memory row and of the block row
    one element shorter, and smem_over_block, by models (amd_predictors') on device's spec (notebook 06)."""
    from .devices import device_by_name
    from .kernels import predict_kernels
    pairs = pd.DataFrame([(b, h) for b in TWIN_ROWS for h in TWIN_LENGTHS], columns=["B", "H"])
    shapes = pd.concat([pairs.assign(op="softmax"), pairs.assign(op="softmax", H=pairs["H"] - 1)], ignore_index=True)
    ns = predict_kernels(shapes, device_by_name(device), cfg_by_class=models) * 1e6 / (shapes["B"] * shapes["H"])
    smem, block = ns[:len(pairs)].to_numpy(), ns[len(pairs):].to_numpy()
    return pairs.assign(device=device, smem_ns_per_element=smem, block_ns_per_element=block,
                        smem_over_block=smem / block)


# What a softmax model makes of f_vec alone: one block-kernel shape (F_VEC_PROBE: B rows of H elements, H - 1 of a twin),
# featured on one AMD GPU's spec, forecast with f_vec set to each of F_VEC_VALUES, every other input as it is.
F_VEC_PROBE = (TWIN_ROWS[-1], 2047)
F_VEC_VALUES = tuple(np.round(np.linspace(0, 1, 11), 1))


def f_vec_response(model: NeuSightPredictor, device: str = TRAIN_GPUS_AMD[1]) -> pd.DataFrame:
    """Per value of F_VEC_VALUES: a softmax model's forecast ns per element of F_VEC_PROBE on device's spec with f_vec set
    to it (notebook 06)."""
    from .devices import device_by_name
    B, H = F_VEC_PROBE
    shape = pd.DataFrame({"op": ["softmax"], "B": [B], "H": [float(H)]}).assign(**device_by_name(device).spec_columns())
    feat = add_features(shape, tiles="oracle")
    ms = [model.predict(feat.assign(f_vec=v))[0] for v in F_VEC_VALUES]
    return pd.DataFrame({"f_vec": F_VEC_VALUES, "ns_per_element": np.array(ms) * 1e6 / (B * H)})


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
    raw = _as_loaded(rows, op_class)
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


def kernel_forecasts(cfg: dict | None = None, nvidia_cfg: dict | None = None, match_steps: bool = True,
                     rocm_softmax: bool = True, smem_input: bool | None = None,
                     op_classes: tuple = OP_CLASSES) -> pd.DataFrame:
    """Every AMD kernel of op_classes (default all) in both settings with its forecasts (ms: AMD_METHODS columns, and
    amd_autotune and amd_classifier, amendment A2's two spec-only rules); cfg, match_steps, rocm_softmax and smem_input
    as amd_predictors', nvidia_cfg as lib.kernels' cfg_by_class for the NVIDIA-trained column (None: the defaults)
    (notebook 06)."""
    from .kernels import predict_by_device
    frames = []
    for op_class in op_classes:
        rows = amd_rows(op_class)
        raw = _as_loaded(rows, op_class)
        held = held_out_shapes(rows)
        parts = [("held-out shapes", "shapes", held)]
        parts += [("GPU never trained on", gpu, (rows["device"] != gpu).to_numpy()) for gpu in TRAIN_GPUS_AMD]
        for setting, variant, mask in parts:
            these = raw[mask].reset_index(drop=True)
            model = train_amd(op_class, variant, cfg, match_steps, rocm_softmax=rocm_softmax, smem_input=smem_input)
            forest = amd_tile_forest(variant) if op_class in GEMM_CLASSES else None
            by_rule = {rule: predict_by_device(these, tiles="spec",
                                               cfg_by_class={op_class: replace(model, tile_forest=f)})
                       for rule, f in (("autotune", None), ("classifier", forest))}
            out = these[["op", "B", "M", "N", "K", "H", "device", "latency_ms"]].assign(
                op_class=op_class, setting=setting, trained_on=variant, amd_spec=by_rule[AMD_SPEC_TILES],
                amd_autotune=by_rule["autotune"], amd_classifier=by_rule["classifier"],
                amd_oracle=predict_by_device(these, tiles="oracle", cfg_by_class={op_class: model}),
                nvidia_spec=predict_by_device(these, tiles="spec", cfg_by_class=nvidia_cfg),
                roofline=predict_by_device(these, method="roofline"))
            frames.append(out)
    return pd.concat(frames, ignore_index=True)


# Amendment A2's choice, made as notebook 04 made NVIDIA's (lib.kernels.SPEC_TILES): on in-distribution rows only, the
# held-out shapes of both AMD GPUs, forecast by the 'shapes' models; the rule with the lower mean of BMM's and FC's
# MAPE is the AMD models' spec-only rule (a tie keeps autotune). No row of a GPU never trained on, no label.
def spec_tile_choice(forecasts: pd.DataFrame) -> pd.DataFrame:
    """Per spec-only tile rule (autotune, classifier): BMM's and FC's MAPE on held-out shapes, their mean, and whether
    it is the rule chosen (forecasts: kernel_forecasts') (notebook 06)."""
    from .metrics import mape
    held = forecasts[(forecasts["setting"] == "held-out shapes") & forecasts["op_class"].isin(GEMM_CLASSES)]
    t = pd.DataFrame({rule: {c: mape(g[f"amd_{rule}"], g["latency_ms"]) for c, g in held.groupby("op_class")}
                      for rule in ("autotune", "classifier")}).T[list(GEMM_CLASSES)]
    t["mean"] = t.mean(axis=1)
    t["chosen"] = t.index == ("classifier" if t.loc["classifier", "mean"] < t.loc["autotune", "mean"] else "autotune")
    return t.rename_axis("rule").reset_index()


# Amendment A4's choice (AMD_SMEM_INPUT), fixed before any A4 model was trained: on in-distribution rows only, the
# held-out softmax shapes of both AMD GPUs, forecast by the 'shapes' softmax models of A3 and of A4; A4 is the default
# if its MAPE there is the lower (a tie keeps A3). No row of a GPU never trained on, no label.
def smem_input_choice(a3: pd.DataFrame, a4: pd.DataFrame) -> pd.DataFrame:
    """Per softmax model (A3, A4): held-out softmax kernels, their MAPE and median forecast over measured, and whether
    it is the one chosen (a3, a4: kernel_forecasts' with smem_input False and True) (notebook 06)."""
    from .metrics import mape
    held = [f[(f["setting"] == "held-out shapes") & (f["op_class"] == "SOFTMAX")] for f in (a3, a4)]
    if len(held[0]) == 0 or not held[0][["B", "H", "device"]].reset_index(drop=True).equals(
            held[1][["B", "H", "device"]].reset_index(drop=True)):
        raise PredictorError("smem_input_choice: A3's and A4's forecasts must hold the same held-out softmax rows")
    t = pd.DataFrame([dict(models=name, kernels=len(h), mape=mape(h["amd_spec"], h["latency_ms"]),
                           median_ratio=float((h["amd_spec"] / h["latency_ms"]).median()))
                      for name, h in zip(("A3", "A4"), held)])
    t["chosen"] = t["models"] == ("A4" if t.loc[1, "mape"] < t.loc[0, "mape"] else "A3")
    return t


# A3 and A4 over training seeds (evaluation only, added after A4's choice; it chooses nothing): the softmax models of
# both retrained from each run of a seed spread (lib.selection.spread_seed: run 0 is the committed models, the others
# share no seed with them or with each other), scored per setting and kernel as A4's table scores them, and end to end
# beside the other classes' models as given.
SEED_MODELS = {"A3": False, "A4": True}   # name: smem_input


def _seeded_softmax(cfg: dict | None, run: int) -> dict:
    """The softmax config of run `run` of a seed spread (cfg: one config for every class, None: AMD_CONFIGS)."""
    base = AMD_CONFIGS["SOFTMAX"] if cfg is None else cfg
    return {**base, "seed": spread_seed(base, run)}


def softmax_seed_kernels(runs, cfg: dict | None = None, nvidia_cfg: dict | None = None) -> pd.DataFrame:
    """Per run of `runs`, model (SEED_MODELS), setting and kernel ('all': every one): the AMD softmax kernels' count and
    MAPE, spec-only tiles (cfg, nvidia_cfg as kernel_forecasts') (notebook 06)."""
    from .metrics import ape
    rows = []
    for run in runs:
        for name, a4 in SEED_MODELS.items():
            f = kernel_forecasts(_seeded_softmax(cfg, run), nvidia_cfg, smem_input=a4, op_classes=("SOFTMAX",))
            f = f.assign(ape=ape(f["amd_spec"], f["latency_ms"]), kernel=rocm_softmax_kernel(f["H"]))
            for kernels in (f.assign(kernel="all"), f):
                t = kernels.groupby(["setting", "kernel"], sort=False)["ape"].agg(kernels="size", mape="mean")
                rows.append(t.reset_index().assign(run=run, models=name))
    return pd.concat(rows, ignore_index=True)[["run", "models", "setting", "kernel", "kernels", "mape"]]


def softmax_seed_labels(labels: pd.DataFrame, runs, cfg: dict | None = None) -> pd.DataFrame:
    """Per run of `runs`, model (SEED_MODELS), mode and device ('all AMD GPUs' too): the labels' count and mean APE,
    forecast by the 'all' models of amd_predictors(cfg=cfg) with that run's softmax model (notebook 06)."""
    from .forecast import evaluate_labels
    others = amd_predictors("all", cfg)
    rows = []
    for run in runs:
        for name, a4 in SEED_MODELS.items():
            models = {**others, "SOFTMAX": train_amd("SOFTMAX", "all", _seeded_softmax(cfg, run), smem_input=a4)}
            ev = evaluate_labels(labels, methods=["neusight"], cfg_by_class=models)
            ev = pd.concat([ev, ev.assign(device="all AMD GPUs")], ignore_index=True)
            t = ev.groupby(["mode", "device"])["neusight_ape"].agg(labels="size", mape="mean")
            rows.append(t.reset_index().assign(run=run, models=name))
    return pd.concat(rows, ignore_index=True)[["run", "models", "mode", "device", "labels", "mape"]]


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
