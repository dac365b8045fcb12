"""`ci-matrix run` and `ci-matrix diagnose` on the example projects, with the real tools:
the workaround makes the build pass; without it, it fails for real and the diagnosis names
the rule. The build's exit code always comes back unchanged."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ci_matrix.edges.files import schema
from tests.tooling import missing_tool

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "ci_matrix" / "knowledge" / "fixtures"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the examples, so that builds write nowhere in the repository."""
    shutil.copytree(
        ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("target", "build", "*.vmfb")
    )
    return tmp_path / "examples" / "ci-matrix.yml"


def ci_matrix(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ci_matrix", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def diagnose_json(log: str, manifest: Path, cell: str) -> dict[str, Any]:
    """`ci-matrix diagnose LOG --manifest M --cell C --format json`, parsed."""
    done = ci_matrix("diagnose", log, "--manifest", str(manifest), "--cell", cell, "--format", "json")
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def record_of(path: Path) -> dict[str, object]:
    record = json.loads(path.read_text(encoding="utf-8"))
    jsonschema.validate(record, schema("diagnosis"))
    return record


def need(tool: str) -> None:
    if shutil.which(tool) is None:
        missing_tool(f"{tool} is not installed")


@pytest.mark.slow
def test_iree_workaround_passes_and_without_it_the_real_failure_is_diagnosed(project: Path, tmp_path: Path) -> None:
    need("iree-compile")
    cell = "model-linux-x86_64-iree-llvm-cpu"
    ok = ci_matrix("run", "--manifest", str(project), "--cell", cell, "--diagnosis", str(tmp_path / "ok.json"))
    assert ok.returncode == 0, ok.stderr
    assert "--iree-hal-local-target-device-backends=llvm-cpu" in ok.stdout
    assert record_of(tmp_path / "ok.json")["outcome"] == "passed"
    assert (project.parent / "iree-model" / f"{cell}.vmfb").is_file()

    bad = ci_matrix(
        "run",
        "--manifest",
        str(project),
        "--cell",
        cell,
        "--ignore-rule",
        "iree-llvm-cpu-backend-flag",
        "--log",
        str(tmp_path / "bad.log"),
        "--diagnosis",
        str(tmp_path / "bad.json"),
    )
    assert bad.returncode == 1  # iree-compile's own exit code
    assert 'device alias "local" does not provide any executable targets' in (tmp_path / "bad.log").read_text()
    record = record_of(tmp_path / "bad.json")
    assert record["findings"][0]["rule"] == "iree-llvm-cpu-backend-flag"  # type: ignore[index]
    assert record["findings"][0]["matched-by"] == "log"  # type: ignore[index]
    assert "known failure iree-llvm-cpu-backend-flag" in bad.stderr


@pytest.mark.slow
def test_cuda_guard_passes_for_sm75_and_the_unguarded_failure_names_the_project_rule(
    project: Path, tmp_path: Path
) -> None:
    need("nvcc")
    cell = "kernels-linux-x86_64-cuda-13.0-sm_75"
    ok = ci_matrix("run", "--manifest", str(project), "--cell", cell, "--no-preflight")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "-DQGEMM_GUARD_BELOW_SM80" in ok.stdout
    bad = ci_matrix(
        "run",
        "--manifest",
        str(project),
        "--cell",
        cell,
        "--no-preflight",
        "--ignore-rule",
        "qgemm-needs-sm80",
        "--diagnosis",
        str(tmp_path / "d.json"),
    )
    assert bad.returncode != 0
    assert "does not support exception handling" in bad.stdout
    assert record_of(tmp_path / "d.json")["findings"][0]["rule"] == "qgemm-needs-sm80"  # type: ignore[index]


@pytest.mark.slow
def test_rust_crate_builds_and_tests_in_debug(project: Path, tmp_path: Path) -> None:
    need("cargo")
    env = {**_env(), "CARGO_TARGET_DIR": str(tmp_path / "target")}
    done = ci_matrix(
        "run",
        "--manifest",
        str(project),
        "--cell",
        "rust-crate-linux-x86_64-rust-stable-debug",
        "--diagnosis",
        str(tmp_path / "d.json"),
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test result: ok" in done.stdout
    assert record_of(tmp_path / "d.json")["tools"]["rustc"].startswith("rustc ")  # type: ignore[index]


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


def test_exit_code_is_passed_through_and_a_missing_program_is_127(project: Path, tmp_path: Path) -> None:
    cell = "model-linux-x86_64-iree-llvm-cpu"
    done = ci_matrix(
        "run",
        "--manifest",
        str(project),
        "--cell",
        cell,
        "--no-preflight",
        "--",
        sys.executable,
        "-c",
        "raise SystemExit(42)",
    )
    assert done.returncode == 42
    missing = ci_matrix(
        "run", "--manifest", str(project), "--cell", cell, "--no-preflight", "--", "no-such-program-ci-matrix"
    )
    assert missing.returncode == 127
    assert "command not found" in missing.stdout


def test_timeout_stops_the_build_with_124_and_keeps_the_log(project: Path, tmp_path: Path) -> None:
    started = time.monotonic()
    code = "import time; print('started', flush=True); time.sleep(60)"
    done = ci_matrix(
        "run",
        "--manifest",
        str(project),
        "--cell",
        "model-linux-x86_64-iree-llvm-cpu",
        "--no-preflight",
        "--timeout",
        "1",
        "--log",
        str(tmp_path / "t.log"),
        "--diagnosis",
        str(tmp_path / "t.json"),
        "--",
        sys.executable,
        "-c",
        code,
    )
    assert time.monotonic() - started < 30
    assert done.returncode == 124  # as timeout(1) reports a time limit
    assert "started" in (tmp_path / "t.log").read_text()
    assert "(stopped: timeout)" in record_of(tmp_path / "t.json")["tail"]  # type: ignore[operator]


def test_sigterm_is_forwarded_and_the_diagnosis_still_written(project: Path, tmp_path: Path) -> None:
    code = "import time; print('building', flush=True); time.sleep(60)"
    argv = [
        sys.executable,
        "-m",
        "ci_matrix",
        "run",
        "--manifest",
        str(project),
        "--cell",
        "model-linux-x86_64-iree-llvm-cpu",
        "--no-preflight",
        "--log",
        str(tmp_path / "s.log"),
        "--diagnosis",
        str(tmp_path / "s.json"),
        "--",
        sys.executable,
        "-c",
        code,
    ]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        assert "building" in proc.stdout.readline() + proc.stdout.readline()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM
    assert record_of(tmp_path / "s.json")["outcome"] == "failed"


def test_hostile_build_output_cannot_issue_workflow_commands(project: Path, tmp_path: Path) -> None:
    summary, outputs = tmp_path / "summary.md", tmp_path / "outputs.txt"
    env = {**_env(), "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_OUTPUT": str(outputs)}
    code = "print('::add-mask::secret'); print('::error title=pwned::owned'); raise SystemExit(3)"
    done = ci_matrix(
        "run",
        "--manifest",
        str(project),
        "--cell",
        "model-linux-x86_64-iree-llvm-cpu",
        "--no-preflight",
        "--diagnosis",
        str(tmp_path / "h.json"),
        "--",
        sys.executable,
        "-c",
        code,
        env=env,
    )
    assert done.returncode == 3
    lines = done.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("::stop-commands::"))
    token = lines[start].split("::")[2]
    end = lines.index(f"::{token}::")
    assert start < lines.index("::error title=pwned::owned") < end  # inert: commands are off there
    annotations = [line for line in lines[end:] if line.startswith("::error")]
    assert annotations and all("pwned::owned" not in a for a in annotations[1:])
    assert "Unclassified failure" in annotations[0]
    assert "unclassified failure" in summary.read_text()
    assert "diagnosis<<ghadelimiter_" in outputs.read_text()


def test_a_generic_crash_is_refined_by_what_its_own_log_shows() -> None:
    # CMake's "compiler identification is NVIDIA 11.6" and -I.../cutlass/include say what the
    # cell would: no --cell is needed to name the CUTLASS rule.
    log = str(FIXTURES / "cutlass-cuda-older-than-11-8" / "match.log")
    found = json.loads(ci_matrix("diagnose", log, "--format", "json").stdout)["findings"][0]
    assert (found["rule"], found["reached-by"], found["confidence"]) == (
        "cutlass-cuda-older-than-11-8", "signature+evidence", "high")
    assert found["refined-from"] == "nvcc-frontend-crash"
    assert {(e["fact"], e["value"], e["line"]) for e in found["evidence"]} == {
        ("uses", "cutlass", 7), ("cuda-version", "11.6", 1)}


def test_a_generic_crash_without_telling_facts_stays_generic() -> None:
    log = str(FIXTURES / "nvcc-frontend-crash" / "match.log")
    found = json.loads(ci_matrix("diagnose", log, "--format", "json").stdout)["findings"]
    assert [f["rule"] for f in found] == ["nvcc-frontend-crash"]
    assert found[0]["maybe"] == [{"rule": "cutlass-cuda-older-than-11-8", "unknown": ["uses", "cuda-version"]}]


def test_diagnose_and_draft_read_a_log_that_gh_run_view_pipes_in() -> None:
    """`gh run view RUN --log-failed | ci-matrix diagnose -`: the log on standard input, its
    lines as gh prints them (job, step, then GitHub's line: a byte-order mark, a stamp)."""
    names = "build (ubuntu-22.04, stable)\tRun cargo build --locked\t"
    lines = ["\ufeff2024-05-01T12:34:56.1234567Z error: linker `cc` not found",
             "2024-05-01T12:34:56.2000000Z   |",
             "2024-05-01T12:34:56.3000000Z   = note: No such file or directory (os error 2)"]
    log = "".join(names + line + "\n" for line in lines)
    done = subprocess.run([sys.executable, "-m", "ci_matrix", "diagnose", "-", "--format", "json"], input=log,
                          capture_output=True, text=True, timeout=300, check=True)
    found = json.loads(done.stdout)
    assert found["log"] == "-"
    assert [(f["rule"], f["log"]["line"], f["log"]["text"]) for f in found["findings"]][:1] == [
        ("rust-linker-cc-not-found", 1, "error: linker `cc` not found")]
    other = "".join(f"{names}2024-05-01T12:34:5{n}.0Z {text}\n"
                    for n, text in enumerate(["frobnicate: error: widget table overflowed", "Error: exit 2"]))
    drafted = subprocess.run([sys.executable, "-m", "ci_matrix", "rules", "draft", "-"], input=other,
                             capture_output=True, text=True, timeout=300, check=True)
    assert "- 'frobnicate: error: widget table overflowed'" in drafted.stdout
    assert "Run cargo" not in drafted.stdout.split("fixtures:")[0]
    twice = ci_matrix("diagnose", "-", "-")
    assert twice.returncode == 64 and "standard input can be read once" in twice.stderr


def test_diagnose_names_the_rule_scoped_to_the_cell(tmp_path: Path) -> None:
    manifest = tmp_path / "ci-matrix.yml"
    manifest.write_text(
        "builds:\n  gemm:\n    platforms: [linux-x86_64]\n    uses: [cutlass]\n"
        "    cuda: {versions: ['11.6', '12.4'], archs: [sm_80]}\n    run: nvcc x.cu\n"
        "ignore-rules: [cutlass-cuda-older-than-11-8]\n",
        encoding="utf-8",
    )
    log = str(FIXTURES / "cutlass-cuda-older-than-11-8" / "match.log")
    old = diagnose_json(log, manifest, "gemm-linux-x86_64-cuda-11.6-sm_80")
    assert old["findings"][0]["rule"] == "cutlass-cuda-older-than-11-8"
    new = diagnose_json(log, manifest, "gemm-linux-x86_64-cuda-12.4-sm_80")
    assert "cutlass-cuda-older-than-11-8" not in [f["rule"] for f in new["findings"]]


def test_silent_failure_is_named_by_configuration(tmp_path: Path) -> None:
    manifest = tmp_path / "ci-matrix.yml"
    manifest.write_text(
        "builds:\n  crate:\n    platforms: [macos-arm64]\n"
        "    rust: {toolchains: [nightly-2024-07-01], backends: [cranelift]}\n    run: cargo test\n"
        "ignore-rules: [cranelift-variadic-macos-arm64]\n",
        encoding="utf-8",
    )
    log = str(FIXTURES / "cranelift-variadic-macos-arm64" / "match.log")
    found = diagnose_json(log, manifest, "crate-macos-arm64-rust-nightly-2024-07-01-debug-cranelift")
    assert found["findings"][0]["rule"] == "cranelift-variadic-macos-arm64"
    assert found["findings"][0]["matched-by"] == "configuration"


def test_a_passing_build_is_never_a_known_failure(project: Path, tmp_path: Path) -> None:
    code = "print('error: device code does not support exception handling')"  # a scary line, exit 0
    done = ci_matrix(
        "run",
        "--manifest",
        str(project),
        "--cell",
        "model-linux-x86_64-iree-llvm-cpu",
        "--no-preflight",
        "--diagnosis",
        str(tmp_path / "p.json"),
        "--",
        sys.executable,
        "-c",
        code,
    )
    assert done.returncode == 0
    record = record_of(tmp_path / "p.json")
    assert record["outcome"] == "passed" and record["findings"] == []
