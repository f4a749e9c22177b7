"""What the two command-line tools (lib.kernels, lib.forecast) share: an argument parser whose errors are one line."""
from __future__ import annotations

import argparse


class Parser(argparse.ArgumentParser):
    """argparse.ArgumentParser that reports a bad argument in one line on stderr and exits 2 (DESIGN.md's contract)."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")
