"""Repository hygiene: source notebooks are stripped, each has a parameters cell and both param files."""
import json
import os
import subprocess
import sys

import pytest

from lib import paths

NOTEBOOKS = sorted((paths.ROOT / "notebooks").glob("[0-9]*.ipynb"))


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stripped_and_parameterized(nb):
    cells = json.loads(nb.read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), \
        f"{nb.name} has outputs: run `nbstripout {nb}`"
    assert "parameters" in code[0].get("metadata", {}).get("tags", []), f"{nb.name}: first code cell must be tagged 'parameters'"
    for kind in ("smoke", "full"):
        assert (paths.ROOT / "params" / kind / f"{nb.stem}.yaml").is_file(), f"params/{kind}/{nb.stem}.yaml missing"


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found"


def test_provenance_records_the_machine(tmp_path, monkeypatch):
    # the CPU model too: the same vector ISA on another CPU trained other weights (README, Reproducibility)
    from lib import notebooks
    monkeypatch.setattr(paths, "FIGURES", tmp_path)
    notebooks.provenance([])
    machine = json.loads((tmp_path / "PROVENANCE.json").read_text())["machine"]
    assert machine["cpu_model"].strip() and machine["cpu_model"] == notebooks._cpu_model()
    assert {"train_threads", "cpu_capability", "cpus"} <= set(machine)
    assert len(machine["blas_fingerprint"]) == 12 and machine["blas_fingerprint"] == notebooks.blas_fingerprint()


def test_blas_fingerprint_tells_mkl_code_paths_apart():
    # MKL_CBWR=COMPATIBLE makes MKL use its vendor-neutral kernels, which sum in another order
    from lib import notebooks
    code = "from lib.notebooks import blas_fingerprint; print(blas_fingerprint())"
    env = {**os.environ, "MKL_CBWR": "COMPATIBLE"}
    other = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           cwd=paths.ROOT, check=True).stdout.strip()
    assert len(other) == 12 and other != notebooks.blas_fingerprint()
