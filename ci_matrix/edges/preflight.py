"""Preflight: before the build, check that the runner has what the cell asks for.

It asks the tools themselves (`rustc`, `nvcc`, `iree-compile`, `nvidia-smi`) and returns
the versions seen, for the diagnosis, and warnings, shown before the build starts: a wrong
toolchain is a common false lead, and code built for an arch that the runner's GPU cannot
run fails later with "no kernel image is available for execution on the device".
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ci_matrix.core.values import parse_arch, runs_on

_PROBE_TIMEOUT = 60.0
_NVCC_RELEASE = re.compile(r"release (\d+\.\d+)(?:, V(\d+\.\d+\.\d+))?")
_IREE_RELEASE = re.compile(r"compiler version (\d+\.\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class Preflight:
    """What the runner has: tool versions seen, and warnings."""

    tools: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    mismatches: tuple[str, ...] = ()  # the warnings that say a toolchain is not what the cell asked for


def probe(argv: Sequence[str], env: Mapping[str, str], timeout: float = _PROBE_TIMEOUT) -> tuple[int, str]:
    """Run a query or a set-up step to its end; (exit code, its output, stderr merged in).
    (127, '') when the program is missing, (124, '') when it ran past `timeout`."""
    try:
        done = subprocess.run(list(argv), env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, timeout=timeout, check=False)
    except (FileNotFoundError, PermissionError):
        return 127, ""
    except subprocess.TimeoutExpired:
        return 124, ""
    return done.returncode, done.stdout.decode("utf-8", errors="replace").strip()


def preflight(values: Mapping[str, str], gpu: str, env: Mapping[str, str]) -> Preflight:
    """Check the tools for a cell with these final values on a platform with this GPU kind."""
    tools: dict[str, str] = {}
    warnings: list[str] = []
    if values.get("rust-toolchain"):
        _check_rust(values["rust-toolchain"], env, tools, warnings)
    if values.get("cuda-version"):
        _check_nvcc(values["cuda-version"], env, tools, warnings)
    if values.get("iree-target"):
        _check_iree(values.get("iree-version", ""), env, tools, warnings)
    mismatches = tuple(warnings)
    if gpu == "nvidia" or values.get("needs-gpu") == "true":
        _check_gpu(values.get("cuda-arch", ""), env, tools, warnings)
    return Preflight(tools, tuple(warnings), mismatches)


def _check_rust(toolchain: str, env: Mapping[str, str], tools: dict[str, str], warnings: list[str]) -> None:
    code, text = probe(["rustc", "--version"], {**env, "RUSTUP_TOOLCHAIN": toolchain})
    if code != 0:
        warnings.append(f"Rust toolchain {toolchain} is not usable here ({_first_line(text) or 'rustc not found'}); "
                        f"install it with: rustup toolchain install {toolchain}")
        return
    tools["rustc"] = text.splitlines()[0]
    if toolchain[:1].isdigit() and f"rustc {toolchain}" not in text and f"rustc {toolchain}." not in text:
        warnings.append(f"the cell asks for Rust {toolchain} but rustc reports {tools['rustc']}")


def _check_nvcc(version: str, env: Mapping[str, str], tools: dict[str, str], warnings: list[str]) -> None:
    code, text = probe(["nvcc", "--version"], env)
    found = _NVCC_RELEASE.search(text) if code == 0 else None
    if found is None:
        warnings.append(f"the cell asks for CUDA {version} but no nvcc is on PATH")
        return
    tools["nvcc"] = found[2] or found[1]
    where = shutil.which("nvcc", path=env.get("PATH"))
    if where:
        tools["nvcc-path"] = where
    if found[1] != ".".join(version.split(".")[:2]):
        warnings.append(f"the cell asks for CUDA {version} but nvcc on PATH is CUDA {found[1]}: "
                        "set up that toolkit first, or the build tests another toolkit than the cell says")


def _check_iree(version: str, env: Mapping[str, str], tools: dict[str, str], warnings: list[str]) -> None:
    code, text = probe(["iree-compile", "--version"], env)
    if code != 0:
        warnings.append("the cell compiles with IREE but iree-compile is not on PATH (pip install iree-base-compiler)")
        return
    found = _IREE_RELEASE.search(text)
    tools["iree-compile"] = found[1] if found else _first_line(text)
    if version and (found is None or found[1] != version):
        warnings.append(f"the cell asks for IREE {version} but iree-compile on PATH is "
                        f"{found[1] if found else 'of an unknown version'}")


def _check_gpu(arch_text: str, env: Mapping[str, str], tools: dict[str, str], warnings: list[str]) -> None:
    code, text = probe(["nvidia-smi", "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"], env)
    if code != 0 or not text:
        warnings.append("this cell runs on a GPU runner but nvidia-smi found no GPU: kernels cannot run here")
        return
    gpus = [line.split(", ") for line in text.splitlines() if line.count(", ") >= 2]
    tools["gpu"] = "; ".join(f"{name} (compute capability {cc}, driver {driver})" for name, cc, driver in gpus)
    if not arch_text:
        return
    arch = parse_arch(arch_text)
    for name, cc, _driver in gpus:
        capability = round(float(cc) * 10)
        if not runs_on(arch, capability):
            warnings.append(
                f"this cell builds for {arch} but the runner's GPU {name} has compute capability {cc}: "
                "its kernels will fail with 'no kernel image is available for execution on the device'. "
                f"Build for sm_{capability} too, or embed PTX ({arch}+ptx)."
            )


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""
