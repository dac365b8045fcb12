"""NVIDIA's CUDA redistributables: read a release's index, download the components a cell
needs, each checked against the index's size and sha256, and unpack them into one root.

The index is `redistrib_<release>.json` under the base URL, as NVIDIA publishes it at
https://developer.download.nvidia.com/compute/cuda/redist/ (one file per release since
11.4.0; copies of them are kept, for instance, in nixpkgs'
pkgs/development/cuda-modules/cuda/manifests/):

    {"release_date": "2024-04-03", "release_label": "12.4.1", "release_product": "cuda",
     "cuda_nvcc": {"name": "CUDA NVCC", "license": "CUDA Toolkit", "version": "12.4.131",
                   "linux-x86_64": {
                       "relative_path": "cuda_nvcc/linux-x86_64/cuda_nvcc-linux-x86_64-12.4.131-archive.tar.xz",
                       "sha256": "...", "md5": "...", "size": "51184484"},
                   "linux-sbsa": {...}, "windows-x86_64": {... "-archive.zip" ...}},
     ...}

Each archive holds one top folder named like the archive (`cuda_nvcc-linux-x86_64-12.4.131-archive/`)
with `bin/`, `include/`, `lib/`, `nvvm/` below it.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ci_matrix.core.provision import RedistArchives
from ci_matrix.edges.archives import ArchiveRefused, unpack

_INDEX_LIMIT = 16 * 1024 * 1024  # NVIDIA's indexes are about 60 KB
_CHUNK = 1024 * 1024
_TIMEOUT = 120.0
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class RedistError(Exception):
    """The redistributables answered, but not with what setup can use (the message says why)."""


class RedistUnreachable(RedistError):
    """The index could not be fetched at all (no network path to the server)."""


@dataclass(frozen=True)
class Archive:
    """One component's archive for one platform, as the index describes it."""

    component: str
    version: str
    url: str
    sha256: str
    size: int

    @property
    def file(self) -> str:
        return self.url.rsplit("/", 1)[-1]

    @property
    def top(self) -> str:
        """The archive's top folder: its file name without the extension."""
        return self.file.removesuffix(".zip").removesuffix(".tar.xz").removesuffix(".tar.gz")


def install(wanted: RedistArchives, home: Path, say: Callable[[str], None]) -> tuple[Archive, ...]:
    """Download and unpack the components of `wanted` into `home`; raises RedistError."""
    archives = archives_of(fetch_index(wanted), wanted)
    downloads = home.parent / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    for archive in archives:
        say(f"  {archive.url} ({archive.size / 1e6:.1f} MB)")
        path = download(archive, downloads)
        try:
            unpack(path, archive.top, home)
        except ArchiveRefused as exc:
            raise RedistError(f"{archive.url}: {exc}") from None
        path.unlink()
    downloads.rmdir()
    return archives


def fetch_index(wanted: RedistArchives) -> Mapping[str, Any]:
    """The release's index, parsed; RedistUnreachable when there is no way to the server."""
    url = wanted.index_url
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT) as response:
            text: bytes = response.read(_INDEX_LIMIT + 1)
    except urllib.error.HTTPError as exc:
        raise RedistError(f"{url}: HTTP {exc.code} {exc.reason}: no index for CUDA {wanted.release} there") from None
    except (OSError, http.client.HTTPException) as exc:
        raise RedistUnreachable(f"cannot reach {url}: {getattr(exc, 'reason', exc)}") from None
    if len(text) > _INDEX_LIMIT:
        raise RedistError(f"{url}: larger than {_INDEX_LIMIT // 2**20} MiB, not a redistributables index")
    try:
        index = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RedistError(f"{url}: not a redistributables index (not JSON: {exc})") from None
    if not isinstance(index, dict):
        raise RedistError(f"{url}: not a redistributables index (a JSON object was expected)")
    return index


def archives_of(index: Mapping[str, Any], wanted: RedistArchives) -> tuple[Archive, ...]:
    """The archives of the wanted components for the wanted platform; raises RedistError
    naming what the index lacks (and what it has) or what it says wrongly. (Names are
    checked with did-you-mean earlier, against the catalogue, when the manifest is read.)"""
    url = wanted.index_url
    label = index.get("release_label")
    if label is not None and label != wanted.release:
        raise RedistError(f"{url}: the index is for release {label!r}, not {wanted.release}")
    components = sorted(k for k, v in index.items() if isinstance(v, dict))
    found = []
    for name in wanted.components:
        key = name.removesuffix("?")
        entry = index.get(key)
        if not isinstance(entry, dict):
            if name.endswith("?"):
                continue
            raise RedistError(f"{url} has no component {key!r}; this release has: {', '.join(components)}")
        found.append(_archive(entry, key, wanted, url))
    return tuple(found)


def _archive(entry: Mapping[str, Any], key: str, wanted: RedistArchives, url: str) -> Archive:
    spec = entry.get(wanted.platform)
    if not isinstance(spec, dict):
        platforms = sorted(k for k, v in entry.items() if isinstance(v, dict))
        listing = ", ".join(platforms) or "none"
        raise RedistError(f"{url}: {key} has no archive for {wanted.platform}; it has: {listing}")
    relative, sha256, size = spec.get("relative_path"), spec.get("sha256"), spec.get("size")
    if not isinstance(relative, str) or not _plain_relative(relative):
        raise RedistError(f"{url}: {key}'s relative_path {relative!r} is not a plain relative path")
    if not isinstance(sha256, str) or not _SHA256.match(sha256):
        raise RedistError(f"{url}: {key}'s sha256 {sha256!r} is not a sha256")
    if not isinstance(size, (str, int)) or not str(size).isdigit():
        raise RedistError(f"{url}: {key}'s size {size!r} is not a number of bytes")
    return Archive(key, str(entry.get("version", "")), wanted.base_url + relative, sha256, int(size))


def _plain_relative(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return bool(parts) and not path.startswith("/") and ".." not in parts and ":" not in path and "\\" not in path


def download(archive: Archive, folder: Path) -> Path:
    """Download `archive` into `folder`, checking its size and sha256 as it arrives."""
    path = folder / archive.file
    digest, got = hashlib.sha256(), 0
    try:
        with urllib.request.urlopen(archive.url, timeout=_TIMEOUT) as response, path.open("wb") as out:
            while chunk := response.read(min(_CHUNK, archive.size + 1 - got)):
                digest.update(chunk)
                out.write(chunk)
                got += len(chunk)
                if got > archive.size:
                    raise RedistError(f"{archive.url} is larger than the index's {archive.size} bytes; refusing it")
    except http.client.IncompleteRead as exc:
        raise RedistError(f"{archive.url}: the download was cut short after {got + len(exc.partial)} "
                          f"of {archive.size} bytes") from None
    except (OSError, http.client.HTTPException) as exc:
        raise RedistError(f"cannot download {archive.url}: {exc}") from None
    if got < archive.size:
        raise RedistError(f"{archive.url}: the download was cut short after {got} of {archive.size} bytes")
    if digest.hexdigest() != archive.sha256:
        raise RedistError(f"{archive.url} has sha256 {digest.hexdigest()}, the index says {archive.sha256}: "
                          "refusing it")
    return path
