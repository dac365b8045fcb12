"""What a cell needs installed, from its final values (pure: no downloads)."""

from __future__ import annotations

import pytest

from ci_matrix.core.provision import Unavailable, cache_key, describe, needs_of
from ci_matrix.edges.files import toolkits


def test_rust_backend_and_target_become_rustup_components_and_targets() -> None:
    needs = needs_of({"rust-toolchain": "nightly-2024-05-21", "rust-backend": "cranelift",
                      "rust-target": "aarch64-unknown-linux-gnu"}, toolkits(), "linux", "x86_64")
    assert needs.rust is not None
    assert needs.rust.toolchain == "nightly-2024-05-21"
    assert needs.rust.components == ("rustc-codegen-cranelift-preview",)
    assert needs.rust.targets == ("aarch64-unknown-linux-gnu",)
    assert needs.cuda is None and not needs.iree


@pytest.mark.parametrize(("version", "source"), [("11.8", "debian"), ("12.4", "debian"), ("13.0", "pypi"),
                                                 ("13.0.2", "pypi")])
def test_cuda_release_sources(version: str, source: str) -> None:
    needs = needs_of({"cuda-version": version}, toolkits(), "linux", "x86_64")
    assert needs.cuda is not None
    assert needs.cuda.version == ".".join(version.split(".")[:2])
    assert (needs.cuda.debian is not None) == (source == "debian")


def test_a_cuda_release_no_registry_carries_names_those_that_can() -> None:
    with pytest.raises(Unavailable) as caught:
        needs_of({"cuda-version": "11.6"}, toolkits(), "linux", "x86_64")
    message = str(caught.value)
    assert message.startswith("CUDA 11.6 cannot be set up")
    assert "11.8, 12.4, 13.0, 13.1, 13.2" in message


def test_cuda_only_on_linux_and_debian_compilers_only_on_x86_64() -> None:
    with pytest.raises(Unavailable, match=r"only be set up on Linux"):
        needs_of({"cuda-version": "13.0"}, toolkits(), "windows", "x86_64")
    with pytest.raises(Unavailable, match=r"this runner is arm64; on arm64 ci-matrix can set up CUDA 13\.0"):
        needs_of({"cuda-version": "12.4"}, toolkits(), "linux", "arm64")
    assert needs_of({"cuda-version": "13.0"}, toolkits(), "linux", "arm64").cuda is not None


def test_iree_cells_get_their_release_or_the_default() -> None:
    pinned = needs_of({"iree-target": "llvm-cpu", "iree-version": "3.12.0"}, toolkits(), "linux", "x86_64")
    assert pinned.iree == "3.12.0"
    assert pinned.iree_packages == ("iree-base-compiler", "iree-base-runtime")
    default = needs_of({"iree-target": "llvm-cpu"}, toolkits(), "linux", "x86_64")
    assert default.iree == toolkits().iree_default
    assert needs_of({"build": "x"}, toolkits(), "linux", "x86_64").empty


def test_cache_key_changes_with_what_would_be_downloaded() -> None:
    def key(values: dict[str, str], cpu: str = "x86_64") -> str:
        return cache_key(needs_of(values, toolkits(), "linux", cpu))

    base = key({"cuda-version": "12.4", "iree-target": "llvm-cpu"})
    assert base.startswith("ci-matrix-tools-v1-linux-x86_64-cuda-12.4-iree-")
    assert base == key({"cuda-version": "12.4.1", "iree-target": "llvm-cpu", "rust-toolchain": "stable"})
    assert base != key({"cuda-version": "13.0", "iree-target": "llvm-cpu"})
    assert base != key({"cuda-version": "12.4", "iree-target": "llvm-cpu", "iree-version": "3.12.0"})
    assert key({"cuda-version": "13.0"}) != key({"cuda-version": "13.0"}, "arm64")
    assert key({"rust-toolchain": "nightly-2024-05-21"}) == ""  # rustup keeps its own toolchains


def test_describe_says_where_each_toolchain_comes_from() -> None:
    needs = needs_of({"rust-toolchain": "stable", "cuda-version": "11.8", "iree-target": "vmvx"},
                     toolkits(), "linux", "x86_64")
    assert describe(needs) == [
        "Rust stable (rustup)",
        "CUDA 11.8 nvcc from Debian's nvidia-cuda-toolkit and PyPI headers",
        f"IREE {toolkits().iree_default} (iree-base-compiler, iree-base-runtime from PyPI, own virtual environment)",
    ]
