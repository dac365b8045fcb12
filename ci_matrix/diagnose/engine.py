"""From scanner hits and what is known of the build to a diagnosis: which known failure this is.

Pure: the scan of the log happens elsewhere. What is known is the cell's facts plus the
facts the log itself shows (evidence). A rule's diagnosis scope is evaluated on them with
three answers: it holds, it fails (the rule is ruled out: a linux toolchain for an
Apple-silicon bug), or it is unknown (the finding stands, with lower confidence). A generic
failure (a rustc crash) becomes the specific rule that `refines` it when that rule's scope
holds. The most specific match wins: a rule's priority, a log line over configuration,
confidence, a scoped or refined rule over a generic one, then the longer pattern. A passing
build is never given a known-failure diagnosis; a failure that matches nothing is unclassified.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ci_matrix.core.conditions import Truth, Verdict
from ci_matrix.core.knowledge import Rule
from ci_matrix.diagnose.evidence import KEY_PREFIX, Conflict, Evidence, Facts
from ci_matrix.diagnose.hits import Hit
from ci_matrix.diagnose.scanner import Signature

UNCLASSIFIED_HINT = (
    "No known failure signature matched. If this failure is known, add a rule for it: a project rule file "
    "listed under `rules:` in ci-matrix.yml, with a `diagnosis.signatures` regex built from the failing line "
    "(`ci-matrix rules draft LOG` proposes one), and a fixture log for `ci-matrix rules test`."
)
CONFIDENCE = ("low", "medium", "high")


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
    reached_by: str = "signature"  # signature | signature+evidence | configuration
    confidence: str = "high"  # high | medium | low
    evidence: tuple[Evidence, ...] = ()  # the facts that confirmed the rule's conditions
    unknown: tuple[str, ...] = ()  # facts its conditions need that neither cell nor log gave
    refined_from: str = ""  # the generic rule whose log line this finding explains
    maybe: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (rule, unknown facts) that could refine it
    generic: bool = False  # the rule names a symptom with many causes (a crash), not one cause


@dataclass(frozen=True)
class RuledOut:
    """A rule whose signature matched but whose conditions the facts contradict."""

    rule: str
    line: int
    evidence: tuple[Evidence, ...]


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
    evidence: tuple[Evidence, ...] = ()  # every fact the log showed
    conflicts: tuple[Conflict, ...] = ()  # facts the cell and the log disagree on
    ruled_out: tuple[RuledOut, ...] = ()
    draft: str = ""  # a proposed rule for an unclassified failure (`ci-matrix rules draft`)

    @property
    def unclassified(self) -> bool:
        """A failure that no rule explains."""
        return self.outcome == "failed" and not self.findings


def signatures(rules: Iterable[Rule]) -> list[Signature]:
    """Every log signature of the knowledge base, fallback signatures included, keyed
    `rule-id#index` (an index into the rule's `Diagnosis.patterns`)."""
    return [
        Signature(f"{rule.id}#{i}", pattern)
        for rule in rules
        if rule.diagnosis is not None
        for i, pattern in enumerate(rule.diagnosis.patterns)
    ]


def diagnose(
    hits: Mapping[str, Hit],
    rules: Sequence[Rule],
    facts: Facts | None = None,
    *,
    cell: str = "",
    exit_code: int | None = None,
    cell_given: bool = False,
) -> Diagnosis:
    """The diagnosis of a build: `exit_code` 0 means it passed; None means unknown but failed.

    `facts` are the cell's plus the log's (`evidence.combine`); `cell_given` says whether a
    cell was among them, which configuration-only findings need.
    """
    facts = facts or Facts()
    if exit_code == 0:
        return Diagnosis(cell, "passed", 0, ())
    by_id = {rule.id: rule for rule in rules}
    found: dict[str, Finding] = {}
    ruled_out: dict[str, RuledOut] = {}
    for key, hit in hits.items():
        rule = by_id.get(key.rpartition("#")[0])
        if key.startswith(KEY_PREFIX) or rule is None or rule.diagnosis is None:
            continue
        finding = _from_log(rule, hit, facts)
        if isinstance(finding, RuledOut):
            ruled_out.setdefault(rule.id, finding)
        elif rule.id not in found or finding.rank > found[rule.id].rank:
            found[rule.id] = finding
    _refine(found, rules, facts)
    for rule in rules:
        if rule.id not in found and cell_given:
            config = _from_config(rule, facts)
            if config is not None:
                found[rule.id] = config
    if any(f.reached_by != "fallback" for f in found.values()):  # the usual noise, where something explains it
        found = {rule_id: f for rule_id, f in found.items() if f.reached_by != "fallback"}
    ordered = sorted(found.values(), key=lambda f: f.rank, reverse=True)
    kept_out = tuple(r for rule_id, r in sorted(ruled_out.items()) if rule_id not in found)
    return Diagnosis(cell, "failed", exit_code, tuple(ordered), evidence=tuple(facts.read_from_log()),
                     conflicts=facts.conflicts, ruled_out=kept_out)


def _from_log(rule: Rule, hit: Hit, facts: Facts) -> Finding | RuledOut:
    assert rule.diagnosis is not None
    scope = rule.diagnosis.scope
    verdict = scope.evaluate(facts.values) if scope is not None else Verdict(Truth.HOLDS)
    if verdict.truth is Truth.FAILS:  # the facts contradict it: not this failure
        return RuledOut(rule.id, hit.line, _evidence_of(verdict.facts, facts))
    against = _ruling_out(rule, facts)
    if against is not None:
        return RuledOut(rule.id, hit.line, against)
    index = int(hit.key.rpartition("#")[2])
    pattern = rule.diagnosis.patterns[index]
    fallback = index >= len(rule.diagnosis.signatures)
    confidence = 0 if fallback else 2 if verdict.truth is Truth.HOLDS else 1
    # A generic rule's line tells the symptom, not which of its causes: at most medium, though
    # it ranks as its signature and facts say.
    shown = min(confidence, 1) if rule.diagnosis.generic else confidence
    return replace(
        _base(rule),
        matched_by="log",
        line=hit.line,
        end_line=hit.end_line,
        text=hit.text,
        before=hit.before,
        after=hit.after,
        groups=dict(hit.groups),
        count=hit.count,
        rank=_rank(rule, confidence, scoped=scope is not None, pattern=len(pattern), line=hit.line),
        reached_by="fallback" if fallback
        else "signature+evidence" if scope is not None and verdict.truth is Truth.HOLDS else "signature",
        confidence=CONFIDENCE[shown],
        generic=rule.diagnosis.generic,
        evidence=_evidence_of(verdict.facts, facts) if verdict.truth is Truth.HOLDS else (),
        unknown=verdict.facts if verdict.truth is Truth.UNKNOWN else (),
    )


def _refine(found: dict[str, Finding], rules: Sequence[Rule], facts: Facts) -> None:
    """Replace each generic finding by the specific rule whose scope the facts confirm; note
    the ones they cannot confirm yet."""
    for generic in [f for f in found.values() if f.matched_by == "log"]:
        maybe = []
        for rule in rules:
            if rule.diagnosis is None or generic.rule not in rule.diagnosis.refines or rule.diagnosis.scope is None:
                continue
            verdict = rule.diagnosis.scope.evaluate(facts.values)
            if verdict.truth is Truth.HOLDS and _ruling_out(rule, facts) is None:
                specific = _refined(rule, generic, _evidence_of(verdict.facts, facts))
                if rule.id not in found or found[rule.id].rank < specific.rank:
                    found[rule.id] = specific
                found.pop(generic.rule, None)
                break
            if verdict.truth is Truth.UNKNOWN:
                maybe.append((rule.id, verdict.facts))
        else:
            if maybe and generic.rule in found:
                found[generic.rule] = replace(found[generic.rule], maybe=tuple(maybe))


def _refined(rule: Rule, generic: Finding, evidence: tuple[Evidence, ...]) -> Finding:
    """The specific rule in the generic finding's place; one reached by a fallback line stays a
    fallback (low confidence, left out beside any other finding), whatever the evidence adds."""
    assert rule.diagnosis is not None
    log_part = {k: getattr(generic, k) for k in ("line", "end_line", "text", "before", "after", "groups", "count")}
    fallback = generic.reached_by == "fallback"
    confidence = 0 if fallback else 2
    return replace(
        _base(rule),
        matched_by="log",
        reached_by="fallback" if fallback else "signature+evidence",
        confidence=CONFIDENCE[confidence],
        evidence=evidence,
        refined_from=generic.rule,
        rank=_rank(rule, confidence, scoped=True, pattern=generic.rank[-2], line=generic.rank[-1], generic=False),
        **log_part,
    )


def _ruling_out(rule: Rule, facts: Facts) -> tuple[Evidence, ...] | None:
    """The evidence of a rule's `unless` when the known facts show it (unknown: nothing)."""
    unless = rule.diagnosis.unless if rule.diagnosis else None
    if unless is None:
        return None
    verdict = unless.evaluate(facts.values)
    return _evidence_of(verdict.facts, facts) if verdict.truth is Truth.HOLDS else None


def _evidence_of(names: Iterable[str], facts: Facts) -> tuple[Evidence, ...]:
    return tuple(facts.evidence[name] for name in names if name in facts.evidence)


def _from_config(rule: Rule, facts: Facts) -> Finding | None:
    """Silent failures: a failed cell that matches the rule's conditions is named."""
    diagnosis = rule.diagnosis
    if diagnosis is None or not diagnosis.match_on_config:
        return None
    conditions = rule.when if diagnosis.scope is None else diagnosis.scope
    verdict = conditions.evaluate(facts.values) if conditions is not None else None
    if verdict is None or verdict.truth is not Truth.HOLDS:
        return None
    return replace(_base(rule), evidence=_evidence_of(verdict.facts, facts))


def _rank(rule: Rule, confidence: int, *, scoped: bool, pattern: int = 0, line: int = 0, from_log: bool = True,
          generic: bool | None = None) -> tuple[int, ...]:
    """How findings are ordered, most specific first: the rule's priority, a log line over
    configuration, a specific rule over a generic one, confidence, a scoped rule, the longer
    pattern, the later line."""
    assert rule.diagnosis is not None
    is_generic = rule.diagnosis.generic if generic is None else generic
    return (rule.diagnosis.priority, int(from_log), int(not is_generic), confidence, int(scoped), pattern, line)


def _base(rule: Rule) -> Finding:
    """A finding of this rule with nothing yet said of how it was reached."""
    assert rule.diagnosis is not None
    return Finding(
        rule=rule.id,
        title=rule.title,
        domain=rule.domain,
        matched_by="configuration",
        explanation=rule.diagnosis.explanation,
        fix=rule.diagnosis.fix,
        references=rule.references,
        rank=_rank(rule, 0, scoped=True, from_log=False, generic=False),
        reached_by="configuration",
        confidence="low",
    )
