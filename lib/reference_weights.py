"""The trained predictors of the last full run, committed beside its figures (figures/predictors/), so that
`make figures` on another CPU loads the weights the committed tables came from (docs/reproducibility.md).

Training is chaotic in the last bit: the same code, data and seed train other weights on another CPU (an Intel Xeon
against the AMD EPYC that made the earlier reference run of 2026-11-25, `make repro`; the committed weights are now
the Xeon's, PROVENANCE.json's trained_on), and every table a trained model feeds moves
within the spread over training seeds. Prediction is not chaotic: it runs each model once, so a last-bit difference
stays in the last bit. So the full run's models are kept as files named like the machine cache's (<name>-<key>.pt,
lib.train.cache_path), and lib.train.cached loads one of them before it looks at this machine's cache: the key names
the data, config and code, so a model whose code or data changed has a new key, misses here and trains. A model the
run read only for its info (a selection run's history) is kept without its weights (sync).
NEUSIGHT_NO_REFERENCE=1 trains every model on this machine instead (as `make repro` does, and `make bench`'s training
benchmark).
"""
from __future__ import annotations

import contextlib
import filecmp
import functools
import hashlib
import os
import shutil
from collections import Counter
from pathlib import Path

from . import paths

NO_REFERENCE_ENV = "NEUSIGHT_NO_REFERENCE"   # set (to anything but '' or 0): train every model on this machine
# A guard against committing a giant by mistake: the largest models, the paper's predictor size (8 x 512,
# lib.selection.PAPER_CONFIGS), are about 7.4 MB each (1.8 million float32 weights), about 37 MB for the five of them
# (about an hour of training on the reference machine). Most of the others are 4 x 128 MLPs of about 0.2 MB each: the
# 672 models of the run of 2026-11-27 took 183 MB together, 121 MB since the 303 that only selection runs read are kept
# without weights (sync; figures/PROVENANCE.json, reference_weights).
REFERENCE_MAX_BYTES = 10_000_000


def folder() -> Path:
    """figures/predictors/: the committed weights of the last full run (notebooks 03-05)."""
    return paths.FIGURES / "predictors"


def enabled() -> bool:
    """Are the committed weights used (NEUSIGHT_NO_REFERENCE unset, empty or 0)?"""
    return os.environ.get(NO_REFERENCE_ENV, "").strip() in ("", "0")


@contextlib.contextmanager
def disabled():
    """Within: every model trains on this machine, as under NEUSIGHT_NO_REFERENCE=1 (lib.repro)."""
    before = os.environ.get(NO_REFERENCE_ENV)
    os.environ[NO_REFERENCE_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[NO_REFERENCE_ENV]
        else:
            os.environ[NO_REFERENCE_ENV] = before


def find(file_name: str) -> Path | None:
    """The committed model <name>-<key>.pt, if there is one and it is to be used, else None (lib.train.cached)."""
    path = folder() / file_name
    return path if enabled() and path.is_file() else None


def digest() -> str:
    """'off', or a hash of the committed models' names and bytes: which weights a lookup uses (lib.forecast's
    calibration key)."""
    return _digest(folder(), enabled())


@functools.lru_cache(maxsize=None)   # once per process: the folder changes only at the end of a full run
def _digest(where: Path, on: bool) -> str:
    h = hashlib.sha256()
    for f in (committed_files(where) if on else []):
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:16] if on else "off"


def committed_files(where: Path | None = None) -> list[Path]:
    """The saved models in folder() (not a temporary file of lib.paths.write_atomic), sorted by name."""
    return sorted(p for p in (where or folder()).glob("*.pt") if not p.name.startswith("."))


def file_hash(path: Path) -> str:
    """sha256 of a saved model's bytes, 16 hex (the ledger's record of what a run loaded; sync checks it)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


# After a full run the committed folder holds exactly the models the run used, each from where lib.train.cached found
# it (its ledger records say: the committed folder, or this machine's cache, where it was also trained, and the hash
# of what it loaded), less those above REFERENCE_MAX_BYTES. A model whose every use read its info alone (weights:
# false, a selection run's history) is kept without weights: {"state": None, "info": info}, a few kB instead of about
# 0.2 MB. Nothing is copied or removed unless every model is still where the run took it, with the bytes it had.
def sync(used: dict[str, list[dict]], machine_cache: Path) -> dict:
    """Make folder() hold the models of `used` ({file name: its ledger records}) from itself or `machine_cache`;
    {models, bytes, without_weights, trained_on, left_out}. The records of a committed file it rewrites take the
    file's new sha256."""
    import torch
    from .train import load_saved
    dest = folder()
    plan, left_out, problems = {}, [], []
    for name, records in sorted(used.items()):
        committed, own = dest / name, machine_cache / name
        where = lambda r: committed if r.get("reference", False) else own
        sources = [f for f in (committed, own) if any(where(r) == f for r in records)]
        weights = any(r.get("weights", True) for r in records)   # ledgers before 2026-11-28 have no "weights"
        if not all(f.is_file() for f in sources):
            problems.append(f"{name} is no longer in {' or '.join(str(f.parent) for f in sources)}")
            continue
        hashes = {f: file_hash(f) for f in sources}
        moved = [where(r) for r in records if "sha256" in r and r["sha256"] != hashes[where(r)]]   # none before 11-27
        if moved:   # checked before any file is loaded: a file replaced since the run may not load at all
            problems.append(f"{name}: {moved[0].parent} holds other bytes than the run loaded")
            continue
        # this machine's cache holds whole models (lib.train.cached); only a committed one may be without weights
        full = [f for f in sources if f == own or has_weights(f)]
        if len(full) == 2 and not filecmp.cmp(committed, own, shallow=False):
            problems.append(f"{name}: the run loaded the committed model and this machine's, and they differ")
        elif weights and not full:
            problems.append(f"{name}: the run used its weights, and {sources[0]} holds none")
        elif weights and full[0].stat().st_size > REFERENCE_MAX_BYTES:
            left_out.append(name)
        else:
            # (source, weights used, strip): a model no use read the weights of loses them, if its source has them
            plan[name] = (full[0], True, False) if weights else (sources[0], False, sources[0] in full)
    if problems:
        raise ValueError(f"{dest}: cannot keep the models of this run ({len(problems)}; first: {problems[0]}); "
                         "rerun its notebooks (rm build/notebooks/*.ipynb; make figures)")
    dest.mkdir(parents=True, exist_ok=True)
    for name, (source, _, strip) in plan.items():
        if strip:
            blob = {"state": None, "info": load_saved(source)["info"]}
            paths.write_atomic(dest / name, lambda tmp: torch.save(blob, tmp))
        elif source != dest / name:
            paths.write_atomic(dest / name, lambda tmp: shutil.copyfile(source, tmp))
        else:
            continue
        # the committed file is now what this sync made of it: its records say so, so that a sync over the same
        # ledgers (a `make figures` that reruns no notebook; lib.notebooks.provenance writes them back) finds it
        new_hash = file_hash(dest / name)
        for r in used[name]:
            if r.get("reference", False) and "sha256" in r:
                r["sha256"] = new_hash
    for stale in committed_files(dest):
        if stale.name not in plan:
            stale.unlink()
    kept = [dest / name for name in plan]
    return {"models": len(plan), "bytes": sum(f.stat().st_size for f in kept),
            "without_weights": sum(not w for _, w, _ in plan.values()), "trained_on": trained_on(kept),
            "left_out": left_out}


def has_weights(path: Path) -> bool:
    """Does a saved model hold its weights (not only its info, as sync keeps a model used for its history alone)?"""
    from .train import load_saved
    return load_saved(path)["state"] is not None


def trained_on(files: list[Path]) -> dict:
    """{CPU model: number of these saved predictors it trained} (lib.numerics.numeric_env; 'unrecorded' before 2026-11-26)."""
    from .train import load_saved
    counts = Counter(load_saved(f)["info"].get("cpu_model", "unrecorded") for f in files)
    return dict(sorted(counts.items()))
