"""What the command-line tools share: an argument parser whose errors are one line, and what to do when the answer
cannot be written to standard output."""
from __future__ import annotations

import argparse
import os
import re
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


def _words(name: str) -> frozenset:
    """A name's words in lower case: 'NVIDIA_H100_80GB_HBM3' and 'nvidia h100-80gb hbm3' give the same four."""
    return frozenset(re.findall(r"[a-z0-9]+", name.lower()))


def named_file(arg: str, files: list, what: str) -> str:
    """argparse type of a JSON input given by its path or by the name of one of the known `files`: the path."""
    # A name matches a file by its words (case, '_', '-' and spaces aside) against the file name without '.json': the
    # file whose words are exactly the name's, else the files whose words include all of them ('H100', 'a100 80gb'),
    # else those with a word that begins with each of the name's words ('A100-80' for A100_80GB_PCIe); one must remain.
    try:
        a_path = Path(arg).exists() or arg.lower().endswith(".json") or "/" in arg or os.sep in arg
    except OSError:   # a name the file system refuses: file_path says so
        a_path = True
    if a_path:
        return file_path(arg)   # the loaders name a missing file
    words = _words(arg)
    exact = [f for f in files if _words(f.stem) == words]
    found = exact or ([f for f in files if words <= _words(f.stem)] if words else [])
    found = found or ([f for f in files if all(any(v.startswith(w) for v in _words(f.stem)) for w in words)]
                      if words else [])
    if len(found) == 1:
        return str(found[0])
    if found:
        raise argparse.ArgumentTypeError(f"'{arg}' names {len(found)} known {what}s ({', '.join(f.stem for f in found)}); "
                                         "give more of the name, or the JSON file's path")
    known = ", ".join(sorted(f.stem for f in files)) or "none (run `make data` first)"
    raise argparse.ArgumentTypeError(f"'{arg}' is neither a file nor the name of a known {what}; known: {known}")


def device_arg(arg: str) -> str:
    """argparse type of --device: a device JSON's path, or a known GPU's name ('H100', 'Tesla T4', 'NVIDIA_H200')."""
    from .devices import device_files   # lazy: the other tools need no device list
    return named_file(arg, device_files(), "GPU")


def model_arg(arg: str) -> str:
    """argparse type of --model: a config.json's path, a folder holding one (a Hugging Face download), or a known
    config's name ('gpt3_27', 'llama3_8b')."""
    from . import paths
    files = [f for d in (paths.MODEL_CONFIGS, paths.MODELS_ADDED) if d.is_dir() for f in sorted(d.glob("*.json"))]
    path = named_file(arg, files, "model config")
    try:
        in_folder = Path(path).is_dir() and (Path(path) / "config.json").is_file()
    except OSError:   # the loader names the path
        in_folder = False
    return str(Path(path) / "config.json") if in_folder else path


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
