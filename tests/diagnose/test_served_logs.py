"""The built-in fixtures judged as `ci-matrix rules test` judges them, on their logs as a user
gets them from GitHub: as the API and a run's archive serve them (a stamp on every line, a
byte-order mark where each step's log starts) and as `gh run view --log` prints them (the job's
and the step's names before each of those lines). Before cleaning knew the last two, 21 of the
5,402 fixtures read otherwise as GitHub serves them, and 373 as gh prints them: a signature that
spans lines, or starts at one's start, saw the names."""

from __future__ import annotations

import io

import pytest

from ci_matrix.core.knowledge import Fixture, Rule
from ci_matrix.diagnose.fixtures import as_expected, fixture_bytes
from ci_matrix.edges import files
from ci_matrix.edges.logs import diagnose_log

BOM = b"\xef\xbb\xbf"
STEP_LINES = 40  # a step's log starts (with its byte-order mark) every this many lines


def as_served(data: bytes, names: bytes = b"") -> bytes:
    lines = data.split(b"\n")
    return b"\n".join(
        names + (BOM if n % STEP_LINES == 0 else b"") + b"2024-05-01T12:34:%02d.%07dZ " % (n % 60, n) + line
        for n, line in enumerate(lines)
    )


def sample() -> list[tuple[Rule, Fixture]]:
    """Every eighth fixture that a log alone is judged on (about 680 of them: matches,
    near-misses and outranked ones of every rule file; all of them were tried once, by hand)."""
    pairs = [(rule, fixture) for rule in files.trusted_builtin_rules() for fixture in rule.fixtures
             if fixture.expect != "config-match"]
    return pairs[::8]


@pytest.mark.parametrize(
    "names", [b"", b"build (ubuntu-22.04, stable)\tRun cargo build --locked\t", b"test (gpu)\tUNKNOWN STEP\t"],
    ids=["served", "gh-run-view", "gh-run-view-job-log"],
)
def test_fixtures_read_the_same_as_github_serves_their_logs(names: bytes) -> None:
    rules = files.trusted_builtin_rules()
    platforms = files.catalog().platforms
    wrong = []
    for rule, fixture in sample():
        cell = dict(fixture.cell) if fixture.cell else None
        found = diagnose_log(io.BytesIO(as_served(fixture_bytes(rule, fixture), names)), rules, cell, platforms,
                             exit_code=1)
        got = [f.rule for f in found.findings]
        if not as_expected(fixture.expect, rule.id, got):
            wrong.append((rule.id, fixture.file, got[:2]))
    assert wrong == []
