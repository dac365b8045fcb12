"""The matrix as markdown grids (pure). GitHub renders them in step summaries, check runs and
comments.

- `render_markdown`: the plan, one grid per build: platforms down, the other axes across, each
  cell built, worked around (which rule) or excluded (why).
- `render_states`: the matrix at a glance after a run: one row per build and platform, one column
  per toolchain/version/arch value, each cell marked by how it ended; failed cells link to their
  entry. Beyond MAX_ROWS rows or MAX_COLUMNS columns the rest is folded into counts, so the grid
  stays far within GitHub's limits (65,535 characters for a check run's summary).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ci_matrix.core import markdown as md
from ci_matrix.core.cells import Cell
from ci_matrix.core.matrix import Plan
from ci_matrix.core.render import plan_record, status

Item = TypeVar("Item")
_MARK = {"built": "✅", "worked-around": "🔧", "excluded": "⛔"}
_COLUMN_KEYS = ("rust-toolchain", "rust-profile", "rust-backend", "rust-target", "rust-features",
                "cuda-version", "cuda-arch", "iree-target")
_ROW_KEYS = frozenset(("build", "platform", "uses", "needs-gpu"))


def render_markdown(plan: Plan, title: str = "ci-matrix plan") -> str:
    """A markdown summary: counts, one grid per build, then every change with its reason."""
    counts = plan_record(plan)["counts"]
    event = f" for {md.code(plan.event)}" if plan.event else ""
    lines = [
        f"## {_escape(title)}{event}",
        "",
        f"**{counts['runnable']}** cells run ({counts['worked-around']} worked around), "
        f"**{counts['excluded']}** excluded. ✅ built · 🔧 worked around · ⛔ excluded",
        "",
    ]
    for build in _in_order(c.build for c in plan.cells):
        lines += _grid(build, [c for c in plan.cells if c.build == build])
    lines += _details(plan.cells)
    return "\n".join(lines) + "\n"


def _in_order(items: Iterable[Item]) -> list[Item]:
    return list(dict.fromkeys(items))


def _column(cell: Cell) -> str:
    found = dict(cell.requested)
    keys = [k for k in _COLUMN_KEYS if found.get(k)]
    keys += [k for k in found if k not in _COLUMN_KEYS and k not in _ROW_KEYS]
    return " ".join(found[k] for k in keys) or "—"


def _grid(build: str, cells: list[Cell]) -> list[str]:
    layout = _Layout.of(cells)
    lines = [f"### {_escape(build)}", "", "| platform | " + " | ".join(_escape(c) for c in layout.columns) + " |"]
    lines.append("|---" * (len(layout.columns) + 1) + "|")
    for row in layout.rows:
        marks = [_mark(layout.cells([row], [col])) for col in layout.columns]
        lines.append(f"| {_escape(row[1])} | " + " | ".join(marks) + " |")
    return [*lines, ""]


def _mark(cells: list[Cell]) -> str:
    marks = []
    for cell in cells:
        state = status(cell)
        rules = ", ".join(cell.rule_ids)
        why = cell.excluded_by if state == "excluded" else rules
        if cell.excluded_by == "duplicate":
            why = f"{rules} → duplicate"
        marks.append(_MARK[state] + (f" {md.code(why, table=True)}" if why else ""))
    return "<br>".join(marks) or " "


def _details(cells: Iterable[Cell]) -> list[str]:
    touched = [c for c in cells if c.changes or c.excluded is not None]
    if not touched:
        return []
    lines = ["<details><summary>Why cells were worked around or excluded</summary>", ""]
    for cell in touched:
        lines.append(f"- {md.code(cell.id)}")
        lines += [f"  - 🔧 {md.code(c.rule)} {_escape(c.title)}: {_escape(c.detail)} {_refs(c.references)}"
                  for c in cell.changes if c.kind == "workaround"]
        if cell.excluded is not None:
            refs = next((c.references for c in cell.changes if c.kind == "exclusion"), ())
            lines.append(f"  - ⛔ {_escape(cell.excluded)} ({_escape(cell.excluded_by or '')}) {_refs(refs)}")
    return [*lines, "", "</details>"]


def _refs(references: Iterable[str]) -> str:
    return " ".join(md.link("ref", r) for r in references)


def _escape(text: str) -> str:
    return md.text(text)


class CellState(enum.Enum):
    """How a cell of the matrix ended, as the grid marks it (the value is the mark)."""

    PASSED = "✅"
    WORKED_AROUND = "🔧"
    KNOWN = "❌"
    UNCLASSIFIED = "❓"
    EXCLUDED = "⛔"
    NO_RESULT = "⬜"


LEGEND = {
    CellState.PASSED: "passed",
    CellState.WORKED_AROUND: "passed with a workaround",
    CellState.KNOWN: "failed, known cause",
    CellState.UNCLASSIFIED: "failed, unclassified",
    CellState.EXCLUDED: "excluded",
    CellState.NO_RESULT: "no result",
}
MAX_ROWS = 24
MAX_COLUMNS = 12
GRID_LIMIT = 32_000  # bytes; a grid above it (many cells in one slot) becomes counts per build


def anchor_name(cell_id: str) -> str:
    """The HTML id of a failed cell's entry in the report, which its grid mark links to."""
    return md.anchor_id(f"ci-matrix-{cell_id}")


def render_states(cells: Sequence[Cell], states: Mapping[str, CellState], linked: Collection[str]) -> str:
    """The matrix at a glance: `states` by cell id (a runnable cell without one has no result);
    the marks of cells in `linked` link to their entry (`anchor_name`)."""
    state = {c.id: CellState.EXCLUDED if c.excluded is not None else states.get(c.id, CellState.NO_RESULT)
             for c in cells}
    totals = Counter(state[c.id] for c in cells)
    counts = " · ".join(f"{s.value} {totals[s]} {LEGEND[s]}" for s in CellState if totals[s])
    table = _state_table(cells, state, linked)
    if len(table.encode("utf-8")) > GRID_LIMIT:
        table = _build_counts(cells, state)
    legend = " · ".join(f"{s.value} {LEGEND[s]}" for s in CellState)
    return f"**{len(cells)}** cells: {counts}\n\n{table}\n\n<sub>{legend}</sub>\n"


Row = tuple[str, str]  # (build, platform)


@dataclass(frozen=True)
class _Layout:
    """Where each cell goes: rows (build, platform) and columns (its other values), in order."""

    rows: tuple[Row, ...]
    columns: tuple[str, ...]
    slots: Mapping[tuple[Row, str], tuple[Cell, ...]]

    @classmethod
    def of(cls, cells: Sequence[Cell]) -> _Layout:
        slots: dict[tuple[Row, str], tuple[Cell, ...]] = {}
        for cell in cells:
            key = ((cell.build, dict(cell.requested)["platform"]), _column(cell))
            slots[key] = (*slots.get(key, ()), cell)
        return cls(tuple(_in_order(k[0] for k in slots)), tuple(_in_order(k[1] for k in slots)), slots)

    def cells(self, rows: Sequence[Row], columns: Sequence[str]) -> list[Cell]:
        """The cells of these rows and columns."""
        return [c for r in rows for col in columns for c in self.slots.get((r, col), ())]


def _state_table(cells: Sequence[Cell], state: Mapping[str, CellState], linked: Collection[str]) -> str:
    layout = _Layout.of(cells)
    shown, folded = layout.columns[:MAX_COLUMNS], layout.columns[MAX_COLUMNS:]
    head = ["build · platform", *(_escape(c) for c in shown), *([f"+{len(folded)} more"] if folded else [])]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for row in layout.rows[:MAX_ROWS]:
        marks = [" ".join(_state_mark(c, state[c.id], c.id in linked) for c in layout.cells([row], [col])) or " "
                 for col in shown]
        marks += [_counts(state[c.id] for c in layout.cells([row], folded))] if folded else []
        lines.append(f"| {_escape(row[0])} · {_escape(row[1])} | " + " | ".join(marks) + " |")
    rest = layout.rows[MAX_ROWS:]
    if rest:
        counts = [_counts(state[c.id] for c in layout.cells(rest, [col])) for col in shown]
        counts += [_counts(state[c.id] for c in layout.cells(rest, folded))] if folded else []
        lines.append(f"| +{len(rest)} more rows | " + " | ".join(counts) + " |")
    return "\n".join(lines)


def _state_mark(cell: Cell, state: CellState, link: bool) -> str:
    return f"[{state.value}](#{anchor_name(cell.id)})" if link else state.value


def _counts(states: Iterable[CellState]) -> str:
    found = Counter(states)
    return " ".join(f"{s.value}{found[s]}" for s in CellState if found[s]) or " "


def _build_counts(cells: Sequence[Cell], state: Mapping[str, CellState]) -> str:
    builds = _in_order(c.build for c in cells)
    return "\n".join(f"- {_escape(b)}: {_counts(state[c.id] for c in cells if c.build == b)}" for b in builds)
