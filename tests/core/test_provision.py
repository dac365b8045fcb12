"""What a cell needs installed, from its final values (pure: no downloads)."""

from __future__ import annotations

import pytest

from ci_matrix.core.provision import Unavailable, cache_key, describe, needs_of
from ci_matrix.edges.files import schema, toolkits


def test_rust_backend_and_target_become_rustup_components_and_targets() -> None:
    needs = needs_of({"rust-toolchain": "nightly-2024-05-21", "rust-backend": "cranelift",
                      "rust-target": "aarch64-unknown-linux-gnu"}, toolkits(), "linux", "x86_64")
    assert needs.rust is not None
    assert needs.rust.toolchain == "nightly-2024-05-21"
    assert needs.rust.components == ("rustc-codegen-cranelift-preview",)
    assert needs.rust.targets == ("aarch64-unknown-linux-gnu",)
    assert needs.cuda is None and not needs.iree


@pytest.mark.parametrize(("version", "kinds", "release"), [
    ("11.8", ["redist", "debian"], "11.8.0"),
    ("12.4", ["redist", "debian"], "12.4.1"),
    ("12.4.0", ["redist", "debian"], "12.4.0"),  # a listed patch release gets its own index
    ("12.6", ["redist"], "12.6.3"),  # the newest patch release of the minor
    ("11.4", ["redist"], "11.4.4"),
    ("13.0", ["pypi", "redist"], "13.0.2"),
    ("13.0.2", ["pypi", "redist"], "13.0.2"),
    ("13.2", ["pypi"], ""),
])
def test_cuda_sources_in_order(version: str, kinds: list[str], release: str) -> None:
    needs = needs_of({"cuda-version": version}, toolkits(), "linux", "x86_64")
    assert needs.cuda is not None
    assert needs.cuda.version == ".".join(version.split(".")[:2])
    assert [s.kind for s in needs.cuda.sources] == kinds
    redist = [s.redist for s in needs.cuda.sources if s.redist is not None]
    assert [r.release for r in redist] == ([release] if release else [])
    for archives in redist:
        assert archives.index_url == f"https://developer.download.nvidia.com/compute/cuda/redist/redistrib_{release}.json"
        assert archives.components == ("cuda_nvcc", "cuda_crt?", "libnvvm?", "cuda_cudart", "cuda_cccl", "cuda_nvrtc")


def test_a_cuda_release_no_source_carries_names_those_that_can() -> None:
    with pytest.raises(Unavailable) as caught:
        needs_of({"cuda-version": "11.2"}, toolkits(), "linux", "x86_64")
    message = str(caught.value)
    assert message.startswith("CUDA 11.2 cannot be set up: no source ci-matrix knows carries its nvcc")
    assert ("on linux-x86_64 ci-matrix can set up CUDA 11.4, 11.5, 11.6, 11.7, 11.8, 12.0, 12.1, 12.2, 12.3, 12.4, "
            "12.5, 12.6, 12.8, 12.9, 13.0, 13.1, 13.2") in message


def test_platforms_each_source_covers() -> None:
    arm = needs_of({"cuda-version": "12.4"}, toolkits(), "linux", "arm64").cuda
    assert arm is not None and [s.kind for s in arm.sources] == ["redist"]  # Debian's compiler is x86_64
    assert arm.sources[0].redist is not None and arm.sources[0].redist.platform == "linux-sbsa"
    windows = needs_of({"cuda-version": "12.8"}, toolkits(), "windows", "x86_64").cuda
    assert windows is not None and windows.windows
    assert windows.sources[0].redist is not None and windows.sources[0].redist.platform == "windows-x86_64"
    with pytest.raises(Unavailable, match=r"CUDA 13\.2 cannot be set up on windows-x86_64 \(on windows-x86_64 "
                                          r"ci-matrix can set up CUDA 11\.4, .*, 13\.1\)"):
        needs_of({"cuda-version": "13.2"}, toolkits(), "windows", "x86_64")  # PyPI's wheels are Linux only
    with pytest.raises(Unavailable, match=r"cannot be set up on macos-arm64: ci-matrix can set up no CUDA there"):
        needs_of({"cuda-version": "12.6"}, toolkits(), "macos", "arm64")


def test_extra_components_come_only_from_the_redistributables() -> None:
    needs = needs_of({"cuda-version": "13.0"}, toolkits(), "linux", "x86_64", ["cublas", "nvcc", "cusparse"])
    assert needs.cuda is not None
    assert [s.kind for s in needs.cuda.sources] == ["redist"]  # PyPI's and Debian's carry only the compiler
    assert needs.cuda.components == ("cublas", "cusparse")  # nvcc is there anyway
    assert needs.cuda.folder == "13.0+cublas+cusparse"
    redist = needs.cuda.sources[0].redist
    assert redist is not None and redist.components[-2:] == ("libcublas", "libcusparse")
    assert describe(needs)[-1] == "  not from PyPI's wheels: they carry the compiler only, not cublas, cusparse"
    arm = needs_of({"cuda-version": "11.8"}, toolkits(), "linux", "arm64")
    assert describe(arm)[-1] == "  not from Debian's package: x86_64 only"


def test_a_mirror_replaces_the_base_url() -> None:
    needs = needs_of({"cuda-version": "12.6"}, toolkits(), "linux", "x86_64", redist_url="http://127.0.0.1:9/redist")
    assert needs.cuda is not None and needs.cuda.sources[0].redist is not None
    assert needs.cuda.sources[0].redist.index_url == "http://127.0.0.1:9/redist/redistrib_12.6.3.json"


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

    def mirrored(url: str) -> str:
        return cache_key(needs_of({"cuda-version": "12.6"}, toolkits(), "linux", "x86_64", redist_url=url))

    assert mirrored("") != mirrored("https://mirror.example/redist/")  # another server, perhaps other bytes
    assert mirrored("https://mirror.example/redist") == mirrored("https://mirror.example/redist/")


def test_describe_says_where_each_toolchain_comes_from_and_why() -> None:
    needs = needs_of({"rust-toolchain": "stable", "cuda-version": "11.8", "iree-target": "vmvx"},
                     toolkits(), "linux", "x86_64")
    why = dict(toolkits().cuda_sources)
    assert describe(needs) == [
        "Rust stable (rustup)",
        "CUDA 11.8 from NVIDIA's redistributables 11.8.0 linux-x86_64 (cuda_nvcc, cuda_cudart, cuda_cccl, cuda_nvrtc) "
        f"at https://developer.download.nvidia.com/compute/cuda/redist/: {why['redist']}",
        f"  if that cannot be reached: Debian's nvidia-cuda-toolkit compiler package and PyPI headers: {why['debian']}",
        f"IREE {toolkits().iree_default} (iree-base-compiler, iree-base-runtime from PyPI, own virtual environment)",
    ]


def test_component_names_are_the_same_in_the_manifest_schema_and_the_catalogue() -> None:
    cuda = schema("manifest")["$defs"]["cuda"]["properties"]["components"]["items"]["enum"]
    assert cuda == list(toolkits().redist.components)
    assert set(toolkits().redist.default_components) <= set(cuda)
