"""What a cell needs installed, decided from its final values (after the rules ran).

Pure: the toolkit catalogue (`data/toolkits.yaml`) says where each toolchain comes from;
`edges/setup.py` does the downloading. A toolchain that cannot be provisioned is an
answer here too, with the versions that can, so that the cell fails before its build.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ci_matrix.core.values import parse_version


@dataclass(frozen=True)
class DebianPackage:
    """A .deb from Debian's pool, checked against its sha256 before it is unpacked."""

    url: str
    sha256: str
    cpu: str


@dataclass(frozen=True)
class CudaSource:
    """Where one CUDA release's compiler comes from."""

    version: str  # MAJOR.MINOR
    pypi: tuple[str, ...]  # exact requirements (`name==version`)
    root: str = ""  # the toolkit root inside the pip target folder (13.x wheels)
    debian: DebianPackage | None = None  # the compiler, when PyPI has none
    host_gcc: int = 0  # newest GCC major the compiler accepts (0: no limit known)


@dataclass(frozen=True)
class Toolkits:
    """The toolkit catalogue."""

    cuda: Mapping[str, CudaSource]
    iree_default: str
    iree_packages: tuple[str, ...]
    backend_components: Mapping[str, tuple[str, ...]]


@dataclass(frozen=True)
class RustNeeds:
    toolchain: str
    components: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()


@dataclass(frozen=True)
class Needs:
    """What `ci-matrix setup` installs for one cell."""

    rust: RustNeeds | None = None
    cuda: CudaSource | None = None
    iree: str = ""  # iree-base-compiler release
    iree_packages: tuple[str, ...] = ()
    os: str = ""  # the runner's, as the platform says
    cpu: str = ""

    @property
    def empty(self) -> bool:
        return self.rust is None and self.cuda is None and not self.iree


class Unavailable(Exception):
    """A toolchain the cell asks for cannot be provisioned."""


def toolkits_from(data: Mapping[str, Any]) -> Toolkits:
    """The Toolkits of a schema-valid `toolkits.yaml`."""
    cuda = {}
    for version, spec in data["cuda"].items():
        deb = spec.get("debian")
        cuda[str(version)] = CudaSource(
            version=str(version),
            pypi=tuple(str(r) for r in spec.get("pypi", ())),
            root=str(spec.get("root", "")),
            debian=DebianPackage(str(deb["url"]), str(deb["sha256"]), str(deb["cpu"])) if deb else None,
            host_gcc=int(spec.get("host-gcc", 0)),
        )
    iree = data["iree"]
    return Toolkits(
        cuda=cuda,
        iree_default=str(iree["default-version"]),
        iree_packages=tuple(str(p) for p in iree["packages"]),
        backend_components={str(k): tuple(str(c) for c in v) for k, v in data["rust"]["backend-components"].items()},
    )


def needs_of(values: Mapping[str, str], toolkits: Toolkits, os: str, cpu: str) -> Needs:
    """What a cell with these final values needs on a runner with this os and cpu.

    Raises Unavailable when a toolchain cannot be provisioned there.
    """
    rust = None
    if values.get("rust-toolchain"):
        backend = values.get("rust-backend", "")
        target = values.get("rust-target", "")
        rust = RustNeeds(values["rust-toolchain"], toolkits.backend_components.get(backend, ()),
                         (target,) if target else ())
    cuda = cuda_source(values["cuda-version"], toolkits, os, cpu) if values.get("cuda-version") else None
    iree = values.get("iree-version", "") or (toolkits.iree_default if values.get("iree-target") else "")
    return Needs(rust, cuda, iree, toolkits.iree_packages if iree else (), os, cpu)


def cuda_source(version: str, toolkits: Toolkits, os: str, cpu: str) -> CudaSource:
    """The source of a CUDA release (`12.4` or `12.4.1`) for this os and cpu."""
    release = ".".join(str(p) for p in parse_version(version)[:2])
    known = sorted(toolkits.cuda, key=parse_version)
    source = toolkits.cuda.get(release)
    if source is None:
        raise Unavailable(f"CUDA {version} cannot be set up: no package registry carries its nvcc "
                          f"(ci-matrix can set up CUDA {', '.join(known)}). Move the cell to one of those "
                          "(a workaround's `set: {cuda-version: ...}`), or install it on the runner and run "
                          "with setup turned off.")
    if os != "linux":
        raise Unavailable(f"CUDA {release} can only be set up on Linux runners, not on {os}")
    if source.debian is not None and source.debian.cpu != cpu:
        others = [v for v in known if toolkits.cuda[v].debian is None]
        raise Unavailable(f"CUDA {release}'s compiler comes from a {source.debian.cpu} package, and this runner "
                          f"is {cpu}; on {cpu} ci-matrix can set up CUDA {', '.join(others)}")
    return source


def describe(needs: Needs) -> list[str]:
    """One line per toolchain, for `ci-matrix setup --dry-run` and the logs."""
    lines = []
    if needs.rust:
        extra = [f"component {c}" for c in needs.rust.components] + [f"target {t}" for t in needs.rust.targets]
        lines.append(f"Rust {needs.rust.toolchain} (rustup)" + (f" with {', '.join(extra)}" if extra else ""))
    if needs.cuda:
        where = "Debian's nvidia-cuda-toolkit and PyPI headers" if needs.cuda.debian else "PyPI"
        lines.append(f"CUDA {needs.cuda.version} nvcc from {where}")
    if needs.iree:
        lines.append(f"IREE {needs.iree} ({', '.join(needs.iree_packages)} from PyPI, own virtual environment)")
    return lines


def cache_key(needs: Needs) -> str:
    """A cache key that changes whenever what would be downloaded changes; '' when nothing
    is cached (Rust toolchains live in rustup's own folders, not in ci-matrix's cache)."""
    if needs.cuda is None and not needs.iree:
        return ""
    cached = {"cuda": asdict(needs.cuda) if needs.cuda else None,
              "iree": [needs.iree, *needs.iree_packages] if needs.iree else None}
    digest = hashlib.sha256(json.dumps(cached, sort_keys=True).encode()).hexdigest()[:16]
    parts = [f"cuda-{needs.cuda.version}" if needs.cuda else "", f"iree-{needs.iree}" if needs.iree else ""]
    return "-".join(["ci-matrix-tools-v1", needs.os, needs.cpu, *[p for p in parts if p], digest])
