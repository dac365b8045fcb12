"""A loopback stand-in for NVIDIA's CUDA redistributables server, in its exact layout.

NVIDIA publishes, under https://developer.download.nvidia.com/compute/cuda/redist/, one
`redistrib_<release>.json` per release and the archives it names. The index format here is
copied from real indexes: NVIDIA's redistrib_12.4.1.json and redistrib_13.0.0.json as kept
in NixOS/nixpkgs (pkgs/development/cuda-modules/cuda/manifests/, commits a3293a92b621 and
6baf095ac318): top-level `release_date`, `release_label`, `release_product`; per component
`name`, `license`, `license_path`, `version`, and per platform (`linux-x86_64`,
`linux-sbsa`, `windows-x86_64`, ...) `relative_path`, `sha256`, `md5` and `size` (a
string of bytes). `relative_path` is `<component>/<platform>/<component>-<platform>-<version>-archive.tar.xz`
(`.zip` on Windows), and each archive holds one top folder of that name without the
extension, with `bin/`, `include/`, `lib/`, `nvvm/` and `LICENSE` below it.

What is served is real where it matters: `tests/test_setup_redist_kernels.py` repacks real
compilers into this layout. The server can also cut a download short or hold one back, for
the failure tests.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import lzma
import tarfile
import threading
import time
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

#: A member: a file's bytes, a file on disk (copied), or ("link", target).
Content = bytes | Path | tuple[str, str]


@dataclass(frozen=True)
class Component:
    """One component of a release, as its archive will hold it (paths below the top folder)."""

    name: str  # the index's key, e.g. cuda_nvcc
    version: str  # e.g. 12.4.131
    files: Mapping[str, Content]
    title: str = ""

    def top(self, platform: str) -> str:
        return f"{self.name}-{platform}-{self.version}-archive"

    def relative_path(self, platform: str) -> str:
        extension = "zip" if platform.startswith("windows") else "tar.xz"
        return f"{self.name}/{platform}/{self.top(platform)}.{extension}"


def tar_xz(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    """A .tar.xz of these members, written as they are (hostile ones included). xz preset 0:
    the format NVIDIA uses, at a speed a 2-core test machine can afford."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return lzma.compress(raw.getvalue(), preset=0)


def member(name: str, content: Content) -> tuple[tarfile.TarInfo, bytes | None]:
    """A tar member for `content` at `name`."""
    info = tarfile.TarInfo(name)
    info.mtime = 1700000000
    if isinstance(content, tuple):
        info.type, info.linkname = tarfile.SYMTYPE, content[1]
        return info, None
    if isinstance(content, Path):
        data, executable = content.read_bytes(), bool(content.stat().st_mode & 0o111)
    else:
        data, executable = content, False
    info.size, info.mode = len(data), 0o755 if executable or name.split("/")[-2:-1] == ["bin"] else 0o644
    return info, data


def archive_of(component: Component, platform: str) -> bytes:
    top = component.top(platform)
    members = [member(f"{top}/{path}", content) for path, content in sorted(component.files.items())]
    members.insert(0, member(f"{top}/LICENSE", b"CUDA Toolkit license (test mirror)\n"))
    return zipped(members) if platform.startswith("windows") else tar_xz(members)


def zipped(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    """A .zip of these members, as NVIDIA ships Windows archives (no links in them)."""
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as archive:
        for info, data in members:
            if data is not None:
                archive.writestr(info.name, data)
    return raw.getvalue()


def entry(relative_path: str, data: bytes) -> dict[str, str]:
    """A platform entry of the index, for `data` published at `relative_path`."""
    return {"relative_path": relative_path, "sha256": hashlib.sha256(data).hexdigest(),
            "md5": hashlib.md5(data).hexdigest(), "size": str(len(data))}


def publish(root: Path, release: str, components: list[Component],
            platforms: tuple[str, ...] = ("linux-x86_64",)) -> dict[str, Any]:
    """Write `redistrib_<release>.json` and the components' archives for these platforms
    under `root`; returns the index."""
    index: dict[str, Any] = {"release_date": "2024-04-03", "release_label": release, "release_product": "cuda"}
    for component in components:
        index[component.name] = {"name": component.title or component.name, "license": "CUDA Toolkit",
                                 "license_path": f"{component.name}/LICENSE.txt", "version": component.version}
        for platform in platforms:
            data = archive_of(component, platform)
            path = root / component.relative_path(platform)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            index[component.name][platform] = entry(component.relative_path(platform), data)
    write_index(root, release, index)
    return index


def write_index(root: Path, release: str, index: Mapping[str, Any]) -> None:
    (root / f"redistrib_{release}.json").write_text(json.dumps(index, indent=4) + "\n", encoding="utf-8")


@dataclass
class Mirror:
    """What the server does besides serving `root`: paths to cut short, paths to hold back."""

    root: Path
    url: str = ""
    cut: set[str] = field(default_factory=set)
    hold: set[str] = field(default_factory=set)
    requests: list[str] = field(default_factory=list)


@contextlib.contextmanager
def serve(root: Path) -> Iterator[Mirror]:
    """Serve `root` on loopback; the Mirror's `url` is the base URL (ends with '/')."""
    mirror = Mirror(root)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            relative = self.path.lstrip("/")
            mirror.requests.append(relative)
            path = (root / relative).resolve()
            if not path.is_relative_to(root.resolve()) or not path.is_file():
                self.send_error(404)
                return
            data = path.read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if relative in mirror.hold:
                time.sleep(60)  # the client is killed meanwhile
            with contextlib.suppress(OSError):
                self.wfile.write(data[: len(data) // 2] if relative in mirror.cut else data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    mirror.url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        yield mirror
    finally:
        server.shutdown()
        server.server_close()
