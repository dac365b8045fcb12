"""Unpacking downloaded archives (.tar.xz, .zip) into a toolkit folder, member by member.

An archive is untrusted input, even after its sha256 matched an index: a member whose path
is absolute or climbs with `..`, a link that points out of the folder, or a device node
refuses the whole archive (ArchiveRefused) before anything of it is trusted. NVIDIA's
redistributable archives hold one top folder named like the archive
(`cuda_nvcc-linux-x86_64-12.4.131-archive/bin/nvcc`); it is stripped, so that every
component lands in the same toolkit root.
"""

from __future__ import annotations

import os
import shutil
import stat
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath


class ArchiveRefused(Exception):
    """An archive whose content is not what it claims, or would escape its folder."""


def unpack(archive: Path, top: str, dest: Path) -> int:
    """Unpack `archive` (named .tar.xz, .tar.gz or .zip) into `dest` without its top folder
    `top`; returns the number of files. Raises ArchiveRefused."""
    dest.mkdir(parents=True, exist_ok=True)
    if archive.name.endswith(".zip"):
        return _unpack_zip(archive, top, dest)
    return _unpack_tar(archive, top, dest)


def inside(top: str, name: str, what: str) -> PurePosixPath:
    """The path of member `name` below the top folder; raises when it is absolute, climbs
    with `..`, or lies outside the top folder."""
    text = name.replace("\\", "/")
    if text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        raise ArchiveRefused(f"{what}: member {name!r} has an absolute path; refusing the archive")
    parts = [p for p in PurePosixPath(text).parts if p != "."]
    if ".." in parts:
        raise ArchiveRefused(f"{what}: member {name!r} climbs out with '..'; refusing the archive")
    if not parts or parts[0] != top:
        raise ArchiveRefused(f"{what}: member {name!r} is outside its folder {top}/; refusing the archive")
    return PurePosixPath(*parts[1:]) if len(parts) > 1 else PurePosixPath(".")


def _link_stays_inside(where: PurePosixPath, target: str, name: str, what: str) -> None:
    """A symbolic link at `where` (relative to the root) must resolve inside the root."""
    text = target.replace("\\", "/")
    if text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        raise ArchiveRefused(f"{what}: link {name!r} points to the absolute path {target!r}; refusing the archive")
    depth = len(where.parent.parts) if str(where.parent) != "." else 0
    for part in PurePosixPath(text).parts:
        depth += -1 if part == ".." else 0 if part == "." else 1
        if depth < 0:
            raise ArchiveRefused(f"{what}: link {name!r} -> {target!r} points out of the folder; refusing the archive")


def _members(tar: tarfile.TarFile, top: str, what: str) -> Iterator[tuple[tarfile.TarInfo, PurePosixPath]]:
    for member in tar:
        path = inside(top, member.name, what)
        if member.issym():
            _link_stays_inside(path, member.linkname, member.name, what)
        elif member.islnk():
            inside(top, member.linkname, what)
        elif not (member.isfile() or member.isdir()):
            raise ArchiveRefused(f"{what}: member {member.name!r} is a device or fifo; refusing the archive")
        yield member, path


def _unpack_tar(archive: Path, top: str, dest: Path) -> int:
    what = archive.name
    try:
        with tarfile.open(archive) as tar:
            members = list(_members(tar, top, what))  # every member checked before any is written
            return sum(_write_tar_member(tar, m, path, top, dest, what) for m, path in members)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ArchiveRefused(f"{what}: cannot unpack: {exc}") from None


def _place(dest: Path, path: PurePosixPath, what: str, *, is_dir: bool) -> Path | None:
    """Where a member goes, its folders made and anything already there removed; None for a
    folder member (made here, nothing to write)."""
    target = _target(dest, path, what)
    if is_dir:
        target.mkdir(parents=True, exist_ok=True)
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove(target)
    return target


def _write_tar_member(tar: tarfile.TarFile, member: tarfile.TarInfo, path: PurePosixPath, top: str,
                      dest: Path, what: str) -> int:
    target = _place(dest, path, what, is_dir=member.isdir())
    if target is None:
        return 0
    if member.issym():
        # checked again where the link really lands: an earlier link (`d -> .`) can make a
        # member's path look deeper than it is
        lands = Path(os.path.normpath(target.parent.resolve() / member.linkname))
        if not lands.is_relative_to(dest.resolve()):
            raise ArchiveRefused(f"{what}: link {member.name!r} -> {member.linkname!r} points out of the folder; "
                                 "refusing the archive")
        target.symlink_to(member.linkname)
        return 1
    if member.islnk():
        source = _target(dest, inside(top, member.linkname, what), what)
        shutil.copy2(source, target)
        return 1
    data = tar.extractfile(member)
    if data is None:
        raise ArchiveRefused(f"{what}: member {member.name!r} has no data")
    with data, target.open("wb") as out:
        shutil.copyfileobj(data, out)
    target.chmod(0o755 if member.mode & 0o111 else 0o644)
    return 1


def _unpack_zip(archive: Path, top: str, dest: Path) -> int:
    what = archive.name
    try:
        with zipfile.ZipFile(archive) as zipped:
            infos = zipped.infolist()
            paths = [inside(top, info.filename, what) for info in infos]
            for info in infos:
                if stat.S_ISLNK(info.external_attr >> 16):
                    raise ArchiveRefused(f"{what}: member {info.filename!r} is a link; refusing the archive")
            pairs = zip(infos, paths, strict=True)
            return sum(_write_zip_member(zipped, info, path, dest, what) for info, path in pairs)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ArchiveRefused(f"{what}: cannot unpack: {exc}") from None


def _write_zip_member(zipped: zipfile.ZipFile, info: zipfile.ZipInfo, path: PurePosixPath, dest: Path,
                      what: str) -> int:
    target = _place(dest, path, what, is_dir=info.is_dir())
    if target is None:
        return 0
    with zipped.open(info) as data, target.open("wb") as out:
        shutil.copyfileobj(data, out)
    if (info.external_attr >> 16) & 0o111:
        target.chmod(0o755)
    return 1


def _target(dest: Path, path: PurePosixPath, what: str) -> Path:
    """Where a member goes; its folder, links resolved, must still be inside `dest` (a link
    unpacked earlier cannot carry a later member out)."""
    target = dest.joinpath(*path.parts)
    if not target.parent.resolve().is_relative_to(dest.resolve()):
        raise ArchiveRefused(f"{what}: member {path} would be written outside the folder through a link")
    return target


def _remove(target: Path) -> None:
    if target.is_symlink() or target.is_file():
        target.unlink()
