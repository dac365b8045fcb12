"""`ci-matrix run` and `ci-matrix diagnose`: build one cell with its workarounds applied,
then say what went wrong, from the knowledge base's signatures.

The build's exit code is passed through unchanged; nothing here (not a failed API call,
not a failed summary write) may change it.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO, TextIO

from ci_matrix.core.cells import Cell
from ci_matrix.core.document import did_you_mean
from ci_matrix.core.facts import Platform
from ci_matrix.core.knowledge import Rule
from ci_matrix.core.matrix import plan
from ci_matrix.diagnose import evidence
from ci_matrix.diagnose.engine import Diagnosis
from ci_matrix.diagnose.output import annotations_of, diagnosis_record, render_markdown, render_text
from ci_matrix.edges import files, logs, process, workflow
from ci_matrix.edges.preflight import Preflight, preflight
from ci_matrix.edges.setup import Provisioned
from ci_matrix.errors import ExitCode, SetupFailed, UsageError


@dataclass(frozen=True)
class RunRequest:
    """What `ci-matrix run` was asked to do."""

    manifest: Path
    cell: str  # an id, or a matrix entry as JSON (only its id is used)
    command: tuple[str, ...] = ()  # replaces the cell's commands when given
    log: Path | None = None
    diagnosis: Path | None = None
    timeout: float | None = None
    check_tools: bool = True
    ignore_rules: tuple[str, ...] = ()
    setup: bool = False  # install the cell's toolchains first (`ci-matrix setup`)


def cell_id_of(text: str) -> str:
    """The cell id from `--cell`: an id, or a matrix entry as JSON."""
    if not text.lstrip().startswith("{"):
        return text.strip()
    try:
        entry = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--cell is neither a cell id nor a matrix entry: {exc}") from None
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
        raise UsageError("--cell JSON has no \"id\": pass `${{ toJSON(matrix) }}` of a ci-matrix matrix")
    return str(entry["id"])


def resolve(manifest: Path, cell_text: str, ignore: Sequence[str] = ()) -> tuple[files.Project, Cell, list[Rule]]:
    """The project, the runnable cell (recomputed from the manifest, never trusted from
    JSON), and every rule for the diagnosis: an ignored rule changes no cell, but a log
    that shows its failure is still recognised."""
    project = files.load_project(manifest)
    acting = [r for r in project.rules if r.id not in set(ignore)]
    from ci_matrix.commands import find_cell

    cell = find_cell(plan(project.manifest, acting, files.catalog()), cell_id_of(cell_text))
    if cell.excluded is not None:
        raise UsageError(f"cell {cell.id} is excluded ({cell.excluded_by}): {cell.excluded}")
    return project, cell, list(project.rules)


def run_cell(request: RunRequest, env: Mapping[str, str], out: BinaryIO, err: TextIO) -> int:
    """Build one cell; diagnose and report when it fails. Returns the build's exit code."""
    project, cell, rules = resolve(request.manifest, request.cell, request.ignore_rules)
    github = env.get("GITHUB_ACTIONS") == "true"
    log_path = request.log or _default_path(env, cell.id, "log")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    build_env = {**env, **dict(cell.env), "CI_MATRIX_CELL": cell.id}
    facts = _CellFacts(dict(cell.values), project.manifest.platforms)
    record = request.diagnosis or _default_path(env, cell.id, "diagnosis.json")
    provisioned, checks = Provisioned(), Preflight()
    try:
        if request.setup:
            from ci_matrix.cell_setup import provision

            provisioned = provision(cell, project, env, lambda line: _say(out, line), github)
            build_env = provisioned.apply(build_env)
            if github:  # later steps of the job (tests, packaging) use the same toolchains
                export_to_job(provisioned, env, err)
        checks = _preflight(cell, project, build_env) if request.check_tools else Preflight()
        if request.setup and checks.mismatches:
            raise SetupFailed("after setup, the toolchain that runs is not the one the cell asks for:\n"
                              + "\n".join(f"  {m}" for m in checks.mismatches))
    except SetupFailed as exc:
        log_path.write_text(f"ci-matrix setup: {exc}\n", encoding="utf-8")
        found = replace(_diagnose_file(log_path, rules, facts, cell.id, ExitCode.UNAVAILABLE),
                        stage="setup", setup=provisioned.done, tools=dict(checks.tools),
                        tail=tuple(f"ci-matrix setup: {exc}".splitlines()))
        _report(found, record, env, out, err)
        return ExitCode.UNAVAILABLE
    for warning in (*provisioned.warnings, *checks.warnings):
        _say(out, workflow.command(workflow.Annotation("warning", warning, "ci-matrix preflight")) if github
             else f"ci-matrix: warning: {warning}")
    commands = (cell.command_for(request.command),) if request.command else cell.commands
    cwd = project.root / cell.working_directory
    deadline = time.monotonic() + request.timeout if request.timeout else None
    with log_path.open("wb") as log:
        result = _run_all(commands, build_env, cwd, out, log, deadline, github)
    found = _diagnose_file(log_path, rules, facts, cell.id, result.exit_code)
    found = replace(found, tools=dict(checks.tools), warnings=(*provisioned.warnings, *checks.warnings),
                    setup=provisioned.done,
                    tail=found.tail + ((f"(stopped: {result.stopped_by})",) if result.stopped_by else ()))
    _report(found, record, env, out, err)
    return result.exit_code


def export_to_job(done: Provisioned, env: Mapping[str, str], err: TextIO) -> None:
    """Put what setup installed on the PATH and environment of the job's later steps."""
    workflow.append_file(env.get("GITHUB_PATH"), "".join(f"{p}\n" for p in reversed(done.path)), err)
    workflow.append_file(env.get("GITHUB_ENV"), workflow.env_text(dict(done.env)), err)


def _preflight(cell: Cell, project: files.Project, env: Mapping[str, str]) -> Preflight:
    platform = project.manifest.platforms[cell.value("platform")]
    return preflight(dict(cell.values), platform.gpu, env)


def _default_path(env: Mapping[str, str], cell_id: str, suffix: str) -> Path:
    base = Path(env["RUNNER_TEMP"]) / "ci-matrix" if env.get("RUNNER_TEMP") else Path(".ci-matrix")
    return base / f"{cell_id}.{suffix}"


def _say(out: BinaryIO, line: str) -> None:
    out.write((line + "\n").encode("utf-8", errors="replace"))
    out.flush()


def _run_all(
    commands: Sequence[Sequence[str]],
    env: Mapping[str, str],
    cwd: Path,
    out: BinaryIO,
    log: BinaryIO,
    deadline: float | None,
    github: bool,
) -> process.Result:
    result = process.Result(0)
    for argv in commands:
        shown = shlex.join(argv)
        log.write(f"$ {shown}\n".encode())
        token = workflow.stop_token() if github else ""
        _say(out, f"::group::$ {workflow.escape_data(shown)}\n::stop-commands::{token}" if github else f"$ {shown}")
        result = process.run(argv, env=env, cwd=cwd, sinks=(out, log), deadline=deadline)
        if github:  # on a line of its own, even when the build's last line had no newline
            _say(out, f"\n::{token}::\n::endgroup::")
        if result.exit_code != 0:
            break
    return result


@dataclass(frozen=True)
class _CellFacts:
    """The values of the cell a log came from, and the platforms that give them meaning."""

    values: Mapping[str, str] | None
    platforms: Mapping[str, Platform]


def _diagnose_file(path: Path, rules: Sequence[Rule], facts: _CellFacts, cell: str, exit_code: int | None) -> Diagnosis:
    with path.open("rb") as stream:
        found = logs.diagnose_log(stream, rules, facts.values, facts.platforms, cell_id=cell, exit_code=exit_code,
                                  source=path.name)
    return replace(found, log=str(path), tail=logs.tail(path) if found.unclassified else ())


def _report(found: Diagnosis, record_path: Path, env: Mapping[str, str], out: BinaryIO, err: TextIO) -> None:
    """Text, annotations, step summary and the diagnosis file; failures here are only reported."""
    if found.outcome == "failed":
        err.write(render_text(found))
    try:
        record_path.parent.mkdir(parents=True, exist_ok=True)
        record_path.write_text(json.dumps(diagnosis_record(found), indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        err.write(f"ci-matrix: warning: cannot write the diagnosis file {record_path}: {exc}\n")
    if env.get("GITHUB_ACTIONS") == "true":
        _github_report([found], env, out, err, {"diagnosis": str(record_path)})


def _github_report(
    found: Sequence[Diagnosis], env: Mapping[str, str], out: BinaryIO, err: TextIO, outputs: Mapping[str, str]
) -> None:
    items = [a for d in found for a in annotations_of(d)]
    for line in workflow.budgeted(items):
        _say(out, line)
    workflow.append_file(env.get("GITHUB_STEP_SUMMARY"), workflow.fit_summary(render_markdown(found)), err)
    workflow.append_file(env.get("GITHUB_OUTPUT"), workflow.outputs_text(outputs), err)


def _diagnosis_context(
    manifest: Path | None, cell_text: str | None, ignore: Sequence[str]
) -> tuple[list[Rule], _CellFacts, str]:
    """The rules a log is diagnosed with, the cell's facts (if a cell is named) and its id.
    An ignored rule changes no cell; its failure is still recognised."""
    rules: list[Rule] = list(files.load_project(manifest).rules) if manifest else list(files.trusted_builtin_rules())
    for rule_id in sorted(set(ignore) - {r.id for r in rules}):
        raise UsageError(f"--ignore-rule {rule_id}: no such rule{did_you_mean(rule_id, [r.id for r in rules])}")
    if not cell_text:
        return rules, _CellFacts(None, files.catalog().platforms), ""
    project, found_cell, rules = resolve(manifest or Path(files.DEFAULT_MANIFEST), cell_text, ignore)
    return rules, _CellFacts(dict(found_cell.values), project.manifest.platforms), found_cell.id


def draft_rule(log: Path, manifest: Path | None, cell_text: str | None, write: Path | None, out: TextIO) -> int:
    """`ci-matrix rules draft LOG`: a rule for the log's failure, printed or added to a rule file."""
    rules, facts, _ = _diagnosis_context(manifest, cell_text, ())
    if not log.is_file():
        raise UsageError(f"{log}: no such log file")
    with log.open("rb") as stream:
        hits = logs.scanner_for(tuple(rules)).scan(stream)
        log_facts = evidence.read_log(hits, files.extractors())
        proposed = logs.rule_draft(stream, rules, facts.values, log_facts, source=log.name)
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
    rules, facts, cell = _diagnosis_context(manifest, cell_text, ignore)
    results = []
    for path in paths:
        if not path.is_file():
            raise UsageError(f"{path}: no such log file")
        results.append(_diagnose_file(path, rules, facts, cell, None))
    if fmt == "json":
        records = [diagnosis_record(r) for r in results]
        out.write(json.dumps(records[0] if len(records) == 1 else records, indent=2) + "\n")
    else:
        out.writelines(render_text(r) for r in results)
    if env.get("GITHUB_ACTIONS") == "true":
        out.flush()
        _github_report(results, env, sys.stdout.buffer, sys.stderr, {})
    return 0
