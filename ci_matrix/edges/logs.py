"""The log edge: scanning a log against the knowledge base (signatures and evidence
extractors in one pass), diagnosing it, and its last lines."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO

from ci_matrix.core.facts import Platform
from ci_matrix.core.knowledge import Rule
from ci_matrix.diagnose import evidence
from ci_matrix.diagnose.cleaning import HEAD_BYTES, clean, indentation
from ci_matrix.diagnose.draft import Draft, draft
from ci_matrix.diagnose.engine import Diagnosis, diagnose, signatures
from ci_matrix.diagnose.scanner import Scanner
from ci_matrix.edges import files

TAIL_LINES = 20
_TAIL_BYTES = 16 << 10
DRAFT_BYTES = 256 << 10


@functools.lru_cache(maxsize=4)
def scanner_for(rules: tuple[Rule, ...]) -> Scanner:
    """One compiled scanner per knowledge base (RE2 compiles once): every rule's signatures
    and every evidence extractor, found in the same pass."""
    return Scanner([*signatures(rules), *files.extractors().signatures()], files.shipped_set_forms())


def diagnose_log(
    stream: BinaryIO | None,
    rules: Sequence[Rule],
    cell: Mapping[str, str] | None,
    platforms: Mapping[str, Platform],
    *,
    cell_id: str = "",
    exit_code: int | None = None,
    source: str = "the build log",
) -> Diagnosis:
    """Scan a failed build's log (None: nothing to scan) and diagnose it with the cell's
    values (None: no cell) and the facts the log shows."""
    hits = scanner_for(tuple(rules)).scan(stream) if stream is not None and exit_code != 0 else {}
    extractors = files.extractors()
    log_facts = evidence.read_log(hits, extractors)
    known = evidence.combine(cell, platforms, log_facts, extractors.defaults)
    found = diagnose(hits, rules, known, cell=cell_id, exit_code=exit_code, cell_given=cell is not None)
    if found.unclassified and stream is not None and stream.seekable():
        proposed = rule_draft(stream, rules, cell, log_facts, source=source)
        found = replace(found, draft=proposed.yaml)
    return found


def rule_draft(
    stream: BinaryIO,
    rules: Sequence[Rule],
    cell: Mapping[str, str] | None,
    log_facts: Mapping[str, evidence.Evidence],
    *,
    source: str,
) -> Draft:
    """A rule draft from the end of a log (its last `DRAFT_BYTES`, where an unclassified
    failure's first error line is)."""
    return draft(draft_text(stream), source=source, cell=cell, log_facts=log_facts, taken_ids=[r.id for r in rules])


def draft_text(stream: BinaryIO) -> str:
    """The part of a log a rule draft reads: its last `DRAFT_BYTES`, cleaned."""
    return _clean_end(stream, DRAFT_BYTES).decode("utf-8", errors="replace")


def tail(path: Path, count: int = TAIL_LINES) -> tuple[str, ...]:
    """The last lines of a log, cleaned, each cut to a readable length."""
    with path.open("rb") as stream:
        data = _clean_end(stream, _TAIL_BYTES)
    lines = data.decode("utf-8", errors="replace").splitlines()
    return tuple(line[:500] for line in lines[-count:])


def _clean_end(stream: BinaryIO, size: int) -> bytes:
    """The last ``size`` bytes of a log, cleaned as the scanner cleans them (the log's own
    indentation, worked out from its start, taken off)."""
    stream.seek(0)
    indent = indentation(stream.read(HEAD_BYTES))
    stream.seek(0, os.SEEK_END)
    stream.seek(max(0, stream.tell() - size))
    return clean(stream.read(), indent=indent)
