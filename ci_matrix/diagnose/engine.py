"""From scanner hits and a cell's facts to a diagnosis: which known failure this is.

Pure: the scan of the log happens elsewhere. The most specific match wins: a rule's
priority, then a signature scoped to the cell's values (a generic crash that only means
something on such cells), then the longer pattern. A passing build is never given a
known-failure diagnosis; a failure that matches nothing is reported as unclassified.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ci_matrix.core.knowledge import Rule
from ci_matrix.diagnose.scanner import Hit, Signature

UNCLASSIFIED_HINT = (
    "No known failure signature matched. If this failure is known, add a rule for it: a project rule file "
    "listed under `rules:` in ci-matrix.yml, with a `diagnosis.signatures` regex built from the failing line "
    "(see `ci-matrix rules --format json` for examples), and a fixture log for `ci-matrix rules test`."
)


@dataclass(frozen=True)
class Finding:
    """One known failure recognised in a log (or, for silent failures, by configuration)."""

    rule: str
    title: str
    domain: str
    matched_by: str  # "log" or "configuration"
    explanation: str
    fix: str
    references: tuple[str, ...]
    line: int = 0
    end_line: int = 0
    text: str = ""
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    groups: Mapping[str, str] = field(default_factory=dict)
    count: int = 0
    rank: tuple[int, ...] = ()


@dataclass(frozen=True)
class Diagnosis:
    """What ci-matrix concluded about one build's log."""

    cell: str
    outcome: str  # passed | failed
    exit_code: int | None
    findings: tuple[Finding, ...]
    tail: tuple[str, ...] = ()  # the log's last lines, for unclassified failures
    log: str = ""
    tools: Mapping[str, str] = field(default_factory=dict)  # actual versions seen by preflight
    warnings: tuple[str, ...] = ()  # preflight warnings
    setup: tuple[str, ...] = ()  # what `ci-matrix setup` installed or found
    stage: str = "build"  # build | setup: where the cell failed

    @property
    def unclassified(self) -> bool:
        """A failure that no rule explains."""
        return self.outcome == "failed" and not self.findings


def signatures(rules: Iterable[Rule]) -> list[Signature]:
    """Every log signature of the knowledge base, keyed `rule-id#index`."""
    return [
        Signature(f"{rule.id}#{i}", pattern)
        for rule in rules
        if rule.diagnosis is not None
        for i, pattern in enumerate(rule.diagnosis.signatures)
    ]


def diagnose(
    hits: Mapping[str, Hit],
    rules: Sequence[Rule],
    facts: Mapping[str, Any] | None,
    *,
    cell: str = "",
    exit_code: int | None = None,
) -> Diagnosis:
    """The diagnosis of a build: `exit_code` 0 means it passed; None means unknown but failed."""
    if exit_code == 0:
        return Diagnosis(cell, "passed", 0, ())
    by_id = {rule.id: rule for rule in rules}
    found: dict[str, Finding] = {}
    for key, hit in hits.items():
        rule = by_id.get(key.rpartition("#")[0])
        if rule is None or rule.diagnosis is None:
            continue
        finding = _from_log(rule, hit, facts)
        if finding is not None and (rule.id not in found or finding.rank > found[rule.id].rank):
            found[rule.id] = finding
    for rule in rules:
        if rule.id not in found and _config_match(rule, facts):
            found[rule.id] = _from_config(rule)
    ordered = sorted(found.values(), key=lambda f: f.rank, reverse=True)
    return Diagnosis(cell, "failed", exit_code, tuple(ordered))


def _from_log(rule: Rule, hit: Hit, facts: Mapping[str, Any] | None) -> Finding | None:
    assert rule.diagnosis is not None
    scope = rule.diagnosis.scope
    if scope is not None and (facts is None or not scope.holds(facts)):
        return None  # a generic line that only means this failure on such cells
    pattern = rule.diagnosis.signatures[int(hit.key.rpartition("#")[2])]
    rank = (rule.diagnosis.priority, 1, int(scope is not None), len(pattern), hit.line)
    return replace(
        _from_config(rule),
        matched_by="log",
        line=hit.line,
        end_line=hit.end_line,
        text=hit.text,
        before=hit.before,
        after=hit.after,
        groups=dict(hit.groups),
        count=hit.count,
        rank=rank,
    )


def _config_match(rule: Rule, facts: Mapping[str, Any] | None) -> bool:
    """Silent failures: a failed cell that matches the rule's conditions is named."""
    diagnosis = rule.diagnosis
    if diagnosis is None or not diagnosis.match_on_config or facts is None:
        return False
    conditions = rule.when if diagnosis.scope is None else diagnosis.scope
    return conditions is not None and conditions.holds(facts)


def _from_config(rule: Rule) -> Finding:
    assert rule.diagnosis is not None
    return Finding(
        rule=rule.id,
        title=rule.title,
        domain=rule.domain,
        matched_by="configuration",
        explanation=rule.diagnosis.explanation,
        fix=rule.diagnosis.fix,
        references=rule.references,
        rank=(rule.diagnosis.priority, 0, 1, 0, 0),
    )
