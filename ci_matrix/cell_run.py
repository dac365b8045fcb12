"""`ci-matrix run`: set up and build one cell with its workarounds applied, then say what
went wrong (`cell_diagnosis`).

The build's exit code is passed through unchanged; nothing here (not a failed API call,
not a failed summary write) may change it.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO, TextIO

from ci_matrix.cell_diagnosis import CellFacts, diagnose_file, report, say
from ci_matrix.cell_resolve import resolve
from ci_matrix.cell_setup import export_to_job, provision
from ci_matrix.core.cells import Cell
from ci_matrix.edges import files, process, workflow
from ci_matrix.edges.preflight import Preflight, preflight
from ci_matrix.edges.setup import Provisioned
from ci_matrix.errors import ExitCode, SetupFailed


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


def run_cell(request: RunRequest, env: Mapping[str, str], out: BinaryIO, err: TextIO) -> int:
    """Build one cell; diagnose and report when it fails. Returns the build's exit code."""
    project, cell, rules = resolve(request.manifest, request.cell, request.ignore_rules)
    github = env.get("GITHUB_ACTIONS") == "true"
    log_path = request.log or _default_path(env, cell.id, "log")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    build_env = {**env, **dict(cell.env), "CI_MATRIX_CELL": cell.id}
    facts = CellFacts(dict(cell.values), project.manifest.platforms)
    record = request.diagnosis or _default_path(env, cell.id, "diagnosis.json")
    provisioned, checks = Provisioned(), Preflight()
    try:
        if request.setup:
            provisioned = provision(cell, project, env, lambda line: say(out, line), github)
            build_env = provisioned.apply(build_env)
            if github:  # later steps of the job (tests, packaging) use the same toolchains
                export_to_job(provisioned, env, err)
        checks = _preflight(cell, project, build_env) if request.check_tools else Preflight()
        if request.setup and checks.mismatches:
            raise SetupFailed("after setup, the toolchain that runs is not the one the cell asks for:\n"
                              + "\n".join(f"  {m}" for m in checks.mismatches))
    except SetupFailed as exc:
        log_path.write_text(f"ci-matrix setup: {exc}\n", encoding="utf-8")
        found = replace(diagnose_file(log_path, rules, facts, cell.id, ExitCode.UNAVAILABLE),
                        stage="setup", setup=provisioned.done, tools=dict(checks.tools),
                        tail=tuple(f"ci-matrix setup: {exc}".splitlines()))
        report(found, record, env, out, err)
        return ExitCode.UNAVAILABLE
    for warning in (*provisioned.warnings, *checks.warnings):
        say(out, workflow.command(workflow.Annotation("warning", warning, "ci-matrix preflight")) if github
             else f"ci-matrix: warning: {warning}")
    commands = (cell.command_for(request.command),) if request.command else cell.commands
    cwd = project.root / cell.working_directory
    deadline = time.monotonic() + request.timeout if request.timeout else None
    with log_path.open("wb") as log:
        result = _run_all(commands, build_env, cwd, out, log, deadline, github)
    found = diagnose_file(log_path, rules, facts, cell.id, result.exit_code)
    found = replace(found, tools=dict(checks.tools), warnings=(*provisioned.warnings, *checks.warnings),
                    setup=provisioned.done,
                    tail=found.tail + ((f"(stopped: {result.stopped_by})",) if result.stopped_by else ()))
    report(found, record, env, out, err)
    return result.exit_code


def _preflight(cell: Cell, project: files.Project, env: Mapping[str, str]) -> Preflight:
    platform = project.manifest.platforms[cell.value("platform")]
    return preflight(dict(cell.values), platform.gpu, env)


def _default_path(env: Mapping[str, str], cell_id: str, suffix: str) -> Path:
    base = Path(env["RUNNER_TEMP"]) / "ci-matrix" if env.get("RUNNER_TEMP") else Path(".ci-matrix")
    return base / f"{cell_id}.{suffix}"



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
        say(out, f"::group::$ {workflow.escape_data(shown)}\n::stop-commands::{token}" if github else f"$ {shown}")
        result = process.run(argv, env=env, cwd=cwd, sinks=(out, log), deadline=deadline)
        if github:  # on a line of its own, even when the build's last line had no newline
            say(out, f"\n::{token}::\n::endgroup::")
        if result.exit_code != 0:
            break
    return result


