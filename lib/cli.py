"""What the two command-line tools (lib.kernels, lib.forecast) share: an argument parser whose errors are one line."""
from __future__ import annotations

import argparse
from pathlib import Path


class Parser(argparse.ArgumentParser):
    """argparse.ArgumentParser that reports a bad argument in one line on stderr and exits 2 (DESIGN.md's contract)."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def file_path(arg: str) -> str:
    """argparse type of a JSON input that is read more than once: a pipe (`<(cat x.json)`) is refused by name."""
    # A missing path or a folder passes: the loaders name those. A pipe would be found empty at its second read.
    path = Path(arg)
    if path.exists() and not path.is_file() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{arg} is not a regular file (a pipe or device); give the JSON file's path")
    return arg
