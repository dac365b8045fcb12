"""The five known failures of REFERENCE.md and the platform constraints, as rules: for each,
the cells it must touch and the near cells it must leave alone.

Each manifest is loaded the way the command line loads it (`load_project`) and expanded
once per module; the tests then look at single cells by id.
"""

from __future__ import annotations

import pytest

RUST_GPU = "rust-gpu-aarch64-debug-segfault"
CRANELIFT = "cranelift-variadic-macos-arm64"
IREE_CPU = "iree-llvm-cpu-backend-flag"
CUTLASS = "cutlass-cuda-older-than-11-8"
TORCHAO = "torchao-marlin-qqq-sm75"


def by_id(the_plan):
    return {c.id: c for c in the_plan.cells}


@pytest.fixture(scope="module")
def rust(plan_of):
    return by_id(plan_of(
        """\
        builds:
          g:
            platforms: [macos-arm64, macos-x86_64, linux-arm64]
            rust:
              toolchains: [nightly-2024-02-13, nightly-2024-02-14, nightly-2024-04-01, nightly-2024-05-20,
                           nightly-2024-05-21, nightly, 1.78.0, "1.78", 1.77.2, 1.79.0, stable]
              profiles: [debug]
            run: cargo build --profile {cargo-profile}
          clif:
            platforms: [macos-arm64, macos-x86_64, linux-x86_64, linux-arm64]
            rust: {toolchains: [nightly-2024-08-01], profiles: [release], backends: [cranelift, llvm]}
            run: cargo build --profile {cargo-profile}
        """
    ))


@pytest.mark.parametrize(
    "cell_id",
    [
        "g-macos-arm64-rust-nightly-2024-02-14-debug",  # first broken nightly
        "g-macos-arm64-rust-nightly-2024-04-01-debug",
        "g-macos-arm64-rust-nightly-2024-05-20-debug",  # last broken nightly
        "g-macos-arm64-rust-1.78.0-debug",  # stable 1.78.0 shipped the same LLVM
        "g-macos-arm64-rust-1.78-debug",
    ],
)
def test_rust_gpu_segfault_builds_affected_debug_cells_in_release(rust, cell_id):
    cell = rust[cell_id]
    assert cell.rule_ids == (RUST_GPU,)
    assert cell.excluded is None
    assert cell.value("rust-profile") == "release"
    assert dict(cell.requested)["rust-profile"] == "debug"
    assert cell.value("rust-toolchain") == dict(cell.requested)["rust-toolchain"]  # the pin is kept
    assert cell.commands == (("cargo", "build", "--profile", "release"),)
    assert cell.changes[0].references[0] == "https://github.com/Rust-GPU/rust-gpu/issues/29"


@pytest.mark.parametrize(
    "cell_id",
    [
        "g-macos-arm64-rust-nightly-2024-02-13-debug",  # before the LLVM update
        "g-macos-arm64-rust-nightly-2024-05-21-debug",  # the fix landed
        "g-macos-arm64-rust-nightly-debug",  # undated: today's nightly
        "g-macos-arm64-rust-1.77.2-debug",
        "g-macos-arm64-rust-1.79.0-debug",
        "g-macos-arm64-rust-stable-debug",
        "g-macos-x86_64-rust-nightly-2024-04-01-debug",  # not arm64
        "g-linux-arm64-rust-nightly-2024-04-01-debug",  # arm64, not macOS
        "g-linux-arm64-rust-1.78.0-debug",
    ],
)
def test_rust_gpu_segfault_leaves_other_debug_cells_alone(rust, cell_id):
    cell = rust[cell_id]
    assert cell.rule_ids == ()
    assert cell.value("rust-profile") == "debug"
    assert cell.commands == (("cargo", "build", "--profile", "dev"),)


def test_rust_gpu_segfault_does_not_touch_release_or_cranelift(plan_of):
    cells = by_id(plan_of(
        """\
        ignore-rules: [cranelift-variadic-macos-arm64]
        builds:
          g:
            platforms: [macos-arm64]
            rust: {toolchains: [nightly-2024-04-01], profiles: [release, debug], backends: [cranelift]}
            run: cargo build
          r:
            platforms: [macos-arm64]
            rust: {toolchains: [nightly-2024-04-01, 1.78.0], profiles: [release]}
            run: cargo build
        """
    ))
    assert {cell_id: c.rule_ids for cell_id, c in cells.items()} == {
        "g-macos-arm64-rust-nightly-2024-04-01-release-cranelift": (),
        "g-macos-arm64-rust-nightly-2024-04-01-debug-cranelift": (),
        "r-macos-arm64-rust-nightly-2024-04-01-release": (),
        "r-macos-arm64-rust-1.78.0-release": (),
    }


def test_cranelift_on_macos_arm64_is_built_with_llvm(rust):
    cell = rust["clif-macos-arm64-rust-nightly-2024-08-01-release-cranelift"]
    assert cell.rule_ids == (CRANELIFT,)
    assert cell.value("rust-backend") == "llvm"
    # The same build as the LLVM cell next to it: that one builds it, and this says so.
    assert cell.excluded == (
        "after its workarounds it is the same build as clif-macos-arm64-rust-nightly-2024-08-01-release"
    )
    assert "rustflags" not in dict(cell.flags)


@pytest.mark.parametrize("platform", ["macos-x86_64", "linux-x86_64", "linux-arm64"])
def test_cranelift_elsewhere_is_left_alone(rust, platform):
    cell = rust[f"clif-{platform}-rust-nightly-2024-08-01-release-cranelift"]
    assert cell.rule_ids == ()
    assert cell.excluded is None
    assert cell.value("rust-backend") == "cranelift"
    assert ("RUSTFLAGS", "-Zcodegen-backend=cranelift") in cell.env


@pytest.mark.parametrize("platform", ["macos-arm64", "macos-x86_64", "linux-x86_64", "linux-arm64"])
def test_llvm_cells_are_never_touched_by_the_cranelift_rule(rust, platform):
    assert rust[f"clif-{platform}-rust-nightly-2024-08-01-release"].rule_ids == ()


def test_one_workaround_can_lead_to_another(plan_of):
    """Cranelift -> LLVM on macOS arm64 makes an affected nightly's debug build an LLVM one,
    which the segfault rule then moves to release: both are recorded, in order."""
    cell = plan_of(
        """\
        builds:
          g:
            platforms: [macos-arm64]
            rust: {toolchains: [nightly-2024-04-01], backends: [cranelift]}
            run: cargo build
        """
    ).cells[0]
    assert cell.rule_ids == (CRANELIFT, RUST_GPU)
    assert (cell.value("rust-backend"), cell.value("rust-profile")) == ("llvm", "release")


@pytest.fixture(scope="module")
def iree(plan_of):
    return by_id(plan_of(
        """\
        builds:
          m:
            platforms: [linux-x86_64, macos-arm64]
            iree: {targets: [llvm-cpu, vmvx, vulkan-spirv, cuda, rocm, metal-spirv]}
            run: [[iree-compile, "{iree-flags}", model.mlir, -o, m.vmfb]]
        """
    ))


@pytest.mark.parametrize("platform", ["linux-x86_64", "macos-arm64"])
def test_iree_cpu_target_always_gets_the_backend_flag(iree, platform):
    cell = iree[f"m-{platform}-iree-llvm-cpu"]
    assert cell.rule_ids == (IREE_CPU,)
    assert cell.commands == ((
        "iree-compile", "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
        "model.mlir", "-o", "m.vmfb",
    ),)


@pytest.mark.parametrize(
    ("cell_id", "device"),
    [
        ("m-linux-x86_64-iree-vulkan-spirv", "vulkan"),
        ("m-linux-x86_64-iree-cuda", "cuda"),
        ("m-linux-x86_64-iree-rocm", "hip"),
        ("m-macos-arm64-iree-metal-spirv", "metal"),
    ],
)
def test_other_iree_targets_get_no_cpu_backend_flag(iree, cell_id, device):
    cell = iree[cell_id]
    assert IREE_CPU not in cell.rule_ids
    assert dict(cell.flags)["iree-compile"] == (f"--iree-hal-target-device={device}",)


@pytest.fixture(scope="module")
def cuda(plan_of):
    return by_id(plan_of(
        """\
        builds:
          cut:
            platforms: [linux-x86_64]
            uses: [cutlass]
            cuda: {versions: ["11.4", "12.4"], archs: [sm_80]}
            run: [[nvcc, "{nvcc-flags}", gemm.cu]]
          plain:
            platforms: [linux-x86_64]
            cuda: {versions: ["11.4"], archs: [sm_75]}
            run: [[nvcc, "{nvcc-flags}", k.cu]]
          tao:
            platforms: [linux-x86_64]
            uses: [torchao, cutlass]
            cuda: {versions: ["12.4"], archs: [sm_75, 7.5+PTX, compute_75, sm_80, 8.6, sm_90a]}
            run: [[nvcc, "{nvcc-flags}", marlin.cu]]
        """
    ))


def test_cutlass_with_cuda_older_than_11_8_is_built_with_11_8(cuda):
    cell = cuda["cut-linux-x86_64-cuda-11.4-sm_80"]
    assert cell.rule_ids == (CUTLASS,)
    assert cell.excluded is None
    assert cell.value("cuda-version") == "11.8"
    assert cell.changes[0].detail.startswith("cuda-version: 11.4 -> 11.8 (CUTLASS 3.x requires CUDA 11.4")


@pytest.mark.parametrize("cell_id", ["cut-linux-x86_64-cuda-12.4-sm_80", "plain-linux-x86_64-cuda-11.4-sm_75"])
def test_cutlass_rule_needs_both_cutlass_and_an_old_toolkit(cuda, cell_id):
    cell = cuda[cell_id]
    assert cell.rule_ids == ()
    assert cell.value("cuda-version") == dict(cell.requested)["cuda-version"]


@pytest.mark.parametrize("arch", ["sm_75", "sm_75+ptx", "compute_75"])
def test_torchao_below_sm_80_is_excluded_with_its_reason(cuda, arch):
    cell = cuda[f"tao-linux-x86_64-cuda-12.4-{arch}"]
    assert cell.excluded_by == TORCHAO
    assert cell.excluded.startswith("marlin_qqq_gemm requires CUDA_ARCH >= 8.0")
    assert cell.changes[-1].references == (
        "https://github.com/pytorch/ao/issues/1648",
        "https://github.com/pytorch/ao/pull/1651",
    )


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_90a"])
def test_torchao_from_sm_80_is_built(cuda, arch):
    cell = cuda[f"tao-linux-x86_64-cuda-12.4-{arch}"]
    assert (cell.excluded, cell.rule_ids) == (None, ())


def test_torchao_rule_only_concerns_builds_that_use_torchao(cuda):
    assert cuda["plain-linux-x86_64-cuda-11.4-sm_75"].excluded is None


@pytest.fixture(scope="module")
def platforms(plan_of):
    return by_id(plan_of(
        """\
        builds:
          kernels:
            platforms: [linux-x86_64, macos-arm64, windows-x86_64]
            cuda: {versions: ["12.4"], archs: [sm_80]}
            run: nvcc k.cu
          gpu-tests:
            platforms: [linux-x86_64-gpu, linux-x86_64, macos-arm64]
            needs-gpu: true
            run: ./run-gpu-tests
          cuda-tests:
            platforms: [linux-x86_64-gpu, macos-arm64]
            needs-gpu: true
            cuda: {versions: ["12.4"], archs: [sm_80]}
            run: ./saxpy_test
        """
    ))


@pytest.mark.parametrize(
    ("cell_id", "rule"),
    [
        ("kernels-macos-arm64-cuda-12.4-sm_80", "cuda-not-on-macos"),
        ("gpu-tests-linux-x86_64", "gpu-build-needs-gpu-runner"),
        ("cuda-tests-macos-arm64-cuda-12.4-sm_80", "cuda-not-on-macos"),
    ],
)
def test_combinations_that_cannot_exist_are_excluded_by_their_rule(platforms, cell_id, rule):
    cell = platforms[cell_id]
    assert cell.excluded_by == rule
    assert cell.rule_ids == (rule,)


def test_the_platform_reason_comes_first(platforms, iree):
    assert platforms["cuda-tests-macos-arm64-cuda-12.4-sm_80"].excluded == (
        "NVIDIA dropped macOS after CUDA 10.2, and no toolkit ever ran on Apple silicon"
    )
    assert iree["m-macos-arm64-iree-cuda"].excluded_by == "iree-cuda-rocm-not-on-macos"
    assert iree["m-macos-arm64-iree-rocm"].excluded_by == "iree-cuda-rocm-not-on-macos"
    assert iree["m-linux-x86_64-iree-metal-spirv"].excluded_by == "iree-metal-only-on-macos"


@pytest.mark.parametrize(
    "cell_id",
    [
        "kernels-linux-x86_64-cuda-12.4-sm_80",
        "kernels-windows-x86_64-cuda-12.4-sm_80",
        "gpu-tests-linux-x86_64-gpu",
        "cuda-tests-linux-x86_64-gpu-cuda-12.4-sm_80",
    ],
)
def test_combinations_that_can_exist_are_built(platforms, cell_id):
    assert platforms[cell_id].excluded is None


def test_gpu_cells_run_on_the_projects_gpu_runner_labels(plan_of):
    cell = plan_of(
        """\
        platforms:
          linux-x86_64-gpu: {runs-on: [self-hosted, gpu, a100]}
        builds:
          t: {platforms: [linux-x86_64-gpu], needs-gpu: true, run: ./t}
        """
    ).cells[0]
    assert cell.runs_on == ("self-hosted", "gpu", "a100")
