"""The plan as a markdown grid: platforms down, the other axes across, each cell built,
worked around (which rule) or excluded (why). GitHub renders it in step summaries."""

from __future__ import annotations

from collections.abc import Iterable

from ci_matrix.core.cells import Cell
from ci_matrix.core.matrix import Plan
from ci_matrix.core.render import plan_record, status

_MARK = {"built": "✅", "worked-around": "🔧", "excluded": "⛔"}
_COLUMN_KEYS = ("rust-toolchain", "rust-profile", "rust-backend", "rust-target", "rust-features",
                "cuda-version", "cuda-arch", "iree-target")
_ROW_KEYS = frozenset(("build", "platform", "uses", "needs-gpu"))


def render_markdown(plan: Plan, title: str = "ci-matrix plan") -> str:
    """A markdown summary: counts, one grid per build, then every change with its reason."""
    counts = plan_record(plan)["counts"]
    event = f" for `{plan.event}`" if plan.event else ""
    lines = [
        f"## {title}{event}",
        "",
        f"**{counts['runnable']}** cells run ({counts['worked-around']} worked around), "
        f"**{counts['excluded']}** excluded. ✅ built · 🔧 worked around · ⛔ excluded",
        "",
    ]
    for build in _in_order(c.build for c in plan.cells):
        lines += _grid(build, [c for c in plan.cells if c.build == build])
    lines += _details(plan.cells)
    return "\n".join(lines) + "\n"


def _in_order(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _column(cell: Cell) -> str:
    found = dict(cell.requested)
    keys = [k for k in _COLUMN_KEYS if found.get(k)]
    keys += [k for k in found if k not in _COLUMN_KEYS and k not in _ROW_KEYS]
    return " ".join(found[k] for k in keys) or "—"


def _grid(build: str, cells: list[Cell]) -> list[str]:
    columns = _in_order(_column(c) for c in cells)
    platforms = _in_order(dict(c.requested)["platform"] for c in cells)
    lines = [f"### {build}", "", "| platform | " + " | ".join(_escape(c) for c in columns) + " |"]
    lines.append("|---" * (len(columns) + 1) + "|")
    for platform in platforms:
        row = [_mark([c for c in cells if dict(c.requested)["platform"] == platform and _column(c) == col])
               for col in columns]
        lines.append(f"| {platform} | " + " | ".join(row) + " |")
    return [*lines, ""]


def _mark(cells: list[Cell]) -> str:
    marks = []
    for cell in cells:
        state = status(cell)
        rules = ", ".join(cell.rule_ids)
        why = cell.excluded_by if state == "excluded" else rules
        if cell.excluded_by == "duplicate":
            why = f"{rules} → duplicate"
        marks.append(_MARK[state] + (f" `{why}`" if why else ""))
    return "<br>".join(marks) or " "


def _details(cells: Iterable[Cell]) -> list[str]:
    touched = [c for c in cells if c.changes or c.excluded is not None]
    if not touched:
        return []
    lines = ["<details><summary>Why cells were worked around or excluded</summary>", ""]
    for cell in touched:
        lines.append(f"- `{cell.id}`")
        lines += [f"  - 🔧 `{c.rule}` {_escape(c.title)}: {_escape(c.detail)} {_refs(c.references)}"
                  for c in cell.changes if c.kind == "workaround"]
        if cell.excluded is not None:
            refs = next((c.references for c in cell.changes if c.kind == "exclusion"), ())
            lines.append(f"  - ⛔ {_escape(cell.excluded)} ({cell.excluded_by}) {_refs(refs)}")
    return [*lines, "", "</details>"]


def _refs(references: Iterable[str]) -> str:
    return " ".join(f"[ref]({r})" for r in references)


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
