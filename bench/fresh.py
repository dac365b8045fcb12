"""Timing a worker in a fresh interpreter whose ci_matrix comes from a given tree, so that
this tree and a baseline checkout are compared in the same run, each with a cold import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def first_figure(tree: Path, worker: str, *args: str) -> float:
    """Run `worker` (Python source) with `args` in a fresh interpreter importing ci_matrix from
    `tree`; the first number it prints."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", worker, *args], env=env, cwd=tree,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return float(done.stdout.split()[0])
