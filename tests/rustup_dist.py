"""A local stand-in for static.rust-lang.org, so that the real `rustup` can install a dated
nightly offline in tests.

This machine cannot reach static.rust-lang.org (no DNS), so `rustup toolchain install
nightly-2024-05-21` has nothing to download from. This module
builds a *rustup distribution server* tree from a toolchain that is already installed under
the real rustup home, and serves it on loopback with `http.server` in a background thread:

    with serve_rust_dist(cache_dir) as url:
        env = {..., "RUSTUP_DIST_SERVER": url, "RUSTUP_UPDATE_ROOT": f"{url}/rustup"}
        subprocess.run([rustup, "toolchain", "install", "nightly-2024-05-21", "--profile", "minimal"], env=env)

What is served, under `<url>/dist/<date>/`:

* `channel-rust-nightly.toml` (a v2 channel manifest) and `channel-rust-nightly.toml.sha256`;
* one rust-installer (format 3) tarball per component, `<pkg>-nightly-<host>.tar.gz`, for
  `rustc`, `cargo`, `rust-std` (what `--profile minimal` needs) and, where the source
  toolchain has them, `rustfmt-preview` and `clippy-preview`. The files of each component are
  the ones the installed toolchain lists in `lib/rustlib/manifest-<pkg>-<host>`.

The toolchain served is the installed one *relabelled*: rustup records it as
`nightly-2024-05-21`, but `rustc --version` still prints the installed nightly's own version
and commit date (say `rustc 1.97.0-nightly (e50aa6fba 2026-05-19)`), not 2024-05-21. Tests
must not assert on that date. Components the manifest does not list (`rust-docs`, `rust-src`,
`rustc-codegen-cranelift-preview`, other targets' `rust-std`, ...) are simply absent, so
rustup fails on them with its own "unavailable" error; nothing is faked. The `default`
profile therefore installs without `rust-docs` (rustup skips profile members that
`pkg.rust` does not list, as it does for `rust-mingw` on Linux).

The manifest keeps the real `https://static.rust-lang.org/dist/...` URLs: rustup rewrites
that prefix to `RUSTUP_DIST_SERVER`, so the cached tree does not depend on the port.
Tarballs are built once into `cache_dir` and reused while the source toolchain is unchanged.
"""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import http.server
import io
import json
import logging
import os
import re
import shutil
import tarfile
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_COMPONENTS",
    "DistBuild",
    "build_rust_dist",
    "find_source_toolchain",
    "serve_directory",
    "serve_rust_dist",
]

log = logging.getLogger(__name__)

DEFAULT_DIST_SERVER = "https://static.rust-lang.org"
"""rustup replaces this prefix in manifest URLs with `RUSTUP_DIST_SERVER`."""

DEFAULT_COMPONENTS: tuple[str, ...] = ("rustc", "cargo", "rust-std", "rustfmt-preview", "clippy-preview")
"""Packages served when present in the source toolchain; the first three are required."""

REQUIRED_COMPONENTS: tuple[str, ...] = ("rustc", "cargo", "rust-std")
"""What `rustup toolchain install --profile minimal` needs on a Linux host."""

# Which packages are `components` (installed with the toolchain) rather than `extensions`
# (optional) of `pkg.rust`, as in the real manifests.
_RUST_COMPONENTS = ("rustc", "rust-std", "cargo", "rust-docs")

# Fallbacks for when the source toolchain has no readable `multirust-channel-manifest.toml`;
# copied from a real nightly manifest.
_FALLBACK_PROFILES: dict[str, list[str]] = {
    "minimal": ["rustc", "cargo", "rust-std", "rust-mingw"],
    "default": ["rustc", "cargo", "rust-std", "rust-mingw", "rust-docs", "rustfmt-preview", "clippy-preview"],
    "complete": [
        "rustc", "cargo", "rust-std", "rust-mingw", "rust-docs", "rustfmt-preview", "clippy-preview",
        "rust-analyzer-preview", "rust-src", "llvm-tools-preview", "rust-analysis", "miri-preview",
        "rustc-codegen-cranelift-preview", "rustc-dev",
    ],
}  # fmt: skip
_FALLBACK_RENAMES: dict[str, str] = {
    name: f"{name}-preview"
    for name in ("clippy", "llvm-tools", "miri", "rust-analyzer", "rust-docs-json", "rustc-codegen-cranelift",
                 "rustfmt")
}  # fmt: skip

_CACHE_FORMAT = 2  # bump when the layout or the tarball contents change
_STAMP = ".rustup-dist-stamp.json"


@dataclass(frozen=True)
class DistBuild:
    """What `build_rust_dist` produced: the tree to serve and where its parts are."""

    root: Path
    """Serve this directory: it holds `dist/<date>/...`."""
    manifest: Path
    """`dist/<date>/channel-rust-<channel>.toml`."""
    tarballs: dict[str, Path]
    """Package name (`rustc`, `rust-std`, ...) -> its `.tar.gz`."""
    host: str
    """The target triple of the served packages (the source toolchain's host)."""
    reused: bool
    """True when the cache was already up to date and nothing was rebuilt."""


def _rustup_home() -> Path:
    home = os.environ.get("RUSTUP_HOME")
    return Path(home) if home else Path.home() / ".rustup"


def find_source_toolchain(source_toolchain: str = "nightly") -> Path:
    """The directory of an installed toolchain: an existing path, or a toolchain name
    (`nightly`, `stable`, `nightly-x86_64-unknown-linux-gnu`) under `$RUSTUP_HOME/toolchains`
    (`~/.rustup` when unset). Raises `FileNotFoundError` when there is none."""
    as_path = Path(source_toolchain).expanduser()
    if as_path.is_absolute():
        if (as_path / "lib" / "rustlib").is_dir():
            return as_path
        raise FileNotFoundError(f"not a toolchain directory (no lib/rustlib): {as_path}")
    toolchains = _rustup_home() / "toolchains"
    exact = toolchains / source_toolchain
    if (exact / "lib" / "rustlib").is_dir():
        return exact
    matches = sorted(p for p in toolchains.glob(f"{source_toolchain}-*") if (p / "lib" / "rustlib").is_dir())
    # `nightly` must not pick `nightly-2024-01-01-<host>`: prefer the undated `<name>-<host>`.
    undated = [
        p
        for p in matches
        if (p / "lib" / "rustlib" / f"manifest-rustc-{p.name[len(source_toolchain) + 1 :]}").is_file()
    ]
    if undated:
        return undated[0]
    raise FileNotFoundError(f"no installed toolchain {source_toolchain!r} under {toolchains}")


def _host_of(toolchain: Path) -> str:
    """The host triple, from the toolchain's `lib/rustlib/manifest-rustc-<host>`."""
    found = sorted((toolchain / "lib" / "rustlib").glob("manifest-rustc-*"))
    if not found:
        raise FileNotFoundError(f"{toolchain} has no lib/rustlib/manifest-rustc-<host>: not installed by rustup?")
    return found[0].name.removeprefix("manifest-rustc-")


def _source_manifest_text(toolchain: Path) -> str:
    path = toolchain / "lib" / "rustlib" / "multirust-channel-manifest.toml"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


def _package_versions(manifest_text: str) -> dict[str, str]:
    """`pkg -> version` from the source's channel manifest (`[pkg.X]` then `version = "..."`)."""
    return dict(re.findall(r'^\[pkg\.([A-Za-z0-9_-]+)\]\nversion = "([^"\n]*)"', manifest_text, re.MULTILINE))


def _renames(manifest_text: str) -> dict[str, str]:
    found = dict(re.findall(r'^\[renames\.([A-Za-z0-9_-]+)\]\nto = "([^"\n]*)"', manifest_text, re.MULTILINE))
    return found or dict(_FALLBACK_RENAMES)


def _profiles(manifest_text: str) -> dict[str, list[str]]:
    section = re.search(r"^\[profiles\]\n((?:[a-z]+ = \[.*\]\n?)+)", manifest_text, re.MULTILINE)
    if not section:
        return {name: list(members) for name, members in _FALLBACK_PROFILES.items()}
    return {
        name: re.findall(r'"([^"]+)"', members)
        for name, members in re.findall(r"^([a-z]+) = \[(.*)\]$", section.group(1), re.MULTILINE)
    }


def _component_entries(toolchain: Path, pkg: str, host: str) -> list[tuple[str, str]]:
    """The `(kind, relative path)` lines of `lib/rustlib/manifest-<pkg>-<host>`, where kind is
    `file` or `dir`, exactly as rust-installer's `manifest.in` spells them."""
    listing = toolchain / "lib" / "rustlib" / f"manifest-{pkg}-{host}"
    entries: list[tuple[str, str]] = []
    for line in listing.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        kind, _, rel = line.partition(":")
        if kind not in ("file", "dir") or not rel or rel.startswith("/") or ".." in Path(rel).parts:
            raise ValueError(f"{listing}: unexpected line {line!r}")
        entries.append((kind, rel))
    return entries


def _tarinfo(name: str, *, mode: int, type_: bytes, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = type_
    info.mode = mode
    info.size = size
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


class _TarWriter:
    """A tar stream with normalised owners and mtimes that emits each parent directory once,
    before its first child: rustup warns ("unexpected: missing parent") otherwise."""

    def __init__(self, tar: tarfile.TarFile) -> None:
        self.tar = tar
        self.dirs: set[str] = set()

    def _parents(self, name: str) -> None:
        parts = name.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            self.add_dir("/".join(parts[:depth]))

    def add_dir(self, name: str) -> None:
        if name not in self.dirs:
            self._parents(name)
            self.dirs.add(name)
            self.tar.addfile(_tarinfo(name, mode=0o755, type_=tarfile.DIRTYPE))

    def add_bytes(self, name: str, data: bytes) -> None:
        self._parents(name)
        self.tar.addfile(_tarinfo(name, mode=0o644, type_=tarfile.REGTYPE, size=len(data)), io.BytesIO(data))

    def add_path(self, src: Path, name: str) -> None:
        """Add a file, symlink or (recursively) directory."""
        if src.is_symlink():
            self._parents(name)
            info = _tarinfo(name, mode=0o777, type_=tarfile.SYMTYPE)
            info.linkname = str(src.readlink())
            self.tar.addfile(info)
        elif src.is_dir():
            self.add_dir(name)
            for child in sorted(src.iterdir()):
                self.add_path(child, f"{name}/{child.name}")
        else:
            self._parents(name)
            stat = src.stat()
            mode = 0o755 if stat.st_mode & 0o111 else 0o644
            info = _tarinfo(name, mode=mode, type_=tarfile.REGTYPE, size=stat.st_size)
            info.mtime = int(stat.st_mtime)  # as rust-installer does; directories and metadata get 0
            with src.open("rb") as handle:
                self.tar.addfile(info, handle)


def _write_component_tarball(
    toolchain: Path, pkg: str, host: str, channel: str, version: str, dest: Path, compresslevel: int
) -> None:
    """Write `<pkg>-<channel>-<host>.tar.gz` in rust-installer format 3:

    <pkg>-<channel>-<host>/rust-installer-version   "3"
    <pkg>-<channel>-<host>/components               the component's name
    <pkg>-<channel>-<host>/version                  informational
    <pkg>-<channel>-<host>/<component>/manifest.in  `file:bin/rustc`, `dir:...`
    <pkg>-<channel>-<host>/<component>/bin/rustc    ... the files themselves
    """
    top = f"{pkg}-{channel}-{host}"
    # Real tarballs name target-specific std by its full name and the rest by the short one;
    # rustup accepts either.
    component = f"{pkg}-{host}" if pkg == "rust-std" else pkg
    entries = _component_entries(toolchain, pkg, host)
    partial = dest.with_name(dest.name + ".partial")
    with (
        partial.open("wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=compresslevel, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar,
    ):
        writer = _TarWriter(tar)
        writer.add_bytes(f"{top}/rust-installer-version", b"3\n")
        writer.add_bytes(f"{top}/components", f"{component}\n".encode())
        writer.add_bytes(f"{top}/version", f"{version}\n".encode())
        manifest_in = "".join(f"{kind}:{rel}\n" for kind, rel in entries)
        writer.add_bytes(f"{top}/{component}/manifest.in", manifest_in.encode())
        for _kind, rel in entries:
            src = toolchain / rel
            if not src.exists() and not src.is_symlink():
                raise FileNotFoundError(f"{pkg}: {rel} is listed but missing from {toolchain}")
            writer.add_path(src, f"{top}/{component}/{rel}")
    partial.replace(dest)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string of ASCII text is a valid TOML basic string


def _toml_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(_toml_str(v) for v in values) + "]"


def _channel_manifest(
    *,
    dated: str,
    host: str,
    packages: dict[str, tuple[str, str, str]],
    profiles: dict[str, list[str]],
    renames: dict[str, str],
    rust_version: str,
) -> str:
    """A v2 channel manifest. `packages` maps pkg -> (version, file name, sha256)."""
    lines = ['manifest-version = "2"', f"date = {_toml_str(dated)}", ""]
    for pkg in sorted(packages):
        version, filename, digest = packages[pkg]
        lines += [
            f"[pkg.{pkg}]",
            f"version = {_toml_str(version)}",
            "",
            f"[pkg.{pkg}.target.{host}]",
            "available = true",
            f"url = {_toml_str(f'{DEFAULT_DIST_SERVER}/dist/{dated}/{filename}')}",
            f"hash = {_toml_str(digest)}",
            "components = []",
            "extensions = []",
            "",
        ]
    # `pkg.rust` is the umbrella: it says which packages make up a toolchain for this host
    # (rustup installs those individually; it never downloads a combined `rust` tarball, so
    # none is listed).
    lines += [
        "[pkg.rust]",
        f"version = {_toml_str(rust_version)}",
        "",
        f"[pkg.rust.target.{host}]",
        "available = true",
        "",
    ]
    for pkg in [p for p in _RUST_COMPONENTS if p in packages] + [
        p for p in sorted(packages) if p not in _RUST_COMPONENTS
    ]:
        kind = "components" if pkg in _RUST_COMPONENTS else "extensions"
        lines += [
            f"[[pkg.rust.target.{host}.{kind}]]",
            f"pkg = {_toml_str(pkg)}",
            f"target = {_toml_str(host)}",
            f"is_extension = {'false' if kind == 'components' else 'true'}",
            "",
        ]
    # rustup rejects a manifest whose rename points at a package it does not list.
    for old in sorted(old for old, new in renames.items() if new in packages):
        lines += [f"[renames.{old}]", f"to = {_toml_str(renames[old])}", ""]
    lines.append("[profiles]")
    lines += [f"{name} = {_toml_list(members)}" for name, members in profiles.items()]
    return "\n".join(lines) + "\n"


def build_rust_dist(
    cache_dir: Path,
    dated: str = "2024-05-21",
    source_toolchain: str = "nightly",
    *,
    channel: str = "nightly",
    components: Iterable[str] = DEFAULT_COMPONENTS,
    compresslevel: int = 1,
) -> DistBuild:
    """Build (or reuse) the distribution tree `cache_dir/dist/<dated>/` from an installed
    toolchain. The tarballs are rebuilt only when the stamp (source toolchain, its rustc
    version and component listings, the options) differs from the cached one.

    `components` lists the packages to serve; those the source does not have are skipped,
    except `rustc`, `cargo` and `rust-std`, which are required."""
    toolchain = find_source_toolchain(source_toolchain)
    host = _host_of(toolchain)
    wanted = list(dict.fromkeys(components))
    rustlib = toolchain / "lib" / "rustlib"
    for pkg in REQUIRED_COMPONENTS:
        if not (rustlib / f"manifest-{pkg}-{host}").is_file():
            raise FileNotFoundError(f"{toolchain} lacks component {pkg!r} (no lib/rustlib/manifest-{pkg}-{host})")
    present = [pkg for pkg in wanted if (rustlib / f"manifest-{pkg}-{host}").is_file()]

    source_text = _source_manifest_text(toolchain)
    listings = hashlib.sha256()
    for pkg in present:
        listings.update((rustlib / f"manifest-{pkg}-{host}").read_bytes())
    rustc = toolchain / "bin" / "rustc"
    stamp = {
        "format": _CACHE_FORMAT,
        "source": str(toolchain),
        "source_rustc": [rustc.stat().st_size, rustc.stat().st_mtime_ns],
        "source_manifest_date": date.group(1) if (date := re.search(r'^date = "(.*)"$', source_text, re.M)) else "",
        "listings": listings.hexdigest(),
        "dated": dated,
        "channel": channel,
        "host": host,
        "components": present,
        "compresslevel": compresslevel,
    }

    root = Path(cache_dir)
    root.mkdir(parents=True, exist_ok=True)
    # One builder at a time (pytest-xdist workers, parallel sessions sharing the cache).
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_locked(toolchain, root, dated, channel, host, present, compresslevel, stamp)


def _build_locked(
    toolchain: Path,
    root: Path,
    dated: str,
    channel: str,
    host: str,
    present: list[str],
    compresslevel: int,
    stamp: dict[str, Any],
) -> DistBuild:
    """The body of `build_rust_dist`, under its lock: reuse the cache or rebuild it."""
    source_text = _source_manifest_text(toolchain)
    versions = _package_versions(source_text)
    out = root / "dist" / dated
    manifest = out / f"channel-rust-{channel}.toml"
    tarballs = {pkg: out / f"{pkg}-{channel}-{host}.tar.gz" for pkg in present}
    stamp_path = out / _STAMP
    try:
        cached = json.loads(stamp_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cached = None
    if cached == stamp and manifest.is_file() and all(p.is_file() for p in tarballs.values()):
        return DistBuild(root=root, manifest=manifest, tarballs=tarballs, host=host, reused=True)

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)

    def build_one(pkg: str) -> None:
        version = versions.get(pkg, "")
        _write_component_tarball(toolchain, pkg, host, channel, version, tarballs[pkg], compresslevel)

    # rustc (about 400 MB of the 650) first, the rest fill the other worker(s); zlib drops the GIL.
    order = sorted(present, key=lambda p: p != "rustc")
    with ThreadPoolExecutor(max_workers=max(1, min(len(order), os.cpu_count() or 1))) as pool:
        for future in [pool.submit(build_one, pkg) for pkg in order]:
            future.result()

    packages = {pkg: (versions.get(pkg, ""), path.name, _sha256(path)) for pkg, path in tarballs.items()}
    text = _channel_manifest(
        dated=dated,
        host=host,
        packages=packages,
        profiles=_profiles(source_text),
        renames=_renames(source_text),
        rust_version=versions.get("rust", versions.get("rustc", "")),
    )
    manifest.write_text(text, encoding="utf-8")
    digest = hashlib.sha256(text.encode()).hexdigest()
    manifest.with_name(manifest.name + ".sha256").write_text(f"{digest}  {manifest.name}\n", encoding="utf-8")
    for pkg, path in tarballs.items():
        path.with_name(path.name + ".sha256").write_text(f"{packages[pkg][2]}  {path.name}\n", encoding="utf-8")
    stamp_path.write_text(json.dumps(stamp, indent=1), encoding="utf-8")
    return DistBuild(root=root, manifest=manifest, tarballs=tarballs, host=host, reused=False)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files; logs requests to `logging` (debug) instead of stderr."""

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("rustup dist server: " + format, *args)


@contextmanager
def serve_directory(root: Path) -> Iterator[str]:
    """Serve `root` over HTTP on 127.0.0.1 at a free port, in a background thread; yields
    the base URL (`http://127.0.0.1:<port>`, no trailing slash)."""

    def handler(*args: Any, **kwargs: Any) -> _QuietHandler:
        return _QuietHandler(*args, directory=str(root), **kwargs)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="rustup-dist-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextmanager
def serve_rust_dist(cache_dir: Path, dated: str = "2024-05-21", source_toolchain: str = "nightly") -> Iterator[str]:
    """Build (or reuse) the tree in `cache_dir` and serve it; yields the base URL to set as
    `RUSTUP_DIST_SERVER` (and `<url>/rustup` as `RUSTUP_UPDATE_ROOT`, which serves nothing:
    pass `--no-self-update`). rustup can then install `nightly-<dated>`."""
    build = build_rust_dist(cache_dir, dated, source_toolchain)
    with serve_directory(build.root) as url:
        yield url
