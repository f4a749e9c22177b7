"""What the command-line tools share: an argument parser whose errors are one line, and what to do when the answer
cannot be written to standard output."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


class Parser(argparse.ArgumentParser):
    """argparse.ArgumentParser that reports a bad argument in one line on stderr and exits 2 (DESIGN.md's contract)."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def file_path(arg: str) -> str:
    """argparse type of a JSON input that is read more than once: a pipe (`<(cat x.json)`) is refused by name."""
    # A missing path or a folder passes: the loaders name those. A pipe would be found empty at its second read.
    path = Path(arg)
    try:
        special = path.exists() and not path.is_file() and not path.is_dir()
    except OSError as e:   # e.g. a name longer than the file system allows
        raise argparse.ArgumentTypeError(f"{arg}: cannot be used as a file path ({e.strerror or e})") from None
    if special:
        raise argparse.ArgumentTypeError(f"{arg} is not a regular file (a pipe or device); give the JSON file's path")
    return arg


def stdout_failed(error: OSError, *written) -> None:
    """After a failed write of the result to standard output: a one-line error, none of the files this run `written`
    left behind, and no second failure when Python flushes standard output at exit."""
    print(f"error: cannot write the result to standard output ({error.strerror or error})", file=sys.stderr)
    for path in written:
        if path:
            Path(path).unlink(missing_ok=True)
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):   # no file descriptor behind sys.stdout (a test's capture)
        pass
