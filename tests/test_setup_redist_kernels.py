"""Real compilers through the redistributables path: a loopback mirror in NVIDIA's exact
layout (tests/cuda_redist.py) whose archives are repacked from compilers this machine can
get, and `ci-matrix run --setup` building a kernel with what setup unpacked from it.

- CUDA 12.4.1: nvcc, cicc and the tools from Debian's nvidia-cuda-toolkit package (the one
  toolkits.yaml pins by sha256), headers and libraries from PyPI's -cu12 wheels of 12.4.
- CUDA 13.0.2: every component from PyPI's 13.0 wheels, which are NVIDIA's own split
  (cuda_nvcc, cuda_crt, libnvvm, ...), plus cuda_nvtx for a build asking for `nvtx`.

NVIDIA's own server cannot be reached from this machine: what is verified here is the
layout, the checks and the unpacking, against this mirror. The downloads and the mirror are
kept in pytest's cache folder between sessions (`--cache-clear` starts afresh).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from ci_matrix.edges import debian
from ci_matrix.edges.files import toolkits
from tests.cuda_redist import Component, Content, Mirror, publish, serve
from tests.test_run import ci_matrix, record_of

pytestmark = pytest.mark.slow

#: The mirror's layout version: a change to how it is built invalidates the cached one.
_LAYOUT = "v2"
_EXTRA_12_4 = ["nvidia-cuda-cccl-cu12==12.4.127", "nvidia-cuda-nvrtc-cu12==12.4.127"]
_EXTRA_13_0 = ["nvidia-cuda-nvrtc==13.0.88", "nvidia-nvtx==13.0.85"]
#: NVIDIA's nvcc.profile of the 12.x redistributables (13.x ships its own, in the wheel).
_PROFILE_12 = """\

TOP              = $(_HERE_)/..

CICC_PATH        = $(TOP)/nvvm/bin
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice

LD_LIBRARY_PATH += $(TOP)/lib:
PATH            += $(CICC_PATH):$(_HERE_):

INCLUDES        +=  "-I$(TOP)/$(_TARGET_DIR_)/include" $(_SPACE_)

LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)/stubs" \
"-L$(TOP)/$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)"

CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
"""


def _wheels(folder: Path, requirements: list[str]) -> dict[str, Path]:
    """PyPI wheels, unpacked: distribution name -> its folder."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                           "-d", str(folder), *requirements], capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr
    unpacked = {}
    for requirement in requirements:
        name = requirement.split("==")[0].replace("-", "_")
        wheel = next(folder.glob(f"{name}-{requirement.split('==')[1]}-*.whl"))
        target = folder / name
        if not target.exists():
            with zipfile.ZipFile(wheel) as zipped:
                zipped.extractall(target)
                for info in zipped.infolist():
                    if (info.external_attr >> 16) & 0o111:
                        (target / info.filename).chmod(0o755)
        unpacked[requirement.split("==")[0]] = target
    return unpacked


def _tree(root: Path, into: str = "") -> dict[str, Content]:
    """Every file below `root`, keyed by its path below it (prefixed with `into`)."""
    files: dict[str, Content] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.name != "__init__.py":
            files[str(PurePosixPath(into) / path.relative_to(root).as_posix())] = path
    return files


def _release_12_4(inputs: Path, mirror: Path) -> None:
    packages = toolkits().cuda["12.4"]
    assert packages.debian is not None
    wheels = _wheels(inputs / "wheels-12.4", [*packages.pypi, *_EXTRA_12_4])
    deb = inputs / "deb-12.4"
    if not (deb / "bin" / "nvcc").exists():
        shutil.rmtree(deb, ignore_errors=True)
        debian.assemble(packages.debian, deb.parent / "work-12.4", lambda _line: None)
        (deb.parent / "work-12.4" / "toolkit").rename(deb)
        shutil.rmtree(deb.parent / "work-12.4")
    nvcc: dict[str, Content] = {f"bin/{p.name}": p for p in (deb / "bin").iterdir()
                                if p.is_file() and p.name != "nvcc.profile"}
    nvcc |= _tree(deb / "bin" / "crt", "bin/crt") | _tree(deb / "nvvm", "nvvm")
    nvcc |= _tree(wheels["nvidia-cuda-nvcc-cu12"] / "nvidia" / "cuda_nvcc" / "include", "include")
    nvcc["bin/nvcc.profile"] = _PROFILE_12.encode()
    runtime = wheels["nvidia-cuda-runtime-cu12"] / "nvidia" / "cuda_runtime"
    cudart = _tree(runtime / "include", "include") | _tree(runtime / "lib", "lib")
    cudart["lib/libcudart.so"] = ("link", "libcudart.so.12")
    nvrtc = wheels["nvidia-cuda-nvrtc-cu12"] / "nvidia" / "cuda_nvrtc"
    publish(mirror, "12.4.1", [
        Component("cuda_nvcc", "12.4.131", nvcc, "CUDA NVCC"),
        Component("cuda_cudart", "12.4.127", cudart, "CUDA Runtime (cudart)"),
        Component("cuda_cccl", "12.4.127", _tree(wheels["nvidia-cuda-cccl-cu12"] / "nvidia" / "cuda_cccl" / "include",
                                                 "include"), "CXX Core Compute Libraries"),
        Component("cuda_nvrtc", "12.4.127", _tree(nvrtc / "include", "include") | _tree(nvrtc / "lib", "lib")
                  | {"lib/libnvrtc.so": ("link", "libnvrtc.so.12")}, "CUDA NVRTC"),
    ])


def _release_13_0(inputs: Path, mirror: Path) -> None:
    wheels = _wheels(inputs / "wheels-13.0", [*toolkits().cuda["13.0"].pypi, *_EXTRA_13_0])
    split = {"nvidia-cuda-nvcc": "cuda_nvcc", "nvidia-cuda-crt": "cuda_crt", "nvidia-nvvm": "libnvvm",
             "nvidia-cuda-runtime": "cuda_cudart", "nvidia-cuda-cccl": "cuda_cccl", "nvidia-cuda-nvrtc": "cuda_nvrtc",
             "nvidia-nvtx": "cuda_nvtx"}
    versions = {r.split("==")[0]: r.split("==")[1] for r in [*toolkits().cuda["13.0"].pypi, *_EXTRA_13_0]}
    components = []
    for wheel, name in split.items():
        files = _tree(wheels[wheel] / "nvidia" / "cu13")
        if name in ("cuda_cudart", "cuda_nvrtc"):  # wheels cannot hold the archives' links
            library = name.removeprefix("cuda_")
            files[f"lib/lib{library}.so"] = ("link", f"lib{library}.so.13")
        components.append(Component(name, versions[wheel], files))
    publish(mirror, "13.0.2", components)


@pytest.fixture(scope="session")
def real_mirror(request: pytest.FixtureRequest) -> Iterator[Mirror]:
    """The mirror with 12.4.1 and 13.0.2, built once and kept in pytest's cache."""
    cache = Path(request.config.cache.mkdir("cuda-redist-mirror"))
    root = cache / f"mirror-{_LAYOUT}"
    if not (root / "complete").exists():
        shutil.rmtree(root, ignore_errors=True)
        _release_12_4(cache / "inputs", root)
        _release_13_0(cache / "inputs", root)
        (root / "complete").write_text("", encoding="utf-8")
    with serve(root) as mirror:
        yield mirror


KERNEL = """\
// Uses the runtime and NVRTC; CCCL (CUB) and NVTX where the cell defines WITH_CCCL / WITH_NVTX.
#include <cuda_runtime.h>
#include <nvrtc.h>
#ifdef WITH_CCCL
#include <cub/block/block_reduce.cuh>
#endif
#ifdef WITH_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

__global__ void block_sum(const float* in, float* out) {
#ifdef WITH_CCCL
  using Reduce = cub::BlockReduce<float, 128>;
  __shared__ typename Reduce::TempStorage storage;
  float sum = Reduce(storage).Sum(in[blockIdx.x * 128 + threadIdx.x]);
#else
  __shared__ float partial[128];
  partial[threadIdx.x] = in[blockIdx.x * 128 + threadIdx.x];
  __syncthreads();
  float sum = 0.0f;
  for (int i = 0; i < 128; ++i) sum += partial[i];
#endif
  if (threadIdx.x == 0) out[blockIdx.x] = sum;
}

int main() {
#ifdef WITH_NVTX
  nvtxRangePushA("block_sum");
#endif
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  block_sum<<<1, 128>>>(nullptr, nullptr);
  return cudaGetLastError() == cudaSuccess && major > 0 ? 0 : 1;
}
"""


# The 12.4 mirror is only as complete as its PyPI sources: the nvidia-cuda-cccl-cu12 12.4.127
# wheel lacks libcu++'s top-level cuda/ headers (cuda/__cccl_config, cuda/version) that CUB
# includes, and the runtime wheel has no libcudadevrt.a, which nvcc's link step needs. So
# 12.4 compiles (runtime, NVRTC headers); CUB, NVTX and linking are exercised with 13.0,
# whose wheels are complete. NVIDIA's real 12.4.1 archives have all of it.
LINK = '      - [nvcc, "{nvcc-flags}", "{cell-id}.o", -lnvrtc, -o, "{cell-id}"]\n'


@pytest.mark.parametrize(("version", "nvcc", "components", "defines", "link"), [
    ("12.4", "12.4.131", "", "", ""),
    ("13.0", "13.0.88", "nvtx", ', "-DWITH_CCCL", "-DWITH_NVTX"', LINK),
])
def test_a_kernel_builds_with_a_toolkit_set_up_from_the_redistributables(
        tmp_path: Path, real_mirror: Mirror, version: str, nvcc: str, components: str, defines: str,
        link: str) -> None:
    (tmp_path / "kernel.cu").write_text(KERNEL, encoding="utf-8")
    extra = f", components: [{components}]" if components else ""
    (tmp_path / "ci-matrix.yml").write_text(f"""\
version: 1
builds:
  kernels:
    platforms: [linux-x86_64]
    cuda: {{versions: ["{version}"], archs: [sm_80]{extra}}}
    run:
      - [nvcc, -c, "{{nvcc-flags}}"{defines}, kernel.cu, -o, "{{cell-id}}.o"]
{link}""", encoding="utf-8")
    cell = f"kernels-linux-x86_64-cuda-{version}-sm_80"
    tools = tmp_path / "tools"
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "CUDA_HOME", "NVCC_PREPEND_FLAGS")}
    env |= {"CI_MATRIX_TOOLS": str(tools), "CI_MATRIX_CUDA_REDIST": real_mirror.url}
    started = time.monotonic()
    done = ci_matrix("run", "--manifest", str(tmp_path / "ci-matrix.yml"), "--cell", cell, "--setup",
                     "--diagnosis", str(tmp_path / "d.json"), "--log", str(tmp_path / "build.log"),
                     env=env, timeout=900)
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr + (tmp_path / "build.log").read_text()
    record: dict[str, Any] = record_of(tmp_path / "d.json")
    folder = tools / "cuda" / (f"{version}+{components}" if components else version)
    assert record["tools"]["nvcc"] == nvcc  # preflight ran the nvcc that setup unpacked ...
    assert record["tools"]["nvcc-path"] == str(folder / "toolkit" / "bin" / "nvcc")
    assert any(line.startswith(f"CUDA {version}: set up in") and line.endswith("(redist)") for line in record["setup"])
    objdump = subprocess.run(["objdump", "-h", str(tmp_path / f"{cell}.o")], capture_output=True, text=True,
                             check=False)
    assert ".nv_fatbin" in objdump.stdout  # ... and it compiled device code
    assert not link or (tmp_path / cell).stat().st_size > 0  # linked: the runtime and NVRTC from the mirror
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    print(f"\nCUDA {version} from the mirror: setup and build {seconds:.1f} s, toolkit {size / 1e6:.0f} MB")
