"""A diagnosis as text, as JSON (schemas/diagnosis.schema.json), as annotations and as a
markdown step summary. Log text is untrusted: it is only ever shown escaped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ci_matrix.core import markdown
from ci_matrix.diagnose.engine import UNCLASSIFIED_HINT, Diagnosis, Finding
from ci_matrix.edges.workflow import Annotation

SCHEMA_ID = "https://ci-matrix.dev/schemas/diagnosis.schema.json"


def finding_record(finding: Finding) -> dict[str, Any]:
    """A finding as plain data."""
    record: dict[str, Any] = {
        "rule": finding.rule,
        "title": finding.title,
        "domain": finding.domain,
        "matched-by": finding.matched_by,
        "explanation": finding.explanation,
        "fix": finding.fix,
        "references": list(finding.references),
    }
    if finding.matched_by == "log":
        record["log"] = {
            "line": finding.line,
            "end-line": finding.end_line,
            "text": finding.text,
            "before": list(finding.before),
            "after": list(finding.after),
            "captures": dict(finding.groups),
            "count": finding.count,
        }
    return record


def diagnosis_record(diagnosis: Diagnosis) -> dict[str, Any]:
    """The JSON document of a diagnosis."""
    return {
        "$schema": SCHEMA_ID,
        "cell": diagnosis.cell,
        "outcome": diagnosis.outcome,
        "exit-code": diagnosis.exit_code,
        "classified": not diagnosis.unclassified,
        "findings": [finding_record(f) for f in diagnosis.findings],
        "hint": UNCLASSIFIED_HINT if diagnosis.unclassified else None,
        "tail": list(diagnosis.tail) if diagnosis.unclassified else [],
        "log": diagnosis.log,
        "tools": dict(diagnosis.tools),
        "warnings": list(diagnosis.warnings),
        "setup": list(diagnosis.setup),
        "stage": diagnosis.stage,
    }


def headline(diagnosis: Diagnosis) -> str:
    """One line: what happened to this cell."""
    who = f"cell {diagnosis.cell}" if diagnosis.cell else "the build"
    if diagnosis.outcome == "passed":
        return f"{who} passed"
    code = f" (exit {diagnosis.exit_code})" if diagnosis.exit_code is not None else ""
    if diagnosis.stage == "setup":
        return f"{who} failed before its build{code}: its toolchain could not be set up"
    if not diagnosis.findings:
        return f"{who} failed{code}: unclassified failure"
    return f"{who} failed{code}: known failure {diagnosis.findings[0].rule}"


def render_text(diagnosis: Diagnosis) -> str:
    """A readable diagnosis for a terminal."""
    lines = [f"ci-matrix: {headline(diagnosis)}"]
    for i, finding in enumerate(diagnosis.findings):
        lines += _finding_text(finding, "" if i == 0 else "also matched: ")
    if diagnosis.unclassified:
        lines += ["", UNCLASSIFIED_HINT]
        if diagnosis.tail:
            lines += ["", "last lines of the log:", *(f"  | {line}" for line in diagnosis.tail)]
    lines += [f"warning: {w}" for w in diagnosis.warnings]
    lines += [f"setup: {line}" for line in diagnosis.setup]
    return "\n".join(lines) + "\n"


def _finding_text(finding: Finding, prefix: str) -> list[str]:
    lines = ["", f"{prefix}{finding.rule}: {finding.title}"]
    if finding.matched_by == "log":
        lines.append(f"  log line {finding.line}: {finding.text}")
    else:
        lines.append("  matched by the cell's configuration (this failure leaves no telltale log line)")
    lines += [f"  why: {finding.explanation}", f"  fix: {finding.fix}"]
    lines += [f"  see: {ref}" for ref in finding.references]
    return lines


def annotations_of(diagnosis: Diagnosis) -> list[Annotation]:
    """Annotations, most important first: the diagnosis, other matches, then warnings."""
    items: list[Annotation] = []
    for i, finding in enumerate(diagnosis.findings):
        title = f"Known failure: {finding.title}"[:255]
        where = f"log line {finding.line}: {finding.text}\n" if finding.matched_by == "log" else ""
        message = f"{where}{finding.explanation}\nFix: {finding.fix}\n" + "\n".join(finding.references)
        items.append(Annotation("error" if i == 0 else "warning", message, title))
    if diagnosis.unclassified:
        tail = "\n".join(diagnosis.tail[-5:])
        title = f"Unclassified failure: {headline(diagnosis)}"
        items.append(Annotation("error", f"{UNCLASSIFIED_HINT}\n{tail}", title))
    items += [Annotation("warning", w, "ci-matrix preflight") for w in diagnosis.warnings]
    return items


def render_markdown(diagnoses: Sequence[Diagnosis]) -> str:
    """A step summary for one or more cells."""
    lines = ["## ci-matrix diagnosis", ""]
    for diagnosis in diagnoses:
        lines += _markdown_one(diagnosis)
    return "\n".join(lines) + "\n"


def _markdown_one(diagnosis: Diagnosis) -> list[str]:
    mark = "✅" if diagnosis.outcome == "passed" else "❓" if diagnosis.unclassified else "❌"
    lines = [f"### {mark} {markdown_text(headline(diagnosis))}", ""]
    for i, finding in enumerate(diagnosis.findings):
        label = "**Diagnosis**" if i == 0 else "Also matched"
        refs = " ".join(f"[{n + 1}]({markdown_text(r)})" for n, r in enumerate(finding.references))
        lines.append(f"- {label}: `{finding.rule}`: {markdown_text(finding.title)} {refs}")
        if finding.matched_by == "log":
            lines += [f"  - log line {finding.line}:", "", "    ```text", f"    {fenced(finding.text)}", "    ```", ""]
        else:
            lines.append("  - matched by the cell's configuration (no telltale log line)")
        lines += [f"  - why: {markdown_text(finding.explanation)}", f"  - fix: {markdown_text(finding.fix)}"]
    if diagnosis.unclassified:
        lines += [markdown_text(UNCLASSIFIED_HINT), "", "```text", *(fenced(t) for t in diagnosis.tail), "```"]
    lines += [f"- ⚠️ {markdown_text(w)}" for w in diagnosis.warnings]
    lines += [f"- 🧰 {markdown_text(line)}" for line in diagnosis.setup]
    return [*lines, ""]


def markdown_text(text: str) -> str:
    """Markdown-safe text from a log: no HTML, link, mention or table syntax injected."""
    return markdown.text(text)


def fenced(text: str) -> str:
    """A log line that cannot close the code fence it is shown in."""
    return markdown.code_line(text)
