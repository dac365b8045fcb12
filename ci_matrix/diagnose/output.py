"""A diagnosis as text, as JSON (schemas/diagnosis.schema.json), as annotations and as a
markdown step summary. Log text is untrusted: it is only ever shown escaped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ci_matrix.core import markdown
from ci_matrix.diagnose.engine import UNCLASSIFIED_HINT, Diagnosis, Finding, RuledOut
from ci_matrix.diagnose.evidence import Conflict, Evidence
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
        "reached-by": finding.reached_by,
        "confidence": finding.confidence,
        "generic": finding.generic,
        "evidence": [evidence_record(e) for e in finding.evidence],
        "unknown": list(finding.unknown),
    }
    if finding.refined_from:
        record["refined-from"] = finding.refined_from
    if finding.maybe:
        record["maybe"] = [{"rule": rule, "unknown": list(facts)} for rule, facts in finding.maybe]
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


def evidence_record(item: Evidence) -> dict[str, Any]:
    """A fact and where it came from."""
    return {"fact": item.fact, "value": item.value, "source": item.source, "line": item.line, "text": item.text,
            "match": item.match}


def _conflict_record(conflict: Conflict) -> dict[str, Any]:
    return {"fact": conflict.fact, "cell": conflict.cell, "log": evidence_record(conflict.log)}


def _ruled_out_record(ruled: RuledOut) -> dict[str, Any]:
    return {"rule": ruled.rule, "line": ruled.line, "evidence": [evidence_record(e) for e in ruled.evidence]}


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
        "evidence": [evidence_record(e) for e in diagnosis.evidence],
        "conflicts": [_conflict_record(c) for c in diagnosis.conflicts],
        "ruled-out": [_ruled_out_record(r) for r in diagnosis.ruled_out],
        "draft": diagnosis.draft or None,
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
    lines += _facts_text(diagnosis)
    if diagnosis.unclassified:
        lines += ["", UNCLASSIFIED_HINT]
        if diagnosis.tail:
            lines += ["", "last lines of the log:", *(f"  | {line}" for line in diagnosis.tail)]
        if diagnosis.draft:
            draft = [f"  {line}" for line in diagnosis.draft.splitlines()]
            lines += ["", "a rule for it (ci-matrix rules draft):", *draft]
    lines += [f"warning: {w}" for w in diagnosis.warnings]
    lines += [f"setup: {line}" for line in diagnosis.setup]
    return "\n".join(lines) + "\n"


REACHED = {
    "signature": "its log signature",
    "signature+evidence": "a log signature, confirmed by the facts below",
    "fallback": "a line that is often only noise, named because nothing else in the log explains the failure",
    "configuration": "the cell's configuration alone (this failure leaves no telltale log line)",
}
_SHOWN = 160  # characters of an evidence line shown in text and annotations


def how(finding: Finding) -> str:
    """How a finding was reached and how sure it is, in a few words."""
    refined = f"; it refines the generic {finding.refined_from}" if finding.refined_from else ""
    unknown = f"; not known: {', '.join(finding.unknown)}" if finding.unknown else ""
    generic = "; a symptom many causes share (the explanation lists them)" if finding.generic else ""
    return f"{finding.confidence} confidence: {REACHED[finding.reached_by]}{refined}{generic}{unknown}"


def evidence_lines(items: Sequence[Evidence]) -> list[str]:
    """Facts grouped by where they came from: each log line once, with what was read on it."""
    groups: dict[tuple[str, int, str], list[Evidence]] = {}
    for item in items:
        where = item.match or item.text if item.source == "log" else item.text
        groups.setdefault((item.source, item.line, where), []).append(item)
    lines = []
    for (source, line, where), found in groups.items():
        facts = ", ".join(f"{e.fact} = {e.value}" for e in found)
        if source == "log":
            lines.append(f"log line {line}: {facts}  ← {_short(where)}")
        elif source == "default":
            lines.append(f"{facts}  ← {where}")
        else:
            lines.append(f"the cell: {facts}")
    return lines


def _short(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def _finding_text(finding: Finding, prefix: str) -> list[str]:
    lines = ["", f"{prefix}{finding.rule}: {finding.title}"]
    if finding.matched_by == "log":
        lines.append(f"  log line {finding.line}: {finding.text}")
    lines.append(f"  how: {how(finding)}")
    lines += [f"  evidence: {line}" for line in evidence_lines(finding.evidence)]
    lines += [f"  may be {rule}, if the log showed {', '.join(facts)}" for rule, facts in finding.maybe]
    lines += [f"  why: {finding.explanation}", f"  fix: {finding.fix}"]
    lines += [f"  see: {ref}" for ref in finding.references]
    return lines


def _facts_text(diagnosis: Diagnosis) -> list[str]:
    """Conflicts between the cell and the log, and rules the facts ruled out."""
    lines = [f"conflict: the cell says {c.fact} = {c.cell}, the log says {c.log.value} "
             f"(line {c.log.line}); the cell's value was used" for c in diagnosis.conflicts]
    for ruled in diagnosis.ruled_out:
        why = "; ".join(evidence_lines(ruled.evidence)) or "the cell's facts"
        lines.append(f"ruled out: {ruled.rule} (its signature matched line {ruled.line}, but {why})")
    return ["", *lines] if lines else []


def annotations_of(diagnosis: Diagnosis) -> list[Annotation]:
    """Annotations, most important first: the diagnosis, other matches, then warnings."""
    items: list[Annotation] = []
    for i, finding in enumerate(diagnosis.findings):
        title = f"Known failure: {finding.title}"[:255]
        where = f"log line {finding.line}: {finding.text}\n" if finding.matched_by == "log" else ""
        facts = "".join(f"evidence: {line}\n" for line in evidence_lines(finding.evidence))
        message = (f"{where}{how(finding)}\n{facts}{finding.explanation}\nFix: {finding.fix}\n"
                   + "\n".join(finding.references))
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
        refs = " ".join(markdown.link(f"[{n + 1}]", r) for n, r in enumerate(finding.references))
        lines.append(f"- {label}: {markdown.code(finding.rule)}: {markdown_text(finding.title)} {refs}")
        if finding.matched_by == "log":
            lines += [f"  - log line {finding.line}:", "", *markdown.code_block([finding.text], "    "), ""]
        lines.append(f"  - how: {markdown_text(how(finding))}")
        if finding.evidence:
            lines += ["  - evidence:", "", *markdown.code_block(evidence_lines(finding.evidence), "    "), ""]
        lines += [f"  - why: {markdown_text(finding.explanation)}", f"  - fix: {markdown_text(finding.fix)}"]
    lines += [f"- {markdown_text(line)}" for line in _facts_text(diagnosis) if line]
    if diagnosis.unclassified:
        lines += [markdown_text(UNCLASSIFIED_HINT), "", *markdown.code_block(diagnosis.tail)]
        if diagnosis.draft:
            lines += ["", "<details><summary>A rule for this failure (ci-matrix rules draft)</summary>", "",
                      *markdown.code_block(diagnosis.draft.splitlines(), limit=2000), "", "</details>"]
    lines += [f"- ⚠️ {markdown_text(w)}" for w in diagnosis.warnings]
    lines += [f"- 🧰 {markdown_text(line)}" for line in diagnosis.setup]
    return [*lines, ""]


def markdown_text(text: str) -> str:
    """Markdown-safe text from a log: no HTML, link, mention or table syntax injected."""
    return markdown.text(text)


def fenced(text: str) -> str:
    """A log line that cannot close the code fence it is shown in."""
    return markdown.code_line(text)
