"""`ci-matrix diagnose` and `ci-matrix rules draft`, and the report of a diagnosis (text,
diagnosis file, annotations, step summary) that `ci-matrix run` shares. A failure here is
only reported: it never changes a build's exit code."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO, TextIO

from ci_matrix.cell_resolve import resolve
from ci_matrix.core.document import did_you_mean
from ci_matrix.core.facts import Platform
from ci_matrix.core.knowledge import Rule
from ci_matrix.diagnose import evidence
from ci_matrix.diagnose.engine import Diagnosis
from ci_matrix.diagnose.output import annotations_of, diagnosis_record, render_markdown, render_text
from ci_matrix.edges import files, logs, workflow
from ci_matrix.errors import ExitCode, UsageError


@dataclass(frozen=True)
class CellFacts:
    """The values of the cell a log came from, and the platforms that give them meaning."""

    values: Mapping[str, str] | None
    platforms: Mapping[str, Platform]


def diagnose_file(path: Path, rules: Sequence[Rule], facts: CellFacts, cell: str, exit_code: int | None) -> Diagnosis:
    with path.open("rb") as stream:
        found = logs.diagnose_log(stream, rules, facts.values, facts.platforms, cell_id=cell, exit_code=exit_code,
                                  source=path.name)
    return replace(found, log=str(path), tail=logs.tail(path) if found.unclassified else ())


def report(found: Diagnosis, record_path: Path, env: Mapping[str, str], out: BinaryIO, err: TextIO) -> None:
    """Text, annotations, step summary and the diagnosis file; failures here are only reported."""
    if found.outcome == "failed":
        err.write(render_text(found))
    try:
        record_path.parent.mkdir(parents=True, exist_ok=True)
        record_path.write_text(json.dumps(diagnosis_record(found), indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        err.write(f"ci-matrix: warning: cannot write the diagnosis file {record_path}: {exc}\n")
    if env.get("GITHUB_ACTIONS") == "true":
        github_report([found], env, out, err, {"diagnosis": str(record_path)})


def github_report(
    found: Sequence[Diagnosis], env: Mapping[str, str], out: BinaryIO, err: TextIO, outputs: Mapping[str, str]
) -> None:
    items = [a for d in found for a in annotations_of(d)]
    for line in workflow.budgeted(items):
        say(out, line)
    workflow.append_file(env.get("GITHUB_STEP_SUMMARY"), workflow.fit_summary(render_markdown(found)), err)
    workflow.append_file(env.get("GITHUB_OUTPUT"), workflow.outputs_text(outputs), err)


def _diagnosis_context(
    manifest: Path | None, cell_text: str | None, ignore: Sequence[str]
) -> tuple[list[Rule], CellFacts, str]:
    """The rules a log is diagnosed with, the cell's facts (if a cell is named) and its id.
    An ignored rule changes no cell; its failure is still recognised."""
    rules: list[Rule] = list(files.load_project(manifest).rules) if manifest else list(files.trusted_builtin_rules())
    for rule_id in sorted(set(ignore) - {r.id for r in rules}):
        raise UsageError(f"--ignore-rule {rule_id}: no such rule{did_you_mean(rule_id, [r.id for r in rules])}")
    if not cell_text:
        return rules, CellFacts(None, files.catalog().platforms), ""
    project, found_cell, rules = resolve(manifest or Path(files.DEFAULT_MANIFEST), cell_text, ignore)
    return rules, CellFacts(dict(found_cell.values), project.manifest.platforms), found_cell.id


STDIN = Path("-")  # a LOG argument that reads standard input: gh run view --log-failed | ci-matrix diagnose -


@contextmanager
def readable_log(path: Path) -> Iterator[Path]:
    """A file to read the log at ``path`` from: the file itself, or, for ``-``, standard input
    copied to a temporary file as it arrives (memory stays bounded; the scan, which reads a
    log's end again, needs a file)."""
    if path != STDIN:
        if not path.is_file():
            raise UsageError(f"{path}: no such log file")
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="ci-matrix-") as folder:
        copy = Path(folder) / "stdin.log"
        with copy.open("wb") as sink:
            shutil.copyfileobj(sys.stdin.buffer, sink, 1 << 20)
        yield copy


def draft_rule(log: Path, manifest: Path | None, cell_text: str | None, write: Path | None, out: TextIO) -> int:
    """`ci-matrix rules draft LOG`: a rule for the log's failure, printed or added to a rule file."""
    rules, facts, _ = _diagnosis_context(manifest, cell_text, ())
    with readable_log(log) as path, path.open("rb") as stream:
        hits = logs.scanner_for(tuple(rules)).scan(stream)
        log_facts = evidence.read_log(hits, files.extractors())
        source = path.name if log == STDIN else log.name
        proposed = logs.rule_draft(stream, rules, facts.values, log_facts, source=source)
    if write is None:
        out.write(proposed.yaml)
        fixture = "".join(f"#   {line}\n" for line in proposed.fixture.splitlines())
        out.write(f"# fixtures/{proposed.fixture_file}:\n{fixture}")
        return ExitCode.OK
    files.add_draft(write, proposed.yaml, proposed.fixture_file, proposed.fixture)
    out.write(f"added rule {proposed.rule_id} to {write} and its fixture fixtures/{proposed.fixture_file}; "
              "write its explanation, fix and reference, then run ci-matrix rules test\n")
    return ExitCode.OK


def diagnose_logs(
    paths: Sequence[Path],
    manifest: Path | None,
    cell_text: str | None,
    fmt: str,
    env: Mapping[str, str],
    out: TextIO,
    ignore: Sequence[str] = (),
) -> int:
    """`ci-matrix diagnose LOG...`: each log as the log of a failed build."""
    if list(paths).count(STDIN) > 1:
        raise UsageError("-: standard input can be read once")
    rules, facts, cell = _diagnosis_context(manifest, cell_text, ignore)
    for path in paths:  # every log is there before any is read
        if path != STDIN and not path.is_file():
            raise UsageError(f"{path}: no such log file")
    results = []
    for path in paths:
        with readable_log(path) as readable:
            found = diagnose_file(readable, rules, facts, cell, None)
        results.append(found if path != STDIN else replace(found, log="-"))
    if fmt == "json":
        records = [diagnosis_record(r) for r in results]
        out.write(json.dumps(records[0] if len(records) == 1 else records, indent=2) + "\n")
    else:
        out.writelines(render_text(r) for r in results)
    if env.get("GITHUB_ACTIONS") == "true":
        out.flush()
        github_report(results, env, sys.stdout.buffer, sys.stderr, {})
    return 0


def say(out: BinaryIO, line: str) -> None:
    """A line on the build's own output stream, flushed at once."""
    out.write((line + "\n").encode("utf-8", errors="replace"))
    out.flush()
