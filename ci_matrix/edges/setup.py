"""`ci-matrix setup`: install the toolchains a cell's final values ask for.

- Rust through rustup: the exact toolchain (dated nightlies included), the backend's
  components and the target; the build then runs with `RUSTUP_TOOLCHAIN` set.
- CUDA: a toolkit of the cell's release in a folder of its own, from the first of its
  sources (as the core ordered them) that can be reached: PyPI wheels (13.x), NVIDIA's
  redistributables (`edges/redist.py`), or Debian's compiler package checked against its
  sha256 plus PyPI headers; first on `PATH`, with `CUDA_HOME`/`CUDA_PATH`/`CUDACXX`.
- IREE: iree-base-compiler and -runtime of the cell's release in a virtual environment.

Everything lands under one tools folder (`CI_MATRIX_TOOLS`, else the runner's tool cache,
else `~/.cache/ci-matrix/tools`), one finished folder per toolchain with a marker file
written last: a second setup of the same cell installs nothing, and the action caches
that folder between runs. A toolchain that cannot be installed raises SetupError: the
cell fails before its build, never with whatever the runner happens to have.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: one job per machine
    fcntl = None  # type: ignore[assignment]

from ci_matrix.core.provision import CudaNeeds, CudaSource, Needs, RustNeeds, describe_source, recipe
from ci_matrix.edges import debian, redist
from ci_matrix.edges.preflight import probe

Say = Callable[[str], None]
_MARKER = ".ci-matrix-setup.json"
_TIMEOUT = 1800.0  # one download or install step
_GCC_MAJOR = re.compile(r"^(\d+)\.")


class SetupError(Exception):
    """A toolchain could not be installed; the message says which and why."""


@dataclass(frozen=True)
class Provisioned:
    """What the build's environment needs to use what setup installed."""

    path: tuple[str, ...] = ()  # folders to put first on PATH, in this order
    env: Mapping[str, str] = field(default_factory=dict)
    done: tuple[str, ...] = ()  # what happened, one line per toolchain
    warnings: tuple[str, ...] = ()

    def apply(self, env: Mapping[str, str]) -> dict[str, str]:
        """`env` with these folders first on PATH and these variables set."""
        if not self.path:
            return {**env, **self.env}
        return {**env, **self.env, "PATH": os.pathsep.join([*self.path, env.get("PATH", os.defpath)])}


def tools_root(env: Mapping[str, str]) -> Path:
    """Where toolchains are installed (and what the action caches)."""
    if env.get("CI_MATRIX_TOOLS"):
        return Path(env["CI_MATRIX_TOOLS"])
    if env.get("RUNNER_TOOL_CACHE"):
        return Path(env["RUNNER_TOOL_CACHE"]) / "ci-matrix"
    cache = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return cache / "ci-matrix" / "tools"


def cached_folders(needs: Needs, root: Path) -> list[Path]:
    """The folders that setup fills for `needs` (what the action caches; rustup keeps its own)."""
    return ([_folder(root, "cuda", needs.cuda.folder)] if needs.cuda else []) + (
        [_folder(root, "iree", needs.iree)] if needs.iree else [])


def _folder(root: Path, kind: str, version: str) -> Path:
    return root / kind / version


def setup(needs: Needs, env: Mapping[str, str], root: Path, say: Say) -> Provisioned:
    """Install what `needs` asks for; raises SetupError with the first toolchain that fails."""
    steps: list[Provisioned] = []
    if needs.rust is not None:
        steps.append(_rust(needs.rust, env, say))
    if needs.cuda is not None:
        steps.append(_cuda(needs.cuda, root, env, say))
    if needs.iree:
        steps.append(_iree(needs.iree, needs.iree_packages, root, env, say))
    return Provisioned(
        path=tuple(p for s in steps for p in s.path),
        env={k: v for s in steps for k, v in s.env.items()},
        done=tuple(d for s in steps for d in s.done),
        warnings=tuple(w for s in steps for w in s.warnings),
    )


# --- processes ---------------------------------------------------------------------------


def _run(argv: Sequence[str], env: Mapping[str, str], say: Say | None = None) -> tuple[int, str]:
    """Run a setup command; its output goes to `say` line by line (when given) and is returned."""
    if say is not None:
        say("$ " + " ".join(argv))
    code, text = probe(argv, env, timeout=_TIMEOUT)
    if not text and code in (124, 127):
        text = f"{argv[0]}: not found" if code == 127 else f"{argv[0]}: no result after {_TIMEOUT:.0f} s"
    if say is not None:
        for line in text.splitlines():
            say("  " + line)
    return code, text


def _tail(text: str, lines: int = 6) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return "\n".join("    " + line for line in kept)


# --- Rust --------------------------------------------------------------------------------


def _rust(needs: RustNeeds, env: Mapping[str, str], say: Say) -> Provisioned:
    rustup = shutil.which("rustup", path=env.get("PATH"))
    if rustup is None:
        raise SetupError(f"Rust {needs.toolchain}: rustup is not on PATH; install rustup (https://rustup.rs) first")
    quiet = {**env, "RUSTUP_AUTO_INSTALL": "0"}
    tc = needs.toolchain
    code, version = _run([rustup, "run", tc, "rustc", "--version"], quiet)
    done = []
    if code != 0:
        argv = [rustup, "toolchain", "install", tc, "--profile", "minimal", "--no-self-update"]
        for component in needs.components:
            argv += ["--component", component]
        for target in needs.targets:
            argv += ["--target", target]
        code, text = _run(argv, env, say)
        if code != 0:
            raise SetupError(f"rustup could not install Rust {tc} (exit {code}):\n{_tail(text)}")
        done.append(f"Rust {tc}: installed with rustup")
    else:
        done.append(f"Rust {tc}: already installed ({version.strip()})")
        _rust_add(rustup, tc, "component", needs.components, quiet, env, say, done)
        _rust_add(rustup, tc, "target", needs.targets, quiet, env, say, done)
    return Provisioned(env={"RUSTUP_TOOLCHAIN": tc}, done=tuple(done))


def _rust_add(rustup: str, tc: str, kind: str, wanted: Sequence[str], quiet: Mapping[str, str],
              env: Mapping[str, str], say: Say, done: list[str]) -> None:
    if not wanted:
        return
    code, text = _run([rustup, kind, "list", "--installed", "--toolchain", tc], quiet)
    installed = text.split() if code == 0 else []
    missing = [w for w in wanted if not any(_same_component(w, i) for i in installed)]
    if not missing:
        return
    code, text = _run([rustup, kind, "add", "--toolchain", tc, *missing], env, say)
    if code != 0:
        raise SetupError(f"rustup could not add {kind} {', '.join(missing)} to Rust {tc} (exit {code}):\n{_tail(text)}")
    done.append(f"Rust {tc}: added {kind} {', '.join(missing)}")


def _same_component(wanted: str, installed: str) -> bool:
    """rustup lists installed components with their target (and without `-preview`)."""
    names = {wanted, wanted.removesuffix("-preview")}
    return installed in names or any(installed.startswith(n + "-") for n in names)


# --- CUDA --------------------------------------------------------------------------------


def _cuda(needs: CudaNeeds, root: Path, env: Mapping[str, str], say: Say) -> Provisioned:
    """The first source that can be reached, in the order the core chose; a folder finished
    from any of them is used as it is."""
    folder = _folder(root, "cuda", needs.folder)
    recipes = [json.loads(json.dumps(recipe(s))) for s in needs.sources]  # as the marker file has them
    finished = _finished_recipe(folder)
    chosen = needs.sources[recipes.index(finished)] if finished in recipes else None
    notes: list[str] = []
    built = False
    for source in needs.sources if chosen is None else ():
        try:
            build = functools.partial(_build_cuda, source, folder=folder, env=env, say=say)
            built = _ensure(folder, recipe(source), build)
        except redist.RedistUnreachable as exc:
            notes.append(f"CUDA {needs.version}: {exc}; trying the next source")
            say(f"ci-matrix setup: {notes[-1]}")
            continue
        chosen = source
        break
    if chosen is None:
        raise SetupError(f"CUDA {needs.version}: no source could be reached:\n" + "\n".join("    " + n for n in notes))
    return _cuda_env(needs, chosen, folder, built, notes, env, say)


def _build_cuda(source: CudaSource, work: Path, *, folder: Path, env: Mapping[str, str], say: Say) -> None:
    say(f"ci-matrix setup: CUDA {source.version} from {describe_source(source)} into {folder}")
    if source.redist is not None:
        try:
            redist.install(source.redist, work / "toolkit", say)
        except redist.RedistUnreachable:
            raise
        except redist.RedistError as exc:
            raise SetupError(f"CUDA {source.version} from NVIDIA's redistributables: {exc}") from None
        if not source.redist.platform.startswith("windows"):  # nvcc.profile's targets/<arch>-linux
            _link_targets(work / "toolkit")
        return
    _pip_target(source.pypi, work / "pypi", env, say, f"CUDA {source.version}")
    if source.debian is not None:
        try:
            debian.assemble(source.debian, work, say)
        except debian.DebianError as exc:
            raise SetupError(f"CUDA {source.version} from Debian's package: {exc}") from None
        shutil.rmtree(work / "pypi")  # its headers and libraries are in the toolkit now
    else:
        _link_targets(work / "pypi" / source.root)


def _cuda_env(needs: CudaNeeds, source: CudaSource, folder: Path, built: bool, notes: Sequence[str],
              env: Mapping[str, str], say: Say) -> Provisioned:
    home = folder / "pypi" / source.root if source.kind == "pypi" else folder / "toolkit"
    done = f"CUDA {needs.version}: {'set up' if built else 'already set up'} in {folder} ({source.kind})"
    nvcc = home / "bin" / ("nvcc.exe" if needs.windows else "nvcc")
    host = Provisioned() if needs.windows else _host_compiler(needs, env, say)
    cuda_env = {"CUDA_HOME": str(home), "CUDA_PATH": str(home), "CUDACXX": str(nvcc), **host.env}
    return Provisioned(path=(str(home / "bin"),), env=cuda_env, done=(*notes, done, *host.done), warnings=host.warnings)


def _link_targets(home: Path) -> None:
    """The wheels' nvcc.profile looks for libraries under targets/<arch>-linux, as a
    toolkit installed by NVIDIA's packages has them."""
    arch = {"aarch64": "sbsa"}.get(os.uname().machine, os.uname().machine)
    target = home / "targets" / f"{arch}-linux"
    target.mkdir(parents=True, exist_ok=True)
    for name in ("include", "lib"):
        if not (target / name).exists():
            (target / name).symlink_to(Path("..") / ".." / name)
    if not (home / "lib64").exists():
        (home / "lib64").symlink_to("lib")


def _host_compiler(source: CudaNeeds, env: Mapping[str, str], say: Say) -> Provisioned:
    """nvcc refuses a host g++ newer than it knows ('unsupported GNU version'): when the
    runner's g++ is too new, use an older g++-N that is installed; on a GitHub runner, install
    g++-N with apt (GitHub's Ubuntu images have passwordless sudo); else say what to do."""
    if not source.host_gcc:
        return Provisioned()
    found = _GCC_MAJOR.match(_run(["g++", "-dumpfullversion"], env)[1].strip() + ".")
    if found is None or int(found[1]) <= source.host_gcc:
        return Provisioned()
    compiler = _older_gxx(source.host_gcc, env)
    if compiler is None and env.get("GITHUB_ACTIONS") == "true" and shutil.which("apt-get", path=env.get("PATH")):
        sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
        _run([*sudo, "apt-get", "install", "-y", "-q", "--no-install-recommends", f"g++-{source.host_gcc}"],
             {**env, "DEBIAN_FRONTEND": "noninteractive"}, say)
        compiler = _older_gxx(source.host_gcc, env)
    if compiler is not None:
        flags = " ".join(f for f in (f"-ccbin={compiler}", env.get("NVCC_PREPEND_FLAGS", "")) if f)
        return Provisioned(env={"NVCC_PREPEND_FLAGS": flags},
                           done=(f"CUDA {source.version}: host compiler {compiler} (the runner's g++ "
                                 f"{found[1]} is newer than this nvcc accepts)",))
    return Provisioned(warnings=(
        f"CUDA {source.version}'s nvcc accepts GCC {source.host_gcc} at most and the runner's g++ is GCC "
        f"{found[1]}: builds stop with 'unsupported GNU version'. Install g++-{source.host_gcc} "
        f"(sudo apt-get install g++-{source.host_gcc}; setup then uses it) or pass -allow-unsupported-compiler",))


def _older_gxx(newest: int, env: Mapping[str, str]) -> str | None:
    for major in range(newest, newest - 4, -1):
        compiler = shutil.which(f"g++-{major}", path=env.get("PATH"))
        if compiler is not None:
            return compiler
    return None


# --- IREE --------------------------------------------------------------------------------


def _iree(version: str, packages: Sequence[str], root: Path, env: Mapping[str, str], say: Say) -> Provisioned:
    folder = _folder(root, "iree", version)
    scripts = folder / "venv" / ("Scripts" if os.name == "nt" else "bin")

    def build(work: Path) -> None:
        say(f"ci-matrix setup: IREE {version} into {folder}")
        code, text = _run([sys.executable, "-m", "venv", str(work / "venv")], env, say)
        if code != 0:
            raise SetupError(f"cannot create a virtual environment for IREE {version}:\n{_tail(text)}")
        _pip([str(scripts / "python"), "-m", "pip", "install"], [f"{p}=={version}" for p in packages], env, say,
             f"IREE {version}")

    built = _ensure(folder, {"version": version, "packages": list(packages)}, build)
    done = f"IREE {version}: {'set up' if built else 'already set up'} in {folder}"
    return Provisioned(path=(str(scripts),), done=(done,))


def _pip_target(requirements: Sequence[str], target: Path, env: Mapping[str, str], say: Say, what: str) -> None:
    _pip([*_pip_install(), "--no-deps", "--target", str(target)], requirements, env, say, what)


def _pip_install() -> list[str]:
    """This interpreter's `pip install`; uv's, for this interpreter, in an environment that uv
    made without pip (`uv venv`, `uv tool install`)."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip", "install"]
    uv = shutil.which("uv")
    if uv is None:
        raise SetupError(f"{sys.executable} has no pip and uv is not on PATH: install pip into this environment "
                         "(`python -m ensurepip`, or `uv venv --seed`)")
    return [uv, "pip", "install", "--python", sys.executable]


def _pip(argv: Sequence[str], requirements: Sequence[str], env: Mapping[str, str], say: Say, what: str) -> None:
    quiet = {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    code, text = _run([*argv, "--quiet", "--only-binary", ":all:", *requirements], quiet, say)
    if code != 0:
        raise SetupError(f"pip could not install {what} ({' '.join(requirements)}), exit {code}:\n{_tail(text)}")


# --- finished folders ----------------------------------------------------------------------


def _ensure(folder: Path, recipe: Mapping[str, object], build: Callable[[Path], None]) -> bool:
    """Build `folder` unless a finished one with the same recipe is there; True when built.

    The folder is built in place (virtual environments cannot move), under a lock so that
    parallel jobs on one machine do not build it twice; the marker file is written last,
    so an interrupted build is started again.
    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _locked(folder.with_name(folder.name + ".lock")):
        if _finished(folder, recipe):
            return False
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        try:
            build(folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        (folder / _MARKER).write_text(json.dumps(recipe, indent=2) + "\n", encoding="utf-8")
        return True


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _finished(folder: Path, recipe: Mapping[str, object]) -> bool:
    return bool(_finished_recipe(folder) == json.loads(json.dumps(recipe)))


def _finished_recipe(folder: Path) -> object:
    """What a finished folder was built from (its marker), else None."""
    try:
        return json.loads((folder / _MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
