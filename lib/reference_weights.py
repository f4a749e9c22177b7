"""The trained predictors of the last full run, committed beside its figures (figures/predictors/), so that
`make figures` on another CPU loads the weights the committed tables came from (README, Reproducibility).

Training is chaotic in the last bit: the same code, data and seed train other weights on another CPU (an Intel Xeon
against the AMD EPYC that made the run of 2026-11-25, `make repro`), and every table a trained model feeds moves
within the spread over training seeds. Prediction is not chaotic: it runs each model once, so a last-bit difference
stays in the last bit. So the full run's models are kept
as files named like the machine cache's (<name>-<key>.pt, lib.train.cache_path), and lib.train.cached loads one of
them before it looks at this machine's cache: the key names the data, config and code, so a model whose code or data
changed has a new key, misses here and trains. NEUSIGHT_NO_REFERENCE=1 trains every model on this machine instead
(as `make repro` does).
"""
from __future__ import annotations

import contextlib
import os
import shutil
from collections import Counter
from pathlib import Path

from . import paths

NO_REFERENCE_ENV = "NEUSIGHT_NO_REFERENCE"   # set (to anything but '' or 0): train every model on this machine
# A guard against committing a giant by mistake: the largest models, the paper's predictor size (8 x 512,
# lib.selection.PAPER_CONFIGS), are about 7.4 MB each (1.8 million float32 weights), about 37 MB for the five of them
# (67 minutes of training on the reference machine); the 660 others take about 7 MB together.
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


# After a full run: the committed folder holds exactly the models the run used (each taken from where lib.train.cached
# found it: the committed folder first, then this machine's cache), less those above REFERENCE_MAX_BYTES.
def sync(models: list[str], machine_cache: Path) -> dict:
    """Make folder() hold `models` (file names) from itself or `machine_cache`; {models, bytes, left_out, missing}."""
    dest = folder()
    dest.mkdir(parents=True, exist_ok=True)
    kept, left_out, missing = [], [], []
    for name in models:
        target, source = dest / name, machine_cache / name
        if find(name) is None:   # the run trained it, or loaded it from this machine's cache
            if not source.is_file():
                missing.append(name)   # the run used it, but neither folder holds it now (build/ cleaned since)
                continue
            if source.stat().st_size > REFERENCE_MAX_BYTES:
                left_out.append(name)
                continue
            paths.write_atomic(target, lambda tmp: shutil.copyfile(source, tmp))
        kept.append(name)
    for stale in set(p.name for p in dest.glob("*.pt")) - set(kept):
        (dest / stale).unlink()
    return {"models": len(kept), "bytes": sum((dest / n).stat().st_size for n in kept),
            "trained_on": trained_on([dest / n for n in kept]), "left_out": left_out, "missing": missing}


def trained_on(files: list[Path]) -> dict:
    """{CPU model: number of these saved predictors it trained} (lib.train.numeric_env; 'unrecorded' before 2026-11-26)."""
    import torch
    counts = Counter(torch.load(f, map_location="cpu", weights_only=False)["info"].get("cpu_model", "unrecorded")
                     for f in files)
    return dict(sorted(counts.items()))
