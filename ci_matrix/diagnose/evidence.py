"""Evidence: facts read from the build log itself, each with the line it came from.

The knowledge base's extractors (`knowledge/evidence/*.yaml`) are RE2 patterns whose named
groups fill facts: a rustup path names the toolchain and its host, nvcc's banner the CUDA
release, iree-compile's crash handler the flags it ran with. They run in the scanner's
one pass beside the signatures. A diagnosis then reasons over the cell's facts plus the
log's: where both give a fact the cell's wins, and the conflict is shown.

Pure: hits in, facts out.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ci_matrix.core.facts import SET_FACTS, Platform, derive, known_facts, typed
from ci_matrix.core.values import parse_toolchain, triple_platform
from ci_matrix.diagnose.hits import Hit
from ci_matrix.diagnose.scanner import Signature

KEY_PREFIX = "@"  # scanner keys of extractors; rule signatures are keyed `rule-id#n`
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Extractor:
    """One pattern whose match states facts: `facts` maps a fact to a template over the
    pattern's named groups (`"{toolchain}"`) or to a literal (`nightly`)."""

    id: str
    pattern: str
    facts: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Default:
    """A fact's value when nothing states it, once any of `given` is known: rustc's backend
    is LLVM unless the log or the cell names another."""

    fact: str
    value: str
    given: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class Extractors:
    """Every extractor and default of the knowledge base."""

    extractors: tuple[Extractor, ...] = ()
    defaults: tuple[Default, ...] = ()

    def signatures(self) -> list[Signature]:
        """The extractors as scanner signatures: only their last match in the log is needed."""
        return [Signature(KEY_PREFIX + e.id, e.pattern, last_only=True) for e in self.extractors]


@dataclass(frozen=True)
class Evidence:
    """Where a fact came from: the log (line and text), the cell, or a default (its reason)."""

    fact: str
    value: str
    source: str  # log | cell | default
    line: int = 0
    text: str = ""  # the log line (a default: its reason)
    match: str = ""  # what the extractor matched on that line


@dataclass(frozen=True)
class Conflict:
    """A fact the cell and the log disagree on; the cell's value is the one used."""

    fact: str
    cell: str
    log: Evidence


@dataclass(frozen=True)
class Facts:
    """What a diagnosis knows about the failing build: typed values and where each came from."""

    values: Mapping[str, Any] = field(default_factory=dict)
    evidence: Mapping[str, Evidence] = field(default_factory=dict)
    conflicts: tuple[Conflict, ...] = ()

    def read_from_log(self) -> list[Evidence]:
        """The facts the log itself showed, in line order."""
        return sorted((e for e in self.evidence.values() if e.source == "log"), key=lambda e: (e.line, e.fact))


def extractors_from(data: Mapping[str, Any]) -> Extractors:
    """Extractors and defaults from one evidence file's data (checked by its schema in tests)."""
    extractors = tuple(
        Extractor(str(e["id"]), str(e["pattern"]), tuple((str(k), str(v)) for k, v in e["facts"].items()))
        for e in data.get("evidence", []) or []
    )
    defaults = tuple(
        Default(str(d["fact"]), str(d["value"]), tuple(str(g) for g in d.get("given", [])), str(d["reason"]))
        for d in data.get("defaults", []) or []
    )
    return Extractors(extractors, defaults)


def merged(parts: Iterable[Extractors]) -> Extractors:
    """Several evidence files as one."""
    parts = list(parts)
    return Extractors(
        tuple(e for p in parts for e in p.extractors), tuple(d for p in parts for d in p.defaults)
    )


def problems_of(extractors: Extractors) -> list[str]:
    """What is wrong with the extractors: unknown facts, templates naming no group, values
    that do not parse as their fact, duplicate ids."""
    facts = known_facts()
    problems, seen = [], set()
    for e in extractors.extractors:
        groups = set(re.findall(r"\(\?P<([A-Za-z_][A-Za-z0-9_]*)>", e.pattern))
        if e.id in seen:
            problems.append(f"evidence {e.id}: duplicate id")
        seen.add(e.id)
        for fact, template in e.facts:
            if fact not in facts:
                problems.append(f"evidence {e.id}: unknown fact {fact!r}")
            missing = set(_PLACEHOLDER.findall(template)) - groups
            if missing:
                problems.append(f"evidence {e.id}: {fact} names no group {sorted(missing)}")
    for d in extractors.defaults:
        problems += [f"default {d.fact}: unknown fact {f!r}" for f in (d.fact, *d.given) if f not in facts]
    return problems


def read_log(hits: Mapping[str, Hit], extractors: Extractors) -> dict[str, Evidence]:
    """The facts the log states: each from the first extractor (in knowledge-base order, the
    most telling first) that matched, at the last line it matched."""
    found: dict[str, Evidence] = {}
    for extractor in extractors.extractors:
        hit = hits.get(KEY_PREFIX + extractor.id)
        if hit is None:
            continue
        for fact, template in extractor.facts:
            value = _fill(template, hit.groups)
            value = _ALIASES.get(fact, {}).get(value, value)  # the catalog's names for what logs spell otherwise
            if value and fact not in found:
                found[fact] = Evidence(fact, value, "log", hit.line, hit.text, hit.matched.strip())
    return found


def _fill(template: str, groups: Mapping[str, str]) -> str:
    """The template with its groups filled in; empty when a group took no part."""
    values = [groups.get(name, "") for name in _PLACEHOLDER.findall(template)]
    if not all(values):
        return ""
    return _PLACEHOLDER.sub(lambda m: groups[m[1]], template).strip()


def combine(
    cell: Mapping[str, str] | None,
    platforms: Mapping[str, Platform],
    log: Mapping[str, Evidence],
    defaults: Sequence[Default] = (),
) -> Facts:
    """The cell's facts plus the log's: the cell wins where both speak, and says so."""
    cell_facts = derive(cell, platforms) if cell else {}
    log_facts, log_evidence = _typed_log(log)
    conflicts = tuple(
        Conflict(fact, _text(fact, cell_facts[fact], cell), log_evidence[fact])
        for fact in sorted(set(cell_facts) & set(log_facts))
        if not _agrees(cell_facts[fact], log_facts[fact])
    )
    values = {**log_facts, **cell_facts}
    evidence = {**log_evidence}
    for fact in cell_facts:
        evidence[fact] = Evidence(fact, _text(fact, cell_facts[fact], cell), "cell")
    for default in defaults:
        if default.fact not in values and (not default.given or any(g in values for g in default.given)):
            values[default.fact] = _typed(default.fact, default.value)
            evidence[default.fact] = Evidence(default.fact, default.value, "default", 0, default.reason)
    return Facts(values, evidence, conflicts)


def _agrees(cell_value: Any, log_value: Any) -> bool:
    if isinstance(cell_value, frozenset):
        return bool(cell_value & log_value) if isinstance(log_value, frozenset) else log_value in cell_value
    return bool(cell_value == log_value)


def _typed_log(log: Mapping[str, Evidence]) -> tuple[dict[str, Any], dict[str, Evidence]]:
    """Typed log facts plus what follows from them (a toolchain's channel and date, a host
    triple's os and cpu, a nightly's date from its commit date); unparsable values are dropped."""
    values: dict[str, Any] = {}
    evidence: dict[str, Evidence] = {}
    for fact, item in log.items():
        try:
            values[fact] = _typed(fact, item.value)
        except ValueError:
            continue
        evidence[fact] = item
    for fact, value, source in _derived(values, evidence):
        if fact not in values:
            values[fact] = value
            evidence[fact] = Evidence(fact, _text(fact, value, None), "log", source.line, source.text, source.match)
    return values, evidence


def _derived(values: Mapping[str, Any], evidence: Mapping[str, Evidence]) -> list[tuple[str, Any, Evidence]]:
    found: list[tuple[str, Any, Evidence]] = []
    if "rust-toolchain" in values:
        toolchain = parse_toolchain(values["rust-toolchain"])
        source = evidence["rust-toolchain"]
        found.append(("rust-channel", toolchain.channel, source))
        if toolchain.date is not None:
            found.append(("rust-date", toolchain.date, source))
        if toolchain.version is not None:
            found.append(("rust-version", toolchain.version + (0,) * (3 - len(toolchain.version)), source))
    if "rust-host" in values:
        platform = triple_platform(values["rust-host"])
        if platform is not None:
            found += [("os", platform[0], evidence["rust-host"]), ("cpu", platform[1], evidence["rust-host"])]
    if "rust-commit-date" in values and values.get("rust-channel") == "nightly":
        # nightly-D is built from the last commit before D: `rustc 1.79.0-nightly (… 2024-04-23)`
        # is nightly-2024-04-24.
        found.append(("rust-date", values["rust-commit-date"] + dt.timedelta(days=1), evidence["rust-commit-date"]))
    return found


_ALIASES = {"os": {"mac": "macos", "darwin": "macos", "osx": "macos"},
            "cpu": {"x64": "x86_64", "amd64": "x86_64", "aarch64": "arm64"}}


def _typed(fact: str, text: str) -> Any:
    if fact in SET_FACTS:
        if fact.endswith("-flags") and text.rstrip().endswith(_CONTINUATIONS):
            # a command echoed over several lines (sh's \, cmd's ^, PowerShell's `): its first
            # line does not tell which flags the command lacks
            raise ValueError(f"{fact} continues on the next line")
        return _flags(text) if fact.endswith("-flags") else frozenset(text.split(","))
    if fact == "rust-toolchain":
        parse_toolchain(text)  # raises ValueError on a name that is not a toolchain
        return text
    return typed(fact, text)


_CONTINUATIONS = ("\\", "^", "`")


def _flags(text: str) -> frozenset[str]:
    """The flags of a command line: each `--name=value` also as its bare `--name`."""
    flags = set()
    for word in text.split():
        word = word.strip("'\"")
        if word.startswith("-"):
            flags.add(word)
            flags.add(word.partition("=")[0])
    return frozenset(flags)


def _text(fact: str, value: Any, cell: Mapping[str, str] | None) -> str:
    """A fact as a person writes it: the cell's own text, or the value formatted back."""
    if cell is not None and fact in cell:
        return str(cell[fact])
    if isinstance(value, frozenset):
        return " ".join(sorted(value))
    if isinstance(value, tuple) and value and all(isinstance(v, int) for v in value):
        return ".".join(str(v) for v in value)
    if isinstance(value, tuple):  # an arch: (capability, variant)
        return f"sm_{value[0]}{value[1]}"
    return str(value)
