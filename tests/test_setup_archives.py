"""The unpacking edge on its own: NVIDIA's Windows archives are .zip files, and a tar can
carry hard links; each hostile form is refused with a message naming the member, and a
well-formed archive lands below the folder without its top folder."""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from ci_matrix.edges.archives import ArchiveRefused, unpack
from tests.cuda_redist import member, tar_xz

TOP = "cuda_nvcc-windows-x86_64-12.4.131-archive"


def _zip(path: Path, members: dict[str, bytes], link: str = "") -> Path:
    with zipfile.ZipFile(path, "w") as zipped:
        for name, data in members.items():
            zipped.writestr(name, data)
        if link:
            info = zipfile.ZipInfo(f"{TOP}/bin/link")
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zipped.writestr(info, link)
    return path


def test_a_windows_zip_is_unpacked_without_its_top_folder(tmp_path: Path) -> None:
    archive = _zip(tmp_path / f"{TOP}.zip", {f"{TOP}/bin/nvcc.exe": b"MZ", f"{TOP}/include/crt/host_config.h": b"//"})
    assert unpack(archive, TOP, tmp_path / "toolkit") == 2
    assert (tmp_path / "toolkit" / "bin" / "nvcc.exe").read_bytes() == b"MZ"
    assert (tmp_path / "toolkit" / "include" / "crt" / "host_config.h").exists()


@pytest.mark.parametrize(("name", "says"), [
    (f"{TOP}/..\\..\\escaped.dll", "climbs out with '..'"),
    ("C:\\Windows\\System32\\evil.dll", "has an absolute path"),
    ("/etc/evil", "has an absolute path"),
    ("other-archive/bin/nvcc.exe", "is outside its folder"),
])
def test_a_hostile_zip_member_is_refused(tmp_path: Path, name: str, says: str) -> None:
    archive = _zip(tmp_path / f"{TOP}.zip", {f"{TOP}/bin/nvcc.exe": b"MZ", name: b"x"})
    with pytest.raises(ArchiveRefused, match=says):
        unpack(archive, TOP, tmp_path / "toolkit")
    assert not (tmp_path / "toolkit" / "bin" / "nvcc.exe").exists()  # checked before anything is written
    assert not (tmp_path / "escaped.dll").exists()


def test_a_link_in_a_zip_is_refused(tmp_path: Path) -> None:
    archive = _zip(tmp_path / f"{TOP}.zip", {f"{TOP}/bin/nvcc.exe": b"MZ"}, link="../../../etc/passwd")
    with pytest.raises(ArchiveRefused, match="is a link; refusing the archive"):
        unpack(archive, TOP, tmp_path / "toolkit")


def test_a_hard_link_out_of_the_archive_is_refused(tmp_path: Path) -> None:
    top = "cuda_cudart-linux-x86_64-12.4.127-archive"
    link = tarfile.TarInfo(f"{top}/lib/passwd")
    link.type, link.linkname = tarfile.LNKTYPE, "../../etc/passwd"
    archive = tmp_path / f"{top}.tar.xz"
    archive.write_bytes(tar_xz([member(f"{top}/lib/libcudart.so.12", b"ELF"), (link, None)]))
    with pytest.raises(ArchiveRefused, match=r"climbs out with '\.\.'"):
        unpack(archive, top, tmp_path / "toolkit")


def test_a_link_that_escapes_through_an_earlier_link_is_refused(tmp_path: Path) -> None:
    top = "cuda_cccl-linux-x86_64-12.4.127-archive"
    archive = tmp_path / f"{top}.tar.xz"  # `d -> .` makes include/d/d/d/e really include/e
    archive.write_bytes(tar_xz([member(f"{top}/include/d", ("link", ".")),
                                member(f"{top}/include/d/d/d/e", ("link", "../../.."))]))
    with pytest.raises(ArchiveRefused, match="points out of the folder"):
        unpack(archive, top, tmp_path / "toolkit")
    assert not (tmp_path / "toolkit" / "include" / "e").is_symlink()


def test_links_inside_the_folder_are_kept(tmp_path: Path) -> None:
    top = "cuda_cudart-linux-x86_64-12.4.127-archive"
    hard = tarfile.TarInfo(f"{top}/lib/libcudart.so.12.4.127")
    hard.type, hard.linkname = tarfile.LNKTYPE, f"{top}/lib/libcudart.so.12"
    archive = tmp_path / f"{top}.tar.xz"
    archive.write_bytes(tar_xz([member(f"{top}/lib/libcudart.so.12", b"ELF"), (hard, None),
                                member(f"{top}/lib/libcudart.so", ("link", "libcudart.so.12"))]))
    unpack(archive, top, tmp_path / "toolkit")
    lib = tmp_path / "toolkit" / "lib"
    assert (lib / "libcudart.so").readlink() == Path("libcudart.so.12")
    assert (lib / "libcudart.so.12.4.127").read_bytes() == b"ELF"


def test_a_corrupt_archive_is_named(tmp_path: Path) -> None:
    archive = tmp_path / "cuda_cccl-linux-x86_64-12.4.127-archive.tar.xz"
    archive.write_bytes(io.BytesIO(b"\xfd7zXZ\x00 not really").getvalue())
    with pytest.raises(ArchiveRefused, match=r"cuda_cccl-linux-x86_64-12\.4\.127-archive\.tar\.xz: cannot unpack"):
        unpack(archive, "cuda_cccl-linux-x86_64-12.4.127-archive", tmp_path / "toolkit")
