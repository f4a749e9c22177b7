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
