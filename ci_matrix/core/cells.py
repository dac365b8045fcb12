"""A cell: one build on one runner, with what the knowledge base changed and why."""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, Generic, TypeVar, overload

from ci_matrix.core.facts import Platform
from ci_matrix.core.knowledge import Rule, Workaround
from ci_matrix.core.manifest import LIST_PLACEHOLDER_NAMES, PLACEHOLDER, Build, Values
from ci_matrix.core.values import parse_arch

Flags = tuple[tuple[str, tuple[str, ...]], ...]
TOOLS = ("cargo", "rustflags", "nvcc", "iree-compile")
#: Placeholders that expand to several arguments when they are a whole argument.
LIST_PLACEHOLDERS = dict(zip(LIST_PLACEHOLDER_NAMES, ("cargo", "nvcc", "iree-compile"), strict=True))
#: Placeholders that every cell of a build with the right axes can fill.
DERIVED_PLACEHOLDERS = ("cell-id", "cargo-profile", "cuda-capability", "rustflags")
_PLACEHOLDER = PLACEHOLDER


_T = TypeVar("_T")


class _once(Generic[_T]):
    """`functools.cached_property` without the lock that it takes on each first access
    before Python 3.12: a tenth of the time of writing out 100,000 cells."""

    def __init__(self, compute: Callable[[Any], _T]) -> None:
        self._compute = compute
        self._name = compute.__name__
        self.__doc__ = compute.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, cell: None, owner: type | None = None) -> _once[_T]: ...
    @overload
    def __get__(self, cell: object, owner: type | None = None) -> _T: ...
    def __get__(self, cell: object, owner: type | None = None) -> _T | _once[_T]:
        if cell is None:
            return self
        value = cell.__dict__[self._name] = self._compute(cell)  # later reads find it there
        return value


@dataclass(frozen=True)
class Change:
    """What one rule did to a cell."""

    rule: str
    title: str
    kind: str  # workaround | exclusion
    detail: str
    references: tuple[str, ...]


@dataclass(frozen=True)
class Context:
    """What a cell needs, besides its values, to name its runner, env, flags and commands."""

    build: Build
    platforms: Mapping[str, Platform]
    iree_devices: Mapping[str, str]


@dataclass(frozen=True, eq=False)
class Cell:
    """One build on one runner.

    The runner labels, environment, flags and commands are derived from the final values
    when first asked for: a plan of 100,000 cells does not pay for what it never renders.
    """

    id: str
    build: str
    values: Values  # after workarounds
    requested: Values  # as expanded from the manifest
    context: Context
    changes: tuple[Change, ...] = ()
    excluded: str | None = None
    excluded_by: str | None = None  # a rule id, "manifest", "event" or "duplicate"
    rule_env: Values = ()
    rule_flags: Flags = ()

    @property
    def rule_ids(self) -> tuple[str, ...]:
        """Ids of the rules that changed or excluded this cell."""
        return tuple(c.rule for c in self.changes)

    def value(self, key: str) -> str:
        """The cell's final value for `key`, or ''."""
        return dict(self.values).get(key, "")

    @_once
    def name(self) -> str:
        """The job name GitHub shows."""
        return cell_name(self.context.build, self.requested)

    @_once
    def _found(self) -> dict[str, str]:
        return dict(self.values)

    @_once
    def flags(self) -> Flags:
        """Tool flags: those that follow from the values, then those that rules added."""
        found = self._found
        target = found.get("iree-target")
        device = self.context.iree_devices[target] if target else None
        own = _own_flags(device, *(found.get(k) for k in _FLAG_FACTS))
        return _merge_flags(own, self.rule_flags) if self.rule_flags else own

    @_once
    def env(self) -> Values:
        """The build's environment: the manifest's, the toolchain's, then the rules'."""
        rustflags = dict(self.flags).get("rustflags", ())
        return _env(self.context.build.env, self._found.get("rust-toolchain"), rustflags, self.rule_env)

    @property
    def runs_on(self) -> tuple[str, ...]:
        """The `runs-on` labels of the cell's platform."""
        return self.context.platforms[self._found["platform"]].runs_on

    @_once
    def commands(self) -> tuple[tuple[str, ...], ...]:
        """The build commands with placeholders filled in, as argument lists."""
        flags = dict(self.flags)
        tool_flags = tuple(flags.get(tool) for tool in LIST_PLACEHOLDERS.values())
        templates = self.context.build.run
        return tuple(_expanded(template, self._filled(template, flags), tool_flags) for template in templates)

    def _filled(self, template: tuple[str, ...], flags: Mapping[str, tuple[str, ...]]) -> tuple[str | None, ...]:
        return tuple(_fill(name, self.id, self._found, flags) for name in _names(template))

    def command_for(self, template: Sequence[str]) -> tuple[str, ...]:
        """A command given on the command line, with this cell's placeholders and flags."""
        flags = dict(self.flags)
        return expand_command(tuple(template), _placeholders(self.id, dict(self.values), flags), flags)

    @property
    def working_directory(self) -> str:
        """Where the commands run, relative to the manifest."""
        return self.context.build.working_directory

    def apply(self, rule: Rule) -> Cell:
        """This cell after a matching rule's exclusion or workaround."""
        if rule.exclude is not None:
            change = Change(rule.id, rule.title, "exclusion", rule.exclude, rule.references)
            return replace(self, excluded=rule.exclude, excluded_by=rule.id, changes=(*self.changes, change))
        assert rule.workaround is not None
        return self._work_around(rule, rule.workaround)

    def _work_around(self, rule: Rule, fix: Workaround) -> Cell:
        values = dict(self.values)
        details = [f"{k}: {values.get(k) or '(none)'} -> {v}" for k, v in fix.set if values.get(k) != v]
        values.update(fix.set)
        detail = "; ".join((*details, *_fixed_details(fix))) + (f" ({fix.note})" if fix.note else "")
        change = Change(rule.id, rule.title, "workaround", detail, rule.references)
        return replace(
            self,
            values=tuple(values.items()),
            rule_env=(*self.rule_env, *fix.env),
            rule_flags=_merge_flags(self.rule_flags, fix.flags),
            changes=(*self.changes, change),
        )


@cache
def _fixed_details(fix: Workaround) -> tuple[str, ...]:
    """What a workaround adds whatever the cell: its env and flags, as the user reads them."""
    return (*(f"env {k}={v}" for k, v in fix.env), *(f"{tool} flags: {shlex.join(args)}" for tool, args in fix.flags))


def _merge_flags(first: Flags, second: Flags) -> Flags:
    merged: dict[str, tuple[str, ...]] = dict(first)
    for tool, args in second:
        merged[tool] = merged.get(tool, ()) + args
    return tuple((tool, merged[tool]) for tool in TOOLS if tool in merged)


#: The values that a cell's own flags follow from (besides its IREE device).
_FLAG_FACTS = ("cuda-arch", "rust-backend", "rust-toolchain", "rust-target", "rust-features")


@cache
def _own_flags(
    iree_device: str | None, arch: str | None, backend: str | None, toolchain: str | None,
    target: str | None, features: str | None,
) -> Flags:  # fmt: skip
    """Flags that follow from the cell's own values, before any rule (few distinct ones:
    cached, like the other pieces below that many cells share)."""
    flags: dict[str, tuple[str, ...]] = {}
    if iree_device is not None:
        flags["iree-compile"] = (f"--iree-hal-target-device={iree_device}",)
    if arch:
        flags["nvcc"] = parse_arch(arch).gencode()
    backend = "llvm" if backend is None else backend
    if toolchain and backend != "llvm":
        flags["rustflags"] = (f"-Zcodegen-backend={backend}",)
    cargo = []
    if target:
        cargo += ["--target", target]
    if features:
        cargo += ["--features", features]
    if cargo:
        flags["cargo"] = tuple(cargo)
    return tuple((tool, flags[tool]) for tool in TOOLS if tool in flags)


@cache
def _env(manifest_env: Values, toolchain: str | None, rustflags: tuple[str, ...], ruled: Values) -> Values:
    env = dict(manifest_env)
    if toolchain:
        env["RUSTUP_TOOLCHAIN"] = toolchain
    if rustflags:
        env["RUSTFLAGS"] = " ".join(rustflags)
    env.update(ruled)
    return tuple(env.items())


@cache
def _names(template: tuple[str, ...]) -> tuple[str, ...]:
    """The placeholders a command template names, each once."""
    return tuple(dict.fromkeys(m for arg in template for m in _PLACEHOLDER.findall(arg)))


def _fill(name: str, identifier: str, values: Mapping[str, str], flags: Mapping[str, tuple[str, ...]]) -> str | None:
    """What placeholder `name` stands for in this cell (None: it stays as written)."""
    if name == "cell-id":
        return identifier
    if name == "rustflags":
        return " ".join(flags.get("rustflags", ()))
    if name == "cargo-profile" and values.get("rust-profile"):
        return "dev" if values["rust-profile"] == "debug" else values["rust-profile"]
    if name == "cuda-capability" and values.get("cuda-arch"):
        return str(parse_arch(values["cuda-arch"]).capability)
    return values.get(name)


@functools.lru_cache(maxsize=1 << 12)
def _expanded(
    template: tuple[str, ...], filled: tuple[str | None, ...], tool_flags: tuple[tuple[str, ...] | None, ...]
) -> tuple[str, ...]:
    """`expand_command` for the values a template names and the flags of the tools it may run."""
    fill = {name: value for name, value in zip(_names(template), filled, strict=True) if value is not None}
    flags = {tool: found for tool, found in zip(LIST_PLACEHOLDERS.values(), tool_flags, strict=True) if found}
    return expand_command(template, fill, flags)


def _placeholders(identifier: str, values: Mapping[str, str], flags: Mapping[str, tuple[str, ...]]) -> dict[str, str]:
    fill = dict(values)
    for name in DERIVED_PLACEHOLDERS:
        value = _fill(name, identifier, values, flags)
        if value is not None:
            fill[name] = value
    return fill


def expand_command(
    template: tuple[str, ...], fill: Mapping[str, str], flags: Mapping[str, tuple[str, ...]]
) -> tuple[str, ...]:
    """One command's arguments with placeholders filled in, argument by argument.

    `{nvcc-flags}` standing alone becomes several arguments; when a command runs a tool
    without naming its placeholder, the tool's flags are added after its subcommand.
    """
    out: list[str] = []
    named = {m for arg in template for m in _PLACEHOLDER.findall(arg)}
    for arg in template:
        whole = _PLACEHOLDER.fullmatch(arg)
        if whole and whole[1] in LIST_PLACEHOLDERS:
            out.extend(flags.get(LIST_PLACEHOLDERS[whole[1]], ()))
        else:
            out.append(_PLACEHOLDER.sub(lambda m: fill.get(m[1], m[0]), arg))
    return _auto_flags(tuple(out), named, flags)


def _auto_flags(argv: tuple[str, ...], named: set[str], flags: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    if not argv:
        return argv
    program = argv[0].rsplit("/", 1)[-1]
    for placeholder, tool in LIST_PLACEHOLDERS.items():
        if program == tool and placeholder not in named and flags.get(tool):
            at = _insertion_point(tool, argv)
            return (*argv[:at], *flags[tool], *argv[at:])
    return argv


def _insertion_point(tool: str, argv: tuple[str, ...]) -> int:
    """After `cargo [+toolchain] SUBCOMMAND`, after the program name for other tools."""
    if tool != "cargo":
        return 1
    at = 2 if len(argv) > 1 and argv[1].startswith("+") else 1
    return min(at + 1, len(argv))


@cache
def slug(text: str) -> str:
    """A value as it appears in a cell id."""
    return re.sub(r"[^a-z0-9._+]+", "-", text.lower()).strip("-")


#: The order of a cell id's parts; free-form axes follow in the build's order.
ID_ORDER = ("build", "platform", "rust-toolchain", "rust-profile", "rust-target", "rust-features",
            "rust-backend", "cuda-version", "cuda-arch", "iree-target", "iree-version")
_ID_KEYS = frozenset(ID_ORDER)
_ID_PREFIX = {"rust-toolchain": "rust-", "cuda-version": "cuda-", "iree-target": "iree-", "iree-version": "iree-"}


@cache
def id_part(axis: str, value: str) -> str:
    """The part of a cell id that one value contributes ('' for a default value)."""
    if axis == "rust-backend" and value == "llvm":
        return ""
    if axis in _ID_KEYS:
        return _ID_PREFIX.get(axis, "") + slug(value)
    return f"{slug(axis)}-{slug(value)}"


def id_keys(build: Build, keys: Iterable[str]) -> list[str]:
    """Which of `keys` appear in a cell id, in id order."""
    present = set(keys)
    return [k for k in ID_ORDER if k in present] + [k for k, _ in build.axes if k not in _ID_KEYS and k in present]


def cell_id(build: Build, values: Values) -> str:
    """A readable, stable id: it names only the values that differ from a default, so that
    adding an axis value later does not rename existing cells."""
    found = {k: v for k, v in values if v}
    return "-".join(p for p in (id_part(k, found[k]) for k in id_keys(build, found)) if p)


def cell_name(build: Build, values: Values) -> str:
    """The job name GitHub shows: build and platform, then the domain values."""
    found = dict(values)
    groups = [found.get("build", build.name), found.get("platform", "")]
    if found.get("rust-toolchain"):
        rust = ["rust", found["rust-toolchain"], found.get("rust-profile", "debug")]
        rust += [found[k] for k in ("rust-backend", "rust-target", "rust-features") if found.get(k)]
        groups.append(" ".join(rust))
    if found.get("cuda-version"):
        groups.append(f"cuda {found['cuda-version']} {found.get('cuda-arch', '')}".strip())
    if found.get("iree-target"):
        groups.append(f"iree {found['iree-target']} {found.get('iree-version', '')}".strip())
    groups += [f"{k} {found[k]}" for k, _ in build.axes if k not in _ID_KEYS and k in found]
    return " · ".join(g for g in groups if g)
