"""`ci-matrix setup` from NVIDIA's redistributables, against a loopback mirror in their exact
layout (tests/cuda_redist.py), through the CLI as a user runs it: what lands in the tools
folder, and what a mirror that answers wrongly or with hostile archives gets instead (exit
69, a message that says what is wrong, nothing left behind). The archives here are small;
tests/test_setup_redist_kernels.py repacks real compilers and builds kernels with them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ci_matrix.core.provision import needs_of, recipe
from ci_matrix.edges.files import toolkits
from tests.cuda_redist import Component, Content, Mirror, entry, member, publish, serve, tar_xz, write_index
from tests.test_run import ci_matrix

MANIFEST = """\
version: 1
builds:
  kernels:
    platforms: [linux-x86_64, linux-arm64, windows-x86_64]
    cuda: {versions: ["12.6"], archs: [sm_80]COMPONENTS}
    run: [[nvcc, --version]]
"""
CELL = "kernels-linux-x86_64-cuda-12.6-sm_80"
RELEASE = "12.6.3"


def components() -> list[Component]:
    """The default components of a release, small: a few files each."""
    return [
        Component("cuda_nvcc", "12.6.85", {"bin/nvcc": b"\x7fELF nvcc", "bin/nvcc.exe": b"MZ nvcc",
                                           "bin/nvcc.profile": b"TOP = $(_HERE_)/..\n",
                                           "nvvm/libdevice/libdevice.10.bc": b"BC",
                                           "include/crt/host_config.h": b"//"}),
        Component("cuda_cudart", "12.6.77", {"include/cuda_runtime.h": b"// runtime",
                                             "lib/libcudart.so.12": b"\x7fELF",
                                             "lib/libcudart.so": ("link", "libcudart.so.12")}),
        Component("cuda_cccl", "12.6.77", {"include/thrust/version.h": b"#define THRUST_VERSION 200600\n"}),
        Component("cuda_nvrtc", "12.6.85", {"include/nvrtc.h": b"// nvrtc", "lib/libnvrtc.so.12": b"\x7fELF"}),
    ]


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[Mirror]:
    root = tmp_path / "mirror"
    publish(root, RELEASE, components(), ("linux-x86_64", "windows-x86_64"))
    with serve(root) as served:
        yield served


def project(tmp_path: Path, extra: str = "") -> Path:
    manifest = tmp_path / "ci-matrix.yml"
    manifest.write_text(MANIFEST.replace("COMPONENTS", f", components: [{extra}]" if extra else ""), encoding="utf-8")
    return manifest


def setup_cell(tmp_path: Path, url: str, cell: str = CELL, *extra: str,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "CI_MATRIX_TOOLS": str(tmp_path / "tools"),
           "CI_MATRIX_CUDA_REDIST": url}
    return ci_matrix("setup", "--manifest", str(tmp_path / "ci-matrix.yml"), "--cell", cell, *extra, env=env,
                     timeout=timeout)


def test_a_release_only_nvidia_publishes_is_set_up_from_the_mirror(tmp_path: Path, mirror: Mirror) -> None:
    project(tmp_path)
    plan = setup_cell(tmp_path, mirror.url, CELL, "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert f"CUDA 12.6 from NVIDIA's redistributables 12.6.3 linux-x86_64 (cuda_nvcc, cuda_cudart, cuda_cccl, " \
           f"cuda_nvrtc) at {mirror.url}" in plan.stdout
    assert mirror.requests == []  # a dry run downloads nothing

    done = setup_cell(tmp_path, mirror.url, CELL, "--format", "json")
    assert done.returncode == 0, done.stderr
    home = tmp_path / "tools" / "cuda" / "12.6" / "toolkit"
    result = json.loads(done.stdout)
    assert result["env"] == {"CUDA_HOME": str(home), "CUDA_PATH": str(home), "CUDACXX": str(home / "bin" / "nvcc")}
    assert result["done"] == [f"CUDA 12.6: set up in {home.parent} (redist)"]
    assert (home / "bin" / "nvcc").read_bytes() == b"\x7fELF nvcc" and os.access(home / "bin" / "nvcc", os.X_OK)
    assert (home / "lib" / "libcudart.so").readlink() == Path("libcudart.so.12")  # the archive's own link
    assert (home / "targets" / "x86_64-linux" / "include" / "thrust" / "version.h").exists()  # where nvcc.profile looks
    assert not (home.parent / "downloads").exists()
    assert sorted(mirror.requests) == sorted([f"redistrib_{RELEASE}.json", *(c.relative_path("linux-x86_64")
                                                                               for c in components())])


def test_a_sha256_that_differs_from_the_index_is_refused(tmp_path: Path, mirror: Mirror) -> None:
    project(tmp_path)
    index = json.loads((mirror.root / f"redistrib_{RELEASE}.json").read_text())
    good = index["cuda_cccl"]["linux-x86_64"]["sha256"]
    index["cuda_cccl"]["linux-x86_64"]["sha256"] = "0" * 64
    write_index(mirror.root, RELEASE, index)
    done = setup_cell(tmp_path, mirror.url)
    assert done.returncode == 69
    assert f"cuda_cccl-linux-x86_64-12.6.77-archive.tar.xz has sha256 {good}, the index says {'0' * 64}: " \
           "refusing it" in done.stderr
    assert not (tmp_path / "tools" / "cuda" / "12.6").exists()  # nothing half-built is left to be trusted


@pytest.mark.parametrize("how", ["connection closed", "file shorter than the index says"])
def test_a_truncated_download_is_refused(tmp_path: Path, mirror: Mirror, how: str) -> None:
    project(tmp_path)
    nvcc = components()[0].relative_path("linux-x86_64")
    size = (mirror.root / nvcc).stat().st_size
    if how == "connection closed":
        mirror.cut.add(nvcc)
    else:
        (mirror.root / nvcc).write_bytes((mirror.root / nvcc).read_bytes()[: size // 2])
    done = setup_cell(tmp_path, mirror.url)
    assert done.returncode == 69
    assert f"{mirror.url}{nvcc}: the download was cut short after {size // 2} of {size} bytes" in done.stderr
    assert not (tmp_path / "tools" / "cuda" / "12.6").exists()


def test_a_component_the_release_lacks_is_named(tmp_path: Path, mirror: Mirror) -> None:
    project(tmp_path)
    index = json.loads((mirror.root / f"redistrib_{RELEASE}.json").read_text())
    write_index(mirror.root, RELEASE, {k: v for k, v in index.items() if k != "cuda_nvrtc"})
    done = setup_cell(tmp_path, mirror.url)
    assert done.returncode == 69
    assert (f"{mirror.url}redistrib_{RELEASE}.json has no component 'cuda_nvrtc'; this release has: "
            "cuda_cccl, cuda_cudart, cuda_nvcc") in done.stderr

    write_index(mirror.root, RELEASE, index)
    project(tmp_path, "cublas")  # a component the manifest asks for
    done = setup_cell(tmp_path, mirror.url)
    assert done.returncode == 69 and "has no component 'libcublas'" in done.stderr


def test_an_index_without_the_runners_platform_is_named(tmp_path: Path, mirror: Mirror) -> None:
    project(tmp_path)
    done = setup_cell(tmp_path, mirror.url, "kernels-linux-arm64-cuda-12.6-sm_80")
    assert done.returncode == 69
    assert (f"redistrib_{RELEASE}.json: cuda_nvcc has no archive for linux-sbsa; it has: linux-x86_64, "
            "windows-x86_64") in done.stderr


def test_a_windows_cell_gets_the_zip_archives(tmp_path: Path, mirror: Mirror) -> None:
    """Unpacked here, on Linux: the layout and the environment, not a Windows build."""
    project(tmp_path)
    done = setup_cell(tmp_path, mirror.url, "kernels-windows-x86_64-cuda-12.6-sm_80", "--format", "json")
    assert done.returncode == 0, done.stderr
    home = tmp_path / "tools" / "cuda" / "12.6" / "toolkit"
    assert json.loads(done.stdout)["env"]["CUDACXX"] == str(home / "bin" / "nvcc.exe")
    assert (home / "include" / "thrust" / "version.h").exists() and not (home / "targets").exists()
    assert any(r.endswith("cuda_nvcc-windows-x86_64-12.6.85-archive.zip") for r in mirror.requests)


HOSTILE: dict[str, tuple[str, Content, str]] = {
    "dot-dot": ("cuda_cccl-linux-x86_64-12.6.77-archive/../../../escaped", b"x", "climbs out with '..'"),
    "absolute": ("/tmp/ci-matrix-escaped", b"x", "has an absolute path"),
    "outside the top folder": ("elsewhere/include/x.h", b"x", "is outside its folder cuda_cccl-linux-x86_64-12.6.77"),
    "link to an absolute path": ("cuda_cccl-linux-x86_64-12.6.77-archive/include/passwd", ("link", "/etc/passwd"),
                                 "points to the absolute path '/etc/passwd'"),
    "link out of the folder": ("cuda_cccl-linux-x86_64-12.6.77-archive/include/up", ("link", "../../.."),
                               "points out of the folder"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_archive_is_refused_before_anything_is_written_outside(tmp_path: Path, mirror: Mirror,
                                                                         case: str) -> None:
    project(tmp_path)
    name, content, says = HOSTILE[case]
    cccl = components()[2]
    top = cccl.top("linux-x86_64")
    members = [member(f"{top}/include/thrust/version.h", b"//"), member(name, content)]
    if case == "link out of the folder":  # then a file written through the link
        members.append(member(f"{top}/include/up/escaped", b"x"))
    data = tar_xz(members)
    (mirror.root / cccl.relative_path("linux-x86_64")).write_bytes(data)
    index = json.loads((mirror.root / f"redistrib_{RELEASE}.json").read_text())
    index["cuda_cccl"]["linux-x86_64"] = entry(cccl.relative_path("linux-x86_64"), data)  # the sha256 matches
    write_index(mirror.root, RELEASE, index)
    done = setup_cell(tmp_path, mirror.url)
    assert done.returncode == 69, done.stdout
    assert says in done.stderr and "refusing the archive" in done.stderr
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "tools" / "escaped").exists()
    assert not Path("/tmp/ci-matrix-escaped").exists()
    assert not (tmp_path / "tools" / "cuda" / "12.6").exists()


def test_a_device_node_in_an_archive_is_refused(tmp_path: Path, mirror: Mirror) -> None:
    project(tmp_path)
    cccl = components()[2]
    device = tarfile.TarInfo(f"{cccl.top('linux-x86_64')}/include/sda")
    device.type, device.devmajor, device.devminor = tarfile.BLKTYPE, 8, 0
    data = tar_xz([(device, None)])
    (mirror.root / cccl.relative_path("linux-x86_64")).write_bytes(data)
    index = json.loads((mirror.root / f"redistrib_{RELEASE}.json").read_text())
    index["cuda_cccl"]["linux-x86_64"] = entry(cccl.relative_path("linux-x86_64"), data)
    write_index(mirror.root, RELEASE, index)
    done = setup_cell(tmp_path, mirror.url)
    assert done.returncode == 69 and "is a device or fifo; refusing the archive" in done.stderr


def test_an_interrupted_setup_is_done_again_by_the_next_one(tmp_path: Path, mirror: Mirror) -> None:
    project(tmp_path)
    nvrtc = components()[3].relative_path("linux-x86_64")
    mirror.hold.add(nvrtc)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "CI_MATRIX_TOOLS": str(tmp_path / "tools"),
           "CI_MATRIX_CUDA_REDIST": mirror.url}
    argv = [sys.executable, "-m", "ci_matrix", "setup", "--manifest", str(tmp_path / "ci-matrix.yml"), "--cell", CELL]
    first = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while nvrtc not in mirror.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    assert nvrtc in mirror.requests, "setup never reached the last archive"
    first.send_signal(signal.SIGKILL)  # as a cancelled job would be: no cleanup runs
    first.wait()
    folder = tmp_path / "tools" / "cuda" / "12.6"
    assert (folder / "toolkit" / "bin" / "nvcc").exists() and not (folder / ".ci-matrix-setup.json").exists()

    mirror.hold.clear()
    again = setup_cell(tmp_path, mirror.url, CELL, "--format", "json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["done"] == [f"CUDA 12.6: set up in {folder} (redist)"]
    assert (folder / "toolkit" / "include" / "nvrtc.h").exists() and (folder / ".ci-matrix-setup.json").exists()
    third = setup_cell(tmp_path, mirror.url, CELL, "--format", "json")
    assert json.loads(third.stdout)["done"] == [f"CUDA 12.6: already set up in {folder} (redist)"]


def test_an_unreachable_mirror_fails_the_cell_naming_it(tmp_path: Path) -> None:
    project(tmp_path)
    done = setup_cell(tmp_path, "http://127.0.0.1:9/redist/")  # the discard port: nothing listens
    assert done.returncode == 69
    assert "CUDA 12.6: no source could be reached" in done.stderr
    assert "cannot reach http://127.0.0.1:9/redist/redistrib_12.6.3.json" in done.stderr


def test_a_mirror_that_is_not_a_url_is_a_clear_error(tmp_path: Path) -> None:
    project(tmp_path)
    done = setup_cell(tmp_path, "mirror.example/redist; rm -rf /")
    assert done.returncode == 69
    assert "CI_MATRIX_CUDA_REDIST='mirror.example/redist; rm -rf /' is not a URL" in done.stderr


def test_a_misspelt_component_is_an_error_at_its_line_with_did_you_mean(tmp_path: Path) -> None:
    manifest = project(tmp_path, "cublas, cusprase")
    done = ci_matrix("validate", str(manifest))
    assert done.returncode == 78
    assert f"{manifest}:5:69: builds.kernels.cuda.components[1]: unknown CUDA component 'cusprase'; expected one " \
           "of: " in done.stdout + done.stderr
    assert "(did you mean 'cusparse'?)" in done.stdout + done.stderr


def test_shell_format_stays_evaluable_when_setup_warns(tmp_path: Path) -> None:
    """Issue 11, item 7: a warning (here: nvcc 11.8 and a GCC 12 host compiler with no g++-11)
    goes to stderr, so that `eval "$(ci-matrix setup ... --format shell)"` still works."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("no g++ on this machine")
    manifest = tmp_path / "ci-matrix.yml"
    manifest.write_text(MANIFEST.replace('"12.6"', '"11.8"').replace("COMPONENTS", ""), encoding="utf-8")
    cuda = needs_of({"cuda-version": "11.8"}, toolkits(), "linux", "x86_64").cuda
    assert cuda is not None
    debian = next(s for s in cuda.sources if s.kind == "debian")
    folder = tmp_path / "tools" / "cuda" / "11.8"  # finished earlier from Debian's package
    (folder / "toolkit" / "bin").mkdir(parents=True)
    (folder / ".ci-matrix-setup.json").write_text(json.dumps(recipe(debian)), encoding="utf-8")
    bin_dir = tmp_path / "bin"  # the runner's g++ (GCC 12 here), and no older g++-N
    bin_dir.mkdir()
    (bin_dir / "g++").symlink_to(gxx)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "CI_MATRIX_TOOLS": str(tmp_path / "tools")}
    argv = f"{sys.executable} -m ci_matrix setup --manifest {manifest} --cell kernels-linux-x86_64-cuda-11.8-sm_80"
    script = f'eval "$({argv} --format shell)" && printf "%s\\n" "$CUDA_HOME" "$CUDACXX"'
    done = subprocess.run(["/bin/bash", "-c", script], env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    if "accepts GCC 11 at most" not in done.stderr:
        pytest.skip(f"no warning to test with: {gxx} is not newer than GCC 11")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(folder / "toolkit"), str(folder / "toolkit" / "bin" / "nvcc")]
    assert "ci-matrix: warning: CUDA 11.8's nvcc accepts GCC 11 at most" in done.stderr
    as_json = ci_matrix("setup", "--manifest", str(manifest), "--cell", "kernels-linux-x86_64-cuda-11.8-sm_80",
                        "--format", "json", env=env)
    result = json.loads(as_json.stdout)
    assert result["warnings"][0].startswith("CUDA 11.8's nvcc accepts GCC 11 at most")
    # a folder finished from the second source is used as it is: no attempt at the first
    assert result["done"] == [f"CUDA 11.8: already set up in {folder} (debian)"]
