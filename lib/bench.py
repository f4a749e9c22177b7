"""`make bench`: speed targets measured in fresh processes, written to figures/tables/bench.csv.

Cold numbers run in a subprocess whose build folder ($NEUSIGHT_BUILD) is a new temporary
directory, so no cache helps them; cached numbers reuse the repository's build/.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from . import paths

PY = sys.executable


def timed(code: str, build: Path | None = None) -> tuple[float, str]:
    """Wall seconds of `python -c code` in a fresh process (its stdout returned too)."""
    env = dict(os.environ)
    if build is not None:
        env["NEUSIGHT_BUILD"] = str(build)
    start = time.perf_counter()
    out = subprocess.run([PY, "-c", code], cwd=paths.ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(f"benchmark step failed:\n{code}\n{out.stderr[-2000:]}")
    return seconds, out.stdout


def timed_cmd(args: list[str], build: Path | None = None) -> float:
    """Wall seconds of one command line in a fresh process."""
    env = dict(os.environ)
    if build is not None:
        env["NEUSIGHT_BUILD"] = str(build)
    start = time.perf_counter()
    out = subprocess.run(args, cwd=paths.ROOT, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"benchmark command failed: {' '.join(args)}\n{out.stderr[-2000:]}")
    return time.perf_counter() - start


def bench_setup() -> list[dict]:
    """Environment set-up time, as recorded by the Makefile when it created .venv."""
    f = paths.ROOT / ".venv" / "setup_seconds"
    value = float(f.read_text()) if f.is_file() else float("nan")
    return [{"metric": "env_setup", "value": value, "unit": "s", "target": "",
             "note": "pip install -r requirements.txt into a new .venv (recorded by make setup)"}]


def bench_data() -> list[dict]:
    """Tidy kernel table load: cold (builds the parquet cache) and cached."""
    code = "import time; t=time.perf_counter(); from lib.data import load_kernels; df=load_kernels(); print(len(df), time.perf_counter()-t)"
    with tempfile.TemporaryDirectory() as tmp:
        _, out_cold = timed(code, Path(tmp))
        _, out_warm = timed(code, Path(tmp))
    rows, cold = out_cold.split()
    _, warm = out_warm.split()
    return [{"metric": "data_load_cold", "value": float(cold), "unit": "s", "target": "",
             "note": f"{rows} kernel rows, all NVIDIA CSVs, no cache"},
            {"metric": "data_load_cached", "value": float(warm), "unit": "s", "target": "",
             "note": "parquet cache under build/cache"}]


SECTIONS = [bench_setup, bench_data]


def main() -> None:
    rows = []
    for section in SECTIONS:
        print(f"bench: {section.__name__} ...", file=sys.stderr)
        rows += section()
    df = pd.DataFrame(rows)
    paths.TABLES.mkdir(parents=True, exist_ok=True)
    df.to_csv(paths.TABLES / "bench.csv", index=False, float_format="%.4g")
    print(df.to_string(index=False))


if __name__ == "__main__":
    main()
