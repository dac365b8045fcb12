"""Which cell a command is about: its id (or matrix entry), found in the plan recomputed
from the manifest, and the rules that diagnose it. Shared by run, setup, diagnose and the
action; it knows no command line."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ci_matrix.core.cells import Cell
from ci_matrix.core.document import did_you_mean
from ci_matrix.core.knowledge import Rule
from ci_matrix.core.matrix import Plan, plan
from ci_matrix.edges import files
from ci_matrix.errors import UsageError


def find_cell(the_plan: Plan, cell_id: str) -> Cell:
    """The cell with this id, or a usage error with the closest id."""
    cell = the_plan.find(cell_id)
    if cell is None:
        hint = did_you_mean(cell_id, [c.id for c in the_plan.cells])
        raise UsageError(f"no cell {cell_id!r} in this manifest{hint}; `ci-matrix render` lists them")
    return cell


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
    cell = find_cell(plan(project.manifest, acting, files.catalog()), cell_id_of(cell_text))
    if cell.excluded is not None:
        raise UsageError(f"cell {cell.id} is excluded ({cell.excluded_by}): {cell.excluded}")
    return project, cell, list(project.rules)
