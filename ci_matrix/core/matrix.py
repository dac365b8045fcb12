"""Expanding a manifest into cells: cross product, GitHub's include/exclude, events, rules.

`plan()` is a pure function of (manifest, rules, event): the same input gives the same
cells in the same order. Every cell records which rules changed or removed it and why.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ci_matrix.core.catalog import Catalog
from ci_matrix.core.cells import Cell, Change, cell_id, cell_name, finish
from ci_matrix.core.facts import derive
from ci_matrix.core.knowledge import Rule
from ci_matrix.core.manifest import Build, EventProfile, Manifest, Values
from ci_matrix.core.rule_index import RuleIndex

_MAX_RULE_PASSES = 8  # a workaround may enable another rule; this bounds the chain


@dataclass(frozen=True)
class Plan:
    """The outcome of expanding a manifest: every cell, runnable or excluded."""

    event: str
    cells: tuple[Cell, ...]

    @property
    def runnable(self) -> tuple[Cell, ...]:
        """Cells that run (not excluded)."""
        return tuple(c for c in self.cells if c.excluded is None)

    def find(self, cell_id: str) -> Cell | None:
        """The cell with this id, runnable or excluded."""
        return next((c for c in self.cells if c.id == cell_id), None)


def plan(manifest: Manifest, rules: Sequence[Rule], catalog: Catalog, event: str = "") -> Plan:
    """Expand every build of the manifest and apply the knowledge base to each cell."""
    # Combinations that cannot exist are decided first, so that their reason is the one shown.
    active = [r for r in rules if r.id not in manifest.ignore_rules]
    index = RuleIndex(sorted(active, key=lambda r: r.domain != "platform"))
    profile = manifest.events.get(event)
    cells: list[Cell] = []
    taken: set[str] = set()
    for build in manifest.builds:
        for values, manifest_exclusion in expand(build):
            identifier = _unique(cell_id(build, values), taken)
            cell = Cell.start(identifier, cell_name(build, values), build, values)
            if manifest_exclusion:
                cells.append(replace(cell, excluded=manifest_exclusion, excluded_by="manifest"))
                continue
            cells.append(_resolve(cell, build, manifest, catalog, index, event, profile))
    return Plan(event, tuple(_drop_duplicates(cells)))


def _unique(identifier: str, taken: set[str]) -> str:
    candidate, n = identifier, 1
    while candidate in taken:
        n += 1
        candidate = f"{identifier}-{n}"
    taken.add(candidate)
    return candidate


def expand(build: Build) -> Iterator[tuple[Values, str]]:
    """Combinations of one build with GitHub's semantics: (values, exclusion reason or '')."""
    names = [name for name, _ in build.axes]
    kept: list[dict[str, str]] = []
    for combo in itertools.product(*(values for _, values in build.axes)):
        values = dict(zip(names, combo))
        reason = _manifest_exclusion(build, values)
        if reason:
            yield _with_build(build, values), reason
        else:
            kept.append(values)
    for values in _include(build, kept, set(names)):
        yield _with_build(build, values), ""


def _manifest_exclusion(build: Build, values: Mapping[str, str]) -> str:
    for i, entry in enumerate(build.exclude):
        if all(values.get(k) == v for k, v in entry):
            return f"excluded by the manifest (builds.{build.name}.exclude[{i}])"
    return ""


def _include(build: Build, combos: list[dict[str, str]], axes: set[str]) -> list[dict[str, str]]:
    """GitHub: an include entry extends every combination whose original values it does not
    overwrite (added values may be overwritten); one that fits none becomes a new combination."""
    originals = [dict(c) for c in combos]
    extra: list[dict[str, str]] = []
    for entry in build.include:
        matched = False
        for combo, original in zip(combos, originals):
            if all(original[k] == v for k, v in entry if k in axes):
                combo.update(entry)
                matched = True
        if not matched:
            extra.append(dict(entry))
    return combos + extra


def _with_build(build: Build, values: Mapping[str, str]) -> Values:
    pairs = [("build", build.name), *values.items()]
    if build.uses:
        pairs.append(("uses", ",".join(build.uses)))
    if build.needs_gpu:
        pairs.append(("needs-gpu", "true"))
    return tuple(pairs)


def _resolve(  # noqa: PLR0913 - one cell needs all of its context
    cell: Cell,
    build: Build,
    manifest: Manifest,
    catalog: Catalog,
    index: RuleIndex,
    event: str,
    profile: EventProfile | None,
) -> Cell:
    reason = _event_exclusion(cell.values, event, profile)
    if reason:
        return replace(cell, excluded=reason, excluded_by="event")
    cell = _apply_rules(cell, manifest, index)
    return finish(cell, build, manifest.platforms, catalog.iree_devices)


def _event_exclusion(values: Values, event: str, profile: EventProfile | None) -> str:
    if profile is None:
        return ""
    found = dict(values)
    if profile.builds is not None and found["build"] not in profile.builds:
        return f"build {found['build']!r} does not run on {event} (events.{event}.builds)"
    if profile.only and not any(_partial_match(found, e) for e in profile.only):
        return f"not selected for {event} (events.{event}.only)"
    if any(_partial_match(found, e) for e in profile.exclude):
        return f"excluded on {event} (events.{event}.exclude)"
    return ""


def _partial_match(values: Mapping[str, str], entry: Values) -> bool:
    return all(values.get(k) == v for k, v in entry)


def _apply_rules(cell: Cell, manifest: Manifest, index: RuleIndex) -> Cell:
    applied: set[str] = set()
    for _ in range(_MAX_RULE_PASSES):
        facts = derive(dict(cell.values), manifest.platforms)
        fresh = [r for r in index.matching(facts) if r.id not in applied]
        if not fresh:
            return cell
        for rule in fresh:
            applied.add(rule.id)
            cell = cell.apply(rule)
            if cell.excluded is not None or _changes_values(rule):
                break
        if cell.excluded is not None:
            return cell
    return cell


def _changes_values(rule: Rule) -> bool:
    return rule.workaround is not None and bool(rule.workaround.set)


def _drop_duplicates(cells: list[Cell]) -> Iterator[Cell]:
    """A workaround can turn a cell into one that is already built: the cell as requested
    is kept, the worked-around copy is excluded, saying which cell builds it."""
    seen: dict[Any, str] = {}
    for cell in cells:
        if cell.excluded is None and not cell.changes:
            seen.setdefault(_build_key(cell), cell.id)
    for cell in cells:
        if cell.excluded is None and cell.changes:
            key = _build_key(cell)
            if key in seen:
                reason = f"after its workarounds it is the same build as {seen[key]}"
                cell = replace(cell, excluded=reason, excluded_by="duplicate")
            else:
                seen[key] = cell.id
        yield cell


def _build_key(cell: Cell) -> Any:
    return (cell.values, cell.env, cell.flags)
