"""The GitHub Action (`action.yml`): `plan`, `run` and `report`, with inputs read from the
environment that action.yml sets (never pasted into script text).

An API failure never changes the workflow's result and never loses a diagnosis: the
report falls back to annotations and the step summary, and says why.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ci_matrix.core.grid import render_markdown as render_grid
from ci_matrix.core.matrix import plan
from ci_matrix.core.render import github_json, shards
from ci_matrix.edges import artifacts, files, workflow
from ci_matrix.errors import ExitCode, UsageError
from ci_matrix.report import MARKER, Report, accept, build_report


def _input(env: Mapping[str, str], name: str, default: str = "") -> str:
    return env.get(f"CI_MATRIX_{name.upper().replace('-', '_')}", "").strip() or default


def execute(env: Mapping[str, str], out: TextIO) -> int:
    """Run the action's command (`CI_MATRIX_COMMAND`)."""
    command = _input(env, "command", "plan")
    handlers = {"plan": plan_command, "run": run_command, "report": report_command}
    if command not in handlers:
        raise UsageError(f"unknown command input {command!r}; expected plan, run or report")
    return handlers[command](env, out)


def plan_command(env: Mapping[str, str], out: TextIO) -> int:
    """Write the matrix (and its shards) to $GITHUB_OUTPUT and draw it in the step summary."""
    project = files.load_project(Path(_input(env, "manifest", files.DEFAULT_MANIFEST)))
    event = _input(env, "event", env.get("GITHUB_EVENT_NAME", ""))
    the_plan = plan(project.manifest, project.rules, files.catalog(), event)
    limit = _input(env, "max-cells")
    parts = shards(the_plan, int(limit) if limit else project.manifest.max_cells)
    outputs = {"matrix": github_json(parts[0]), "shards": str(len(parts)), "cell-count": str(len(the_plan.runnable))}
    outputs.update({f"matrix-{i}": github_json(part) for i, part in enumerate(parts[1:], start=1)})
    workflow.append_file(env.get("GITHUB_OUTPUT"), workflow.outputs_text(outputs), sys.stderr)
    summary = render_grid(the_plan, project.manifest.project or "ci-matrix plan")
    workflow.append_file(env.get("GITHUB_STEP_SUMMARY"), workflow.fit_summary(summary), sys.stderr)
    out.write(f"ci-matrix: {len(the_plan.runnable)} cells in {len(parts)} matrix(es) for {event or 'every event'}\n")
    if not the_plan.runnable:
        out.write(workflow.command(workflow.Annotation(
            "notice", "no cell runs for this event; guard the matrix job with cell-count != '0'", "ci-matrix")) + "\n")
    return ExitCode.OK


def run_command(env: Mapping[str, str], out: TextIO) -> int:
    """Build the cell (`ci-matrix run`): the build's exit code is the step's."""
    from ci_matrix.cell_resolve import cell_id_of
    from ci_matrix.cell_run import RunRequest, run_cell

    cell = _input(env, "cell")
    timeout = _input(env, "timeout")
    folder = Path(_input(env, "diagnoses", "ci-matrix-diagnoses"))
    request = RunRequest(
        manifest=Path(_input(env, "manifest", files.DEFAULT_MANIFEST)),
        cell=cell,
        diagnosis=folder / f"{cell_id_of(cell)}.json",
        timeout=float(timeout) if timeout else None,
        setup=_input(env, "setup", "true") == "true",
    )
    out.flush()
    return run_cell(request, env, sys.stdout.buffer, sys.stderr)


def report_command(env: Mapping[str, str], out: TextIO) -> int:
    """Post the check run and the sticky comment; fall back to annotations and summary.

    The same path serves a run of this repository and a fork's run (workflow_run): the diagnosis
    files are read as untrusted data and only what they may say reaches the report."""
    project = files.load_project(Path(_input(env, "manifest", files.DEFAULT_MANIFEST)))
    event = _input(env, "event", env.get("GITHUB_EVENT_NAME", ""))
    the_plan = plan(project.manifest, project.rules, files.catalog(), event)
    folder = Path(_input(env, "diagnoses", "ci-matrix-diagnoses"))
    loaded = artifacts.read_diagnoses(folder, files.schema("diagnosis"), {c.id for c in the_plan.runnable})
    results = accept(loaded.records, the_plan, project.rules, loaded.ignored)
    report = build_report(results, the_plan, _run_url(env))
    workflow.append_file(env.get("GITHUB_STEP_SUMMARY"), workflow.fit_summary(report.text), sys.stderr)
    problems = _post(report, env, out)
    for problem in problems:
        out.write(workflow.command(workflow.Annotation("warning", problem, "ci-matrix report")) + "\n")
    failing = problems and _input(env, "fail-on-api-error", "false") == "true"
    return ExitCode.FAILED if failing else ExitCode.OK


def _post(report: Report, env: Mapping[str, str], out: TextIO) -> list[str]:
    """Post through the API; returns what went wrong (never raises)."""
    token, repo = _input(env, "token"), env.get("GITHUB_REPOSITORY", "")
    if not token or not repo:
        _annotate(report, out)
        return ["no github-token or repository: the report is in the step summary and annotations only"]
    from ci_matrix.edges.github_api import Annotation, ApiSettings, GitHubReporter, PostStatus

    reporter = GitHubReporter(ApiSettings(env.get("GITHUB_API_URL", "https://api.github.com"), token))
    notes = [Annotation(_manifest_path(env), 1, 1, level, title, message)  # type: ignore[arg-type]
             for level, title, message in report.annotations]
    outcomes = [reporter.post_check_run(repo, _head_sha(env), "ci-matrix", report.conclusion,  # type: ignore[arg-type]
                                        report.title, report.sections[0], report.text, notes)]
    pr = _pull_request(env)
    if pr:
        outcomes.append(reporter.upsert_sticky_comment(repo, pr, MARKER, report.sections))
    failed = [o for o in outcomes if o.status in (PostStatus.FORBIDDEN, PostStatus.FAILED, PostStatus.TIMED_OUT)]
    if failed:
        _annotate(report, out)
    return [f"{o.status.name.lower()}: {o.message}; the report is in the step summary and annotations" for o in failed]


def _annotate(report: Report, out: TextIO) -> None:
    levels = {"failure": "error", "warning": "warning", "notice": "notice"}
    items = [workflow.Annotation(levels[level], message, title) for level, title, message in report.annotations]
    out.writelines(line + "\n" for line in workflow.budgeted(items))


def _event(env: Mapping[str, str]) -> dict[str, Any]:
    path = env.get("GITHUB_EVENT_PATH")
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8")) if path else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _pull_request(env: Mapping[str, str]) -> int:
    explicit = _input(env, "pull-request")
    if explicit:
        return int(explicit)
    number = (_event(env).get("pull_request") or {}).get("number")
    return int(number) if isinstance(number, int) else 0


def _head_sha(env: Mapping[str, str]) -> str:
    head = ((_event(env).get("pull_request") or {}).get("head") or {}).get("sha")
    return _input(env, "head-sha") or (head if isinstance(head, str) else env.get("GITHUB_SHA", ""))


def _run_url(env: Mapping[str, str]) -> str:
    server, repo, run = env.get("GITHUB_SERVER_URL"), env.get("GITHUB_REPOSITORY"), env.get("GITHUB_RUN_ID")
    return f"{server}/{repo}/actions/runs/{run}" if server and repo and run else ""


def _manifest_path(env: Mapping[str, str]) -> str:
    return _input(env, "manifest", files.DEFAULT_MANIFEST)


__all__: Sequence[str] = ("execute",)
