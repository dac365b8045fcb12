"""The built-in fixtures judged as `ci-matrix rules test` judges them, on their logs as a user
gets them from GitHub: as the API and a run's archive serve them (a stamp on every line, a
byte-order mark where each step's log starts) and as `gh run view --log` prints them (the job's
and the step's names before each of those lines); and behind the prefix that a launcher or a
test runner puts on every line. Before cleaning knew them, 21 of the 5,402 fixtures read
otherwise as GitHub serves them, 373 as gh prints them, and about 9% behind any of those prefixes:
a signature that spans lines, or starts at one's start, saw the prefix."""

from __future__ import annotations

import io
from collections.abc import Callable

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


def sample(every: int = 8) -> list[tuple[Rule, Fixture]]:
    """Every eighth fixture that a log alone is judged on (about 680 of them: matches,
    near-misses and outranked ones of every rule file; all of them were tried once, by hand)."""
    pairs = [(rule, fixture) for rule in files.trusted_builtin_rules() for fixture in rule.fixtures
             if fixture.expect != "config-match"]
    return pairs[::every]


def misread(transform: Callable[[bytes], bytes], every: int = 8) -> list[tuple[str, str, list[str]]]:
    """The sampled fixtures whose transformed log is not judged as their own is."""
    rules = files.trusted_builtin_rules()
    platforms = files.catalog().platforms
    wrong = []
    for rule, fixture in sample(every):
        cell = dict(fixture.cell) if fixture.cell else None
        found = diagnose_log(io.BytesIO(transform(fixture_bytes(rule, fixture))), rules, cell, platforms,
                             exit_code=1)
        got = [f.rule for f in found.findings]
        if not as_expected(fixture.expect, rule.id, got):
            wrong.append((rule.id, fixture.file, got[:2]))
    return wrong


@pytest.mark.parametrize(
    "names", [b"", b"build (ubuntu-22.04, stable)\tRun cargo build --locked\t", b"test (gpu)\tUNKNOWN STEP\t"],
    ids=["served", "gh-run-view", "gh-run-view-job-log"],
)
def test_fixtures_read_the_same_as_github_serves_their_logs(names: bytes) -> None:
    assert misread(lambda data: as_served(data, names)) == []


@pytest.mark.parametrize("prefix", [b"[rank0]: ", b"20: ", b"ollama-1  | ", b"rustc-1.75.0> "],
                         ids=["torchrun-rank", "ctest-verbose", "compose", "nix-build"])
def test_fixtures_read_the_same_behind_a_launcher_s_prefix_on_every_line(prefix: bytes) -> None:
    assert misread(lambda data: b"\n".join(prefix + line for line in data.split(b"\n")), every=16) == []
