"""`ci-matrix setup` and `run --setup`, provisioning for real on this machine.

- CUDA 11.8 and 12.4 compilers come from Debian's pool (sha256-checked) with PyPI headers,
  13.x from PyPI; each builds the example kernels.
- IREE comes from PyPI into its own virtual environment.
- Rust: this machine cannot reach static.rust-lang.org, so a dated nightly is installed by
  the real rustup from `tests/rustup_dist.py`, a loopback stand-in for that server (it
  serves the installed nightly relabelled), into a throwaway RUSTUP_HOME.

The toolchains are kept in pytest's cache folder between runs (`--cache-clear` starts
afresh; CI starts from a clean clone, so there every toolchain is downloaded).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.rustup_dist import serve_rust_dist
from tests.test_run import ci_matrix, record_of
from tests.tooling import missing_tool

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def tools(request: pytest.FixtureRequest) -> Path:
    """The tools folder shared by these tests (kept between runs in pytest's cache)."""
    return Path(request.config.cache.mkdir("ci-matrix-tools"))


def write_manifest(folder: Path, builds: str) -> Path:
    """A project in `folder` with a copy of the examples (builds write nowhere in the repository)."""
    shutil.copytree(ROOT / "examples", folder / "examples",
                    ignore=shutil.ignore_patterns("target", "build", "*.vmfb", "*.o"))
    manifest = folder / "ci-matrix.yml"
    manifest.write_text(f"version: 1\nproject: setup test\nbuilds:\n{builds}", encoding="utf-8")
    return manifest


def env_with(tools: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "CUDA_HOME", "NVCC_PREPEND_FLAGS")}
    return {**env, "CI_MATRIX_TOOLS": str(tools), **more}


def run_cell(manifest: Path, cell: str, env: dict[str, str], *extra: str) -> tuple[int, dict[str, Any], str]:
    diagnosis = manifest.parent / f"{cell}.json"
    done = ci_matrix("run", "--manifest", str(manifest), "--cell", cell, "--diagnosis", str(diagnosis),
                     "--log", str(manifest.parent / f"{cell}.log"), *extra, env=env, timeout=900)
    return done.returncode, record_of(diagnosis), done.stdout + done.stderr


# A project whose kernels use CUTLASS, asking for CUDA 11.6 on Volta (sm_70). The built-in
# rule cutlass-cuda-older-than-11-8 moves the cell to CUDA 11.8. The runner has the newest
# toolkit installed (nvcc 13.0, as on this machine), which no longer builds sm_70.
CUTLASS = """\
  gemm:
    platforms: [linux-x86_64]
    uses: [cutlass]
    cuda: {versions: ["11.6"], archs: [sm_70]}
    working-directory: examples/cuda-kernels
    run:
      - [nvcc, -c, "{nvcc-flags}", kernels/saxpy.cu, -o, "{cell-id}.o"]
"""
CUTLASS_CELL = "gemm-linux-x86_64-cuda-11.6-sm_70"


def test_the_cutlass_workaround_takes_effect_only_with_setup(tmp_path: Path, tools: Path) -> None:
    if shutil.which("nvcc") is None:
        missing_tool("nvcc (the runner's own, newer toolkit)")
    if shutil.which("g++-11") is None:
        missing_tool("g++-11: nvcc 11.8 accepts GCC 11 at most (.ci/test installs it)")
    manifest = write_manifest(tmp_path / "project", CUTLASS)
    explained = ci_matrix("explain", CUTLASS_CELL, "--manifest", str(manifest))
    assert "cutlass-cuda-older-than-11-8" in explained.stdout and "11.8" in explained.stdout

    # Without setup the rule's CUDA 11.8 exists only on paper: the runner's nvcc 13.0 builds, and fails.
    code, record, _ = run_cell(manifest, CUTLASS_CELL, env_with(tools))
    assert code == 1 and record["outcome"] == "failed"
    assert "Unsupported gpu architecture 'compute_70'" in (tmp_path / "project" / f"{CUTLASS_CELL}.log").read_text()
    assert record["tools"]["nvcc"].startswith("13.")
    assert any("asks for CUDA 11.8 but nvcc on PATH is CUDA 13" in w for w in record["warnings"])

    # With setup the cell gets CUDA 11.8, and the same build passes.
    code, record, output = run_cell(manifest, CUTLASS_CELL, env_with(tools), "--setup")
    assert code == 0, output
    assert record["outcome"] == "passed" and record["stage"] == "build"
    assert record["tools"]["nvcc"] == "11.8.89"
    assert record["tools"]["nvcc-path"] == str(tools / "cuda" / "11.8" / "toolkit" / "bin" / "nvcc")
    assert any(line.startswith("CUDA 11.8:") for line in record["setup"])
    # This machine's g++ is GCC 12, too new for nvcc 11.8: setup picked g++-11.
    assert any("host compiler" in line and "g++-11" in line for line in record["setup"])


def test_a_toolkit_that_cannot_be_set_up_fails_the_cell_before_its_build(tmp_path: Path, tools: Path) -> None:
    manifest = write_manifest(tmp_path / "project", CUTLASS)
    code, record, output = run_cell(manifest, CUTLASS_CELL, env_with(tools), "--setup",
                                     "--ignore-rule", "cutlass-cuda-older-than-11-8")
    assert code == 69
    assert record["stage"] == "setup" and record["outcome"] == "failed"
    assert "failed before its build" in output
    # CUDA 11.6 exists only in NVIDIA's redistributables, which this machine cannot reach. Where
    # the host name does not resolve (here, and on CI's machines) the diagnosis names that, from
    # setup's own line; where it resolves but cannot be reached, the failure is unclassified and
    # its tail shows setup's summary.
    shown = record["tail"] + [f["log"]["text"] for f in record["findings"] if f.get("log")]
    assert any("CUDA 11.6: no source could be reached" in line or "CUDA 11.6: cannot reach" in line
               for line in shown), record
    if "Name or service not known" in output or "name resolution" in output:
        assert [f["rule"] for f in record["findings"]] == ["network-host-name-not-resolved"]
    assert "cannot reach https://developer.download.nvidia.com/compute/cuda/redist/redistrib_11.6.2.json" in output
    log = (tmp_path / "project" / f"{CUTLASS_CELL}.log").read_text()
    assert "$ nvcc" not in log  # no silent fallback to the runner's nvcc


KERNELS_124_AND_13 = """\
  kernels:
    platforms: [linux-x86_64]
    cuda: {versions: ["12.4", "13.0"], archs: [sm_80]}
    working-directory: examples/cuda-kernels
    run:
      - [nvcc, -c, "{nvcc-flags}", kernels/qgemm.cu, -o, "{cell-id}-qgemm.o"]
      - [nvcc, "{nvcc-flags}", tests/saxpy_test.cu, -o, "{cell-id}-saxpy"]
"""


@pytest.mark.parametrize("version", ["12.4", "13.0"])
def test_setup_gives_each_cell_its_own_nvcc(tmp_path: Path, tools: Path, version: str) -> None:
    manifest = write_manifest(tmp_path / "project", KERNELS_124_AND_13)
    cell = f"kernels-linux-x86_64-cuda-{version}-sm_80"
    code, record, output = run_cell(manifest, cell, env_with(tools), "--setup")
    if version == "12.4":  # the Debian root has the shared libcudart only: compile works, static linking not
        assert code == 1 and "cudart_static" in (tmp_path / "project" / f"{cell}.log").read_text()
        assert (tmp_path / "project" / "examples" / "cuda-kernels" / f"{cell}-qgemm.o").exists()
    else:
        assert code == 0, output
    assert record["tools"]["nvcc"].startswith(version + ".")
    assert record["tools"]["nvcc-path"].startswith(str(tools / "cuda" / version))


def test_a_second_setup_installs_nothing(tmp_path: Path, tools: Path) -> None:
    manifest = write_manifest(tmp_path / "project", KERNELS_124_AND_13)
    cell = "kernels-linux-x86_64-cuda-12.4-sm_80"
    first = ci_matrix("setup", "--manifest", str(manifest), "--cell", cell, env=env_with(tools), timeout=900)
    assert first.returncode == 0, first.stderr
    marker = tools / "cuda" / "12.4" / ".ci-matrix-setup.json"
    before = marker.stat().st_mtime_ns
    second = ci_matrix("setup", "--manifest", str(manifest), "--cell", cell, "--format", "json",
                       env=env_with(tools), timeout=60)
    assert second.returncode == 0, second.stderr
    result = json.loads(second.stdout)
    # NVIDIA's servers cannot be reached from this machine: the folder came from Debian's package
    assert result["done"] == [f"CUDA 12.4: already set up in {tools / 'cuda' / '12.4'} (debian)"]
    assert marker.stat().st_mtime_ns == before
    assert result["env"]["CUDA_HOME"] == str(tools / "cuda" / "12.4" / "toolkit")
    assert result["path"] == [str(tools / "cuda" / "12.4" / "toolkit" / "bin")]
    assert result["cache-key"].startswith("ci-matrix-tools-v1-linux-x86_64-cuda-12.4-")


def test_an_unfinished_toolchain_folder_is_set_up_again(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "project", KERNELS_124_AND_13)
    tools = tmp_path / "tools"
    (tools / "cuda" / "13.0" / "pypi").mkdir(parents=True)  # an earlier setup that was killed
    done = ci_matrix("setup", "--manifest", str(manifest), "--cell", "kernels-linux-x86_64-cuda-13.0-sm_80",
                     "--format", "shell", env=env_with(tools), timeout=900)
    assert done.returncode == 0, done.stderr
    assert "CUDA 13.0: set up in" in done.stderr  # progress on stderr, exports on stdout
    assert f"export CUDA_HOME={tools / 'cuda' / '13.0' / 'pypi' / 'nvidia' / 'cu13'}" in done.stdout.splitlines()


IREE = """\
  model:
    platforms: [linux-x86_64]
    iree: {targets: [llvm-cpu], versions: ["3.12.0"]}
    working-directory: examples/iree-model
    run:
      - [iree-compile, "{iree-flags}", --iree-llvmcpu-target-cpu=generic, model.mlir, -o, "{cell-id}.vmfb"]
"""


def test_iree_release_in_its_own_environment(tmp_path: Path, tools: Path) -> None:
    manifest = write_manifest(tmp_path / "project", IREE)
    cell = "model-linux-x86_64-iree-llvm-cpu-iree-3.12.0"
    code, record, output = run_cell(manifest, cell, env_with(tools), "--setup")
    assert code == 0, output
    assert record["tools"]["iree-compile"] == "3.12.0"
    assert (tools / "iree" / "3.12.0" / "venv" / "bin" / "iree-run-module").exists()  # the runtime too
    assert (tmp_path / "project" / "examples" / "iree-model" / f"{cell}.vmfb").stat().st_size > 0


RUST = """\
  crate:
    platforms: [linux-x86_64]
    rust: {toolchains: [nightly-2024-05-21], profiles: [debug]}
    working-directory: examples/rust-crate
    run:
      - cargo build --locked --profile {cargo-profile}
"""


@pytest.fixture(scope="session")
def rust_dist(request: pytest.FixtureRequest) -> Iterator[str]:
    if shutil.which("rustup") is None:
        missing_tool("rustup")
    with serve_rust_dist(Path(request.config.cache.mkdir("rustup-dist"))) as url:
        yield url


def test_a_dated_nightly_is_installed_through_rustup(tmp_path: Path, rust_dist: str) -> None:
    home = tmp_path / "rustup"
    env = env_with(tmp_path / "tools", RUSTUP_HOME=str(home), RUSTUP_DIST_SERVER=rust_dist,
                   RUSTUP_UPDATE_ROOT=f"{rust_dist}/rustup", CARGO_TARGET_DIR=str(tmp_path / "target"))
    manifest = write_manifest(tmp_path / "project", RUST)
    cell = "crate-linux-x86_64-rust-nightly-2024-05-21-debug"

    code, record, output = run_cell(manifest, cell, env)  # without setup: not installed
    assert code != 0
    assert record["findings"][0]["rule"] == "rustup-toolchain-not-installed", output

    code, record, output = run_cell(manifest, cell, env, "--setup")
    assert code == 0, output
    assert record["setup"] == ["Rust nightly-2024-05-21: installed with rustup"]
    assert (home / "toolchains" / "nightly-2024-05-21-x86_64-unknown-linux-gnu" / "bin" / "rustc").exists()

    code, record, output = run_cell(manifest, cell, env, "--setup")  # the second time: nothing to do
    assert code == 0, output
    assert record["setup"][0].startswith("Rust nightly-2024-05-21: already installed")


def test_a_component_rustup_cannot_get_fails_the_cell_before_its_build(tmp_path: Path, rust_dist: str) -> None:
    env = env_with(tmp_path / "tools", RUSTUP_HOME=str(tmp_path / "rustup"), RUSTUP_DIST_SERVER=rust_dist,
                   RUSTUP_UPDATE_ROOT=f"{rust_dist}/rustup")
    cranelift = RUST.replace("profiles: [debug]", "profiles: [debug], backends: [cranelift]")
    manifest = write_manifest(tmp_path / "project", cranelift)
    cell = "crate-linux-x86_64-rust-nightly-2024-05-21-debug-cranelift"
    code, record, output = run_cell(manifest, cell, env, "--setup")
    assert code == 69 and record["stage"] == "setup"
    assert "rustc-codegen-cranelift-preview' for target 'x86_64-unknown-linux-gnu' is unavailable" in output
