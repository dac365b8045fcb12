"""Self-check of `tests/rustup_dist.py`: the real `rustup` installs `nightly-2024-05-21` from
the loopback stand-in for static.rust-lang.org, and the result compiles a crate.

Every rustup call runs with a fresh `RUSTUP_HOME` and `CARGO_HOME`, so the machine's own
`~/.rustup` is only read (as the source of the repackaged toolchain), never changed. The
tarballs are cached in pytest's cache (`.pytest_cache/d/rustup-dist`, about 240 MB, built in
a few seconds) so that later runs only pay for the install (a few seconds)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.rustup_dist import build_rust_dist, serve_directory

TOOLCHAIN = "nightly-2024-05-21"

pytestmark = pytest.mark.slow


def _rustup() -> Path:
    found = shutil.which("rustup") or str(Path.home() / ".cargo" / "bin" / "rustup")
    if not Path(found).is_file():
        pytest.skip("rustup is not installed (looked on PATH and in ~/.cargo/bin)")
    return Path(found)


def _cache_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = getattr(request.config, "cache", None)  # absent under `-p no:cacheprovider`
    return cache.mkdir("rustup-dist") if cache is not None else tmp_path_factory.mktemp("rustup-dist")


def test_real_rustup_installs_and_builds_from_the_local_dist_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    rustup = _rustup()
    try:
        build = build_rust_dist(_cache_dir(request, tmp_path_factory), dated="2024-05-21", source_toolchain="nightly")
    except FileNotFoundError as missing:
        pytest.skip(f"no installed nightly toolchain to repackage: {missing}")

    rustup_home, cargo_home = tmp_path / "rustup-home", tmp_path / "cargo-home"
    (cargo_home / "bin").mkdir(parents=True)
    for proxy in ("cargo", "rustc"):  # rustup acts as the proxy named by argv[0]
        (cargo_home / "bin" / proxy).symlink_to(rustup)
    crate = tmp_path / "hello"
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text('[package]\nname = "hello"\nversion = "0.1.0"\nedition = "2021"\n')
    (crate / "src" / "main.rs").write_text('fn main() {\n    println!("hello");\n}\n')

    env = {k: v for k, v in os.environ.items() if k not in {"RUSTUP_TOOLCHAIN", "RUSTC", "RUSTDOC", "RUSTC_WRAPPER"}}

    def run(
        *args: str | Path, extra: dict[str, str] | None = None, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(a) for a in args], env={**env, **(extra or {})}, cwd=cwd, capture_output=True, text=True, timeout=120
        )

    with serve_directory(build.root) as url:
        env.update(
            RUSTUP_HOME=str(rustup_home),
            CARGO_HOME=str(cargo_home),
            RUSTUP_DIST_SERVER=url,
            RUSTUP_UPDATE_ROOT=f"{url}/rustup",
            CARGO_TARGET_DIR=str(tmp_path / "target"),
            RUST_BACKTRACE="0",
            PATH=f"{cargo_home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        )
        install = run(rustup, "toolchain", "install", TOOLCHAIN, "--profile", "minimal", "--no-self-update")
        assert install.returncode == 0, install.stderr
        assert f"{TOOLCHAIN}-{build.host} installed" in install.stdout

        # A component the manifest does not list fails with rustup's own error.
        cranelift = run(
            rustup, "toolchain", "install", TOOLCHAIN, "--profile", "minimal",
            "-c", "rustc-codegen-cranelift-preview", "--no-self-update",
        )  # fmt: skip
        assert cranelift.returncode != 0
        assert (
            f"component 'rustc-codegen-cranelift-preview' for target '{build.host}' "
            f"is unavailable for download for channel '{TOOLCHAIN}'"
        ) in cranelift.stderr

    # The server is down now: everything below runs from the installed toolchain.
    rustc = run(rustup, "run", TOOLCHAIN, "rustc", "--version")
    assert rustc.returncode == 0, rustc.stderr
    assert rustc.stdout.startswith("rustc ") and "-nightly" in rustc.stdout  # the source's date, not 2024-05-21
    components = run(rustup, "component", "list", "--installed", "--toolchain", TOOLCHAIN)
    assert components.stdout.split() == sorted(f"{pkg}-{build.host}" for pkg in ("cargo", "rust-std", "rustc"))

    cargo = run(cargo_home / "bin" / "cargo", "build", extra={"RUSTUP_TOOLCHAIN": TOOLCHAIN}, cwd=crate)
    assert cargo.returncode == 0, cargo.stderr
    hello = run(tmp_path / "target" / "debug" / "hello")
    assert hello.stdout == "hello\n"
    assert (rustup_home / "toolchains" / f"{TOOLCHAIN}-{build.host}" / "bin" / "rustc").is_file()
