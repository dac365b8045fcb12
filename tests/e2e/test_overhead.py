"""What the action costs each matrix cell, measured where it runs: act runs
tests/e2e/overhead/workflow.yml on this machine (host mode, offline actions) with cells whose
build is `true`, so that a cell's whole time in the action is overhead. It prints the figure
(cold: the first cell installs ci-matrix; warm: later cells restore the environment it saved)
and asserts only what happened, never how long it took.

actions/cache is the local stand-in under act-stubs/cache (restore/ and save/ copy a folder
under ACT_CACHE_DIR): the real cache service, its download and upload, is not exercised.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_act import STUBS, _copy_repo, _host_env
from tests.tooling import missing_tool

pytestmark = pytest.mark.slow

WORKFLOW = "tests/e2e/overhead/workflow.yml"
# Sub-steps of the action (step id: heading), in the order they run; the toolchain cache
# step is skipped (nothing to set up), the `tools` step still asks `ci-matrix setup --dry-run`.
PARTS = {"venv": "key", "venv-cache": "restore", "install": "install", "venv-save": "save",
         "tools": "setup-key", "main": "run"}  # fmt: skip
TARGET_WARM_S, TARGET_COLD_S = 3.0, 5.0


@dataclass(frozen=True)
class CellTimes:
    """Seconds one cell spent in the action, in all and per sub-step (absent: skipped)."""

    job: str
    cell: str
    total: float
    parts: dict[str, float]
    outputs: dict[str, str]


def _act_argv(act: str, work: Path) -> list[str]:
    return [
        act, "workflow_dispatch", "-C", str(work / "repo"), "-W", WORKFLOW,
        "-P", "ubuntu-latest=-self-hosted", "--action-offline-mode", "--pull=false", "--no-cache-server",
        "--env-file", "/dev/null",
        "--local-repository", f"actions/cache@v4={STUBS / 'cache'}",
        "--env", f"ACT_CACHE_DIR={work / 'cache'}",
        # A fresh runner has no uv cache either: the cold cell downloads what it installs.
        "--env", f"UV_CACHE_DIR={work / 'uv-cache'}",
        "--action-cache-path", str(work / "act-cache"), "--rm", "--json",
    ]  # fmt: skip


def _cell_times(records: list[dict[str, Any]]) -> list[CellTimes]:
    found: dict[tuple[str, str], CellTimes] = {}
    for r in records:
        step = r.get("stepID") or []
        if not step or step[0] != "run" or r.get("stage") != "Main":
            continue
        cell = (r.get("matrix") or {}).get("cell", "noop-linux-x86_64-n-1")
        key = (r["jobID"], cell)
        times = found.setdefault(key, CellTimes(r["jobID"], cell, 0.0, {}, {}))
        if "stepResult" in r and len(step) == 1:
            found[key] = CellTimes(r["jobID"], cell, r["executionTime"] / 1e9, times.parts, times.outputs)
        elif "stepResult" in r and len(step) == 2:
            times.parts[step[1]] = r["executionTime"] / 1e9
        if r.get("command") == "set-output" and len(step) == 2:
            times.outputs[f"{step[1]}.{r['name']}"] = r.get("arg", "")
    return sorted(found.values(), key=lambda t: (t.job != "cold", t.cell))


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[CellTimes]]:
    missing = [tool for tool in ("act", "git", "uv") if shutil.which(tool) is None]
    if missing:
        missing_tool(f"the overhead run needs {', '.join(missing)}")
    work = tmp_path_factory.mktemp("overhead")
    (work / "repo").mkdir()
    _copy_repo(work / "repo")
    done = subprocess.run(
        _act_argv(str(shutil.which("act")), work), cwd=work, env=_host_env(),
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    (work / "act-out.json").write_text(done.stdout, encoding="utf-8")
    assert done.returncode == 0, done.stderr[-3000:]
    yield _cell_times(records)


def _row(t: CellTimes) -> str:
    parts = "".join(f"{t.parts[p]:>10.2f}" if p in t.parts else f"{'-':>10}" for p in PARTS)
    return f"  {t.job:<5} {t.cell:<22} {t.total:>6.2f}{parts}"


def test_per_cell_overhead_is_printed(cells: list[CellTimes], capsys: pytest.CaptureFixture[str]) -> None:
    cold = [t.total for t in cells if t.job == "cold"]
    warm = [t.total for t in cells if t.job == "warm"]
    with capsys.disabled():
        print("\n\nper-cell overhead of the action under act (host mode, this machine), seconds;")
        print("the cells build `true`, so this is everything the action does in a cell:")
        print(f"  {'job':<5} {'cell':<22} {'total':>6}" + "".join(f"{h:>10}" for h in PARTS.values()))
        for t in cells:
            print(_row(t))
        print(f"cold (installs, saves): {cold[0]:.2f} s   target <= {TARGET_COLD_S:.0f} s   "
              f"{'OK' if cold[0] <= TARGET_COLD_S else 'MISSED'}")
        print(f"warm (restores), median of {len(warm)}: {statistics.median(warm):.2f} s   "
              f"target <= {TARGET_WARM_S:.0f} s   {'OK' if statistics.median(warm) <= TARGET_WARM_S else 'MISSED'}")
    assert len(cold) == 1 and len(warm) == 3


def test_the_first_cell_installs_and_saves_the_others_restore(cells: list[CellTimes]) -> None:
    hits = {t.cell: t.outputs.get("venv-cache.cache-hit") for t in cells}
    assert hits == {
        "noop-linux-x86_64-n-1": "false",
        "noop-linux-x86_64-n-2": "true",
        "noop-linux-x86_64-n-3": "true",
        "noop-linux-x86_64-n-4": "true",
    }
    assert [("venv-save" in t.parts) for t in cells] == [True, False, False, False]


def test_every_cell_ran_ci_matrix_from_the_environment(cells: list[CellTimes]) -> None:
    keys = {t.outputs["venv.key"] for t in cells}
    assert len(keys) == 1 and keys.pop().startswith("ci-matrix-venv-v1-Linux-X64-cpython-")
    assert all(t.outputs["install.bin"].endswith("/ci-matrix-venv/bin/ci-matrix") for t in cells)
    assert all(t.outputs["main.diagnosis"].endswith(f"{t.cell}.json") for t in cells)
