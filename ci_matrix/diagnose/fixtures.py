"""`ci-matrix rules test`: every rule's fixture logs, diagnosed as a failed build would be.

A `match` fixture must be diagnosed as exactly its rule; a `clean` (near-miss) fixture
must not be; an `outranked` one holds the rule's text beside the real failure (noise), so the
rule may be among the findings but must not come first; a `config-match` fixture must name
its rule from the cell alone.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ci_matrix.core.knowledge import Fixture, Rule
from ci_matrix.edges import files
from ci_matrix.edges.logs import diagnose_log
from ci_matrix.errors import ExitCode


@dataclass(frozen=True)
class Outcome:
    """One fixture's result."""

    rule: str
    fixture: Fixture
    got: tuple[str, ...]  # rule ids of the findings, most specific first
    passed: bool
    problem: str = ""


def fixture_bytes(rule: Rule, fixture: Fixture) -> bytes:
    """A fixture log: built-in ones ship in the package, project ones sit beside their rule file."""
    origin = rule.origin.rpartition(":")[0]
    if origin.startswith("ci_matrix/knowledge/"):
        return files.knowledge_fixture(fixture.file)
    return (Path(origin).parent / "fixtures" / fixture.file).read_bytes()


def run_fixture(rule: Rule, fixture: Fixture, rules: Sequence[Rule]) -> Outcome:
    """Diagnose one fixture as the log of a failed build of its cell."""
    try:
        data = fixture_bytes(rule, fixture)
    except OSError as exc:
        return Outcome(rule.id, fixture, (), False, f"cannot read: {exc}")
    cell = dict(fixture.cell) if fixture.cell else None
    found = diagnose_log(io.BytesIO(data), rules, cell, files.catalog().platforms, exit_code=1)
    got = tuple(f.rule for f in found.findings)
    return Outcome(rule.id, fixture, got, as_expected(fixture.expect, rule.id, got))


NEAR_MISSES = ("clean", "outranked")  # fixtures of another cause, counted as near-misses


def as_expected(expect: str, rule: str, got: Sequence[str]) -> bool:
    """Whether findings ``got`` (rule ids, most specific first) are what a fixture of ``rule``
    that expects ``expect`` asks for."""
    if expect == "clean":
        return rule not in got
    if expect == "outranked":
        return list(got[:1]) != [rule]
    return list(got[:1]) == [rule]


def run_all(rules: Sequence[Rule], tested: Sequence[Rule] | None = None) -> list[Outcome]:
    """Every fixture of every rule of ``tested`` (default: all), diagnosed among all ``rules``."""
    return [run_fixture(rule, fixture, rules) for rule in (rules if tested is None else tested)
            for fixture in rule.fixtures]


def summary(outcomes: Sequence[Outcome]) -> dict[str, int | float]:
    """The figures `rules test` reports."""
    matches = [o for o in outcomes if o.fixture.expect not in NEAR_MISSES]
    clean = [o for o in outcomes if o.fixture.expect in NEAR_MISSES]
    unclassified = sum(1 for o in matches if not o.got)
    return {
        "fixtures": len(outcomes),
        "expected-rule": sum(1 for o in matches if o.passed),
        "match-fixtures": len(matches),
        "near-misses-clean": sum(1 for o in clean if o.passed),
        "near-misses": len(clean),
        "unclassified-rate": round(unclassified / len(matches), 4) if matches else 0.0,
        "failed": sum(1 for o in outcomes if not o.passed),
    }


def run_fixture_tests(rules: Sequence[Rule], fmt: str, out: TextIO, tested: Sequence[Rule] | None = None) -> int:
    """`ci-matrix rules test`: run the fixtures of ``tested`` (default: every rule) among all
    ``rules``, report, exit 1 when any fixture is wrong."""
    outcomes = run_all(rules, tested)
    figures = summary(outcomes)
    if fmt == "json":
        failures = [_failure(o) for o in outcomes if not o.passed]
        out.write(json.dumps({"summary": figures, "failures": failures}, indent=2) + "\n")
    else:
        out.writelines(f"FAIL {line}\n" for line in (_failure(o) for o in outcomes if not o.passed))
        out.write(
            f"{figures['expected-rule']}/{figures['match-fixtures']} fixtures got exactly their rule, "
            f"{figures['near-misses-clean']}/{figures['near-misses']} near-misses stayed clean, "
            f"unclassified rate {figures['unclassified-rate']:.1%}\n"
            f"{figures['fixtures'] - figures['failed']} passed, {figures['failed']} failed\n"
        )
        if tested is not None and len(tested) < len(rules):
            out.write(f"fixtures of the project's rules only ({len(tested)} of {len(rules)} rules, diagnosed "
                      "among all of them; --builtin runs the built-in rules' fixtures too)\n")
    return ExitCode.FAILED if figures["failed"] else ExitCode.OK


def _failure(outcome: Outcome) -> str:
    want = {"clean": f"not {outcome.rule}", "outranked": f"not {outcome.rule} first"}.get(
        outcome.fixture.expect, outcome.rule
    )
    got = ", ".join(outcome.got) or "no rule"
    problem = f" ({outcome.problem})" if outcome.problem else ""
    return f"{outcome.fixture.file}: expected {want}, got {got}{problem}"
