"""The one error module: every failure the command line reports, with its exit code.

Exit codes follow sysexits(3), so that they never collide with the exit codes that
builds themselves use (cargo 101, make 2, nvcc 1, ...), which `ci-matrix run` passes through.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass


class ExitCode(enum.IntEnum):
    """Exit codes of ci-matrix's own failures; a build's exit code is passed through as is."""

    OK = 0
    FAILED = 1  # a check failed: rules test, validate found problems in data
    USAGE = 64  # EX_USAGE: wrong command-line arguments, unknown cell
    UNAVAILABLE = 69  # EX_UNAVAILABLE: a toolchain the cell asks for cannot be set up (before the build)
    CONFIG = 78  # EX_CONFIG: the manifest or a rule file is broken
    INTERNAL = 70  # EX_SOFTWARE: a bug in ci-matrix


@dataclass(frozen=True)
class Problem:
    """One problem found in a file, located precisely enough to jump to it."""

    file: str
    line: int  # 1-based; 0 when unknown
    column: int  # 1-based; 0 when unknown
    path: str  # where inside the document, e.g. `builds.kernels.cuda.archs[1]`
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        at = f" {self.path}:" if self.path else ""
        return f"{where}:{at} {self.message}"


class CiMatrixError(Exception):
    """Base of the failures that the command line turns into a message and an exit code."""

    exit_code = ExitCode.INTERNAL


class UsageError(CiMatrixError):
    """A wrong command-line argument, such as an unknown cell id."""

    exit_code = ExitCode.USAGE


class SetupFailed(CiMatrixError):
    """A toolchain that a cell asks for could not be set up, or is not what runs."""

    exit_code = ExitCode.UNAVAILABLE


class ConfigError(CiMatrixError):
    """One or more problems in a manifest or rule file, all reported together."""

    exit_code = ExitCode.CONFIG

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))
