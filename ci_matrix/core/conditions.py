"""Conditions over cell facts, as written in rules, include/exclude and event profiles.

A condition is a value (equal), a list (any of), a comparison string such as
`">= 2024-02-14, <= 2024-05-20"` or `"< sm_80"` (all must hold), `{not: ...}` or
`{exists: true|false}` or `{all: [...]}` (each must hold). Conditions compile once into predicates over typed facts.
"""

from __future__ import annotations

import enum
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ci_matrix.core.facts import is_ordered, typed

Predicate = Callable[[Any], bool]
MISSING: Any = object()  # the value of a fact a cell does not have

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
}
_COMPARISON = re.compile(r"\s*(<=|>=|==|!=|<|>)\s*(\S.*?)\s*\Z")


def as_text(value: Any) -> str:
    """The text of a scalar as facts hold it: booleans are `true`/`false`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def compile_condition(fact: str, spec: Any) -> Predicate:
    """A predicate over the typed value of `fact`; raises ValueError on a malformed condition.

    A fact that holds a set (`uses`) matches a value when it contains it.
    """
    if isinstance(spec, Mapping):
        return _compile_mapping(fact, spec)
    if isinstance(spec, list):
        options = [compile_condition(fact, item) for item in spec]
        return lambda value: any(option(value) for option in options)
    text = as_text(spec)
    if text.lstrip()[:1] in ("<", ">", "=", "!"):
        return _compile_comparisons(fact, text)
    expected = typed(fact, text)
    return lambda value: value is not MISSING and (
        expected in value if isinstance(value, frozenset) else value == expected
    )


def _compile_mapping(fact: str, spec: Mapping[str, Any]) -> Predicate:
    if "not" in spec:
        inner = compile_condition(fact, spec["not"])
        return lambda value: not inner(value)
    if "all" in spec:  # several conditions on one fact, e.g. a flag present and another absent
        parts = [compile_condition(fact, item) for item in spec["all"]]
        return lambda value: all(part(value) for part in parts)
    wanted = bool(spec["exists"])
    return lambda value: (value is not MISSING) == wanted


def _compile_comparisons(fact: str, text: str) -> Predicate:
    tests: list[tuple[Callable[[Any, Any], bool], Any]] = []
    for part in text.split(","):
        m = _COMPARISON.match(part)
        if not m:
            raise ValueError(f"malformed comparison {part.strip()!r}; expected e.g. '< sm_80'")
        op, literal = m.groups()
        if op not in ("==", "!=") and not is_ordered(fact):
            raise ValueError(f"{fact!r} cannot be compared with {op!r}; compare it with a value")
        tests.append((_OPS[op], typed(fact, literal)))
    return lambda value: value is not MISSING and all(test(value, x) for test, x in tests)


class Truth(enum.Enum):
    """What conditions say about facts that may be incomplete (a log shows some, not all)."""

    HOLDS = "holds"
    FAILS = "fails"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Verdict:
    """The truth of conditions and the facts that decided it: the facts of the clause that
    holds, the facts that contradict, or the facts nobody knows."""

    truth: Truth
    facts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Clause:
    """Conditions that must all hold: `(fact, predicate)` pairs."""

    tests: tuple[tuple[str, Predicate], ...]

    def evaluate(self, facts: Mapping[str, Any]) -> Verdict:
        """Three answers: a fact these facts lack is unknown, not false; one that fails decides."""
        failing = tuple(fact for fact, test in self.tests if fact in facts and not test(facts[fact]))
        if failing:
            return Verdict(Truth.FAILS, failing)
        unknown = tuple(fact for fact, _ in self.tests if fact not in facts)
        if unknown:
            return Verdict(Truth.UNKNOWN, unknown)
        return Verdict(Truth.HOLDS, tuple(fact for fact, _ in self.tests))


@dataclass(frozen=True)
class Conditions:
    """Clauses of which any one must hold (a single mapping is one clause)."""

    clauses: tuple[Clause, ...]

    def evaluate(self, facts: Mapping[str, Any]) -> Verdict:
        """Holds when a clause holds, fails when every clause fails, else unknown (naming the
        unknown facts of the clause that lacks the fewest)."""
        verdicts = [clause.evaluate(facts) for clause in self.clauses]
        for verdict in verdicts:
            if verdict.truth is Truth.HOLDS:
                return verdict
        open_ = [v for v in verdicts if v.truth is Truth.UNKNOWN]
        if open_:
            return min(open_, key=lambda v: len(v.facts))
        return Verdict(Truth.FAILS, tuple(dict.fromkeys(f for v in verdicts for f in v.facts)))

    @property
    def facts(self) -> frozenset[str]:
        """The fact names these conditions look at."""
        return frozenset(fact for clause in self.clauses for fact, _ in clause.tests)


def compile_clause(spec: Mapping[str, Any]) -> Clause:
    """One mapping of facts to conditions; raises ValueError naming the fact on error."""
    tests = []
    for fact, condition in spec.items():
        try:
            tests.append((str(fact), compile_condition(str(fact), condition)))
        except ValueError as exc:
            raise ConditionError(str(fact), str(exc)) from None
    return Clause(tuple(tests))


class ConditionError(ValueError):
    """A malformed condition, with the fact it was written for."""

    def __init__(self, fact: str, message: str) -> None:
        super().__init__(message)
        self.fact = fact
