"""`ci-matrix setup`: install the toolchains that one cell's final values ask for.

The rules have already run: a workaround that moved the cell to another nightly or
toolkit is what gets installed. `ci-matrix run --setup` (the action's default) calls the
same code before the build.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from ci_matrix.cell_resolve import resolve
from ci_matrix.core.cells import Cell
from ci_matrix.core.provision import Needs, Unavailable, cache_key, describe, needs_of
from ci_matrix.edges import files, workflow
from ci_matrix.edges.setup import Provisioned, SetupError, cached_folders, setup, tools_root
from ci_matrix.errors import ExitCode, SetupFailed


def provision(cell: Cell, project: files.Project, env: Mapping[str, str], say: Callable[[str], None],
              github: bool = False) -> Provisioned:
    """Install the toolchains of a cell's final values; raises SetupFailed."""
    needs = cell_needs(cell, project, env)
    if needs.empty:
        return Provisioned()
    token = workflow.stop_token() if github else ""
    if github:  # what pip and rustup print cannot issue workflow commands
        say(f"::group::ci-matrix setup\n::stop-commands::{token}")
    try:
        done = setup(needs, env, tools_root(env), say)
    except SetupError as exc:
        raise SetupFailed(str(exc)) from None
    finally:
        if github:
            say(f"::{token}::\n::endgroup::")
    for line in done.done:
        say(f"ci-matrix setup: {line}")
    return done


#: The environment variable that points setup at a mirror of NVIDIA's redistributables.
REDIST_MIRROR = "CI_MATRIX_CUDA_REDIST"


def cell_needs(cell: Cell, project: files.Project, env: Mapping[str, str]) -> Needs:
    """What a cell needs installed on its platform; raises SetupFailed when it cannot be."""
    platform = project.manifest.platforms[cell.value("platform")]
    try:
        return needs_of(dict(cell.values), files.toolkits(), platform.os, platform.cpu,
                        cell.context.build.cuda_components, redist_mirror(env))
    except Unavailable as exc:
        raise SetupFailed(str(exc)) from None


def redist_mirror(env: Mapping[str, str]) -> str:
    """The mirror of NVIDIA's redistributables that `CI_MATRIX_CUDA_REDIST` names ('' when unset)."""
    url = env.get(REDIST_MIRROR, "")
    if url and not url.startswith(("https://", "http://", "file://")):
        raise SetupFailed(f"{REDIST_MIRROR}={url!r} is not a URL: give the folder that holds "
                          "redistrib_<release>.json (https://, http:// or file://)")
    return url


def setup_command(manifest: Path, cell_text: str, ignore: Sequence[str], dry_run: bool, fmt: str,
                  env: Mapping[str, str], out: TextIO) -> int:
    """`ci-matrix setup --cell ID`: install (or with `dry_run`, only name) the cell's toolchains.

    In GitHub Actions the toolchains are also put on later steps' PATH and environment
    (`GITHUB_PATH`, `GITHUB_ENV`), and the cache key and folder become step outputs.
    """
    project, cell, _rules = resolve(manifest, cell_text, ignore)
    needs = cell_needs(cell, project, env)
    key = cache_key(needs)
    root = tools_root(env)
    github = env.get("GITHUB_ACTIONS") == "true"
    if github:
        paths = "\n".join(str(p) for p in cached_folders(needs, root))
        outputs = {"cache-key": key, "tools": str(root), "paths": paths}
        workflow.append_file(env.get("GITHUB_OUTPUT"), workflow.outputs_text(outputs), out)
    if dry_run:
        return _print_plan(cell.id, needs, key, root, fmt, out)
    progress = out if fmt == "text" else sys.stderr  # json and shell output stay parseable
    done = provision(cell, project, env, lambda line: print(line, file=progress, flush=True), github)
    if github:
        export_to_job(done, env, sys.stderr)
    for warning in done.warnings:  # on stdout only where it is text: `eval "$(... --format shell)"`
        print(workflow.command(workflow.Annotation("warning", warning, "ci-matrix setup")) if github
              else f"ci-matrix: warning: {warning}", file=progress)
    if fmt == "json":
        record = {"cell": cell.id, "path": list(done.path), "env": dict(done.env), "done": list(done.done),
                  "warnings": list(done.warnings), "cache-key": key, "tools": str(root)}
        out.write(json.dumps(record, indent=2) + "\n")
    elif fmt == "shell":
        out.write(shell_exports(done))
    elif not needs.empty and not github:
        out.write("ci-matrix: to use them in this shell: "
                  f"eval \"$(ci-matrix setup --cell {cell.id} --format shell)\"\n")
    return ExitCode.OK


def shell_exports(done: Provisioned) -> str:
    """`export` lines for a POSIX shell (values quoted, never interpreted)."""
    lines = [f"export {k}={shlex.quote(v)}" for k, v in done.env.items()]
    if done.path:
        lines.append(f"export PATH={shlex.quote(':'.join(done.path))}:\"$PATH\"")
    return "".join(line + "\n" for line in lines)


def _print_plan(cell: str, needs: Needs, key: str, root: Path, fmt: str, out: TextIO) -> int:
    if fmt == "json":
        out.write(json.dumps({"cell": cell, "needs": describe(needs), "cache-key": key, "tools": str(root)},
                             indent=2) + "\n")
    else:
        lines = describe(needs) or ["nothing to install"]
        out.write(f"ci-matrix setup for {cell}:\n" + "".join(f"  {line}\n" for line in lines))
        if key:
            out.write(f"cache key: {key}\ntools folder: {root}\n")
    return ExitCode.OK


def export_to_job(done: Provisioned, env: Mapping[str, str], err: TextIO) -> None:
    """Put what setup installed on the PATH and environment of the job's later steps."""
    workflow.append_file(env.get("GITHUB_PATH"), "".join(f"{p}\n" for p in reversed(done.path)), err)
    workflow.append_file(env.get("GITHUB_ENV"), workflow.env_text(dict(done.env)), err)
