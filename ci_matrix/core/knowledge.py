"""The knowledge base: rules read from YAML data, checked and compiled.

A rule names a known failure, the cells it happens on (`when`), what to do about it (a
workaround or an exclusion with its reason), how to recognise it in a log (`diagnosis`)
and where it is documented upstream. Code never hard-codes a particular failure.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

from ci_matrix.core.conditions import Clause, ConditionError, Conditions, as_text, compile_clause
from ci_matrix.core.document import Document, Path, did_you_mean
from ci_matrix.core.facts import AXES
from ci_matrix.core.values import parse_date
from ci_matrix.errors import Problem

#: Values a workaround may change: the axes of a cell, except which build and platform it is.
SETTABLE = frozenset(AXES) - {"build", "platform"}


@dataclass(frozen=True)
class Workaround:
    """Changes that make a cell build: values to set, env vars, tool flags."""

    set: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    flags: tuple[tuple[str, tuple[str, ...]], ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Diagnosis:
    """How a rule's failure shows in a log, and what to tell the user."""

    signatures: tuple[str, ...]
    scope: Conditions | None
    explanation: str
    fix: str
    match_on_config: bool = False
    priority: int = 0
    refines: tuple[str, ...] = ()  # generic failures this rule explains when its scope holds
    unless: Conditions | None = None  # facts that rule it out when known (unknown: no effect)
    generic: bool = False  # many causes: named only when no specific rule explains the failure
    # lines often printed where this failure is not the cause: named only where nothing else is
    fallback: tuple[str, ...] = ()

    @property
    def patterns(self) -> tuple[str, ...]:
        """Every log pattern, signatures then fallback signatures: a hit's key `rule#i` indexes it."""
        return (*self.signatures, *self.fallback)


@dataclass(frozen=True)
class Fixture:
    """A log that must (or must not) be diagnosed as this rule."""

    file: str
    expect: str  # match | clean | outranked | config-match
    source: str
    cell: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Rule:
    """One entry of the knowledge base."""

    id: str
    title: str
    domain: str
    when: Conditions | None
    workaround: Workaround | None
    exclude: str | None
    diagnosis: Diagnosis | None
    references: tuple[str, ...]
    recheck_after: dt.date | None
    fixtures: tuple[Fixture, ...]
    origin: str  # file:line where the rule is written

    def __hash__(self) -> int:
        # The generated hash walks every field down to each fixture on every call, and the
        # knowledge base is hashed whole (a tuple of its rules) as a cache key on every scan:
        # kept once computed, as the fields never change.
        cached: int | None = self.__dict__.get("_hash")
        if cached is None:
            cached = hash(tuple(getattr(self, f.name) for f in fields(self)))
            object.__setattr__(self, "_hash", cached)
        return cached

    @property
    def kind(self) -> str:
        """`exclusion`, `workaround` or `diagnosis` (a rule that only recognises a failure)."""
        if self.exclude is not None:
            return "exclusion"
        return "workaround" if self.workaround is not None else "diagnosis"


def rules_from_document(document: Document, facts: frozenset[str]) -> tuple[list[Rule], list[Problem]]:
    """Build the rules of a schema-valid rule file, collecting every semantic problem."""
    rules: list[Rule] = []
    problems: list[Problem] = []
    for index, entry in enumerate(document.root.get("rules", [])):
        reader = _RuleReader(document, ("rules", index), facts)
        rule = reader.read(entry)
        problems.extend(reader.problems)
        if rule is not None:
            rules.append(rule)
    return rules, problems


def unknown_refinements(rules: Iterable[Rule]) -> Iterator[tuple[Rule, str, str]]:
    """(rule, id, hint) for each `refines` id that names no rule of the knowledge base."""
    rules = list(rules)
    known = {rule.id for rule in rules}
    for rule in rules:
        for target in rule.diagnosis.refines if rule.diagnosis else ():
            if target not in known:
                yield rule, target, did_you_mean(target, known)


def duplicate_ids(rules: Iterable[Rule]) -> Iterator[tuple[Rule, Rule]]:
    """Pairs (first, again) of rules sharing an id."""
    seen: dict[str, Rule] = {}
    for rule in rules:
        if rule.id in seen:
            yield seen[rule.id], rule
        seen.setdefault(rule.id, rule)


class _RuleReader:
    """Turns one rule entry into a Rule, noting problems with their positions."""

    def __init__(self, document: Document, path: Path, facts: frozenset[str]) -> None:
        self.document, self.path, self.facts = document, path, facts
        self.problems: list[Problem] = []

    def fail(self, where: Path, message: str, *, key: bool = False) -> None:
        self.problems.append(self.document.problem((*self.path, *where), message, key=key))

    def read(self, entry: Mapping[str, Any]) -> Rule | None:
        action = entry.get("action", {})
        diagnosis = entry.get("diagnosis")
        line, _ = self.document.position(self.path)
        rule = Rule(
            id=str(entry["id"]),
            title=str(entry["title"]),
            domain=str(entry.get("domain", "platform")),
            when=self.conditions(entry.get("when"), ("when",)),
            workaround=self.workaround(action.get("workaround")),
            exclude=str(action["exclude"]) if "exclude" in action else None,
            diagnosis=self.diagnosis(diagnosis) if diagnosis else None,
            references=tuple(str(r) for r in entry["references"]),
            recheck_after=self.date(entry.get("recheck-after")),
            fixtures=tuple(self.fixture(f) for f in entry.get("fixtures", [])),
            origin=f"{self.document.file}:{line}",
        )
        return None if self.problems else rule

    def conditions(self, spec: Any, where: Path) -> Conditions | None:
        if spec is None:
            return None
        specs = spec if isinstance(spec, list) else [spec]
        clauses = []
        for i, clause in enumerate(specs):
            at = (*where, i) if isinstance(spec, list) else where
            compiled = self.clause(clause, at)
            if compiled is not None:
                clauses.append(compiled)
        return Conditions(tuple(clauses))

    def clause(self, spec: Mapping[str, Any], where: Path) -> Clause | None:
        for fact in spec:
            if fact not in self.facts:
                hint = did_you_mean(str(fact), self.facts)
                self.fail((*where, fact), f"unknown fact {fact!r}{hint}", key=True)
        try:
            return compile_clause(spec)
        except ConditionError as exc:
            self.fail((*where, exc.fact), str(exc))
            return None

    def workaround(self, spec: Mapping[str, Any] | None) -> Workaround | None:
        if spec is None:
            return None
        changes = spec.get("set", {})
        for name in changes:
            if name not in SETTABLE:
                hint = did_you_mean(str(name), SETTABLE)
                self.fail(("action", "workaround", "set", name), f"cannot set {name!r}{hint}", key=True)
        flags = spec.get("flags", {})
        return Workaround(
            set=tuple((str(k), as_text(v)) for k, v in changes.items()),
            env=tuple((str(k), str(v)) for k, v in spec.get("env", {}).items()),
            flags=tuple((str(tool), tuple(str(f) for f in values)) for tool, values in flags.items()),
            note=str(spec.get("note", "")),
        )

    def diagnosis(self, spec: Mapping[str, Any]) -> Diagnosis:
        refines = tuple(str(r) for r in spec.get("refines", []))
        if refines and "scope" not in spec:
            self.fail(("diagnosis", "refines"), "a rule that refines a generic failure needs a diagnosis scope: "
                      "the facts that tell its cause apart")
        return Diagnosis(
            signatures=tuple(str(s) for s in spec.get("signatures", [])),
            fallback=tuple(str(s) for s in spec.get("fallback-signatures", [])),
            scope=self.conditions(spec.get("scope"), ("diagnosis", "scope")),
            explanation=str(spec["explanation"]).strip(),
            fix=str(spec["fix"]).strip(),
            match_on_config=bool(spec.get("match-on-config", False)),
            priority=int(spec.get("priority", 0)),
            refines=refines,
            generic=bool(spec.get("generic", False)),
            unless=self.conditions(spec.get("unless"), ("diagnosis", "unless")),
        )

    def fixture(self, spec: Mapping[str, Any]) -> Fixture:
        cell = tuple((str(k), as_text(v)) for k, v in spec.get("cell", {}).items())
        return Fixture(str(spec["file"]), str(spec["expect"]), str(spec.get("source", "")), cell)

    def date(self, text: Any) -> dt.date | None:
        if text is None:
            return None
        try:
            return parse_date(str(text))
        except ValueError as exc:
            self.fail(("recheck-after",), str(exc))
            return None
