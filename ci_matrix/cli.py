"""The command line: parse arguments into a typed object, make one call into the library.

One handler at the top turns failures into a message and an exit code; a user error
never shows a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from ci_matrix import __version__, commands
from ci_matrix.edges.files import DEFAULT_MANIFEST
from ci_matrix.errors import CiMatrixError, ConfigError, ExitCode

FORMATS = ("github", "json", "yaml", "table", "markdown")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--manifest", type=Path, default=Path(DEFAULT_MANIFEST),
                        help=f"project manifest (default: {DEFAULT_MANIFEST})")
    parser.add_argument("--event", default=None,
                        help="event profile: pull_request, push, schedule, ... (default: $GITHUB_EVENT_NAME)")
    parser.add_argument("--ignore-rule", action="append", default=[], metavar="ID",
                        help="do not apply this rule (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="ci-matrix", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"ci-matrix {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    render = sub.add_parser("render", help="expand the manifest into a build matrix")
    _common(render)
    render.add_argument("--format", choices=FORMATS, default="table")
    render.add_argument("--max-cells", type=int, default=None, metavar="N",
                        help="split the GitHub matrix into shards of at most N cells (N <= 256)")

    explain = sub.add_parser("explain", help="why a cell is built, worked around or excluded")
    _common(explain)
    explain.add_argument("cell", help="cell id (see `ci-matrix render`)")
    explain.add_argument("--format", choices=("text", "json"), default="text")

    validate = sub.add_parser("validate", help="check the manifest and rule files")
    validate.add_argument("--manifest", type=Path, default=None,
                          help=f"manifest to check (default: {DEFAULT_MANIFEST} when no files are given)")
    validate.add_argument("--ignore-rule", action="append", default=[], metavar="ID",
                          help="a rule id the project does not want applied (checked to exist; repeatable)")
    validate.add_argument("files", nargs="*", type=Path, help="more manifests or rule files")

    rules = sub.add_parser("rules", help="list the knowledge base, test its fixtures, or draft a rule from a log")
    rules.add_argument("action", nargs="?", choices=("list", "test", "draft"), default="list")
    rules.add_argument("log", nargs="?", type=Path,
                       help="draft: the log of the unclassified failure (-: standard input)")
    rules.add_argument("--manifest", type=Path, default=None,
                       help="add this project's rules (test: run their fixtures, among all the rules)")
    rules.add_argument("--builtin", action="store_true",
                       help="test, with --manifest: run the built-in rules' fixtures too")
    rules.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    rules.add_argument("--cell", default=None, help="draft: the cell the log came from (id or matrix entry JSON)")
    rules.add_argument("--write", type=Path, default=None, metavar="RULE_FILE",
                       help="draft: add the rule to this project rule file and its fixture beside it")
    run = sub.add_parser("run", help="build one cell with its workarounds; diagnose a failure")
    run.add_argument("--manifest", type=Path, default=Path(DEFAULT_MANIFEST))
    run.add_argument("--cell", required=True, help="cell id, or the matrix entry as JSON (`${{ toJSON(matrix) }}`)")
    run.add_argument("--log", type=Path, default=None, help="log file (default: $RUNNER_TEMP/ci-matrix/CELL.log)")
    run.add_argument("--diagnosis", type=Path, default=None, help="diagnosis JSON file (default: beside the log)")
    run.add_argument("--timeout", type=float, default=None, metavar="SECONDS", help="stop the build after this long")
    run.add_argument("--no-preflight", action="store_true", help="do not check the tools before building")
    run.add_argument("--setup", action="store_true",
                     help="install the cell's toolchains first (ci-matrix setup); a mismatch then fails the cell")
    run.add_argument("--ignore-rule", action="append", default=[], metavar="ID")
    run.add_argument("build_command", nargs=argparse.REMAINDER, help="-- COMMAND...: run this instead")

    setup = sub.add_parser("setup", help="install the toolchains that a cell's final values ask for")
    setup.add_argument("--manifest", type=Path, default=Path(DEFAULT_MANIFEST))
    setup.add_argument("--cell", required=True, help="cell id, or the matrix entry as JSON")
    setup.add_argument("--ignore-rule", action="append", default=[], metavar="ID")
    setup.add_argument("--dry-run", action="store_true", help="only say what would be installed, and the cache key")
    setup.add_argument("--format", choices=("text", "json", "shell"), default="text",
                       help="shell: export lines for eval")

    diagnose = sub.add_parser("diagnose", help="scan build logs for known failures")
    diagnose.add_argument("logs", nargs="+", type=Path, metavar="LOG",
                          help="a build log as a tool, a CI system or `gh run view --log` wrote it; -: standard input")
    diagnose.add_argument("--manifest", type=Path, default=None, help="add this project's rules")
    diagnose.add_argument("--cell", default=None, help="the cell the log came from (id or matrix entry JSON)")
    diagnose.add_argument("--format", choices=("text", "json"), default="text")
    diagnose.add_argument("--ignore-rule", action="append", default=[], metavar="ID",
                          help="with --cell: this rule changes no cell (its failure is still recognised; repeatable)")

    sub.add_parser("action", help="the GitHub Action's entry point (inputs in CI_MATRIX_* variables)")
    return parser


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    env = os.environ if environ is None else environ
    args = build_parser().parse_args(argv)
    handlers: dict[str, Callable[[argparse.Namespace, Mapping[str, str], TextIO], int]] = {
        "render": commands.render,
        "explain": commands.explain,
        "validate": commands.validate,
        "rules": commands.rules,
        "run": commands.run,
        "setup": commands.setup,
        "diagnose": commands.diagnose,
        "action": commands.action,
    }
    try:
        return handlers[args.command](args, env, sys.stdout)
    except CiMatrixError as exc:
        return _report(exc, env)


def _report(exc: CiMatrixError, env: Mapping[str, str]) -> int:
    problems = exc.problems if isinstance(exc, ConfigError) else ()
    count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}" if problems else ""
    print(f"ci-matrix: error: {count}\n{exc}" if count else f"ci-matrix: error: {exc}", file=sys.stderr)
    if env.get("GITHUB_ACTIONS") == "true":
        from ci_matrix.edges.workflow import error_annotation

        for line in error_annotation(exc):
            print(line)
    return int(exc.exit_code)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

__all__ = ["ExitCode", "build_parser", "main"]
