"""The project manifest (`ci-matrix.yml`) as typed values, with every problem located."""

from __future__ import annotations

import itertools
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ci_matrix.core.axes import normalise
from ci_matrix.core.catalog import Catalog, platform_from
from ci_matrix.core.document import Document, Path, did_you_mean
from ci_matrix.core.facts import AXES, Platform
from ci_matrix.errors import Problem

Values = tuple[tuple[str, str], ...]  # an ordered, hashable mapping of cell keys to values


@dataclass(frozen=True)
class Build:
    """One named build: its axes in cross-product order and what runs in each cell."""

    name: str
    axes: tuple[tuple[str, tuple[str, ...]], ...]
    include: tuple[Values, ...] = ()
    exclude: tuple[Values, ...] = ()
    env: Values = ()
    run: tuple[tuple[str, ...], ...] = ()
    working_directory: str = ""
    needs_gpu: bool = False
    uses: tuple[str, ...] = ()
    cuda_components: tuple[str, ...] = ()  # what `ci-matrix setup` adds to the CUDA toolkit


@dataclass(frozen=True)
class EventProfile:
    """Which cells run for one event."""

    builds: tuple[str, ...] | None = None
    only: tuple[Values, ...] = ()
    exclude: tuple[Values, ...] = ()


@dataclass(frozen=True)
class Manifest:
    """A project's builds, platforms and options."""

    file: str
    project: str
    builds: tuple[Build, ...]
    platforms: Mapping[str, Platform]
    rule_files: tuple[str, ...] = ()
    ignore_rules: frozenset[str] = frozenset()
    max_cells: int | None = None
    events: Mapping[str, EventProfile] = field(default_factory=dict)

    @property
    def extra_axes(self) -> tuple[str, ...]:
        """Names of the free-form axes declared by any build."""
        names = {name for b in self.builds for name, _ in b.axes if name not in AXES}
        return tuple(sorted(names))


def manifest_from(document: Document, catalog: Catalog) -> tuple[Manifest | None, list[Problem]]:
    """Build the Manifest of a schema-valid document, collecting every semantic problem."""
    reader = _ManifestReader(document, catalog)
    manifest = reader.read()
    return (None if reader.problems else manifest), reader.problems


class _ManifestReader:
    def __init__(self, document: Document, catalog: Catalog) -> None:
        self.document, self.catalog = document, catalog
        self.problems: list[Problem] = []
        self.platforms: dict[str, Platform] = dict(catalog.platforms)

    def fail(self, path: Path, message: str, *, key: bool = False) -> None:
        self.problems.append(self.document.problem(path, message, key=key))

    def read(self) -> Manifest:
        data = self.document.root
        self.read_platforms(data.get("platforms", {}))
        builds = tuple(self.build(str(n), spec) for n, spec in data["builds"].items())
        events = {str(e): self.event(str(e), p, builds) for e, p in data.get("events", {}).items()}
        return Manifest(
            file=self.document.file,
            project=str(data.get("project", "")),
            builds=builds,
            platforms=self.platforms,
            rule_files=tuple(str(f) for f in data.get("rules", [])),
            ignore_rules=frozenset(str(r) for r in data.get("ignore-rules", [])),
            max_cells=int(data["max-cells"]) if "max-cells" in data else None,
            events=events,
        )

    def read_platforms(self, overrides: Mapping[str, Any]) -> None:
        for name, spec in overrides.items():
            known = self.catalog.platforms.get(str(name))
            if known is None and not {"os", "cpu", "gpu", "runs-on"} <= set(spec):
                hint = did_you_mean(str(name), self.catalog.platforms)
                message = f"unknown platform {name!r}{hint}; a new platform needs os, cpu, gpu and runs-on"
                self.fail(("platforms", name), message, key=True)
                continue
            base = {"os": "", "cpu": "", "gpu": "", "runs-on": [], "rust-target": ""}
            if known is not None:
                base.update(os=known.os, cpu=known.cpu, gpu=known.gpu, **{"rust-target": known.rust_target})
                base["runs-on"] = list(known.runs_on)
            self.platforms[str(name)] = platform_from(str(name), {**base, **spec})

    def values(self, path: Path, axis: str, items: list[Any]) -> tuple[str, ...]:
        out: list[str] = []
        for i, item in enumerate(items):
            try:
                value = normalise(axis, item, self.catalog, self.platforms)
            except ValueError as exc:
                self.fail((*path, i), str(exc))
                continue
            if value in out:
                self.fail((*path, i), f"{value!r} is listed twice")
            out.append(value)
        return tuple(out)

    def build(self, name: str, spec: Mapping[str, Any]) -> Build:
        at: Path = ("builds", name)
        axes = self.build_axes(at, spec)
        names = {axis for axis, _ in axes}
        build = Build(
            name=name,
            axes=axes,
            include=tuple(self.partial((*at, "include", i), e, None) for i, e in enumerate(spec.get("include", []))),
            exclude=tuple(self.partial((*at, "exclude", i), e, names) for i, e in enumerate(spec.get("exclude", []))),
            env=tuple((str(k), str(v)) for k, v in spec.get("env", {}).items()),
            run=self.commands((*at, "run"), spec["run"]),
            working_directory=str(spec.get("working-directory", "")),
            needs_gpu=bool(spec.get("needs-gpu", False)),
            uses=tuple(sorted({str(u) for u in spec.get("uses", [])})),
            cuda_components=tuple(str(c) for c in spec.get("cuda", {}).get("components", [])),
        )
        self.check_new_cells(at, build)
        self.check_placeholders((*at, "run"), spec["run"], build)
        return build

    def check_placeholders(self, at: Path, spec: Any, build: Build) -> None:
        """A misspelt `{placeholder}`, or one that no cell of this build can fill, is an error:
        it would otherwise reach the build as literal text."""
        fillable = {axis for axis, _ in build.axes} | {k for entry in build.include for k, _ in entry}
        known = fillable | {"build", "cell-id", "rustflags", *LIST_PLACEHOLDER_NAMES}
        known |= {"cargo-profile"} if "rust-toolchain" in fillable else set()
        known |= {"cuda-capability"} if "cuda-arch" in fillable else set()
        items = [spec] if isinstance(spec, str) else list(spec)
        for i, item in enumerate(items):
            text = item if isinstance(item, str) else " ".join(map(str, item))
            for name in dict.fromkeys(PLACEHOLDER.findall(text)):
                if name not in known:
                    hint = did_you_mean(name, sorted(known))
                    self.fail(at if isinstance(spec, str) else (*at, i),
                              f"placeholder {{{name}}} has no value in any cell of this build{hint}")

    def check_new_cells(self, at: Path, build: Build) -> None:
        # GitHub turns an include that extends no combination into a new one; a cell needs a platform.
        for i, entry in enumerate(build.include):
            if "platform" not in dict(entry) and not _extends_some(build, dict(entry)):
                message = "this include matches no combination, so it would be a new cell; give it a platform"
                self.fail((*at, "include", i), message)

    def build_axes(self, at: Path, spec: Mapping[str, Any]) -> tuple[tuple[str, tuple[str, ...]], ...]:
        axes = [("platform", self.values((*at, "platforms"), "platform", spec["platforms"]))]
        for domain, key, axis, default in _DOMAIN_AXES:
            section = spec.get(domain)
            if section is None or (key not in section and default is None):
                continue
            items = section.get(key, default)
            axes.append((axis, self.values((*at, domain, key), axis, list(items))))
        for axis, items in spec.get("axes", {}).items():
            if axis in AXES:
                self.fail((*at, "axes", axis), f"{axis!r} is a built-in axis; set it in its own section", key=True)
            axes.append((str(axis), self.values((*at, "axes", axis), str(axis), list(items))))
        return tuple(axes)

    def partial(self, path: Path, entry: Mapping[str, Any], axes: set[str] | None) -> Values:
        out = []
        for key, value in entry.items():
            if axes is not None and key not in axes:
                hint = did_you_mean(str(key), axes)
                self.fail((*path, key), f"{key!r} is not an axis of this build{hint}", key=True)
                continue
            try:
                out.append((str(key), normalise(str(key), value, self.catalog, self.platforms)))
            except ValueError as exc:
                self.fail((*path, key), str(exc))
        return tuple(out)

    def commands(self, path: Path, spec: Any) -> tuple[tuple[str, ...], ...]:
        items = [spec] if isinstance(spec, str) else list(spec)
        out = []
        for i, item in enumerate(items):
            if isinstance(item, str):
                try:
                    out.append(tuple(shlex.split(item)))
                except ValueError as exc:
                    self.fail(path if isinstance(spec, str) else (*path, i), f"cannot split command: {exc}")
            else:
                out.append(tuple(str(arg) for arg in item))
        return tuple(out)

    def event(self, name: str, spec: Mapping[str, Any], builds: tuple[Build, ...]) -> EventProfile:
        at: Path = ("events", name)
        names = [b.name for b in builds]
        for i, build in enumerate(spec.get("builds", [])):
            if build not in names:
                self.fail((*at, "builds", i), f"unknown build {build!r}{did_you_mean(str(build), names)}")
        only = tuple(self.partial((*at, "only", i), e, None) for i, e in enumerate(spec.get("only", [])))
        exclude = tuple(self.partial((*at, "exclude", i), e, None) for i, e in enumerate(spec.get("exclude", [])))
        chosen = tuple(str(b) for b in spec["builds"]) if "builds" in spec else None
        return EventProfile(chosen, only, exclude)


#: `{name}` in a command argument (core/cells.py fills them).
PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_-]*)\}")
#: Placeholders that stand for a tool's flags (several arguments).
LIST_PLACEHOLDER_NAMES = ("cargo-flags", "nvcc-flags", "iree-flags")


def _extends_some(build: Build, entry: Mapping[str, str]) -> bool:
    """Whether an include entry fits a combination that the build's excludes keep."""
    names = [name for name, _ in build.axes]
    choices = [[v for v in values if entry.get(name, v) == v] for name, values in build.axes]
    for combo in itertools.product(*choices):
        values = dict(zip(names, combo, strict=True))
        if not any(all(values.get(k) == v for k, v in e) for e in build.exclude):
            return True
    return False


# (manifest section, key, cell axis, default when the section exists but the key does not)
_DOMAIN_AXES: tuple[tuple[str, str, str, list[str] | None], ...] = (
    ("rust", "toolchains", "rust-toolchain", None),
    ("rust", "profiles", "rust-profile", ["debug"]),
    ("rust", "backends", "rust-backend", ["llvm"]),
    ("rust", "targets", "rust-target", None),
    ("rust", "features", "rust-features", None),
    ("cuda", "versions", "cuda-version", None),
    ("cuda", "archs", "cuda-arch", None),
    ("iree", "targets", "iree-target", None),
    ("iree", "versions", "iree-version", None),
)
