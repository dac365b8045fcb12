"""One function per subcommand: each takes parsed arguments and the environment, writes to
`out` and returns an exit code. The command line does nothing else."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_matrix.cell_resolve import find_cell
from ci_matrix.core.cells import Cell
from ci_matrix.core.document import did_you_mean
from ci_matrix.core.grid import render_markdown
from ci_matrix.core.knowledge import Rule
from ci_matrix.core.matrix import Plan, plan
from ci_matrix.core.render import cell_record, render_github, render_json, render_table, render_yaml
from ci_matrix.edges import files
from ci_matrix.errors import ConfigError, ExitCode, SetupFailed, UsageError


def make_plan(args: argparse.Namespace, env: Mapping[str, str]) -> tuple[files.Project, Plan]:
    """Load the project named by --manifest and expand it for the event."""
    project = files.load_project(args.manifest)
    ignored = set(args.ignore_rule)
    known = {r.id for r in project.rules}
    for rule_id in sorted(ignored - known):
        raise UsageError(f"--ignore-rule {rule_id}: no such rule{did_you_mean(rule_id, known)}")
    rules = [r for r in project.rules if r.id not in ignored]
    event = args.event if args.event is not None else env.get("GITHUB_EVENT_NAME", "")
    return project, plan(project.manifest, rules, files.catalog(), event)


def render(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """`ci-matrix render`: the matrix in one of the formats."""
    project, the_plan = make_plan(args, env)
    if args.format == "github":
        out.write(render_github(the_plan, project.manifest.max_cells if args.max_cells is None else args.max_cells))
    elif args.format == "json":
        out.write(render_json(the_plan))
    elif args.format == "yaml":
        out.write(render_yaml(the_plan))
    elif args.format == "markdown":
        out.write(render_markdown(the_plan, project.manifest.project or "ci-matrix plan"))
    else:
        out.write(render_table(the_plan))
    return ExitCode.OK


def explain(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """`ci-matrix explain CELL`: what the rules did to a cell and why."""
    project, the_plan = make_plan(args, env)
    cell = find_cell(the_plan, args.cell)
    if args.format == "json":
        out.write(json.dumps(cell_record(cell), indent=2, ensure_ascii=False) + "\n")
    else:
        rules = {r.id: r for r in project.rules}
        out.write(explain_text(cell, rules))
        if cell.excluded is None:
            out.write("".join(f"setup:     {line}\n" for line in _setup_lines(cell, project, env)))
    return ExitCode.OK


def _setup_lines(cell: Cell, project: files.Project, env: Mapping[str, str]) -> list[str]:
    """What `ci-matrix setup` would install for the cell (for CUDA: each source, in the
    order they are tried, and why), or why it cannot."""
    from ci_matrix.cell_setup import cell_needs
    from ci_matrix.core.provision import describe

    try:
        return describe(cell_needs(cell, project, env))
    except SetupFailed as exc:
        return [f"cannot be set up: {exc}"]


def explain_text(cell: Cell, rules: Mapping[str, Rule]) -> str:
    """A readable account of one cell."""
    state = "excluded" if cell.excluded is not None else "worked around" if cell.changes else "built as requested"
    lines = [f"cell:      {cell.id}", f"name:      {cell.name}", f"status:    {state}"]
    if cell.excluded is not None:
        lines.append(f"reason:    {cell.excluded} ({cell.excluded_by})")
    lines.append("requested: " + ", ".join(f"{k}={v}" for k, v in cell.requested))
    for change in cell.changes:
        origin = rules[change.rule].origin if change.rule in rules else ""
        lines += [f"rule:      {change.rule} ({change.kind}) {origin}", f"           {change.title}",
                  f"           {change.detail}"]
        lines += [f"           see {ref}" for ref in change.references]
    if cell.excluded is None:
        lines += _runnable_lines(cell)
    return "\n".join(lines) + "\n"


def _runnable_lines(cell: Cell) -> list[str]:
    lines = ["values:    " + ", ".join(f"{k}={v}" for k, v in cell.values), f"runs-on:   {', '.join(cell.runs_on)}"]
    lines += [f"env:       {k}={v}" for k, v in cell.env]
    lines += [f"flags:     {tool}: {' '.join(args)}" for tool, args in cell.flags]
    lines += [f"command:   {' '.join(c)}" for c in cell.commands]
    return lines


def validate(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """`ci-matrix validate`: every problem of the manifest and the given files, together."""
    paths = list(args.files)
    if args.manifest is not None or not paths:
        paths.insert(0, args.manifest or Path(files.DEFAULT_MANIFEST))
    problems = []
    for path in paths:
        problems += files.check_file(path)
    if problems:
        raise ConfigError(problems)
    _check_ignored(args.ignore_rule, paths)
    out.write(f"ok: {len(paths)} file{'s' if len(paths) != 1 else ''} valid\n")
    return ExitCode.OK


def _check_ignored(ignored: list[str], paths: list[Path]) -> None:
    """`--ignore-rule` ids must name rules: of the built-in base or of the manifests given."""
    if not ignored:
        return
    known = {r.id for r in files.trusted_builtin_rules()}
    for path in paths:
        known |= files.rule_ids_in(path)
    for rule_id in ignored:
        if rule_id not in known:
            raise UsageError(f"--ignore-rule {rule_id}: no such rule{did_you_mean(rule_id, known)}")


def rules(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """`ci-matrix rules`: list the knowledge base (`rules test`: run its fixtures; `rules
    draft LOG`: propose a rule for an unclassified failure)."""
    if args.action == "draft":
        from ci_matrix.cell_diagnosis import draft_rule

        if args.log is None:
            raise UsageError("rules draft needs the log: ci-matrix rules draft LOG [--cell ID]")
        return draft_rule(args.log, args.manifest, args.cell, args.write, out)
    known = list(files.load_project(args.manifest).rules) if args.manifest else files.builtin_rules()
    if args.action == "test":
        from ci_matrix.diagnose.fixtures import run_fixture_tests

        # A project's own rules by default: the built-in ones have their own test, some 4,000 logs.
        own = None
        if args.manifest and not args.builtin:
            builtin = {r.id for r in files.trusted_builtin_rules()}
            own = [r for r in known if r.id not in builtin]
        return run_fixture_tests(known, args.format, out, own)
    from ci_matrix.core.rule_listing import listing

    out.write(listing(known, args.format))
    return ExitCode.OK


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """`ci-matrix run --cell ID`: the build's own exit code."""
    from ci_matrix.cell_run import RunRequest, run_cell

    command = tuple(args.build_command[1:] if args.build_command[:1] == ["--"] else args.build_command)
    request = RunRequest(
        manifest=args.manifest, cell=args.cell, command=command, log=args.log, diagnosis=args.diagnosis,
        timeout=args.timeout, check_tools=not args.no_preflight, ignore_rules=tuple(args.ignore_rule),
        setup=args.setup,
    )
    out.flush()
    return run_cell(request, env, sys.stdout.buffer, sys.stderr)


def setup(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """`ci-matrix setup --cell ID`."""
    from ci_matrix.cell_setup import setup_command

    return setup_command(args.manifest, args.cell, args.ignore_rule, args.dry_run, args.format, env, out)


def diagnose(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """`ci-matrix diagnose LOG...`."""
    from ci_matrix.cell_diagnosis import diagnose_logs

    return diagnose_logs(args.logs, args.manifest, args.cell, args.format, env, out, tuple(args.ignore_rule))


def action(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """`ci-matrix action`: plan, run or report, as action.yml asks."""
    from ci_matrix.action import execute

    return execute(env, out)
