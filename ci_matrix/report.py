"""The pull request report, built from every cell's diagnosis file (pure).

One sticky comment (a hidden marker identifies it), the check run's summary and its
annotations: known failures with their diagnosis, fix, reference and a link to the run;
unclassified failures; the cells that rules worked around or excluded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ci_matrix.core.cells import Cell
from ci_matrix.diagnose.output import fenced
from ci_matrix.diagnose.output import markdown_text as _md

MARKER = "<!-- ci-matrix:report -->"


@dataclass(frozen=True)
class Report:
    """What the report job posts."""

    title: str
    conclusion: str  # success | failure
    sections: tuple[str, ...]  # comment sections, most important first; the summary is the first
    annotations: tuple[tuple[str, str, str], ...]  # (level notice|warning|failure, title, message)

    @property
    def text(self) -> str:
        """The whole report as one markdown text (check run output, step summary)."""
        return "\n\n".join(self.sections)


def build_report(diagnoses: Sequence[Mapping[str, Any]], cells: Sequence[Cell], run_url: str) -> Report:
    """The report of a workflow run: diagnosis records (schemas/diagnosis.schema.json) and the
    plan's cells (for what was worked around or excluded)."""
    failed = [d for d in diagnoses if d.get("outcome") == "failed"]
    known = [d for d in failed if d.get("findings")]
    unknown = [d for d in failed if not d.get("findings")]
    title = _title(len(diagnoses), known, unknown)
    sections = [f"## ci-matrix: {title}\n\n[workflow run]({run_url})" if run_url else f"## ci-matrix: {title}"]
    if known:
        sections.append(_known_section(known, run_url))
    if unknown:
        sections.append(_unknown_section(unknown))
    changed = [c for c in cells if c.changes or c.excluded is not None]
    if changed:
        sections.append(_changed_section(changed))
    annotations = tuple(_annotation(d) for d in failed)
    return Report(title, "failure" if failed else "success", tuple(sections), annotations)


def _title(total: int, known: Sequence[Mapping[str, Any]], unknown: Sequence[Mapping[str, Any]]) -> str:
    if not known and not unknown:
        return f"all {total} cells passed"
    return f"{len(known) + len(unknown)} of {total} cells failed ({len(known)} known, {len(unknown)} unclassified)"


def _known_section(failed: Sequence[Mapping[str, Any]], run_url: str) -> str:
    lines = ["### Known failures", ""]
    for record in failed:
        top = record["findings"][0]
        refs = " ".join(f"[{i + 1}]({_md(r)})" for i, r in enumerate(top.get("references", [])))
        where = f" ([log]({run_url}))" if run_url else ""
        lines.append(f"- **`{_md(record['cell'])}`**{where}: `{top['rule']}` {_md(top['title'])} {refs}")
        log = top.get("log")
        if log:
            lines += ["", "  ```text", f"  {fenced(log['text'])}", "  ```", ""]
        else:
            lines.append("  - matched by the cell's configuration: this failure leaves no telltale log line")
        lines += [f"  - why: {_md(top['explanation'])}", f"  - fix: {_md(top['fix'])}"]
    return "\n".join(lines)


def _unknown_section(failed: Sequence[Mapping[str, Any]]) -> str:
    lines = ["### Unclassified failures", ""]
    for record in failed:
        lines += [f"<details><summary><code>{_md(record['cell'])}</code> exit {record.get('exit-code')}</summary>",
                  "", "```text", *(fenced(t) for t in record.get("tail", [])[-15:]), "```", "</details>", ""]
    lines.append("No known signature matched: add a rule (see the README's knowledge base section).")
    return "\n".join(lines)


def _changed_section(cells: Sequence[Cell]) -> str:
    lines = ["### Worked around or excluded", "", "<details><summary>cells the knowledge base changed</summary>", ""]
    for cell in cells:
        if cell.excluded is not None:
            lines.append(f"- ⛔ `{cell.id}`: {_md(cell.excluded)} ({cell.excluded_by})")
        else:
            lines.append(f"- 🔧 `{cell.id}`: " + "; ".join(f"`{c.rule}` {_md(c.detail)}" for c in cell.changes))
    return "\n".join([*lines, "", "</details>"])


def _annotation(record: Mapping[str, Any]) -> tuple[str, str, str]:
    findings = record.get("findings") or []
    if not findings:
        return ("failure", f"{record['cell']}: unclassified failure", "\n".join(record.get("tail", [])[-10:]))
    top = findings[0]
    message = f"{top['explanation']}\nFix: {top['fix']}\n" + "\n".join(top.get("references", []))
    return ("failure", f"{record['cell']}: {top['title']}", message)
