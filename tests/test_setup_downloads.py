"""The download edge of `ci-matrix setup` against a loopback HTTP server (no registry):
a package whose sha256 differs is refused, and a .deb that is not nvcc's is named as such."""

from __future__ import annotations

import hashlib
import io
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ci_matrix.core.provision import DebianPackage
from ci_matrix.edges import debian, setup


def _deb(files: dict[str, bytes]) -> bytes:
    """A Debian package: an ar archive with debian-binary, control and data tarballs."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:xz") as tar:
        for name, content in files.items():
            info = tarfile.TarInfo(f"./{name}")
            info.size, info.mode = len(content), 0o755
            tar.addfile(info, io.BytesIO(content))
    members = [("debian-binary", b"2.0\n"), ("control.tar.xz", b""), ("data.tar.xz", data.getvalue())]
    out = b"!<arch>\n"
    for name, body in members:
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(body):<10}`\n".encode() + body + b"\n" * (len(body) % 2)
    return out


@pytest.fixture
def served() -> Iterator[tuple[str, dict[str, bytes]]]:
    files: dict[str, bytes] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = files.get(self.path.lstrip("/"))
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", files
    finally:
        server.shutdown()
        server.server_close()


def test_a_download_whose_sha256_differs_is_refused(served: tuple[str, dict[str, bytes]]) -> None:
    url, files = served
    files["toolkit.deb"] = b"not what was pinned"
    with pytest.raises(debian.DebianError, match="refusing to use it"):
        debian.download(f"{url}/toolkit.deb", "0" * 64)


def test_an_unreachable_package_says_so(served: tuple[str, dict[str, bytes]]) -> None:
    url, _files = served
    with pytest.raises(debian.DebianError, match=r"cannot download .*/missing.deb"):
        debian.download(f"{url}/missing.deb", "0" * 64)


def test_a_deb_without_the_compiler_is_named(served: tuple[str, dict[str, bytes]], tmp_path: Path) -> None:
    url, files = served
    files["other.deb"] = _deb({"usr/bin/ptxas": b"#!/bin/sh\n"})
    package = DebianPackage(f"{url}/other.deb", hashlib.sha256(files["other.deb"]).hexdigest(), "x86_64")
    with pytest.raises(debian.DebianError, match="has no bin/nvcc: not the compiler package"):
        debian.assemble(package, tmp_path, lambda _line: None)
    assert (tmp_path / "toolkit" / "bin" / "ptxas").read_bytes() == b"#!/bin/sh\n"  # the ar and tar reading works


@pytest.mark.parametrize(("wanted", "installed", "same"), [
    ("rustc-codegen-cranelift-preview", "rustc-codegen-cranelift-x86_64-unknown-linux-gnu", True),
    ("rustc-codegen-cranelift-preview", "rustc-codegen-cranelift-preview-x86_64-unknown-linux-gnu", True),
    ("clippy", "clippy-x86_64-unknown-linux-gnu", True),
    ("rust-src", "rust-std-x86_64-unknown-linux-gnu", False),
    ("aarch64-unknown-linux-gnu", "aarch64-unknown-linux-gnu", True),
])
def test_installed_rustup_components_are_recognised(wanted: str, installed: str, same: bool) -> None:
    assert setup._same_component(wanted, installed) is same
