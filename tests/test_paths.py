"""lib.paths: where an output may be written, and atomic writes."""
import os

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
