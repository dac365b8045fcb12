"""`ci-matrix run` on a real GPU runner: preflight reads the GPU's compute capability and
warns before building code it cannot run; the build then fails for real with "no kernel
image is available", and the diagnosis names that rule.

Needs nvidia-smi and nvcc with a GPU: skipped elsewhere (CI has no GPU). It was run on the
device machine that the project borrows (see the closing notes of issue 3).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow, pytest.mark.gpu]


def _capability() -> int | None:
    if not shutil.which("nvidia-smi") or not shutil.which("nvcc"):
        return None
    done = subprocess.run(
        ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True, text=True, check=False
    )
    first = done.stdout.strip().splitlines()[:1]
    return round(float(first[0]) * 10) if done.returncode == 0 and first else None


CAPABILITY = _capability()
needs_gpu = pytest.mark.skipif(CAPABILITY is None, reason="no NVIDIA GPU (nvidia-smi) and nvcc here")


def _nvcc_release() -> str:
    done = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=False)
    return done.stdout.split("release ")[1].split(",")[0]


def _manifest(tmp_path: Path, archs: list[str]) -> Path:
    shutil.copytree(ROOT / "examples" / "cuda-kernels", tmp_path / "cuda-kernels")
    manifest = tmp_path / "ci-matrix.yml"
    manifest.write_text(
        f"""
builds:
  gpu:
    platforms: [linux-x86_64-gpu]
    needs-gpu: true
    cuda:
      versions: ["{_nvcc_release()}"]
      archs: [{", ".join(archs)}]
    working-directory: cuda-kernels
    run:
      - [mkdir, -p, build]
      - [nvcc, "{{nvcc-flags}}", tests/saxpy_test.cu, -o, "build/{{cell-id}}"]
      - ["build/{{cell-id}}"]
""",
        encoding="utf-8",
    )
    return manifest


def _run(manifest: Path, cell: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    record = tmp_path / f"{cell}.json"
    done = subprocess.run(
        [sys.executable, "-m", "ci_matrix", "run", "--manifest", str(manifest), "--cell", cell,
         "--log", str(tmp_path / f"{cell}.log"), "--diagnosis", str(record)],
        capture_output=True, text=True, check=False, timeout=300,
    )
    return done, json.loads(record.read_text(encoding="utf-8"))


def _other_major(capability: int) -> int:
    return 80 if capability // 10 != 8 else 90


@needs_gpu
def test_arch_of_the_gpu_builds_and_runs(tmp_path: Path) -> None:
    assert CAPABILITY is not None
    manifest = _manifest(tmp_path, [f"sm_{CAPABILITY}"])
    cell = f"gpu-linux-x86_64-gpu-cuda-{_nvcc_release()}-sm_{CAPABILITY}"
    done, record = _run(manifest, cell, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "saxpy ok" in done.stdout
    assert "no kernel image" not in done.stdout
    assert record["outcome"] == "passed"
    assert "compute capability" in str(record["tools"]["gpu"])  # type: ignore[index]


@needs_gpu
def test_arch_the_gpu_cannot_run_is_warned_then_diagnosed(tmp_path: Path) -> None:
    assert CAPABILITY is not None
    wrong = _other_major(CAPABILITY)
    manifest = _manifest(tmp_path, [f"sm_{wrong}"])
    cell = f"gpu-linux-x86_64-gpu-cuda-{_nvcc_release()}-sm_{wrong}"
    done, record = _run(manifest, cell, tmp_path)
    warning = done.stdout.find("no kernel image is available for execution on the device'. Build for")
    build = done.stdout.find("$ nvcc")
    assert 0 <= warning < build, done.stdout  # warned before building
    assert done.returncode == 1  # the test program's own exit code, passed through
    findings = record["findings"]
    assert isinstance(findings, list) and findings[0]["rule"] == "cuda-no-kernel-image"
    assert "cuda-no-kernel-image" in done.stderr
