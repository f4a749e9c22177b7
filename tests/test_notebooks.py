"""Repository hygiene: source notebooks are stripped, each has a parameters cell and both param files."""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

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
    ids = [c.get("id") for c in cells]
    assert all(ids) and len(set(ids)) == len(ids), f"{nb.name}: every cell needs its own id (nbformat 4.5)"


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found"


def test_provenance_records_the_machine(tmp_path, monkeypatch):
    # the CPU model too: the same vector ISA on another CPU trained other weights (docs/reproducibility.md)
    from lib import notebooks, numerics
    monkeypatch.setattr(paths, "FIGURES", tmp_path)
    notebooks.provenance([])
    machine = json.loads((tmp_path / "PROVENANCE.json").read_text())["machine"]
    assert machine["cpu_model"].strip() and machine["cpu_model"] == numerics.cpu_model()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():   # read independently: the first 'model name' line
        names = [ln.split(":", 1)[1].strip() for ln in cpuinfo.read_text().splitlines() if ln.startswith("model name")]
        assert machine["cpu_model"] == (names[0] if names else machine["cpu_model"])
    assert {"train_threads", "cpu_capability", "cpus"} <= set(machine)
    assert machine["mkl_cbwr"] == "COMPATIBLE"
    assert len(machine["blas_fingerprint"]) == 12 and machine["blas_fingerprint"] == numerics.blas_fingerprint()


def _fingerprint_in_subprocess(**env_changes) -> str:
    """blas_fingerprint() of a fresh python that imports lib, with MKL_CBWR as given (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    env.update({k: v for k, v in env_changes.items() if v is not None})
    code = "import torch; from lib.numerics import blas_fingerprint; print(blas_fingerprint())"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=paths.ROOT, check=True).stdout.strip()


def test_importing_lib_pins_mkl_to_its_vendor_neutral_kernels():
    # MKL_CBWR=COMPATIBLE unless the user set it; AUTO (MKL's default, kernels picked by CPU) sums in another order
    from lib import numerics
    assert os.environ["MKL_CBWR"] == "COMPATIBLE"
    unset, compatible = _fingerprint_in_subprocess(MKL_CBWR=None), _fingerprint_in_subprocess(MKL_CBWR="COMPATIBLE")
    assert len(unset) == 12 and unset == compatible == numerics.blas_fingerprint()
    assert _fingerprint_in_subprocess(MKL_CBWR="AUTO") != compatible


def test_cold_estimate_by_hand():
    # A trains m1 (5 s) and loads m2 (trained earlier, 7 s): 10 + 7. B loads m1 (A trained it), m2 (counted in A)
    # and m3 twice (3 s): 4 + 3. C loads nothing: 2.
    from lib import notebooks
    rec = lambda m, cached, s: {"model": m, "cached": cached, "train_s": s}
    runs = [("A", 10.0, [rec("m1", False, 5.0), rec("m2", True, 7.0)]),
            ("B", 4.0, [rec("m1", True, 5.0), rec("m2", True, 7.0), rec("m3", True, 3.0), rec("m3", True, 3.0)]),
            ("C", 2.0, [])]
    got = notebooks.cold_estimate(runs)
    assert {n: c["cold_s"] for n, c in got.items()} == {"A": 17.0, "B": 7.0, "C": 2.0}
    assert (got["A"]["trained"], got["A"]["loaded"], got["B"]["trained"], got["B"]["loaded"]) == (1, 1, 0, 3)
    # a model trained and then loaded again in one notebook is in its wall time once: trained, not loaded too
    again = notebooks.cold_estimate([("D", 10.0, [rec("m4", False, 5.0), rec("m4", True, 5.0)])])["D"]
    assert (again["trained"], again["loaded"], again["cold_s"]) == (1, 0, 10.0)


def test_the_runner_reads_notebook_parameters_and_output_in_that_order(monkeypatch):
    from lib import notebooks
    calls = []
    monkeypatch.setattr(notebooks, "run", lambda *a: calls.append(a))
    notebooks.main(["run", "nb.ipynb", "params/full/nb.yaml", "build/notebooks/nb.ipynb"])
    assert [tuple(map(str, c)) for c in calls] == [("nb.ipynb", "params/full/nb.yaml", "build/notebooks/nb.ipynb")]


def test_ledger_logs_a_trained_then_a_loaded_model(tmp_path, monkeypatch):
    import torch
    from lib import reference_weights, train
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    ledger = tmp_path / "nb.models.jsonl"
    monkeypatch.setenv(paths.MODEL_LEDGER_ENV, str(ledger))
    build = lambda: ({"w": torch.zeros(2)}, {"train_seconds": 1.5})
    train.cached("toy", "k0", build)
    train.cached("toy", "k0", lambda: pytest.fail("a cached model was rebuilt"))
    lines = [json.loads(ln) for ln in ledger.read_text().splitlines()]
    sha = reference_weights.file_hash(train.cache_path("toy", "k0"))
    assert lines == [{"model": "toy-k0.pt", "cached": False, "train_s": 1.5, "reference": False, "sha256": sha,
                      "weights": True},
                     {"model": "toy-k0.pt", "cached": True, "train_s": 1.5, "reference": False, "sha256": sha,
                      "weights": True}]


def test_provenance_adds_the_cold_estimate_only_when_every_run_has_a_ledger(tmp_path, monkeypatch):
    from lib import notebooks, train
    monkeypatch.setattr(paths, "FIGURES", tmp_path)
    monkeypatch.setattr(paths, "BUILD", tmp_path / "build")
    train.cache_dir().mkdir(parents=True)
    import torch   # the model of the ledger below, committed by the full run
    torch.save({"state": {}, "info": {}}, train.cache_dir() / "m")
    outs = [tmp_path / "01-a.ipynb", tmp_path / "02-b.ipynb"]
    for out, wall in zip(outs, (3.0, 4.0)):
        out.with_suffix(".time.json").write_text(json.dumps({"notebook": out.name, "wall_s": wall}))
    notebooks.ledger_path(outs[1]).write_text(json.dumps({"model": "m", "cached": True, "train_s": 60.0}) + "\n")
    notebooks.provenance(outs)
    assert "cold_estimate_s" not in json.loads((tmp_path / "PROVENANCE.json").read_text())   # 01 ran without one
    notebooks.ledger_path(outs[0]).write_text("")
    notebooks.provenance(outs)
    record = json.loads((tmp_path / "PROVENANCE.json").read_text())
    assert record["cold_estimate_s"] == 67.0
    assert record["models_per_notebook"]["02-b.ipynb"] == {"trained": 0, "loaded": 1, "cold_s": 64.0}


def test_run_starts_an_empty_ledger_and_points_the_kernel_at_it(tmp_path, monkeypatch):
    # a notebook that loads no model still leaves a ledger, so PROVENANCE can add up every notebook
    from lib import notebooks
    params = tmp_path / "p.yaml"
    params.write_text("")
    out = tmp_path / "nb.ipynb"
    notebooks.ledger_path(out).write_text('{"stale": true}\n')
    seen = {}
    monkeypatch.setattr(notebooks.pm, "execute_notebook", lambda *a, **k: seen.update(env=os.environ[paths.MODEL_LEDGER_ENV]))
    for name in (paths.MODEL_LEDGER_ENV, "TQDM_DISABLE"):   # run() sets both: restored after the test
        monkeypatch.setenv(name, "before")
    notebooks.run(tmp_path / "nb-source.ipynb", params, out)
    assert seen["env"] == str(notebooks.ledger_path(out).resolve()) and notebooks.ledger_path(out).read_text() == ""
    assert json.loads(out.with_suffix(".time.json").read_text())["notebook"] == "nb-source.ipynb"


def test_a_failed_run_leaves_no_time_record_so_provenance_sees_no_full_run(tmp_path, monkeypatch):
    # a notebook that fails halfway leaves a partial ledger: the committed weights must not follow it
    from lib import notebooks
    params = tmp_path / "p.yaml"
    params.write_text("")
    out = tmp_path / "nb.ipynb"
    out.with_suffix(".time.json").write_text(json.dumps({"notebook": "nb.ipynb", "wall_s": 1.0}))   # an earlier run's

    def fail(*a, **k):
        raise RuntimeError("a cell failed")

    monkeypatch.setattr(notebooks.pm, "execute_notebook", fail)
    monkeypatch.setenv(paths.MODEL_LEDGER_ENV, "before")
    with pytest.raises(RuntimeError):
        notebooks.run(tmp_path / "nb.ipynb", params, out)
    assert not out.with_suffix(".time.json").exists()
    monkeypatch.setattr(paths, "FIGURES", tmp_path / "figures")
    notebooks.provenance([out])
    assert "reference_weights" not in json.loads((tmp_path / "figures" / "PROVENANCE.json").read_text())


def test_run_executes_over_private_sockets_and_leaves_none_behind(tmp_path):
    # a real kernel, reached over Unix sockets in a temporary folder, so ipykernel does not warn of unencrypted TCP.
    # In its own process, as make figures runs it: a kernel client's zmq context, collected later inside a
    # long-lived test process, can block that process for good
    import nbformat
    kernelspec = {"name": "python3", "language": "python", "display_name": "Python 3"}
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 20", metadata={"tags": ["parameters"]}),
                                         nbformat.v4.new_code_cell("print(x + 1)")], metadata={"kernelspec": kernelspec})
    nbformat.write(nb, tmp_path / "nb.ipynb")
    (tmp_path / "p.yaml").write_text("x: 41\n")
    out = tmp_path / "out" / "nb.ipynb"
    # tmp_path (under xdist) or a long TMPDIR is too long for a socket's path: the kernel would stay on TCP
    with tempfile.TemporaryDirectory(prefix="nb-", dir="/tmp") as short:
        run = subprocess.run([sys.executable, "-m", "lib.notebooks", "run", str(tmp_path / "nb.ipynb"),
                              str(tmp_path / "p.yaml"), str(out)], cwd=paths.ROOT, env=dict(os.environ, TMPDIR=short),
                             capture_output=True, text=True, timeout=300)
        assert list(Path(short).iterdir()) == []
    assert run.returncode == 0, run.stderr
    assert [o.get("text") for o in nbformat.read(out, as_version=4).cells[-1].outputs] == ["42\n"]
    assert "without encryption" not in run.stderr


def test_a_folder_too_long_for_a_unix_socket_keeps_the_kernel_on_tcp():
    from lib import notebooks
    short = notebooks.kernel_transport(Path("/tmp/neusight-kernel-x"))
    assert short.KernelManager.transport == "ipc" and short.KernelManager.ip == "/tmp/neusight-kernel-x/kernel"
    deep = Path("/tmp") / ("d" * (notebooks.SOCKET_PATH_MAX_BYTES - len("/tmp/kernel-99")))   # one byte too many
    assert "transport" not in notebooks.kernel_transport(deep).KernelManager
    assert notebooks.kernel_transport(deep.with_name(deep.name[1:])).KernelManager.transport == "ipc"
