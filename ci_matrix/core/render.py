"""Rendering a plan: GitHub matrix JSON (sharded within GitHub's limits), JSON, YAML,
a text table and a markdown grid. Pure: same plan, byte-identical output."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ci_matrix.core.cells import Cell, Change
from ci_matrix.core.manifest import Values
from ci_matrix.core.matrix import Plan, gc_paused
from ci_matrix.errors import UsageError

GITHUB_MAX_CELLS = 256
#: GitHub caps a job's outputs at 1 MB, counted in UTF-16; keep headroom for other outputs.
GITHUB_MAX_OUTPUT_BYTES = 900_000


def cell_entry(cell: Cell) -> dict[str, Any]:
    """The matrix entry of a runnable cell: everything a job needs to build it."""
    entry: dict[str, Any] = {"id": cell.id, "name": cell.name, "runs-on": list(cell.runs_on)}
    entry.update(cell.values)
    entry["env"] = dict(cell.env)
    entry["flags"] = {tool: list(args) for tool, args in cell.flags}
    entry["commands"] = [list(c) for c in cell.commands]
    if cell.working_directory:
        entry["working-directory"] = cell.working_directory
    entry["rules"] = list(cell.rule_ids)
    return entry


def cell_record(cell: Cell) -> dict[str, Any]:
    """Everything known about a cell, runnable or not, with what changed it and why."""
    record: dict[str, Any] = cell_entry(cell) if cell.excluded is None else {"id": cell.id, "name": cell.name}
    record["status"] = status(cell)
    record["requested"] = dict(cell.requested)
    if cell.excluded is not None:
        record["excluded"] = {"reason": cell.excluded, "by": cell.excluded_by}
    record["changes"] = _changes(cell.changes)
    return record


def status(cell: Cell) -> str:
    """`built`, `worked-around` or `excluded`."""
    if cell.excluded is not None:
        return "excluded"
    return "worked-around" if cell.changes else "built"


def shards(plan: Plan, max_cells: int | None) -> list[list[dict[str, Any]]]:
    """Runnable cells split into GitHub matrices of at most `max_cells` cells.

    Without `max_cells`, more than 256 cells is an error: GitHub would refuse the job.
    """
    if max_cells is not None and not 1 <= max_cells <= GITHUB_MAX_CELLS:
        allowed = f"a shard holds 1 to {GITHUB_MAX_CELLS} cells (GitHub's limit per job)"
        raise UsageError(f"--max-cells {max_cells}: {allowed}")
    entries = [cell_entry(c) for c in plan.runnable]
    limit = max_cells or GITHUB_MAX_CELLS
    if max_cells is None and len(entries) > GITHUB_MAX_CELLS:
        raise UsageError(
            f"the matrix has {len(entries)} cells and GitHub runs at most {GITHUB_MAX_CELLS} per job; "
            "narrow the manifest (exclude, events) or split it with --max-cells N (see README: sharding)"
        )
    parts = [entries[i : i + limit] for i in range(0, len(entries), limit)] or [[]]
    _check_size(parts)
    return parts


def _check_size(parts: Sequence[Sequence[dict[str, Any]]]) -> None:
    size = sum(len(github_json(p).encode("utf-16-le")) for p in parts)
    if size > GITHUB_MAX_OUTPUT_BYTES:
        raise UsageError(
            f"the matrix is {size:,} bytes as GitHub counts them (UTF-16) and a job's outputs "
            f"are capped at 1 MB; narrow the manifest or move commands out of it"
        )


def github_json(entries: Sequence[dict[str, Any]]) -> str:
    """`{"include": [...]}` as compact JSON, as `fromJSON()` reads it."""
    return json.dumps({"include": list(entries)}, separators=(",", ":"), ensure_ascii=False)


def render_github(plan: Plan, max_cells: int | None) -> str:
    """One matrix, or with --max-cells and more cells than that, one line per shard."""
    return "\n".join(github_json(part) for part in shards(plan, max_cells)) + "\n"


def plan_record(plan: Plan, *, with_cells: bool = True) -> dict[str, Any]:
    """The whole plan as plain data (json and yaml formats)."""
    runnable = plan.runnable
    record: dict[str, Any] = {
        "event": plan.event or None,
        "counts": {
            "cells": len(plan.cells),
            "runnable": len(runnable),
            "worked-around": sum(1 for c in runnable if c.changes),
            "excluded": len(plan.cells) - len(runnable),
        },
    }
    if with_cells:
        record["cells"] = [cell_record(c) for c in plan.cells]
    return record


def render_json(plan: Plan) -> str:
    """The whole plan as indented JSON: the text `json.dumps(plan_record(plan), indent=2)` gives.

    The standard library's indenting encoder is written in Python, one generator per value:
    for 100,000 cells it takes seconds. Here each cell is written from pieces that many
    cells share (runner labels, env, flags, commands, `"axis": "value"` lines), each
    encoded once; anything unusual takes the standard library's path for that cell.
    """
    with gc_paused():
        record = plan_record(plan, with_cells=False)
        head = json.dumps(record, indent=2, ensure_ascii=False)[:-2]  # without "\n}"
        if not plan.cells:
            return head + ',\n  "cells": []\n}\n'
        writer = _CellWriter()
        return head + ',\n  "cells": [\n' + ",\n".join(map(writer.cell, plan.cells)) + "\n  ]\n}\n"


_encode = json.encoder.encode_basestring  # what json.dumps(ensure_ascii=False) writes strings with
#: Keys of a cell's record besides its values: a value of that name takes the general path.
_RECORD_KEYS = frozenset(("id", "name", "runs-on", "env", "flags", "commands", "working-directory",
                          "rules", "status", "requested", "excluded", "changes"))


def _indented(value: Any, level: int) -> str:
    """`value` as `json.dumps(value, indent=2)` writes it at this nesting level."""
    return json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + "  " * level)


_SHARED = ("runs-on", "env", "flags", "commands", "rules", "excluded", "changes")


class _CellWriter:
    """Writes cell records at their place in the plan (level 2), from memoised pieces.

    Most cells share their runner labels, env, flags, commands and `(axis, value)` pairs
    with many others: each such piece is encoded once, then found by its value."""

    def __init__(self) -> None:
        self._lines: dict[tuple[str, str], str | None] = {}  # "axis": "value" at level 3; None: a record key
        self._requested: dict[tuple[str, str], str | None] = {}  # the same at level 4
        self._pieces: dict[str, dict[Any, str]] = {key: {} for key in _SHARED}  # per record key, by value

    def cell(self, cell: Cell) -> str:
        """The cell's record, as the standard library would write it at level 2."""
        lines = [f'"id": {_encode(cell.id)}', f'"name": {_encode(cell.name)}']
        piece = self._piece
        if cell.excluded is None:
            values = self._known(self._lines, cell.values, reserved=_RECORD_KEYS)
            if values is None:
                return "    " + _indented(cell_record(cell), 2)
            lines += (piece("runs-on", cell.runs_on, list), *values, piece("env", cell.env, dict),
                      piece("flags", cell.flags, _flags), piece("commands", cell.commands, _commands))
            if cell.working_directory:
                lines.append(f'"working-directory": {_encode(cell.working_directory)}')
            lines.append(piece("rules", cell.rule_ids, list))
            lines.append('"status": "worked-around"' if cell.changes else '"status": "built"')
        else:
            lines.append('"status": "excluded"')
        requested = self._known(self._requested, cell.requested, reserved=frozenset())
        lines.append('"requested": {\n        ' + ",\n        ".join(requested) + "\n      }"
                     if requested else '"requested": {}')
        if cell.excluded is not None:
            lines.append(piece("excluded", (cell.excluded, cell.excluded_by), _exclusion))
        lines.append(piece("changes", cell.changes, _changes))
        return "    {\n      " + ",\n      ".join(lines) + "\n    }"

    @staticmethod
    def _known(memo: dict[tuple[str, str], str | None], pairs: Values, reserved: frozenset[str]) -> list[str] | None:
        """The `"key": "value"` text of each pair; None when a key is one of `reserved`."""
        found = list(map(memo.get, pairs))
        if None in found:
            for key, value in pairs:
                if (key, value) not in memo:
                    memo[key, value] = None if key in reserved else f"{_encode(key)}: {_encode(value)}"
            found = list(map(memo.get, pairs))
        return None if None in found else found  # type: ignore[return-value]

    def _piece(self, key: str, value: Any, as_data: Callable[[Any], Any]) -> str:
        memo = self._pieces[key]
        text = memo.get(value)
        if text is None:
            text = memo[value] = f"{_encode(key)}: {_indented(as_data(value), 3)}"
        return text


def _flags(flags: tuple[tuple[str, tuple[str, ...]], ...]) -> dict[str, list[str]]:
    return {tool: list(args) for tool, args in flags}


def _exclusion(excluded: tuple[str, str | None]) -> dict[str, str | None]:
    return {"reason": excluded[0], "by": excluded[1]}


def _commands(commands: tuple[tuple[str, ...], ...]) -> list[list[str]]:
    return [list(c) for c in commands]


def _changes(changes: tuple[Change, ...]) -> list[dict[str, Any]]:
    return [
        {"rule": c.rule, "title": c.title, "kind": c.kind, "detail": c.detail, "references": list(c.references)}
        for c in changes
    ]


def render_yaml(plan: Plan) -> str:
    """The whole plan as YAML."""
    import yaml  # only this format needs it

    text: str = yaml.safe_dump(plan_record(plan), sort_keys=False, allow_unicode=True, width=100)
    return text


def render_table(plan: Plan) -> str:
    """A text table: one line per cell with its status and the rules that touched it."""
    rows = [("CELL", "STATUS", "RULES / REASON")]
    for cell in plan.cells:
        why = cell.excluded if cell.excluded is not None else ", ".join(cell.rule_ids)
        rows.append((cell.id, status(cell), why or ""))
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    lines = [f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c}".rstrip() for a, b, c in rows]
    counts = plan_record(plan)["counts"]
    lines.append(
        f"\n{counts['runnable']} cells run ({counts['worked-around']} worked around), "
        f"{counts['excluded']} excluded"
    )
    return "\n".join(lines) + "\n"
