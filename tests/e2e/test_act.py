"""End to end: act runs .github/workflows/example.yml on this machine (host mode, offline).

plan → one job per cell with real builds (cargo, nvcc, iree-compile) of the projects under
examples/ → report to the loopback GitHub API → gate. The manifest is tests/e2e/ci-matrix.yml:
four cells pass (one of them worked around by the project's own rule) and two fail for real
with known failures, so the gate fails and act exits non-zero, as a required check would.

act runs once per module (about a minute on 2 cores); each test asserts one thing a user sees.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.github_api import spec
from tests.github_api.server import BOT_LOGIN, ApiServer
from tests.tooling import missing_tool

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
STUBS = Path(__file__).resolve().parent / "act-stubs"
#: Folders of the repository that no workflow reads, left out of the copy act checks out.
UNREAD = ("tests/corpus/",)
SLUG = "acme/ci-matrix-e2e"
PR_NUMBER = 7
HEAD_SHA = "1111111111111111111111111111111111111111"
TOKEN = "ghs_e2eWorkflowToken000000000000000000"
MARKER = "<!-- ci-matrix:report -->"

# cell id → (outcome, rule of the top finding)
EXPECTED = {
    "rust-crate-linux-x86_64-rust-stable-debug": ("passed", None),
    "kernels-linux-x86_64-cuda-13.0-sm_75": ("passed", None),
    "kernels-linux-x86_64-cuda-13.0-sm_80": ("passed", None),
    "model-linux-x86_64-iree-llvm-cpu": ("passed", None),
    "model-no-backend-linux-x86_64-iree-llvm-cpu": ("failed", "iree-llvm-cpu-backend-flag"),
    "kernels-unguarded-linux-x86_64-cuda-13.0-sm_75": ("failed", "qgemm-needs-sm80"),
}
TOOLS = ("act", "git", "cargo", "nvcc", "iree-compile")


@dataclass(frozen=True)
class ActRun:
    """One act run of the example workflow and what it left behind."""

    returncode: int
    seconds: float
    records: list[dict[str, Any]]  # act --json lines
    stderr: str
    artifacts: Path
    api: ApiServer
    log: Path  # act's --json output, kept for whoever reads a failure
    cache_log: Path  # what the actions/cache stand-in was asked to cache

    def top_steps(self, job_id: str) -> list[dict[str, Any]]:
        """Results of the top-level Main steps of a job (a matrix job: of all its cells)."""
        return [
            r
            for r in self.records
            if r.get("jobID") == job_id
            and "stepResult" in r
            and len(r.get("stepID", [])) == 1
            and r.get("stage") == "Main"
        ]


def _event(path: Path) -> None:
    pull = {
        "number": PR_NUMBER,
        "head": {"ref": "feature/x", "sha": HEAD_SHA, "repo": {"full_name": SLUG, "fork": False}},
        "base": {"ref": "main", "sha": "2" * 40, "repo": {"full_name": SLUG}},
        "user": {"login": "octocat"},
    }
    repository = {"full_name": SLUG, "name": SLUG.split("/")[1], "owner": {"login": "acme"}}
    path.write_text(
        json.dumps({"action": "synchronize", "number": PR_NUMBER, "pull_request": pull, "repository": repository}),
        encoding="utf-8",
    )


def _git(cwd: Path, *args: str) -> None:
    # No automatic gc: past some 6,700 loose objects (the tree has more files than that) `git commit`
    # starts one in the background, and the explicit `gc` below then fails with "gc is already running".
    subprocess.run(
        ["git", "-c", "user.name=e2e", "-c", "user.email=e2e@example.invalid", "-c", "gc.auto=0", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        timeout=60,
    )


def _copy_repo(dest: Path) -> None:
    """The working tree as act would see it in a checkout: tracked and untracked, not ignored files;
    committed in a fresh repository whose `origin` gives act GITHUB_REPOSITORY.

    Left out: the real-log corpus (tests/corpus), which no workflow reads. act's checkout copies
    every file of the repository, .git included, for each job (seconds per thousand files on
    this machine), so the commit is also packed rather than left as one loose object a file."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=60,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if name.startswith(UNREAD):
            continue
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    _git(dest, "init", "-q", "-b", "main")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "e2e")
    _git(dest, "gc", "-q", "--prune=now")
    _git(dest, "remote", "add", "origin", f"https://github.com/{SLUG}")


def _act_argv(act: str, work: Path, api: ApiServer, tools: Path) -> list[str]:
    return [
        act,
        "pull_request",
        "-C",
        str(work / "repo"),
        "-W",
        ".github/workflows/example.yml",
        "-e",
        str(work / "event.json"),
        "-P",
        "ubuntu-latest=-self-hosted",
        "-P",
        "ubuntu-24.04=-self-hosted",
        "--action-offline-mode",
        "--pull=false",
        "--no-cache-server",
        "--env-file",
        "/dev/null",
        "--local-repository",
        f"actions/upload-artifact@v6={STUBS / 'upload-artifact'}",
        "--local-repository",
        f"actions/download-artifact@v7={STUBS / 'download-artifact'}",
        "--local-repository",
        f"actions/cache@v4={STUBS / 'cache'}",
        "--env",
        f"ACT_ARTIFACT_DIR={work / 'artifacts'}",
        "--env",
        f"ACT_CACHE_LOG={work / 'cache.jsonl'}",
        # Toolchains that `setup` installs are kept between test runs (as actions/cache would).
        "--env",
        f"CI_MATRIX_TOOLS={tools}",
        "--env",
        f"GITHUB_API_URL={api.base_url}",
        "--var",
        "CI_MATRIX_MANIFEST=tests/e2e/ci-matrix.yml",
        "--secret",
        f"GITHUB_TOKEN={TOKEN}",
        "--action-cache-path",
        str(work / "act-cache"),
        "--rm",
        "--json",
    ]


def _host_env() -> dict[str, str]:
    # act passes the caller's environment to host-mode steps: drop what a CI runner (or a
    # developer's shell) set for *this* job, so the workflow sees only what act gives it.
    dropped = ("GITHUB_", "RUNNER_", "ACTIONS_", "CI_MATRIX_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    return {**env, "ACT_DISABLE_VERSION_CHECK": "1"}


@pytest.fixture(scope="module")
def act_run(
    tmp_path_factory: pytest.TempPathFactory,
    github_api_description: spec.ApiDescription,
    request: pytest.FixtureRequest,
) -> Iterator[ActRun]:
    """Run act once for the module, against a loopback API that accepts the workflow's token."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        missing_tool(f"the end-to-end run needs {', '.join(missing)}")
    work = tmp_path_factory.mktemp("act")  # act also reads .actrc/.env from its cwd: none here
    (work / "repo").mkdir()
    _copy_repo(work / "repo")
    _event(work / "event.json")
    api = ApiServer(github_api_description).start()
    api.add_token(TOKEN, BOT_LOGIN)
    try:
        started = time.monotonic()
        done = subprocess.run(
            _act_argv(str(shutil.which("act")), work, api, Path(request.config.cache.mkdir("ci-matrix-tools"))),
            cwd=work,
            env=_host_env(),
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        seconds = time.monotonic() - started
        records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        (work / "act-out.json").write_text(done.stdout, encoding="utf-8")  # for a failing test's reader
        yield ActRun(done.returncode, seconds, records, done.stderr, work / "artifacts", api, work / "act-out.json",
                     work / "cache.jsonl")
    finally:
        api.stop()


def test_every_job_ran_and_the_gate_failed_because_cells_failed(act_run: ActRun) -> None:
    ran = {r["jobID"] for r in act_run.records if "jobResult" in r}
    assert ran == {"plan", "build", "report", "gate"}, act_run.stderr[-2000:]
    cells = {r["matrix"]["id"] for r in act_run.records if r.get("jobID") == "build" and r.get("matrix")}
    assert cells == set(EXPECTED)
    results = {r["jobID"]: r["jobResult"] for r in act_run.records if "jobResult" in r and r["jobID"] != "build"}
    assert results == {"plan": "success", "report": "success", "gate": "failure"}
    gate_steps = [(r["step"], r["stepResult"]) for r in act_run.top_steps("gate")]
    assert gate_steps == [("Every cell passed", "failure")]
    # Not asserted: the gate's own `::error` line. act 0.2.89 in host mode now and then drops the
    # whole output of a step that exits within milliseconds (2 runs in 5 here); the result stays.
    assert act_run.returncode != 0


def test_each_cell_built_for_real_and_failed_only_where_expected(act_run: ActRun) -> None:
    # act's jobResult of a matrix cell is the whole matrix's; the run step's result is the cell's.
    step = {r["matrix"]["id"]: r["stepResult"] for r in act_run.top_steps("build") if r["stepID"] == ["run"]}
    assert step == {cell: "success" if outcome == "passed" else "failure" for cell, (outcome, _) in EXPECTED.items()}


@pytest.mark.parametrize(("cell", "outcome", "rule"), [(c, o, r) for c, (o, r) in EXPECTED.items()])
def test_each_cell_uploaded_its_diagnosis(act_run: ActRun, cell: str, outcome: str, rule: str | None) -> None:
    record = json.loads((act_run.artifacts / f"ci-matrix-diagnosis-{cell}" / f"{cell}.json").read_text("utf-8"))
    assert (record["cell"], record["outcome"]) == (cell, outcome)
    assert [f["rule"] for f in record["findings"]][:1] == ([rule] if rule else [])
    assert record["exit-code"] == (0 if outcome == "passed" else 1)


def test_failed_cells_annotate_the_run_with_their_known_failure(act_run: ActRun) -> None:
    titles = {
        r["matrix"]["id"]: r["kvPairs"].get("title", "")
        for r in act_run.records
        if r.get("jobID") == "build" and r.get("command") == "error"
    }
    assert titles == {
        "model-no-backend-linux-x86_64-iree-llvm-cpu": (
            "Known failure: IREE CPU compiles need the llvm-cpu backend flag"
        ),
        "kernels-unguarded-linux-x86_64-cuda-13.0-sm_75": (
            "Known failure: qgemm uses int8 tensor-core mma.sync, which sm_75 does not have"
        ),
    }


def test_plan_summary_draws_the_grid_with_the_workaround(act_run: ActRun) -> None:
    summaries = [
        r["content"]
        for r in act_run.records
        if r.get("jobID") == "plan" and r.get("command") == "summary" and len(r.get("stepID", [])) == 1
    ]
    assert len(summaries) == 1
    assert "**6** cells run (1 worked around)" in summaries[0]
    assert "🔧 `qgemm-needs-sm80`" in summaries[0]


def test_one_sticky_comment_names_both_known_failures(act_run: ActRun) -> None:
    comments = act_run.api.store.comments_on("acme", "ci-matrix-e2e", PR_NUMBER)
    assert len(comments) == 1
    body, login = comments[0].body, comments[0].login
    assert login == BOT_LOGIN
    assert body.startswith(MARKER)
    assert "2 of 6 cells failed (2 known, 0 unclassified)" in body
    assert "`iree-llvm-cpu-backend-flag`" in body and 'device alias "local" does not provide' in body
    assert "`qgemm-needs-sm80`" in body and "does not support exception handling" in body
    assert "https://github.com/acme/ci-matrix-e2e/actions/runs/" in body


GRID = """\
**6** cells: ✅ 3 passed · 🔧 1 passed with a workaround · ❌ 2 failed, known cause

| build · platform | stable debug llvm | 13.0 sm_75 | 13.0 sm_80 | llvm-cpu |
|---|---|---|---|---|
| rust-crate · linux-x86_64 | ✅ |   |   |   |
| kernels · linux-x86_64 |   | 🔧 | ✅ |   |
| model · linux-x86_64 |   |   |   | ✅ |
| model-no-backend · linux-x86_64 |   |   |   | [❌](#ci-matrix-model-no-backend-linux-x86-64-iree-llvm-cpu) |
| kernels-unguarded · linux-x86_64 |   | [❌](#ci-matrix-kernels-unguarded-linux-x86-64-cuda-13-0-sm-75) |   |   |
"""


def test_the_report_opens_with_the_matrix_at_a_glance(act_run: ActRun) -> None:
    summaries = [r["content"] for r in act_run.records if r.get("jobID") == "report" and r.get("command") == "summary"]
    assert summaries and all(s.startswith("## ci-matrix: 2 of 6 cells failed") for s in summaries)
    [body] = [c.body for c in act_run.api.store.comments_on("acme", "ci-matrix-e2e", PR_NUMBER)]
    for markdown in (summaries[0], body):
        assert GRID in markdown and markdown.index(GRID) < markdown.index("### Known failures")
        for anchor in ("model-no-backend-linux-x86-64-iree-llvm-cpu", "kernels-unguarded-linux-x86-64-cuda-13-0-sm-75"):
            assert f'<a id="ci-matrix-{anchor}"></a>' in markdown  # where the grid's ❌ links to
    [run] = act_run.api.store.check_runs.values()
    assert GRID in run.output["summary"]


def test_check_run_on_the_pull_request_head_with_one_annotation_per_failure(act_run: ActRun) -> None:
    runs = list(act_run.api.store.check_runs.values())
    assert [(r.name, r.head_sha, r.status, r.conclusion) for r in runs] == [
        ("ci-matrix", HEAD_SHA, "completed", "failure")
    ]
    titles = sorted(a["title"] for a in runs[0].annotations)
    assert titles == [
        "kernels-unguarded-linux-x86_64-cuda-13.0-sm_75: "
        "qgemm uses int8 tensor-core mma.sync, which sm_75 does not have",
        "model-no-backend-linux-x86_64-iree-llvm-cpu: IREE CPU compiles need the llvm-cpu backend flag",
    ]


def test_every_api_request_was_valid_and_authenticated(act_run: ActRun) -> None:
    assert act_run.api.violations == []
    posted = [r for r in act_run.api.requests if r.method in ("POST", "PATCH")]
    assert [(r.method, r.path, r.login, r.status) for r in posted] == [
        ("POST", "/repos/acme/ci-matrix-e2e/check-runs", BOT_LOGIN, 201),
        ("POST", f"/repos/acme/ci-matrix-e2e/issues/{PR_NUMBER}/comments", BOT_LOGIN, 201),
    ]


def test_each_cell_was_set_up_with_its_own_toolchains_and_cache_key(act_run: ActRun) -> None:
    setup = {}
    for cell in EXPECTED:
        record = json.loads((act_run.artifacts / f"ci-matrix-diagnosis-{cell}" / f"{cell}.json").read_text("utf-8"))
        setup[cell] = [line.split(":")[0] for line in record["setup"]]
    assert setup == {
        "rust-crate-linux-x86_64-rust-stable-debug": ["Rust stable"],
        "kernels-linux-x86_64-cuda-13.0-sm_75": ["CUDA 13.0"],
        "kernels-linux-x86_64-cuda-13.0-sm_80": ["CUDA 13.0"],
        "model-linux-x86_64-iree-llvm-cpu": ["IREE 3.13.0"],
        "model-no-backend-linux-x86_64-iree-llvm-cpu": ["IREE 3.13.0"],
        "kernels-unguarded-linux-x86_64-cuda-13.0-sm_75": ["CUDA 13.0"],
    }
    cached = [json.loads(line) for line in act_run.cache_log.read_text("utf-8").splitlines()]
    keys = sorted(c["key"].rsplit("-", 1)[0] for c in cached)  # the Rust cell caches nothing: rustup's own
    prefix = "ci-matrix-tools-v1-linux-x86_64"
    assert keys == [f"{prefix}-cuda-13.0"] * 3 + [f"{prefix}-iree-3.13.0"] * 2
    assert all(c["path"].endswith(("/cuda/13.0", "/iree/3.13.0")) for c in cached)
