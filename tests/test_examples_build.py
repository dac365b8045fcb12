"""Real builds of the example projects under examples/ with the real tools on this machine.

These are the builds ci-matrix's rules are about: cargo debug and release, nvcc for sm_80
and sm_75 (the torchao marlin_qqq failure, pytorch/ao#1648), iree-compile for llvm-cpu
with and without the backend flag (iree-org/iree#20283). Each test skips, with a reason,
when its tool is not installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.tooling import missing_tool

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
RUST_CRATE = EXAMPLES / "rust-crate"
CUDA_KERNELS = EXAMPLES / "cuda-kernels"
IREE_MODEL = EXAMPLES / "iree-model" / "model.mlir"

# What the crate's binary prints when the variadic snprintf call is compiled correctly.
RUST_EXPECTED_STDOUT = "origin=(0, -7) r=2.25\n"
# nvcc's front end on the sm_75 pass of qgemm.cu, as in pytorch/ao#1648.
NVCC_EXCEPTION_ERROR = "device code does not support exception handling"
NVCC_ARCH_MESSAGE = "qgemm_m16n8k16(..) requires CUDA_ARCH >= 8.0"
QGEMM_GUARD_FLAG = "-DQGEMM_GUARD_BELOW_SM80"
# iree-compile (3.x) when --iree-hal-target-device=local comes without a local backend.
IREE_NO_BACKEND_ERROR = (
    'device alias "local" does not provide any executable targets; '
    "ensure device-specific compilation backends have been specified"
)
IREE_CPU_FLAGS = (
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
)


def _require(tool: str) -> str:
    """Returns the tool's path, or skips the test when it is not installed."""
    path = shutil.which(tool)
    if path is None:
        missing_tool(f"{tool} is not installed")
    return path


def _run(
    argv: list[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Runs a build command without a shell; a hung tool fails the test instead of CI."""
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _cargo_build(cargo: str, crate: Path, target_dir: Path, *args: str) -> None:
    env = {**os.environ, "CARGO_TARGET_DIR": str(target_dir)}
    result = _run([cargo, "build", "--locked", *args], crate, env)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("profile", ["debug", "release"])
def test_rust_crate_builds_and_prints_variadic_result(tmp_path: Path, profile: str) -> None:
    cargo = _require("cargo")
    crate = tmp_path / "crate"
    # A copy keeps the source tree free of build outputs and of a rewritten Cargo.lock.
    shutil.copytree(RUST_CRATE, crate, ignore=shutil.ignore_patterns("target"))
    target_dir = tmp_path / "target"
    _cargo_build(cargo, crate, target_dir, *(["--release"] if profile == "release" else []))
    binary = target_dir / profile / "variadic-demo"
    printed = _run([str(binary)], tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == RUST_EXPECTED_STDOUT


def _nvcc_compile(
    source: str, arch: str, out: Path, *flags: str
) -> subprocess.CompletedProcess[str]:
    nvcc = _require("nvcc")
    argv = [nvcc, "-c", f"-arch={arch}", *flags, str(CUDA_KERNELS / "kernels" / source)]
    return _run([*argv, "-o", str(out)], CUDA_KERNELS)


@pytest.mark.parametrize("source", ["saxpy.cu", "block_sum.cu", "qgemm.cu"])
def test_every_kernel_compiles_for_sm80(tmp_path: Path, source: str) -> None:
    out = tmp_path / "kernel.o"
    result = _nvcc_compile(source, "sm_80", out)
    assert result.returncode == 0, result.stderr
    assert out.stat().st_size > 0


def test_qgemm_fails_for_sm75_like_marlin_qqq(tmp_path: Path) -> None:
    out = tmp_path / "qgemm.o"
    result = _nvcc_compile("qgemm.cu", "sm_75", out)
    assert result.returncode != 0
    assert NVCC_EXCEPTION_ERROR in result.stderr
    assert NVCC_ARCH_MESSAGE in result.stderr
    assert not out.exists()


def test_qgemm_guard_flag_compiles_for_sm75(tmp_path: Path) -> None:
    out = tmp_path / "qgemm.o"
    result = _nvcc_compile("qgemm.cu", "sm_75", out, QGEMM_GUARD_FLAG)
    assert result.returncode == 0, result.stderr
    assert out.stat().st_size > 0


def test_build_script_builds_the_rest_and_names_the_failing_kernel(tmp_path: Path) -> None:
    _require("nvcc")
    bash = _require("bash")
    env = {**os.environ, "BUILD_DIR": str(tmp_path)}
    result = _run([bash, str(CUDA_KERNELS / "build.sh"), "sm_75"], tmp_path, env)
    assert result.returncode == 1
    assert "FAILED: qgemm for sm_75" in result.stderr
    assert sorted(p.name for p in (tmp_path / "sm_75").iterdir()) == ["block_sum.o", "saxpy.o"]


def _iree_compile(out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    iree_compile = _require("iree-compile")
    return _run([iree_compile, *flags, str(IREE_MODEL), "-o", str(out)], IREE_MODEL.parent)


def test_iree_model_compiles_for_llvm_cpu_with_backend_flag(tmp_path: Path) -> None:
    out = tmp_path / "model.vmfb"
    result = _iree_compile(out, *IREE_CPU_FLAGS)
    assert result.returncode == 0, result.stderr
    assert b"dense_relu" in out.read_bytes()


def test_iree_model_fails_without_backend_flag(tmp_path: Path) -> None:
    out = tmp_path / "model.vmfb"
    result = _iree_compile(out, IREE_CPU_FLAGS[0])
    assert result.returncode != 0
    assert IREE_NO_BACKEND_ERROR in result.stderr
    assert not out.exists()
