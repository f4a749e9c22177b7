"""Training loop shared by every learned predictor, with a cache keyed by data, config and code
(introduced in notebook 03; used by notebooks 03 and 04).

Loss: mean relative error |pred - meas| / meas, the paper's MAPE-style loss, computed on
latencies so that every kernel counts the same whatever its size. AdamW, large batches,
early stopping on a validation split drawn from the training GPUs only (never OOD data).
"""
from __future__ import annotations

import ast
import copy
import functools
import hashlib
import inspect
import io
import json
import os
import re
import shutil
import sys
import textwrap
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from tqdm import tqdm  # text bars on stderr (tqdm.auto warns in notebooks without ipywidgets)

from . import numerics, paths, reference_weights

@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of one predictor; the paper used 8 x 512, ReLU, AdamW, 100 epochs."""
    layers: int = 8
    width: int = 512
    epochs: int = 100
    batch_size: int = 4096
    lr: float = 1e-3
    weight_decay: float = 1e-4
    patience: int = 10           # epochs without validation improvement before stopping
    val_fraction: float = 0.1    # share of the training shapes (whole groups) held out for early stopping ('shapes')
    seed: int = 0
    schedule_epochs: int | None = None   # length of the cosine learning-rate schedule; None = epochs


def set_seed(seed: int) -> None:
    """Deterministic torch / numpy state for one training run."""
    torch.manual_seed(seed)
    np.random.seed(seed)


def relative_error_loss(pred: torch.Tensor, meas: torch.Tensor) -> torch.Tensor:
    """mean(|pred - meas| / meas)."""
    return torch.mean(torch.abs(pred - meas) / meas)


def split_indices(groups: np.ndarray, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train/validation row indices; whole groups (e.g. one shape on all GPUs) go to one side."""
    rng = np.random.default_rng(seed)
    uniq = np.unique(groups)
    val_groups = set(rng.choice(uniq, size=max(1, int(len(uniq) * val_fraction)), replace=False).tolist())
    is_val = np.array([g in val_groups for g in groups])
    return np.flatnonzero(~is_val), np.flatnonzero(is_val)


def fit(model: torch.nn.Module, predict: Callable, inputs: dict[str, torch.Tensor],
        target_ms: torch.Tensor, groups: np.ndarray, cfg: TrainConfig, desc: str = "train",
        val_mask: np.ndarray | None = None) -> dict:
    """Train `model` in place so that predict(model, batch_inputs) ~ target_ms; returns history.

    `inputs` holds one tensor per name, first dimension = rows; `groups` labels rows that must
    stay on one side of the train/validation split. val_mask (bool per row, optional) fixes the
    validation rows instead, e.g. every row of one held-out training GPU (leave-one-GPU-out).
    With patience >= epochs, training runs all epochs and keeps the best-validation weights.
    """
    set_seed(cfg.seed)
    if val_mask is not None:
        val_mask = np.asarray(val_mask, dtype=bool)
        train_idx, val_idx = np.flatnonzero(~val_mask), np.flatnonzero(val_mask)
    else:
        train_idx, val_idx = split_indices(groups, cfg.val_fraction, cfg.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    # lr(epoch e) = lr * (1 + cos(pi * e / T)) / 2,  T = schedule_epochs (or epochs): a model retrained for
    # the E epochs a selection chose follows the schedule of the longer run that scored it (lib.selection._final)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(cfg.schedule_epochs or cfg.epochs, 1))
    gen = torch.Generator().manual_seed(cfg.seed)
    take = lambda idx: {k: v[idx] for k, v in inputs.items()}
    val_inputs, val_target = take(torch.as_tensor(val_idx)), target_ms[val_idx]
    best, best_state, stale, history = float("inf"), copy.deepcopy(model.state_dict()), 0, []
    start = time.perf_counter()
    bar = tqdm(range(cfg.epochs), desc=desc, file=sys.stderr, leave=False)
    for epoch in bar:
        model.train()
        order = torch.as_tensor(train_idx)[torch.randperm(len(train_idx), generator=gen)]
        for i in range(0, len(order), cfg.batch_size):
            idx = order[i:i + cfg.batch_size]
            loss = relative_error_loss(predict(model, take(idx)), target_ms[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        sched.step()
        model.eval()
        if len(val_idx) == 0:       # no validation rows: run every epoch, keep the last weights
            history.append({"epoch": epoch, "train_loss": loss.item(), "val_loss": float("nan")})
            best_state = copy.deepcopy(model.state_dict())
            continue
        with torch.no_grad():
            val = relative_error_loss(predict(model, val_inputs), val_target).item()
        history.append({"epoch": epoch, "train_loss": loss.item(), "val_loss": val})
        bar.set_postfix(val=f"{val:.3f}")
        if val < best - 1e-5:
            best, best_state, stale = val, copy.deepcopy(model.state_dict()), 0
        else:
            stale += 1
            if stale >= cfg.patience:
                break
    model.load_state_dict(best_state)
    return {"history": history, "best_val_loss": best, "train_seconds": time.perf_counter() - start,
            "epochs_run": len(history)}


# The code of this module that shapes a model's weights: every learned predictor's cache key reads these (their
# code_text) and no other part of lib.train, so editing the cache or the ledger below retrains nothing. `cached`
# also runs, and pins the thread count: that value names the cache folder (cache_folder), so it is covered too.
FIT_CODE = (fit, relative_error_loss, split_indices, set_seed)


# Code enters a cache key as its syntax tree written back out (ast.parse -> ast.unparse), with every
# docstring taken out: comments and docstrings do not reach the key, so fixing prose retrains nothing,
# while any change to what the code does gives a new key. A function's or class's source names the module
# constants it reads (MS_PER_S) but not their values, so "name = value" of each is appended (_read_constants).
def code_text(code) -> str:
    """Source of a module, class or function (or source text) without comments and docstrings (notebook 03)."""
    text = _without_docstrings(code if isinstance(code, str) else inspect.getsource(code))
    return text + _read_constants(code) if inspect.isfunction(code) or inspect.isclass(code) else text


# Keyed by the source text itself, so an edited file is parsed anew: notebook 05 builds a calibration key (26 whole
# modules) and a data fingerprint for each forecast, and parsing them each time took 40% of its forecasts' time.
@functools.lru_cache(maxsize=None)
def _without_docstrings(source: str) -> str:
    """ast.unparse of source text with every docstring taken out (code_text's work, once per distinct text)."""
    tree = ast.parse(textwrap.dedent(source))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                node.body = node.body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def _is_constant(value) -> bool:
    """A number, string, None, or a tuple / frozenset of them: a value whose repr is the value."""
    if isinstance(value, (tuple, frozenset)):
        return all(_is_constant(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str, bytes))


def names_read(obj) -> tuple[set, dict]:
    """(global names a function, or a class's methods, read, nested code included; the scope they resolve in) (notebook 03)."""
    if inspect.isclass(obj):
        funcs = [getattr(v, "__func__", v) for v in vars(obj).values()]
        funcs += [f for v in vars(obj).values() if isinstance(v, property) for f in (v.fget, v.fset) if f]
        scope = vars(sys.modules[obj.__module__])
    else:
        funcs, scope = [obj], obj.__globals__
    names, codes = set(), [f.__code__ for f in funcs if inspect.isfunction(f)]
    while codes:                       # nested functions, lambdas and comprehensions read globals too
        co = codes.pop()
        names |= set(co.co_names)
        codes += [c for c in co.co_consts if inspect.iscode(c)]
    return names, scope


def _read_constants(obj) -> str:
    """"\nname = repr(value)" of each module-level constant a function (or a class's methods) reads (notebook 03)."""
    names, scope = names_read(obj)
    return "".join(f"\n{n} = {scope[n]!r}" for n in sorted(names) if n in scope and _is_constant(scope[n]))


def cache_key(*parts) -> str:
    """sha256 (16 hex) over data arrays, configs and code objects (their code_text)."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, (np.ndarray, torch.Tensor)):
            h.update(np.ascontiguousarray(np.asarray(part)).tobytes())
        elif inspect.ismodule(part) or inspect.isclass(part) or inspect.isfunction(part):
            h.update(code_text(part).encode())
        elif hasattr(part, "__dataclass_fields__"):
            h.update(json.dumps(asdict(part), sort_keys=True).encode())
        else:
            h.update(json.dumps(part, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


# The CPU model names the folder too: on 2026-11-26 an Intel Xeon whose BLAS fingerprint equals the AMD EPYC's of the
# earlier reference run trained other weights from the same code and data (docs/reproducibility.md), so the fingerprint alone
# does not keep apart weights trained another way.
def cache_folder() -> str:
    """torch<v>-numpy<v>-pandas<v>-<cpu model>-blas-<fingerprint>-threads<N>: one folder per numeric environment
    (notebook 03)."""
    libraries = "-".join(f"{name}{v}" for name, v in numerics.library_versions().items())
    cpu = re.sub(r"[^a-z0-9]+", "-", numerics.cpu_model().lower().replace("(r)", "").replace("(tm)", "")).strip("-")
    return f"{libraries}-{cpu}-blas-{numerics.blas_fingerprint()}-threads{numerics.TRAIN_THREADS}"


def cache_dir() -> Path:
    """build/predictors/<cache_folder()>: this machine's trained models (notebook 03)."""
    return paths.BUILD / "predictors" / cache_folder()


def cache_path(name: str, key: str) -> Path:
    """build/predictors/<cache_folder()>/<name>-<key>.pt: weights trained another way never mix (notebook 03)."""
    return cache_dir() / f"{name}-{key}.pt"


# A notebook run's model ledger (lib.notebooks.run points $NEUSIGHT_MODEL_LEDGER at a file per notebook): one JSON
# line per model trained or loaded, with the seconds its training took (as recorded when it was trained), so that a
# run that loads cached models can still say what a cold run would add (figures/PROVENANCE.json), and whether it came
# from the committed weights (lib.reference_weights.sync keeps the ones the run used), and whether the caller used
# its weights or only its info (a selection run reads its history alone: sync commits such a model without weights).
def _log_model(path: Path, info: dict, was_cached: bool, weights: bool = True) -> None:
    """Append {model, cached, train_s, reference, sha256, weights} to the ledger named by $NEUSIGHT_MODEL_LEDGER, if
    any (notebooks 03-05)."""
    ledger = os.environ.get(paths.MODEL_LEDGER_ENV)
    if ledger:
        with open(ledger, "a") as f:
            f.write(json.dumps({"model": path.name, "cached": was_cached, "train_s": info.get("train_seconds"),
                                "reference": path.parent == reference_weights.folder(),
                                "sha256": reference_weights.file_hash(path), "weights": weights}) + "\n")


def saved(name: str, key: str) -> Path | None:
    """Where the model <name>-<key> is saved: the committed weights (lib.reference_weights) first, then this
    machine's cache; None if in neither (notebook 03)."""
    path = cache_path(name, key)
    return reference_weights.find(path.name) or (path if path.is_file() else None)


def copy_cached(name: str, old_key: str, key: str) -> bool:
    """Copy the model saved under old_key to key where only the former exists, in the committed weights (when used)
    and in this machine's cache (lib.data.MIGRATE_ENV)."""
    copied = False
    for folder in ([reference_weights.folder()] if reference_weights.enabled() else []) + [cache_dir()]:
        old, new = folder / f"{name}-{old_key}.pt", folder / f"{name}-{key}.pt"
        if old.is_file() and not new.is_file():
            paths.write_atomic(new, lambda tmp: shutil.copyfile(old, tmp))
            copied = True
    return copied


def load_saved(path: Path) -> dict:
    """{state, info} of a saved model (state None: committed without weights, lib.reference_weights.sync); a file
    that is none fails with its path (notebook 03)."""
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:   # a truncated or foreign file: name it, do not train over it silently
        raise RuntimeError(f"{path}: not a saved predictor ({type(e).__name__}: {e})") from None
    if not (isinstance(blob, dict) and {"state", "info"} <= blob.keys()):   # a loadable file of another layout
        raise RuntimeError(f"{path}: not a saved predictor (no 'state' and 'info' in it)")
    return blob


def cached(name: str, key: str, build: Callable[[], tuple[dict, dict]], weights: bool = True) -> tuple[dict, dict]:
    """(state, info) from the committed weights (lib.reference_weights) or cache_path(name, key), else build() on
    lib.numerics.TRAIN_THREADS threads and save atomically; info records the numeric environment it was trained in.
    weights=False: the caller reads info only, and a model committed without weights serves (state None)."""
    found = saved(name, key)
    blob = load_saved(found) if found else None
    if blob is not None and blob["state"] is None and weights:   # committed without weights: this machine's, or train
        found = cache_path(name, key) if cache_path(name, key).is_file() else None
        blob = load_saved(found) if found else None
    if blob is not None:
        _log_model(found, blob["info"], True, weights)
        return blob["state"], {**blob["info"], "cached": True}
    threads = torch.get_num_threads()
    torch.set_num_threads(numerics.TRAIN_THREADS)
    try:
        state, info = build()
    finally:
        torch.set_num_threads(threads)
    info = {**info, **numerics.numeric_env()}
    path = cache_path(name, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    torch.save({"state": state, "info": info}, buf)
    paths.write_atomic(path, lambda tmp: tmp.write_bytes(buf.getvalue()))
    _log_model(path, info, False, weights)
    return state, {**info, "cached": False}
