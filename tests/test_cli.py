"""lib.cli: the argparse helpers both command-line tools share."""
import argparse
import os

import pytest

from lib import cli


def test_file_path_refuses_a_pipe_and_passes_files_folders_and_missing_paths(tmp_path):
    f = tmp_path / "d.json"
    f.write_text("{}")
    for arg in (str(f), str(tmp_path), str(tmp_path / "missing.json")):   # the loaders name a folder or a missing file
        assert cli.file_path(arg) == arg
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(argparse.ArgumentTypeError, match="is not a regular file"):
        cli.file_path(str(fifo))


def test_file_path_names_a_path_the_file_system_refuses(tmp_path):
    long = str(tmp_path / ("x" * 300 + ".json"))
    with pytest.raises(argparse.ArgumentTypeError, match=r"x\.json: cannot be used as a file path \(File name too long\)"):
        cli.file_path(long)


class _Closed:
    """A standard output whose reader has quit."""
    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        pass


def test_a_failed_write_to_standard_output_leaves_no_file_behind(tmp_path, monkeypatch, capsys):
    written = tmp_path / "kernels.csv"
    written.write_text("this run's")
    monkeypatch.setattr("sys.stdout", _Closed())
    try:
        print("x")
    except OSError as e:
        cli.stdout_failed(e, written, None)
    assert not written.exists()
    assert capsys.readouterr().err == "error: cannot write the result to standard output (Broken pipe)\n"
