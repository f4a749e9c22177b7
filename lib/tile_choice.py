"""GEMM tiles without the target GPU's kernel names: spec-only tile choice (notebook 04).

The paper read GEMM tiles from kernel names profiled on the target GPU ("oracle" tiles). A
forecast may not: it knows the target's spec and the training GPUs' data only. The rules:
  autotune:   among the tiles the libraries use on the training GPUs
              (lib.tiles.GEMM_TILE_CANDIDATES), take the one the NeuSight model predicts
              fastest, as cuBLAS' heuristics / an autotuner would:  tile = argmin_t latency(t).
  classifier: a decision forest over log(B, M, N, K), the op and the log spec (num_sm, peak,
              bandwidth, L2, memory) trained to reproduce the training GPUs' oracle tiles.
  hybrid:     the classifier for narrow GEMMs, the autotuner for the others (amendment 8);
  ranged:     the hybrid on a GPU within the spec range of the GPUs the classifier was fitted on, the autotuner
              beyond it (amendment 9; the default for BMM, lib.kernels.SPEC_TILES);
  hedged:     the ranged rule, but beyond that range a narrow GEMM takes the geometric mean of its forecasts with the
              classifier's and the autotuner's tile (amendment 10; the default for FC).
GEMM predictors may carry their own classifier (lib.amd's, over the AMD tiles): 'spec' then means it.
Vector ops (EW, softmax, LN) need no choice: lib.tiles.vec_tile is a spec-only launch rule.
"""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pandas as pd

from . import paths
from .data import load_kernels
from .features import add_features
from .ops import GEMM_OPS
from .tiles import GEMM_TILE_CANDIDATES, gemm_tile_from_name

CANDIDATES = np.array(sorted(GEMM_TILE_CANDIDATES), dtype=float)     # (C, 2): tile_m, tile_n
SPEC_COLS = ("num_sm", "peak_gflops", "mem_bw_gbps", "l2_mb", "mem_gb")
NEEDED_COLS = ("op", "B", "M", "N", "K", "H")
FOREST_TREES = 30
FOREST_MIN_LEAF = 5


def _gemm_fields(cfg_by_class: dict | None, field: str) -> list:
    """A NeuSightPredictor field of the BMM and FC entries of cfg_by_class (None for a config or a missing class)."""
    return [getattr((cfg_by_class or {}).get(c), field, None) for c in ("BMM", "FC")]


def tile_forest(cfg_by_class: dict | None):
    """The classifier the GEMM predictors of cfg_by_class carry (lib.amd: fitted over their own tile_candidates), which
    then chooses their spec-only tiles in place of autotune; None where they carry none (notebook 06)."""
    return next((f for f in _gemm_fields(cfg_by_class, "tile_forest") if f is not None), None)


def named_tiles(cfg_by_class: dict | None) -> set:
    """The (tile_m, tile_n) the GEMM predictors of cfg_by_class name as their own (lib.amd: the tiles of the AMD
    training GPUs); empty where none do (notebook 06)."""
    return set().union(*[set(t) for t in _gemm_fields(cfg_by_class, "tile_candidates") if t])


def tile_candidates(cfg_by_class: dict | None) -> np.ndarray:
    """(C, 2) tile_m, tile_n that autotune_tiles chooses among: the GEMM predictors' own (named_tiles), else
    CANDIDATES (notebook 06)."""
    tiles = named_tiles(cfg_by_class)
    return np.array(sorted(tiles), dtype=float) if tiles else CANDIDATES


def autotune_tiles(df: pd.DataFrame, predict_featured,
                   candidates: np.ndarray = CANDIDATES) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tile_m, tile_n, pred_ms) per GEMM row: the candidate with the lowest predicted latency.

    predict_featured(feat) -> ms over a featured table (lib.predictors.predict_featured); candidates: (C, 2) tile_m,
    tile_n (tile_candidates). A row whose every forecast is missing or not positive gets NaN (tile and ms): no forecast,
    rather than an infinite one.
    """
    n, c = len(df), len(candidates)
    # one table of n * c rows (every row with every candidate), predicted in one batched call;
    # only the columns the features need are repeated
    keep = [col for col in (*NEEDED_COLS, *SPEC_COLS, "peak_vec_gflops", "vendor", "device") if col in df.columns]
    rep = pd.DataFrame({col: np.repeat(df[col].to_numpy(), c) for col in keep})
    rep["tile_m"] = np.tile(candidates[:, 0], n)
    rep["tile_n"] = np.tile(candidates[:, 1], n)
    pred = predict_featured(add_features(rep, tiles="given")).reshape(n, c)
    pred = np.where(np.isfinite(pred) & (pred > 0), pred, np.inf)
    best = np.argmin(pred, axis=1)
    found = np.isfinite(pred[np.arange(n), best])
    pick = lambda values: np.where(found, values, np.nan)
    return pick(candidates[best, 0]), pick(candidates[best, 1]), pick(pred[np.arange(n), best])


def classifier_inputs(df: pd.DataFrame) -> np.ndarray:
    """log B, M, N, K, is_linear and the log spec, one row per GEMM kernel."""
    cols = [np.log(df[c].to_numpy(float)) for c in ("B", "M", "N", "K")]
    cols.append((df["op"].to_numpy() == "linear").astype(float))
    cols += [np.log(df[c].to_numpy(float)) for c in SPEC_COLS]
    return np.stack(cols, axis=1)


_FOREST: dict = {}


def oracle_tile_labels(df: pd.DataFrame, candidates: np.ndarray = CANDIDATES) -> np.ndarray:
    """Index into candidates of each row's oracle tile (parsed from kernel_name); -1 where none."""
    index = {tuple(t): i for i, t in enumerate(candidates.astype(int).tolist())}
    codes, names = pd.factorize(df["kernel_name"], use_na_sentinel=False)   # each distinct name parsed once
    per_name = np.array([index.get(t, -1) if (t := gemm_tile_from_name(n)) else -1 for n in names], dtype=int)
    return per_name[codes]


def fit_tile_classifier(df: pd.DataFrame, seed: int = 0, candidates: np.ndarray = CANDIDATES):
    """A random forest: GEMM shape + spec -> oracle tile index into candidates, fitted on df's rows."""
    from sklearn.ensemble import RandomForestClassifier
    label = oracle_tile_labels(df, candidates)
    keep = label >= 0
    # grown on two threads, as the predictors train: each tree's seed is drawn before the trees are dealt out, so the
    # trees are the same on any number of threads. It predicts on one, since the order in which threads add up the
    # trees' probabilities moves their last bits.
    forest = RandomForestClassifier(n_estimators=FOREST_TREES, min_samples_leaf=FOREST_MIN_LEAF,
                                    random_state=seed, n_jobs=2)
    forest.fit(classifier_inputs(df[keep]), label[keep])
    return forest.set_params(n_jobs=1)


# The forest is saved under build/cache, keyed like a predictor (lib.train.cache_key) by what it is made from: the
# kernel table's fingerprint, the code that labels and fits it, its candidates, seed, rows, and the scikit-learn and
# numpy that grew it. Fitting it (load the 120,000 training GEMM rows, grow 30 trees) took 2.5 s of a cold forecast's
# 5.2 s; loading it takes a tenth of a second, and a loaded forest is the fitted one, so every tile is as it was.
def forest_path(seed: int = 0, max_rows: int | None = None, *rows_from) -> Path:
    """build/cache/tile-forest-<key>.pkl, where tile_classifier(seed, max_rows) is saved; rows_from: what else the
    forest's rows are made from, for one fitted on more rows (lib.measured_training) (notebook 04)."""
    import sklearn
    from .data import fingerprint
    from .train import cache_key, code_text
    key = cache_key("tile-forest", seed, max_rows, list(GEMM_OPS), CANDIDATES, fingerprint("nvidia"),
                    sklearn.__version__, np.__version__,
                    *[code_text(f) for f in (fit_tile_classifier, classifier_inputs, oracle_tile_labels,
                                             gemm_tile_from_name)], *rows_from)
    return paths.CACHE / f"tile-forest-{key}.pkl"


def saved_forest(path: Path, rows, seed: int = 0):
    """fit_tile_classifier(rows(), seed), loaded from path where it was saved, else fitted and saved there; a file
    that is no saved forest fails with its path (notebook 04)."""
    if path.is_file():
        try:
            return pickle.loads(path.read_bytes())
        except Exception as e:   # a truncated or foreign file: name it, do not fit over it silently
            raise RuntimeError(f"{path}: not a saved tile classifier ({type(e).__name__}: {e}); "
                               "delete it to fit the classifier again") from None
    forest = fit_tile_classifier(rows(), seed)
    blob = pickle.dumps(forest, protocol=pickle.HIGHEST_PROTOCOL)
    path.parent.mkdir(parents=True, exist_ok=True)
    paths.write_atomic(path, lambda tmp: tmp.write_bytes(blob))
    return forest


def _training_gemms(seed: int, max_rows: int | None) -> pd.DataFrame:
    """The training GPUs' GEMM rows, max_rows of them drawn with seed (all where None or more)."""
    df = load_kernels(ops=list(GEMM_OPS), splits="train")
    return df.sample(n=max_rows, random_state=seed) if max_rows is not None and max_rows < len(df) else df


def tile_classifier(seed: int = 0, max_rows: int | None = None):
    """fit_tile_classifier on the training GPUs' GEMM rows (cached per process and under build/cache)."""
    key = (seed, max_rows)
    if key not in _FOREST:
        _FOREST[key] = saved_forest(forest_path(seed, max_rows), lambda: _training_gemms(seed, max_rows), seed)
    return _FOREST[key]


# A model trained as if one training GPU were never trained on (lib.selection.held_out_configs) must not choose that
# GPU's tiles with a classifier that learned them from its own kernel names: its classifier leaves that GPU's rows
# out too, and amendment 9 trusts it within the other four GPUs' spec range only
def held_out_classifier(gpu: str, seed: int = 0):
    """fit_tile_classifier on the training GPUs' GEMM rows but `gpu`'s (cached per process and under build/cache as
    tile_classifier is): the classifier of the models trained without `gpu` (notebooks 04 and 05)."""
    key = (seed, "without", gpu)
    if key not in _FOREST:
        def rows():
            df = _training_gemms(seed, None)
            return df[df["device"] != gpu]
        _FOREST[key] = saved_forest(forest_path(seed, None, "without", gpu), rows, seed)
    return _FOREST[key]


def classify_tiles(df: pd.DataFrame, forest=None, candidates: np.ndarray = CANDIDATES) -> tuple[np.ndarray, np.ndarray]:
    """(tile_m, tile_n) per GEMM row, predicted by `forest` (default: tile_classifier()) fitted over candidates."""
    idx = (tile_classifier() if forest is None else forest).predict(classifier_inputs(df))
    return candidates[idx, 0], candidates[idx, 1]


# Amendment 8 (lib.selection): a GEMM whose smaller output side min(M, K) is below NARROW_SIDE, the candidates'
# largest tile side, can run a tile partly empty, as the A100's libraries run 128 x 128 on every batched matmul; the
# autotuner's fastest forecast never picks such a tile, so these rows take the classifier's tile (what the training
# GPUs' libraries ran), the others the autotuner's ('hybrid' tiles)
NARROW_SIDE = 128


def narrow_gemms(df: pd.DataFrame) -> np.ndarray:
    """Whether each GEMM row's smaller output side min(M, K) is below NARROW_SIDE (amendment 8; notebook 04)."""
    return np.minimum(df["M"].to_numpy(float), df["K"].to_numpy(float)) < NARROW_SIDE


# Amendment 9 (lib.selection): the classifier knows what the libraries of the GPUs it was fitted on ran, and a forest
# asked about a GPU beyond them answers as the edge of their range does. A narrow GEMM takes its tile only on a GPU
# whose spec lies within that range on every field the classifier reads (ends included):
#     min over the fitted GPUs of f <= f(target) <= max over them,   for every f in SPEC_COLS
# ('ranged' tiles); elsewhere it takes the autotuner's
def spec_range(gpus) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) of each SPEC_COLS field over the named GPUs (lib.devices names; notebook 04)."""
    from .devices import device_by_name
    specs = np.array([[device_by_name(g).spec_columns()[c] for c in SPEC_COLS] for g in gpus], dtype=float)
    return specs.min(axis=0), specs.max(axis=0)


def within_range(df: pd.DataFrame, gpus=None) -> np.ndarray:
    """Whether each row's GPU spec lies within spec_range(gpus) on every SPEC_COLS field; gpus None: the NVIDIA
    training GPUs, which the default classifier was fitted on (amendment 9; notebook 04)."""
    from .devices import TRAIN_GPUS_NVIDIA
    lo, hi = spec_range(TRAIN_GPUS_NVIDIA if gpus is None else gpus)
    x = np.stack([df[c].to_numpy(float) for c in SPEC_COLS], axis=1)
    return ((x >= lo) & (x <= hi)).all(axis=1)


def classifier_gpus(cfg_by_class: dict | None) -> tuple | None:
    """The GPUs the classifier of cfg_by_class's GEMM predictors was fitted on (lib.measured_training's: six); None
    where they name none, the NVIDIA training GPUs (notebook 04)."""
    return next((g for g in _gemm_fields(cfg_by_class, "tile_gpus") if g is not None), None)
