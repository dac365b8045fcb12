"""The log edge: scanning a log file against the knowledge base, and its last lines."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path

from ci_matrix.core.knowledge import Rule
from ci_matrix.diagnose.cleaning import clean
from ci_matrix.diagnose.engine import signatures
from ci_matrix.diagnose.scanner import Hit, Scanner

TAIL_LINES = 20
_TAIL_BYTES = 16 << 10


@functools.lru_cache(maxsize=4)
def scanner_for(rules: tuple[Rule, ...]) -> Scanner:
    """One compiled scanner per knowledge base (RE2 compiles once)."""
    return Scanner(signatures(rules))


def scan_file(path: Path, rules: Sequence[Rule]) -> dict[str, Hit]:
    """The last hit of every signature in the log at `path`."""
    with path.open("rb") as stream:
        return scanner_for(tuple(rules)).scan(stream)


def tail(path: Path, count: int = TAIL_LINES) -> tuple[str, ...]:
    """The last lines of a log, cleaned, each cut to a readable length."""
    with path.open("rb") as stream:
        stream.seek(0, os.SEEK_END)
        size = stream.tell()
        stream.seek(max(0, size - _TAIL_BYTES))
        data = clean(stream.read())
    lines = data.decode("utf-8", errors="replace").splitlines()
    return tuple(line[:500] for line in lines[-count:])
