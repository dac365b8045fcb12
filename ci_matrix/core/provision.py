"""What a cell needs installed, decided from its final values (after the rules ran).

Pure: the toolkit catalogue (`data/toolkits.yaml`) says where each toolchain comes from;
`edges/setup.py` does the downloading. A toolchain that cannot be provisioned is an
answer here too, with the versions that can, so that the cell fails before its build.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from ci_matrix.core.values import parse_version


@dataclass(frozen=True)
class DebianPackage:
    """A .deb from Debian's pool, checked against its sha256 before it is unpacked."""

    url: str
    sha256: str
    cpu: str


@dataclass(frozen=True)
class CudaPackages:
    """A CUDA release's compiler from package registries (`cuda:` in toolkits.yaml)."""

    version: str  # MAJOR.MINOR
    pypi: tuple[str, ...]  # exact requirements (`name==version`)
    root: str = ""  # the toolkit root inside the pip target folder (13.x wheels)
    debian: DebianPackage | None = None  # the compiler, when PyPI has none
    host_gcc: int = 0  # newest GCC major the compiler accepts (0: no limit known)


@dataclass(frozen=True)
class Redist:
    """NVIDIA's redistributables (`redist:` in toolkits.yaml)."""

    base_url: str
    releases: Mapping[str, tuple[str, ...]]  # MAJOR.MINOR -> patch releases, newest last
    platforms: Mapping[str, str]  # os-cpu -> the index's platform key
    components: Mapping[str, tuple[str, ...]]  # manifest name -> index names (`?`: where present)
    default_components: tuple[str, ...]
    host_gcc: Mapping[str, int]


@dataclass(frozen=True)
class RedistArchives:
    """One release's archives from NVIDIA's redistributables."""

    base_url: str  # ends with '/'
    release: str  # the index's release, e.g. 12.4.1: `redistrib_12.4.1.json`
    platform: str  # the index's platform key, e.g. linux-sbsa
    components: tuple[str, ...]  # the index's component names; `?` suffix: only where the release has it

    @property
    def index_url(self) -> str:
        return f"{self.base_url}redistrib_{self.release}.json"


@dataclass(frozen=True)
class CudaSource:
    """One place a CUDA release's toolkit can come from."""

    version: str  # MAJOR.MINOR
    kind: str  # pypi | redist | debian
    why: str  # why this source is where it is in the order
    pypi: tuple[str, ...] = ()  # exact requirements (`name==version`)
    root: str = ""  # the toolkit root inside the pip target folder (13.x wheels)
    debian: DebianPackage | None = None
    redist: RedistArchives | None = None


@dataclass(frozen=True)
class CudaNeeds:
    """A CUDA release and its sources, tried in order (the next only when one cannot be reached)."""

    version: str  # MAJOR.MINOR
    sources: tuple[CudaSource, ...]
    components: tuple[str, ...] = ()  # the manifest's extra components
    host_gcc: int = 0  # newest GCC major this nvcc accepts (0: no limit known)
    windows: bool = False
    passed_over: tuple[str, ...] = ()  # sources that have the release but not for this cell, and why

    @property
    def folder(self) -> str:
        """The name of its folder under `cuda/`: extra components make another toolkit."""
        return "+".join([self.version, *self.components])


@dataclass(frozen=True)
class Toolkits:
    """The toolkit catalogue."""

    cuda: Mapping[str, CudaPackages]
    redist: Redist
    cuda_sources: tuple[tuple[str, str], ...]  # (kind, why) in the order they are tried
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
    cuda: CudaNeeds | None = None
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
    iree = data["iree"]
    return Toolkits(
        cuda={str(v): _packages_from(str(v), spec) for v, spec in data["cuda"].items()},
        redist=_redist_from(data["redist"]),
        cuda_sources=tuple((str(s["kind"]), str(s["why"])) for s in data["cuda-sources"]),
        iree_default=str(iree["default-version"]),
        iree_packages=tuple(str(p) for p in iree["packages"]),
        backend_components={str(k): tuple(str(c) for c in v) for k, v in data["rust"]["backend-components"].items()},
    )


def _packages_from(version: str, spec: Mapping[str, Any]) -> CudaPackages:
    deb = spec.get("debian")
    return CudaPackages(
        version=version,
        pypi=tuple(str(r) for r in spec.get("pypi", ())),
        root=str(spec.get("root", "")),
        debian=DebianPackage(str(deb["url"]), str(deb["sha256"]), str(deb["cpu"])) if deb else None,
        host_gcc=int(spec.get("host-gcc", 0)),
    )


def _redist_from(spec: Mapping[str, Any]) -> Redist:
    return Redist(
        base_url=str(spec["base-url"]),
        releases={str(k): tuple(str(r) for r in v) for k, v in spec["releases"].items()},
        platforms={str(k): str(v) for k, v in spec["platforms"].items()},
        components={str(k): tuple(str(c) for c in v) for k, v in spec["components"].items()},
        default_components=tuple(str(c) for c in spec["default-components"]),
        host_gcc={str(k): int(v) for k, v in spec["host-gcc"].items()},
    )


def needs_of(values: Mapping[str, str], toolkits: Toolkits, os: str, cpu: str,
             cuda_components: Sequence[str] = (), redist_url: str = "") -> Needs:
    """What a cell with these final values needs on a runner with this os and cpu.

    `cuda_components` are the build's extra CUDA components (manifest names); `redist_url`
    replaces the redistributables' base URL (a mirror), when given.
    Raises Unavailable when a toolchain cannot be provisioned there.
    """
    rust = None
    if values.get("rust-toolchain"):
        backend = values.get("rust-backend", "")
        target = values.get("rust-target", "")
        rust = RustNeeds(values["rust-toolchain"], toolkits.backend_components.get(backend, ()),
                         (target,) if target else ())
    cuda = None
    if values.get("cuda-version"):
        cuda = cuda_needs(values["cuda-version"], toolkits, os, cpu, cuda_components, redist_url)
    iree = values.get("iree-version", "") or (toolkits.iree_default if values.get("iree-target") else "")
    return Needs(rust, cuda, iree, toolkits.iree_packages if iree else (), os, cpu)


def cuda_needs(version: str, toolkits: Toolkits, os: str, cpu: str, components: Sequence[str] = (),
               redist_url: str = "") -> CudaNeeds:
    """The sources of a CUDA release (`12.4` or `12.4.1`) for this os and cpu, in the order
    `cuda-sources` gives; raises Unavailable when none has it there."""
    release = ".".join(str(p) for p in parse_version(version)[:2])
    extra = tuple(c for c in dict.fromkeys(components) if c not in toolkits.redist.default_components)
    sources = _sources(version, toolkits, os, cpu, extra, redist_url)
    if not sources:
        raise Unavailable(_unavailable(version, toolkits, os, cpu, extra))
    packages = toolkits.cuda.get(release)
    host_gcc = toolkits.redist.host_gcc.get(release, packages.host_gcc if packages else 0)
    return CudaNeeds(release, sources, extra, host_gcc, os == "windows", _passed_over(packages, os, cpu, extra))


def _passed_over(packages: CudaPackages | None, os: str, cpu: str, extra: tuple[str, ...]) -> tuple[str, ...]:
    """Why a package source that has the release is not among the cell's sources."""
    if packages is None:
        return ()
    name = "Debian's package" if packages.debian else "PyPI's wheels"
    if extra:
        return (f"not from {name}: they carry the compiler only, not {', '.join(extra)}",)
    if os != "linux":
        return (f"not from {name}: Linux only",)
    if packages.debian is not None and packages.debian.cpu != cpu:
        return (f"not from {name}: {packages.debian.cpu} only",)
    return ()


def _sources(version: str, toolkits: Toolkits, os: str, cpu: str, extra: tuple[str, ...],
             redist_url: str = "") -> tuple[CudaSource, ...]:
    release = ".".join(str(p) for p in parse_version(version)[:2])
    candidates = {
        "pypi": _from_pypi(release, toolkits, os, extra),
        "redist": _from_redist(version, release, toolkits, f"{os}-{cpu}", extra, redist_url),
        "debian": _from_debian(release, toolkits, os, cpu, extra),
    }
    return tuple(replace(found, why=why) for kind, why in toolkits.cuda_sources
                 if (found := candidates[kind]) is not None)


def _from_pypi(release: str, toolkits: Toolkits, os: str, extra: tuple[str, ...]) -> CudaSource | None:
    packages = toolkits.cuda.get(release)
    if packages is None or packages.debian is not None or os != "linux" or extra:
        return None
    return CudaSource(release, "pypi", "", pypi=packages.pypi, root=packages.root)


def _from_debian(release: str, toolkits: Toolkits, os: str, cpu: str, extra: tuple[str, ...]) -> CudaSource | None:
    packages = toolkits.cuda.get(release)
    if packages is None or packages.debian is None or os != "linux" or packages.debian.cpu != cpu or extra:
        return None
    return CudaSource(release, "debian", "", pypi=packages.pypi, debian=packages.debian)


def _from_redist(version: str, release: str, toolkits: Toolkits, platform: str, extra: tuple[str, ...],
                 redist_url: str) -> CudaSource | None:
    redist = toolkits.redist
    patches = redist.releases.get(release, ())
    if not patches or platform not in redist.platforms:
        return None
    exact = version if version in patches else patches[-1]
    names = [n for c in (*redist.default_components, *extra) for n in redist.components[c]]
    base = (redist_url or redist.base_url).rstrip("/") + "/"
    archives = RedistArchives(base, exact, redist.platforms[platform], tuple(dict.fromkeys(names)))
    return CudaSource(release, "redist", "", redist=archives)


def _unavailable(version: str, toolkits: Toolkits, os: str, cpu: str, extra: tuple[str, ...]) -> str:
    release = ".".join(str(p) for p in parse_version(version)[:2])
    everywhere = sorted({*toolkits.cuda, *toolkits.redist.releases}, key=parse_version)
    here = [v for v in everywhere if _sources(v, toolkits, os, cpu, extra)]
    where = f"{os}-{cpu}" + (f" with components {', '.join(extra)}" if extra else "")
    if release not in everywhere:
        head = f"CUDA {version} cannot be set up: no source ci-matrix knows carries its nvcc"
    else:
        head = f"CUDA {version} cannot be set up on {where}"
    if not here:
        return f"{head}: ci-matrix can set up no CUDA there; install it on the runner and run with setup turned off."
    return (f"{head} (on {where} ci-matrix can set up CUDA {', '.join(here)}). Move the cell to one of those "
            "(a workaround's `set: {cuda-version: ...}`), or install it on the runner and run with setup turned off.")


def describe(needs: Needs) -> list[str]:
    """One line per toolchain (CUDA: one per source, in order), for `--dry-run` and `explain`."""
    lines = []
    if needs.rust:
        extra = [f"component {c}" for c in needs.rust.components] + [f"target {t}" for t in needs.rust.targets]
        lines.append(f"Rust {needs.rust.toolchain} (rustup)" + (f" with {', '.join(extra)}" if extra else ""))
    if needs.cuda:
        for i, source in enumerate(needs.cuda.sources):
            lead = f"CUDA {needs.cuda.version} from " if i == 0 else "  if that cannot be reached: "
            lines.append(f"{lead}{describe_source(source)}: {source.why}")
        lines += [f"  {line}" for line in needs.cuda.passed_over]
    if needs.iree:
        lines.append(f"IREE {needs.iree} ({', '.join(needs.iree_packages)} from PyPI, own virtual environment)")
    return lines


def describe_source(source: CudaSource) -> str:
    """Where one CUDA source downloads from, in a few words."""
    if source.redist is not None:
        archives = source.redist
        names = ", ".join(c for c in archives.components if not c.endswith("?"))
        return f"NVIDIA's redistributables {archives.release} {archives.platform} ({names}) at {archives.base_url}"
    if source.debian is not None:
        return "Debian's nvidia-cuda-toolkit compiler package and PyPI headers"
    return f"PyPI ({', '.join(source.pypi)})"


def cache_key(needs: Needs) -> str:
    """A cache key that changes whenever what would be downloaded changes; '' when nothing
    is cached (Rust toolchains live in rustup's own folders, not in ci-matrix's cache)."""
    if needs.cuda is None and not needs.iree:
        return ""
    cached = {"cuda": [recipe(s) for s in needs.cuda.sources] if needs.cuda else None,
              "iree": [needs.iree, *needs.iree_packages] if needs.iree else None}
    digest = hashlib.sha256(json.dumps(cached, sort_keys=True).encode()).hexdigest()[:16]
    parts = [f"cuda-{needs.cuda.folder}" if needs.cuda else "", f"iree-{needs.iree}" if needs.iree else ""]
    return "-".join(["ci-matrix-tools-v1", needs.os, needs.cpu, *[p for p in parts if p], digest])


def recipe(source: CudaSource) -> dict[str, Any]:
    """What a CUDA folder built from `source` is made of (its marker file; the cache key)."""
    made_of = asdict(source)
    del made_of["why"]  # words, not content
    return made_of
