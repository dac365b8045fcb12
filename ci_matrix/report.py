"""The pull request report, built from every cell's diagnosis file (pure).

A diagnosis file is attacker input when the run came from a fork: `accept` keeps only what such a
file may say (a cell of this repository's plan, its outcome and exit code, rule ids of this
repository's knowledge base, log lines) and every word the report writes about a rule comes from
the base repository's rule. `build_report` renders one sticky comment (a hidden marker identifies
it), the check run's summary and text, and its annotations: the matrix at a glance, known
failures with their diagnosis, fix, references and a link to the run, unclassified failures with
their last log lines, and the cells that rules worked around or excluded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ci_matrix.core import markdown as md
from ci_matrix.core.cells import Cell
from ci_matrix.core.grid import CellState, anchor_name, render_states
from ci_matrix.core.knowledge import Rule
from ci_matrix.core.matrix import Plan

MARKER = "<!-- ci-matrix:report -->"
TAIL_LINES = 15  # last log lines shown for an unclassified failure
EXCERPT_LINES = 5  # lines of a matched log excerpt
DRAFT_LINES = 40  # lines of a draft rule for an unclassified failure
NAMED_IGNORED = 20  # ignored files named one by one; the rest are counted
ALSO_MATCHED = 5  # other rules named for one cell
DETAILED_CELLS = 10  # cells of one rule shown with their log lines; the others are listed
UNCLASSIFIED_PER_SECTION = 10  # unclassified cells (with their last log lines) per section
NAME_LIMIT = 120  # characters of an ignored file's name
_REACHED_BY = {
    "signature": "matched by its log signature",
    "signature+evidence": "matched by its log signature and the cell's evidence",
    "fallback": "matched by a line that is often only noise: nothing else in the log explains the failure",
    "configuration": "matched by the cell's configuration: this failure leaves no telltale log line",
}
_CONFIDENCE = ("high", "medium", "low")


@dataclass(frozen=True)
class Ignored:
    """A diagnosis file that the report did not use, and why (the reason is ours, not the file's)."""

    name: str  # path inside the diagnoses folder (attacker-chosen: shown only as a code span)
    reason: str


@dataclass(frozen=True)
class KnownFinding:
    """A finding whose rule exists in the base repository's knowledge base."""

    rule: Rule
    reached_by: str  # a key of _REACHED_BY
    confidence: str  # one of _CONFIDENCE, or ""
    line: int | None  # where the log matched
    excerpt: tuple[str, ...]  # log text: shown only inside code blocks
    evidence: tuple[str, ...]  # log and cell text: shown only inside code blocks


@dataclass(frozen=True)
class CellResult:
    """What a diagnosis file says about one cell of the plan, as far as it may say it."""

    cell: Cell
    failed: bool
    exit_code: int | None
    findings: tuple[KnownFinding, ...]  # most specific first
    tail: tuple[str, ...]  # last log lines (untrusted)
    draft: tuple[str, ...]  # a draft rule for an unclassified failure (untrusted)
    unknown_rules: int  # findings dropped because their rule is not in the knowledge base
    setup: tuple[str, ...] = ()  # what setup did, when the cell failed setting up (untrusted)

    @property
    def state(self) -> CellState:
        """How the grid marks the cell."""
        if not self.failed:
            return CellState.WORKED_AROUND if self.cell.changes else CellState.PASSED
        return CellState.KNOWN if self.findings else CellState.UNCLASSIFIED


@dataclass(frozen=True)
class Results:
    """The accepted results of a run, and the files that were not used."""

    cells: tuple[CellResult, ...]
    ignored: tuple[Ignored, ...]


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


def accept(files: Sequence[tuple[str, Mapping[str, Any]]], plan: Plan, rules: Sequence[Rule],
           ignored: Sequence[Ignored] = ()) -> Results:
    """Results from schema-valid diagnosis records (name, record), in name order: a record whose
    cell does not run in `plan`, or whose cell an earlier record already reported, is ignored."""
    runnable = {c.id: c for c in plan.runnable}
    by_id = {r.id: r for r in rules}
    results: dict[str, CellResult] = {}
    dropped = list(ignored)
    for name, record in files:
        cell = runnable.get(record.get("cell", "")) if isinstance(record.get("cell"), str) else None
        if cell is None:
            dropped.append(Ignored(name, "its cell does not run in this repository's plan"))
        elif cell.id in results:
            dropped.append(Ignored(name, "a second diagnosis of a cell already reported"))
        else:
            results[cell.id] = _result(cell, record, by_id)
    order = {c.id: i for i, c in enumerate(plan.cells)}
    cells = tuple(sorted(results.values(), key=lambda r: order[r.cell.id]))
    return Results(cells, tuple(dropped))


def _result(cell: Cell, record: Mapping[str, Any], rules: Mapping[str, Rule]) -> CellResult:
    failed = record.get("outcome") == "failed"
    raw = [f for f in record.get("findings") or [] if isinstance(f, Mapping)] if failed else []
    findings = tuple(_finding(rules[f["rule"]], f) for f in raw if rules.get(str(f.get("rule"))) is not None)
    in_setup = failed and record.get("stage") == "setup"
    return CellResult(cell, failed, _exit_code(record.get("exit-code")), findings,
                      _lines(record.get("tail"))[-TAIL_LINES:] if failed else (),
                      _draft(record.get("draft")) if failed else (), len(raw) - len(findings),
                      _lines(record.get("setup"))[:TAIL_LINES] if in_setup else ())


def _exit_code(value: Any) -> int | None:
    is_code = isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**32
    return value if is_code else None


def _lines(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _draft(value: Any) -> tuple[str, ...]:
    if not value:
        return ()
    text = value if isinstance(value, str) else json.dumps(value, indent=2, sort_keys=True)
    return tuple(text.splitlines()[:DRAFT_LINES])


def _finding(rule: Rule, finding: Mapping[str, Any]) -> KnownFinding:
    log = finding.get("log") if isinstance(finding.get("log"), Mapping) else None
    matched = "signature" if finding.get("matched-by") == "log" else "configuration"
    reached = _one_of(finding.get("reached-by"), tuple(_REACHED_BY)) or matched
    confidence = _one_of(finding.get("confidence"), _CONFIDENCE)
    line = log.get("line") if log and isinstance(log.get("line"), int) else None
    excerpt = tuple(str(log.get("text", "")).splitlines()[:EXCERPT_LINES]) if log else ()
    return KnownFinding(rule, reached, confidence, line, excerpt, _evidence(finding.get("evidence")))


def _one_of(value: Any, allowed: tuple[str, ...]) -> str:
    """`value` when it is one of `allowed` (an enum of the schema), else ''."""
    return value if isinstance(value, str) and value in allowed else ""


def _evidence(value: Any) -> tuple[str, ...]:
    items = [e for e in value if isinstance(e, Mapping)] if isinstance(value, list) else []
    lines = []
    for item in items[:EXCERPT_LINES]:
        if item.get("source") == "log":
            lines.append(f"log line {item.get('line')}: {item.get('text', '')}")
        else:
            lines.append(f"{item.get('fact', '')} = {item.get('value', '')}")
    return tuple(lines)


def build_report(results: Results, plan: Plan, run_url: str) -> Report:
    """The report of a workflow run, from its accepted results and the plan they belong to."""
    failed = [r for r in results.cells if r.failed]
    known = [r for r in failed if r.findings]
    unknown = [r for r in failed if not r.findings]
    title = _title(len(results.cells), known, unknown)
    sections = [_summary_section(title, results, plan, run_url)]
    if known:
        sections += _known_sections(known, run_url)
    if unknown:
        sections += _unknown_sections(unknown)
    changed = [c for c in plan.cells if c.changes or c.excluded is not None]
    if changed:
        sections.append(_changed_section(changed))
    annotations = tuple(_annotation(r) for r in failed)
    return Report(title, "failure" if failed else "success", tuple(sections), annotations)


def _title(total: int, known: Sequence[CellResult], unknown: Sequence[CellResult]) -> str:
    if not known and not unknown:
        return f"all {total} cells passed"
    return f"{len(known) + len(unknown)} of {total} cells failed ({len(known)} known, {len(unknown)} unclassified)"


def _summary_section(title: str, results: Results, plan: Plan, run_url: str) -> str:
    lines = [f"## ci-matrix: {md.text(title)}", ""]
    if run_url:
        lines += [md.link("workflow run", run_url), ""]
    states = {r.cell.id: r.state for r in results.cells}
    lines.append(render_states(plan.cells, states, {r.cell.id for r in results.cells if r.failed}).rstrip("\n"))
    lines += _ignored_note(results)
    return "\n".join(lines).rstrip("\n")


def _ignored_note(results: Results) -> list[str]:
    dropped = results.ignored
    unknown = sum(r.unknown_rules for r in results.cells)
    lines = []
    if dropped:
        files = "file was" if len(dropped) == 1 else "files were"
        named = [f"{md.code(md.capped(i.name, NAME_LIMIT))} ({md.text(i.reason)})" for i in dropped[:NAMED_IGNORED]]
        more = [f"{len(dropped) - NAMED_IGNORED:,} more"] if len(dropped) > NAMED_IGNORED else []
        lines.append(f"⚠️ {len(dropped):,} diagnosis {files} ignored: " + "; ".join([*named, *more]) + ".")
    if unknown:
        noun = "finding named a rule" if unknown == 1 else "findings named rules"
        lines.append(f"⚠️ {unknown:,} {noun} that this repository's knowledge base does not have: left out.")
    return ["", *lines] if lines else []


def _known_sections(failed: Sequence[CellResult], run_url: str) -> list[str]:
    """One section per rule, its cells below it: a comment too long for GitHub loses whole rules."""
    groups: dict[str, list[CellResult]] = {}
    for result in failed:
        groups.setdefault(result.findings[0].rule.id, []).append(result)
    sections = [_rule_section(results, run_url) for results in groups.values()]
    return [f"### Known failures\n\n{sections[0]}", *sections[1:]]


def _rule_section(results: Sequence[CellResult], run_url: str) -> str:
    rule = results[0].findings[0].rule
    refs = " ".join(md.link(str(i + 1), r) for i, r in enumerate(rule.references))
    lines = [f"#### {md.code(rule.id)} {md.text(rule.title)} {refs}".rstrip(), ""]
    if rule.diagnosis is not None:
        lines += [f"- why: {md.text(rule.diagnosis.explanation)}", f"- fix: {md.text(rule.diagnosis.fix)}"]
    for result in results[:DETAILED_CELLS]:
        lines += _known_item(result, run_url)
    rest = results[DETAILED_CELLS:]
    if rest:
        cells = ", ".join(f"{_anchor(r.cell)}{md.code(r.cell.id)}" for r in rest)
        lines.append(f"- {len(rest)} more cells (their log lines are in their diagnosis files): {cells}")
    return "\n".join(lines).rstrip("\n")


def _known_item(result: CellResult, run_url: str) -> list[str]:
    top = result.findings[0]
    where = f" ({md.link('log', run_url)})" if run_url else ""
    confidence = f" (confidence: {top.confidence})" if top.confidence else ""
    lines = [f"- {_anchor(result.cell)}**{md.code(result.cell.id)}**{where}: {_REACHED_BY[top.reached_by]}{confidence}"]
    if top.excerpt:
        at = f"log line {top.line}:" if top.line else "log:"
        lines += [f"  - {at}", "", *md.code_block(top.excerpt, "    "), ""]
    if top.evidence:
        lines += ["  - evidence:", "", *md.code_block(top.evidence, "    "), ""]
    rule = top.rule.id
    also = [md.code(r) for r in dict.fromkeys(f.rule.id for f in result.findings[1:]) if r != rule][:ALSO_MATCHED]
    return lines + ([f"  - also matched: {', '.join(also)}"] if also else [])


def _anchor(cell: Cell) -> str:
    return f'<a id="{anchor_name(cell.id)}"></a>'


def _unknown_sections(failed: Sequence[CellResult]) -> list[str]:
    """Sections of UNCLASSIFIED_PER_SECTION cells: a comment too long for GitHub loses whole ones."""
    hint = "No known signature matched: add a rule (see the README's knowledge base section)."
    chunks = [failed[i : i + UNCLASSIFIED_PER_SECTION] for i in range(0, len(failed), UNCLASSIFIED_PER_SECTION)]
    sections = ["\n".join(line for result in chunk for line in _unknown_item(result)).rstrip("\n") for chunk in chunks]
    return [f"### Unclassified failures\n\n{hint}\n\n{sections[0]}", *sections[1:]]


def _unknown_item(result: CellResult) -> list[str]:
    code = f" exit {result.exit_code}" if result.exit_code is not None else ""
    code += ", before its build: its toolchains could not be set up" if result.setup else ""
    lines = [f"{_anchor(result.cell)}<details><summary><code>{md.html(result.cell.id)}</code>{code}</summary>",
             "", *md.code_block([*result.setup, *result.tail])]
    if result.draft:
        lines += ["", "A draft rule for this failure (review it before adding it):", "", *md.code_block(result.draft)]
    return [*lines, "", "</details>", ""]


def _changed_section(cells: Sequence[Cell]) -> str:
    lines = ["### Worked around or excluded", "", "<details><summary>cells the knowledge base changed</summary>", ""]
    for cell in cells:
        if cell.excluded is not None:
            lines.append(f"- ⛔ {md.code(cell.id)}: {md.text(cell.excluded)} ({md.text(cell.excluded_by or '')})")
        else:
            changes = "; ".join(f"{md.code(c.rule)} {md.text(c.detail)}" for c in cell.changes)
            lines.append(f"- 🔧 {md.code(cell.id)}: {changes}")
    return "\n".join([*lines, "", "</details>"])


def _annotation(result: CellResult) -> tuple[str, str, str]:
    """Annotations are plain text (no markdown), but log lines are still capped and cleaned."""
    if not result.findings:
        tail = "\n".join(md.capped(line) for line in result.tail[-10:])
        return ("failure", f"{result.cell.id}: unclassified failure", tail or "no log lines")
    rule = result.findings[0].rule
    why = f"{rule.diagnosis.explanation}\nFix: {rule.diagnosis.fix}\n" if rule.diagnosis else ""
    return ("failure", f"{result.cell.id}: {rule.title}", why + "\n".join(rule.references))
