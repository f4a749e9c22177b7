"""lib.paths: where an output may be written, and atomic writes."""
import os

import pytest

from lib import paths


def test_output_problem_names_each_case(tmp_path):
    (tmp_path / "in.csv").write_text("x")
    assert paths.output_problem(tmp_path / "out.csv") is None
    assert paths.output_problem(tmp_path / "in.csv") is None          # an existing file may be replaced
    assert "folder" in paths.output_problem(tmp_path)
    assert "folder" in paths.output_problem(f"{tmp_path}/new/")       # a trailing slash names a folder
    assert "does not exist" in paths.output_problem(tmp_path / "no" / "out.csv")
    os.mkfifo(tmp_path / "fifo")
    assert "not a regular file" in paths.output_problem(tmp_path / "fifo")
    assert "also an input" in paths.output_problem(tmp_path / "in.csv", (None, tmp_path / "in.csv"))
    os.symlink(tmp_path / "in.csv", tmp_path / "link.csv")
    assert "also an input" in paths.output_problem(tmp_path / "link.csv", (tmp_path / "in.csv",))
    os.symlink(tmp_path / "gone" / "out.csv", tmp_path / "dangling.csv")   # a link into a missing folder
    assert paths.output_problem(tmp_path / "dangling.csv") == f"folder {tmp_path / 'gone'} does not exist"
    # a file where a folder should be, and a name the file system refuses: said, not raised
    assert paths.output_problem(tmp_path / "in.csv" / "out.csv") == f"{tmp_path / 'in.csv'} is a file, not a folder"
    assert paths.output_problem(tmp_path / ("x" * 300)) == "cannot be used as a file path (File name too long)"


def test_write_atomic_writes_through_a_symlink(tmp_path):
    target, link = tmp_path / "target.csv", tmp_path / "link.csv"
    target.write_text("old")
    os.symlink(target, link)
    paths.write_atomic(link, lambda tmp: tmp.write_text("new"))
    assert link.is_symlink() and target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.csv", "target.csv"]   # no temporary left


def test_write_atomic_uses_a_temporary_file_of_its_own_process(tmp_path):
    seen = []
    paths.write_atomic(tmp_path / "m.pt", lambda tmp: (seen.append(tmp.name), tmp.write_text("w")))
    assert seen == [f".tmp-{os.getpid()}-m.pt"] and (tmp_path / "m.pt").read_text() == "w"


def test_an_input_named_another_way_is_still_the_output(tmp_path, monkeypatch):
    # relative and absolute names of one file are one file
    (tmp_path / "in.csv").write_text("x")
    monkeypatch.chdir(tmp_path)
    assert "also an input" in paths.output_problem("in.csv", (tmp_path / "in.csv",))
    assert "also an input" in paths.output_problem(tmp_path / "in.csv", ("./sub/../in.csv",))


def test_write_atomic_leaves_nothing_behind_when_the_write_fails(tmp_path):
    (tmp_path / "m.csv").write_text("old")

    def fail(tmp):
        tmp.write_text("half")
        raise RuntimeError("disk full")
    with pytest.raises(RuntimeError, match="disk full"):
        paths.write_atomic(tmp_path / "m.csv", fail)
    assert [p.name for p in tmp_path.iterdir()] == ["m.csv"] and (tmp_path / "m.csv").read_text() == "old"


def test_build_and_figures_folders_follow_their_variables(tmp_path):
    # NEUSIGHT_BUILD moves every cache (CACHE too), NEUSIGHT_FIGURES every figure and table (make test's build/smoke)
    import subprocess
    import sys
    env = {**os.environ, "NEUSIGHT_BUILD": str(tmp_path / "b"), "NEUSIGHT_FIGURES": str(tmp_path / "f")}
    out = subprocess.run([sys.executable, "-c", "from lib import paths; print(paths.BUILD, paths.CACHE, paths.FIGURES, "
                          "paths.TABLES)"], cwd=paths.ROOT, env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(tmp_path / "b"), str(tmp_path / "b" / "cache"), str(tmp_path / "f"),
                           str(tmp_path / "f" / "tables")]
