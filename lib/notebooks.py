"""Run the numbered notebooks with papermill parameters, and record provenance (Makefile).

  python -m lib.notebooks run NB.ipynb PARAMS.yaml OUT.ipynb   execute (make figures)
  python -m lib.notebooks prepare smoke NB.ipynb ...           inject params/smoke for nbval (make test)
  python -m lib.notebooks provenance OUT.ipynb ...             figures/PROVENANCE.json, figures/predictors/
"""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import papermill as pm
import yaml
from traitlets.config import Config

from . import paths, reference_weights


def load_params(path: Path) -> dict:
    """Papermill parameters from a YAML file (an empty file means none)."""
    if not path.is_file():
        raise SystemExit(f"error: parameter file {path} is missing")
    return yaml.safe_load(path.read_text()) or {}


def run(notebook: Path, params_file: Path, out: Path) -> None:
    """Execute one notebook with its parameters; wall time written beside the output."""
    out.parent.mkdir(parents=True, exist_ok=True)
    # The kernel inherits this: tqdm bars inside cells cannot be watched here and would only fill the saved
    # outputs with hundreds of stderr lines; papermill's own bar (one per notebook, by cells) shows progress.
    os.environ["TQDM_DISABLE"] = "1"
    # ... and this: every model the notebook trains or loads goes to its ledger (lib.train; cold_estimate below)
    ledger = ledger_path(out)
    ledger.write_text("")   # a notebook that trains and loads nothing leaves an empty ledger
    out.with_suffix(".time.json").unlink(missing_ok=True)   # written on success only: a failed run is not a full one
    os.environ[paths.MODEL_LEDGER_ENV] = str(ledger.resolve())
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="neusight-kernel-") as sockets:
        pm.execute_notebook(str(notebook), str(out), parameters=load_params(params_file),
                            config=kernel_transport(Path(sockets)), cwd=str(paths.ROOT / "notebooks"),
                            kernel_name="python3", progress_bar=True)
    seconds = time.perf_counter() - start
    out.with_suffix(".time.json").write_text(json.dumps({"notebook": notebook.name, "wall_s": round(seconds, 1)}))
    print(f"{notebook.name}: {seconds:.0f} s", file=sys.stderr)


# A Unix socket's path holds at most 103 bytes on macOS (107 on Linux); jupyter_client appends "-N" per channel.
SOCKET_PATH_MAX_BYTES = 103


def kernel_transport(folder: Path) -> Config:
    """run()'s kernel sockets: Unix ones in `folder`, or localhost TCP where that path is too long (make figures)."""
    # Unix sockets in a private folder: no other user can connect to the kernel, and ipykernel prints no
    # "running over TCP without encryption" warning for every notebook
    ip = str(folder / "kernel")
    if len(os.fsencode(ip)) + len("-99") > SOCKET_PATH_MAX_BYTES:
        return Config()
    return Config({"KernelManager": {"transport": "ipc", "ip": ip}})


def ledger_path(out: Path) -> Path:
    """The model ledger beside an executed notebook: one JSON line per model its run trained or loaded (lib.train)."""
    return Path(out).with_suffix(".models.jsonl")


# A cold run trains every model a warm run loaded from the cache. Walking the notebooks in run order, a model first
# met as a cache hit adds the training seconds recorded when it was trained; one the run trained is in the wall time:
#   cold_s(notebook) = wall_s(notebook) + sum of train_s over the models it is the first notebook to load, cached
def cold_estimate(runs: list[tuple[str, float, list[dict]]]) -> dict:
    """{notebook: {wall_s, trained, loaded, cold_s}} of (notebook, wall_s, ledger records) in run order (docs/reproducibility.md)."""
    seen, out = set(), {}
    for name, wall_s, records in runs:
        trained = {r["model"] for r in records if not r["cached"]}
        loaded = {r["model"]: r["train_s"] or 0.0 for r in records if r["cached"] and r["model"] not in trained}
        added = sum(s for m, s in loaded.items() if m not in seen)
        seen |= trained | loaded.keys()
        out[name] = {"wall_s": wall_s, "trained": len(trained), "loaded": len(loaded), "cold_s": round(wall_s + added, 1)}
    return out


def prepare(kind: str, notebooks: list[Path]) -> None:
    """Copies of the notebooks with params/<kind>/ injected, under build/<kind>/, for nbval."""
    dest = paths.BUILD / kind
    dest.mkdir(parents=True, exist_ok=True)
    for nb in notebooks:
        params = load_params(paths.ROOT / "params" / kind / f"{nb.stem}.yaml")
        pm.execute_notebook(str(nb), str(dest / nb.name), parameters=params, prepare_only=True,
                            kernel_name="python3", progress_bar=False)


def provenance(outputs: list[Path]) -> None:
    """figures/PROVENANCE.json: commit, date, machine and wall time per notebook of the last full run; after a full
    run, figures/predictors/ holds the models it used (lib.reference_weights)."""
    from .numerics import numeric_env    # torch: imported only here
    from .train import cache_dir
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=paths.ROOT).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "lib", "notebooks", "params"],
                                capture_output=True, text=True, cwd=paths.ROOT).stdout.strip())
    times, runs, ledgers = {}, [], {}
    for out in outputs:
        t = Path(out).with_suffix(".time.json")
        if t.is_file():
            rec = json.loads(t.read_text())
            times[rec["notebook"]] = rec["wall_s"]
            ledger = ledger_path(out)
            if ledger.is_file():
                ledgers[ledger] = [json.loads(line) for line in ledger.read_text().splitlines()]
                runs.append((rec["notebook"], rec["wall_s"], ledgers[ledger]))
    # the cold estimate (and the committed weights) only when every notebook ran to its end and left a ledger (runs
    # before the ledger existed did not)
    cold = cold_estimate(runs) if runs and len(runs) == len(outputs) else {}
    record = {"commit": commit, "uncommitted_changes": dirty,
              "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "machine": {"platform": platform.platform(), "processor": platform.machine(),
                          "cpus": os.cpu_count(), "python": platform.python_version(),
                          **numeric_env()},
              "wall_s_per_notebook": times}
    if cold:   # a full run: its models become the committed weights (lib.reference_weights)
        used = {}
        for _, _, records in runs:
            for r in records:
                used.setdefault(r["model"], []).append(r)
        record["reference_weights"] = reference_weights.sync(used, cache_dir())
        for ledger, records in ledgers.items():   # with the hashes of the committed files sync rewrote
            text = "".join(json.dumps(r) + "\n" for r in records)
            if text != ledger.read_text():
                paths.write_atomic(ledger, lambda tmp: tmp.write_text(text))
        if record["reference_weights"]["left_out"]:
            print(f"warning: {len(record['reference_weights']['left_out'])} models above "
                  f"{reference_weights.REFERENCE_MAX_BYTES} bytes are not in {reference_weights.folder()}; "
                  "another machine trains them", file=sys.stderr)
        record["models_per_notebook"] = {nb: {k: v for k, v in c.items() if k != "wall_s"} for nb, c in cold.items()}
        record["cold_estimate_s"] = round(sum(c["cold_s"] for c in cold.values()), 1)
    target = paths.FIGURES / "PROVENANCE.json"
    if not cold and target.is_file():   # the committed weights are still the last full run's
        record.update({k: v for k, v in json.loads(target.read_text()).items() if k == "reference_weights"})
    paths.FIGURES.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(record, indent=2) + "\n")


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit(__doc__)
    cmd, args = argv[0], argv[1:]
    if cmd == "run" and len(args) == 3:
        run(Path(args[0]), Path(args[1]), Path(args[2]))
    elif cmd == "prepare" and len(args) >= 2:
        prepare(args[0], [Path(a) for a in args[1:]])
    elif cmd == "provenance":
        provenance([Path(a) for a in args])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
