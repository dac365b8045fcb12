"""Debian's `nvidia-cuda-toolkit` compiler package as a CUDA source: download it from the
pool, check it against the sha256 that toolkits.yaml pins, and copy nvcc, cicc, libdevice
and the tools out of its data archive into a relocatable toolkit root (nothing is
installed), completed with the headers and runtime of the PyPI wheels of the same release.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath

from ci_matrix.core.provision import DebianPackage


class DebianError(Exception):
    """The package could not be downloaded, or is not the compiler package expected."""


_DEB_TOOLS = ("cudafe++", "ptxas", "fatbinary", "nvlink", "bin2c", "cuobjdump", "nvdisasm", "nvprune", "cu++filt")
_PROFILE = """\
TOP              = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib:
PATH            += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib/stubs" "-L$(TOP)/lib"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
"""


def assemble(deb: DebianPackage, work: Path, say: Callable[[str], None]) -> None:
    """A relocatable toolkit root from Debian's compiler package and the PyPI headers."""
    say(f"  downloading {deb.url}")
    data = download(deb.url, deb.sha256)
    home = work / "toolkit"
    for sub in ("bin", "nvvm/bin", "nvvm/libdevice", "include", "lib"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    lib = PurePosixPath("usr/lib/nvidia-cuda-toolkit")
    wanted = {lib / "bin" / "nvcc": "bin/nvcc", lib / "bin" / "cicc": "nvvm/bin/cicc",
              lib / "libdevice" / "libdevice.10.bc": "nvvm/libdevice/libdevice.10.bc"}
    wanted.update({PurePosixPath("usr/bin") / tool: f"bin/{tool}" for tool in _DEB_TOOLS})
    found = _extract_deb(data, wanted, {lib / "bin" / "crt": "bin/crt"}, home)
    for must in ("bin/nvcc", "nvvm/bin/cicc", "bin/cudafe++", "bin/ptxas", "bin/fatbinary"):
        if must not in found:
            raise DebianError(f"{deb.url} has no {must}: not the compiler package ci-matrix expects")
    (home / "bin" / "nvcc.profile").write_text(_PROFILE, encoding="utf-8")
    wheels = work / "pypi" / "nvidia"
    for part in ("cuda_runtime", "cuda_nvcc"):
        _copy_tree(wheels / part / "include", home / "include")
    _copy_tree(wheels / "cuda_runtime" / "lib", home / "lib")
    for shared in (home / "lib").glob("libcudart.so.*"):
        link = home / "lib" / "libcudart.so"
        if not link.exists():
            link.symlink_to(shared.name)


def download(url: str, sha256: str) -> bytes:
    """The bytes at `url`, refused unless their sha256 is the pinned one."""
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            data: bytes = response.read()
    except OSError as exc:
        raise DebianError(f"cannot download {url}: {exc}") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise DebianError(f"{url} has sha256 {digest}, expected {sha256}: refusing to use it")
    return data


def _extract_deb(deb: bytes, files: Mapping[PurePosixPath, str], trees: Mapping[PurePosixPath, str],
                 home: Path) -> set[str]:
    """Copy the named files and folders out of a .deb's data archive (an `ar` archive)."""
    found: set[str] = set()
    with tarfile.open(fileobj=io.BytesIO(_ar_member(deb, "data.tar"))) as data:
        for member in data:
            name = PurePosixPath(member.name.removeprefix("./"))
            dest = files.get(name)
            if dest is None:
                dest = next((f"{d}/{name.relative_to(t)}" for t, d in trees.items() if name.is_relative_to(t)), None)
            if dest is None or not member.isfile():
                continue
            source = data.extractfile(member)
            assert source is not None
            target = home / dest
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read())
            target.chmod(0o755 if member.mode & 0o111 else 0o644)
            found.add(dest)
    return found


def _ar_member(archive: bytes, prefix: str) -> bytes:
    """The first member of an `ar` archive whose name starts with `prefix`."""
    if not archive.startswith(b"!<arch>\n"):
        raise DebianError("not a Debian package (no ar header)")
    at = 8
    while at + 60 <= len(archive):
        header = archive[at:at + 60]
        name, size = header[:16].decode().strip().rstrip("/"), int(header[48:58].decode().strip())
        if name.startswith(prefix):
            return archive[at + 60:at + 60 + size]
        at += 60 + size + (size % 2)
    raise DebianError(f"the Debian package has no {prefix}.* member")


def _copy_tree(source: Path, dest: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, dest, symlinks=True, dirs_exist_ok=True)
