"""The action's `report` command against the loopback GitHub API, fed with diagnosis files from
real builds: `ci-matrix run` compiles the IREE example twice (tests/e2e/ci-matrix.yml), once with
the llvm-cpu backend flag (passes) and once without it (fails with a known failure).

What a user sees: one sticky comment however many times the report runs, a check run with the
failure annotated, and when the API cannot be used (a fork's read-only token, a 500 storm) the
same report in annotations and the step summary, with the job's result unchanged.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

import ci_matrix.edges.github_api as github_api_module
from ci_matrix.action import execute
from tests.github_api.faults import Fault, FaultKind
from tests.github_api.server import BOT_LOGIN, DEFAULT_TOKEN, ApiServer
from tests.tooling import missing_tool

REPO = Path(__file__).resolve().parent.parent
PASSING = "model-linux-x86_64-iree-llvm-cpu"
FAILING = "model-no-backend-linux-x86_64-iree-llvm-cpu"
KNOWN_RULE = "iree-llvm-cpu-backend-flag"
MARKER = "<!-- ci-matrix:report -->"
SLUG = "acme/widgets"
PR_NUMBER = 42
HEAD_SHA = "abcdef0123456789abcdef0123456789abcdef01"
FORK_TOKEN = "ghs_forkReadOnlyToken00000000000000000"


@dataclass(frozen=True)
class Project:
    """A copy of the e2e manifest and the example it builds, with real diagnosis files."""

    manifest: Path
    diagnoses: Path  # one subfolder per cell, as download-artifact lays them out


def build_project(root: Path) -> Project:
    """Copy the e2e manifest and its example into `root`, build both IREE cells for real there
    and keep their diagnosis files."""
    if shutil.which("iree-compile") is None:
        missing_tool("iree-compile is not installed (pip install iree-base-compiler)")
    # A copy, so the builds' outputs never land in the source tree.
    shutil.copytree(REPO / "examples" / "iree-model", root / "examples" / "iree-model")
    shutil.copytree(REPO / "examples" / "rules", root / "examples" / "rules")
    manifest = root / "tests" / "e2e" / "ci-matrix.yml"
    manifest.parent.mkdir(parents=True)
    shutil.copy2(REPO / "tests" / "e2e" / "ci-matrix.yml", manifest)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_"))}
    for cell, expected_exit in ((PASSING, 0), (FAILING, 1)):
        diagnosis = root / "diagnoses" / f"ci-matrix-diagnosis-{cell}" / f"{cell}.json"
        argv = [sys.executable, "-m", "ci_matrix", "run", "--manifest", str(manifest), "--cell", cell,
                "--log", str(root / f"{cell}.log"), "--diagnosis", str(diagnosis)]
        built = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, timeout=300, check=False)
        assert built.returncode == expected_exit, built.stderr.decode(errors="replace")
    return Project(manifest, root / "diagnoses")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """Build both IREE cells for real once; keep their diagnosis files."""
    return build_project(tmp_path_factory.mktemp("project"))


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Backoff delays the reporter asked for, recorded instead of slept."""
    asked: list[float] = []
    reporter = github_api_module.GitHubReporter
    monkeypatch.setattr(github_api_module, "GitHubReporter", partial(reporter, sleep=asked.append))
    return asked


def _event(path: Path, number: int = PR_NUMBER) -> Path:
    pull = {"number": number, "head": {"sha": HEAD_SHA, "ref": "topic"}, "base": {"ref": "main"}}
    path.write_text(json.dumps({"action": "synchronize", "number": number, "pull_request": pull}), "utf-8")
    return path


def _env(api: ApiServer, project: Project, tmp_path: Path, **inputs: str) -> dict[str, str]:
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_API_URL": api.base_url,
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": SLUG,
        "GITHUB_RUN_ID": "1234",
        "GITHUB_SHA": "f" * 40,
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(_event(tmp_path / "event.json")),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "CI_MATRIX_COMMAND": "report",
        "CI_MATRIX_MANIFEST": str(project.manifest),
        "CI_MATRIX_DIAGNOSES": str(project.diagnoses),
        "CI_MATRIX_TOKEN": DEFAULT_TOKEN,
    }
    env.update({f"CI_MATRIX_{name.upper()}": value for name, value in inputs.items()})
    return env


def _report(env: dict[str, str]) -> tuple[int, str]:
    out = io.StringIO()
    return execute(env, out), out.getvalue()


def _comments(api: ApiServer) -> list[str]:
    owner, repo = SLUG.split("/")
    return [c.body for c in api.store.comments_on(owner, repo, PR_NUMBER)]


def test_the_report_is_one_sticky_comment_updated_in_place(
    github_api: ApiServer, project: Project, tmp_path: Path, sleeps: list[float]
) -> None:
    env = _env(github_api, project, tmp_path)
    assert _report(env)[0] == 0
    [first] = _comments(github_api)
    assert first.startswith(MARKER)
    assert "1 of 2 cells failed (1 known, 0 unclassified)" in first
    assert f"`{FAILING}`" in first and f"`{KNOWN_RULE}`" in first
    assert 'device alias "local" does not provide any executable targets' in first  # the real log line
    assert "https://github.com/acme/widgets/actions/runs/1234" in first

    assert _report(env)[0] == 0  # a re-run with the same diagnoses: nothing to change
    # the next push fixed the build: only the passing cell's diagnosis is left
    shutil.rmtree(tmp_path / "fixed", ignore_errors=True)
    shutil.copytree(project.diagnoses / f"ci-matrix-diagnosis-{PASSING}", tmp_path / "fixed")
    assert _report({**env, "CI_MATRIX_DIAGNOSES": str(tmp_path / "fixed")})[0] == 0
    [last] = _comments(github_api)
    assert last.startswith(MARKER) and "all 1 cells passed" in last and KNOWN_RULE not in last
    comment_writes = [(r.method, r.status) for r in github_api.requests if "/comments" in r.path and r.method != "GET"]
    assert comment_writes == [("POST", 201), ("PATCH", 200)]
    assert sleeps == []


def test_the_check_run_annotates_the_known_failure(
    github_api: ApiServer, project: Project, tmp_path: Path, sleeps: list[float]
) -> None:
    assert _report(_env(github_api, project, tmp_path)) == (0, "")
    [run] = github_api.store.check_runs.values()
    assert (run.name, run.head_sha, run.status, run.conclusion) == ("ci-matrix", HEAD_SHA, "completed", "failure")
    assert run.output["title"] == "1 of 2 cells failed (1 known, 0 unclassified)"
    [note] = run.annotations
    assert note["annotation_level"] == "failure"
    assert note["title"] == f"{FAILING}: IREE CPU compiles need the llvm-cpu backend flag"
    assert "--iree-hal-local-target-device-backends=llvm-cpu" in note["message"]  # the fix
    assert note["path"] == str(project.manifest)


def test_a_fork_read_only_token_falls_back_to_annotations_and_summary(
    github_api: ApiServer, project: Project, tmp_path: Path, sleeps: list[float]
) -> None:
    github_api.add_token(FORK_TOKEN, BOT_LOGIN, read_only=True)
    code, printed = _report(_env(github_api, project, tmp_path, token=FORK_TOKEN))
    assert code == 0
    errors = [line for line in printed.splitlines() if line.startswith("::error")]
    assert len(errors) == 1
    assert f"title={FAILING}%3A IREE CPU compiles need the llvm-cpu backend flag::" in errors[0]
    warnings = [line for line in printed.splitlines() if line.startswith("::warning")]
    assert warnings and all("the report is in the step summary and annotations" in w for w in warnings)
    assert any("read-only token, as pull requests from forks get" in w for w in warnings)
    summary = (tmp_path / "summary.md").read_text("utf-8")
    assert f"`{KNOWN_RULE}`" in summary and "1 of 2 cells failed" in summary
    assert _comments(github_api) == [] and not github_api.store.check_runs
    assert sleeps == []  # a read-only token is not retried


def _storm(api: ApiServer) -> None:
    api.inject(Fault(FaultKind.SERVER_ERROR, times=1000, path=f"^/repos/{SLUG}"))


def test_a_500_storm_keeps_the_job_green_and_the_diagnosis_in_the_summary(
    github_api: ApiServer, project: Project, tmp_path: Path, sleeps: list[float]
) -> None:
    _storm(github_api)
    code, printed = _report(_env(github_api, project, tmp_path))
    assert code == 0
    assert sleeps == [2.0, 4.0, 8.0, 2.0, 4.0, 8.0]  # backoff, 4 attempts each for check run and comment
    warnings = [line for line in printed.splitlines() if line.startswith("::warning")]
    assert len(warnings) == 2 and all("HTTP 500" in w for w in warnings)
    assert sum(line.startswith("::error") for line in printed.splitlines()) == 1
    summary = (tmp_path / "summary.md").read_text("utf-8")
    assert f"`{KNOWN_RULE}`" in summary and 'device alias "local"' in summary
    assert _comments(github_api) == []


def test_fail_on_api_error_makes_the_step_fail(
    github_api: ApiServer, project: Project, tmp_path: Path, sleeps: list[float]
) -> None:
    _storm(github_api)
    code, printed = _report(_env(github_api, project, tmp_path, fail_on_api_error="true"))
    assert code == 1
    assert "HTTP 500" in printed
    assert f"`{KNOWN_RULE}`" in (tmp_path / "summary.md").read_text("utf-8")  # the diagnosis is still kept


def test_without_a_pull_request_only_the_check_run_is_posted(
    github_api: ApiServer, project: Project, tmp_path: Path, sleeps: list[float]
) -> None:
    env = _env(github_api, project, tmp_path)
    env.update({"GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": str(tmp_path / "push.json")})
    (tmp_path / "push.json").write_text(json.dumps({"after": "f" * 40}), "utf-8")
    assert _report(env) == (0, "")
    assert [r.head_sha for r in github_api.store.check_runs.values()] == ["f" * 40]
    assert _comments(github_api) == [] and not github_api.store.comments


def _big_project(tmp_path: Path, record: dict[str, object]) -> tuple[Path, Path]:
    """A manifest of 16 builds x 16 values (256 cells) and a diagnosis file per cell."""
    axis = ", ".join(f'"v{i:02d}"' for i in range(16))
    build = "  b{:02d}:\n    platforms: [linux-x86_64]\n    axes: {{x: [{}]}}\n    run: [make]\n"
    manifest = tmp_path / "big" / "ci-matrix.yml"
    manifest.parent.mkdir()
    manifest.write_text("version: 1\nbuilds:\n" + "".join(build.format(b, axis) for b in range(16)), "utf-8")
    for b in range(16):
        for v in range(16):
            cell = f"b{b:02d}-linux-x86_64-x-v{v:02d}"
            path = tmp_path / "diagnoses" / f"ci-matrix-diagnosis-{cell}" / f"{cell}.json"
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps({**record, "cell": cell}), "utf-8")
    return manifest, tmp_path / "diagnoses"


@pytest.mark.parametrize("known", [True, False])
def test_a_256_cell_matrix_that_failed_everywhere_stays_within_githubs_limits_grid_first(
    github_api: ApiServer, project: Project, tmp_path: Path, sleeps: list[float], known: bool
) -> None:
    failing = json.loads((project.diagnoses / f"ci-matrix-diagnosis-{FAILING}" / f"{FAILING}.json").read_text("utf-8"))
    if not known:
        failing.update(findings=[], classified=False, tail=[f"error {i}: " + "x" * 390 for i in range(40)])
    manifest, diagnoses = _big_project(tmp_path, failing)
    assert _report(_env(github_api, project, tmp_path, manifest=str(manifest), diagnoses=str(diagnoses))) == (0, "")
    [comment] = _comments(github_api)
    [run] = github_api.store.check_runs.values()
    kind = "256 known, 0 unclassified" if known else "0 known, 256 unclassified"
    assert comment.startswith(f"{MARKER}\n\n## ci-matrix: 256 of 256 cells failed ({kind})")
    mark = "❌" if known else "❓"
    assert f"**256** cells: {mark} 256 failed" in comment
    assert f"| b00 · linux-x86_64 | [{mark}](#ci-matrix-b00-linux-x86-64-x-v00) |" in comment
    assert comment.count("| +4 more |") == 1 and comment.count(f" | {mark}4 |") == 16  # columns 13-16 folded
    assert len(comment) <= 65_536 and len(run.output["summary"]) <= 65_535
    if known:  # one rule: its section names every cell, so every mark of the grid leads somewhere
        assert all(f'<a id="ci-matrix-b{b:02d}-linux-x86-64-x-v{v:02d}"></a>' in comment
                   for b in range(16) for v in range(16))
        assert "cut to keep this comment" not in comment
    else:  # 256 log tails cannot fit: whole sections of 10 cells are cut, and the comment says so
        assert "more sections were cut to keep this comment under GitHub's 65,536-character limit" in comment
        assert comment.count("<details><summary><code>") % 10 == 0
    assert len(run.annotations) == 256  # posted 50 at a time
