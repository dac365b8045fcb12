"""Each benchmark under bench/ runs here at a small size: it must still work and print its
figures beside their baselines. Nothing here times anything (the benchmarks do that)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def run_bench(*argv: str) -> str:
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_render_benchmark_prints_plan_json_and_cold_start_with_baselines() -> None:
    out = run_bench(str(BENCH / "render.py"), "--combinations", "400", "--rules", "5", "--repeat", "1", "--starts", "1")
    lines = out.splitlines()
    assert lines[0].startswith("plan: ") and "raw cells x 5 project rules" in lines[0]
    assert "baseline json.dumps(indent=2) of the same record" in lines[1]
    assert "identical text: yes" in lines[1]
    assert "python -c pass" in lines[2] and "ci-matrix render (example)" in lines[2] and "ratio" in lines[2]


@pytest.mark.skipif(shutil.which("grep") is None, reason="the scanner is compared with GNU grep")
def test_diagnose_benchmark_prints_scan_and_grep_for_every_log(tmp_path: Path) -> None:
    out = run_bench(str(BENCH / "diagnose.py"), "--size-mb", "1", "--repeat", "1", "--workdir", str(tmp_path))
    for log in ("normal", "adversarial", "escape flood"):
        assert any(line.startswith(log) for line in out.splitlines()), out
    for figure in ("scan / grep on the normal log", "peak memory of a scan", "adversarial / normal scan time"):
        assert figure in out
    assert {p.name for p in tmp_path.iterdir()} >= {"normal.log", "adversarial.log", "patterns.ere"}


def test_fixtures_benchmark_prints_both_trees_and_their_ratio() -> None:
    root = BENCH.parent
    argv = ["--logs", "20", "--runs", "1", "--starts", "1", "--baseline-tree", str(root)]
    out = run_bench(str(BENCH / "fixtures.py"), *argv)
    lines = out.splitlines()
    assert lines[0].startswith("diagnosis of 20 fixture logs") and "milliseconds per log" in lines[0]
    assert lines[1].lstrip().startswith("tree") and lines[2].lstrip().startswith("before")
    assert lines[3].lstrip().startswith("tree / before: ")
    assert lines[4].startswith("cold start of `ci-matrix diagnose` on ")
    assert [line.split()[0] for line in lines[5:8]] == ["python", "tree", "before"]
    assert lines[8].lstrip().startswith("tree / before: ")
