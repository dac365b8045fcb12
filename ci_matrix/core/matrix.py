"""Expanding a manifest into cells: cross product, GitHub's include/exclude, events, rules.

`plan()` is a pure function of (manifest, rules, event): the same input gives the same
cells in the same order. Every cell records which rules changed or removed it and why.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from ci_matrix.core.catalog import Catalog
from ci_matrix.core.cells import Cell, Context, cell_id
from ci_matrix.core.facts import derive
from ci_matrix.core.knowledge import Rule
from ci_matrix.core.manifest import Build, EventProfile, Manifest, Values
from ci_matrix.core.rule_index import BuildShortcut, RuleIndex

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
    with gc_paused():
        return _plan(manifest, rules, catalog, event)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a plan is made or written.

    A large plan allocates about ten objects per cell and frees none; none of them form
    cycles, so the cyclic collector's repeated passes over them (a quarter of the time of
    100,000 cells) find nothing. It runs again, as before, afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _plan(manifest: Manifest, rules: Sequence[Rule], catalog: Catalog, event: str) -> Plan:
    # Ignored rules change no cell (their diagnosis still recognises their failure in a log).
    # Combinations that cannot exist are decided first, so that their reason is the one shown.
    active = [r for r in rules if r.id not in manifest.ignore_rules]
    index = RuleIndex(sorted(active, key=lambda r: r.domain != "platform"))
    profile = manifest.events.get(event)
    cells: list[tuple[Cell, bool]] = []
    taken: set[str] = set()
    for build in manifest.builds:
        context = Context(build, manifest.platforms, catalog.iree_devices)
        shortcut = BuildShortcut(build, index, manifest.platforms, _with_build(build, {}))
        if build.exclude or build.include:
            cells += _general_cells(build, shortcut, context, taken)
        else:  # the common case: the plain cross product, on the shortcut
            combos = shortcut.combinations()
            cells += ((Cell(_unique(i, taken), build.name, v, v, context), not m) for v, i, m in combos)
    resolved = [c if untouched and not profile else _resolve(c, untouched, manifest, index, event, profile)
                for c, untouched in cells]
    return Plan(event, tuple(_drop_duplicates(resolved)))


def _general_cells(
    build: Build, shortcut: BuildShortcut, context: Context, taken: set[str]
) -> Iterator[tuple[Cell, bool]]:
    """Cells of a build with `include` or `exclude`, GitHub's way, each with whether no
    rule can act on it."""
    for values, manifest_exclusion, combo in expand(build):
        identifier = _unique(shortcut.cell_id(combo) if combo else cell_id(build, values), taken)
        if manifest_exclusion:
            yield Cell(identifier, build.name, values, values, context, (), manifest_exclusion, "manifest"), True
        else:
            untouched = combo is not None and not shortcut.mask(combo)
            yield Cell(identifier, build.name, values, values, context), untouched


def _unique(identifier: str, taken: set[str]) -> str:
    candidate, n = identifier, 1
    while candidate in taken:
        n += 1
        candidate = f"{identifier}-{n}"
    taken.add(candidate)
    return candidate


def expand(build: Build) -> Iterator[tuple[Values, str, tuple[str, ...] | None]]:
    """Combinations of one build with GitHub's semantics.

    Yields (values, exclusion reason or '', the plain cross-product combination, or None
    when an `include` added to it or created it)."""
    names = [name for name, _ in build.axes]
    raw = list(itertools.product(*(values for _, values in build.axes)))
    if not build.exclude and not build.include:  # the common case, without a dict per cell
        head, tail = _with_build(build, {}), _build_tail(build)
        for combo in raw:
            yield (head[0], *zip(names, combo, strict=True), *tail), "", combo
        return
    combos = [dict(zip(names, combo, strict=True)) for combo in raw]
    reasons = [_manifest_exclusion(build, values) for values in combos]
    # Excluded combinations keep their place in the cross product, so the order stays readable.
    kept = [c for c, reason in zip(combos, reasons, strict=True) if not reason]
    extended, extra = _include(build, kept, set(names))
    for combo, values, reason in zip(raw, combos, reasons, strict=True):
        yield _with_build(build, values), reason, None if id(values) in extended else combo
    for values in extra:
        yield _with_build(build, values), "", None


def _manifest_exclusion(build: Build, values: Mapping[str, str]) -> str:
    for i, entry in enumerate(build.exclude):
        if all(values.get(k) == v for k, v in entry):
            return f"excluded by the manifest (builds.{build.name}.exclude[{i}])"
    return ""


def _include(build: Build, combos: list[dict[str, str]], axes: set[str]) -> tuple[set[int], list[dict[str, str]]]:
    """GitHub: an include entry extends every combination whose original values it does not
    overwrite (added values may be overwritten); one that fits none becomes a new combination.

    `combos` are extended in place; returns the ids of those extended, and the new combinations."""
    originals = [dict(c) for c in combos] if build.include else []
    extended: set[int] = set()
    extra: list[dict[str, str]] = []
    for entry in build.include:
        matched = False
        for combo, original in zip(combos, originals, strict=True):
            if all(original[k] == v for k, v in entry if k in axes):
                combo.update(entry)
                extended.add(id(combo))
                matched = True
        if not matched:
            extra.append(dict(entry))
    return extended, extra


def _with_build(build: Build, values: Mapping[str, str]) -> Values:
    return (("build", build.name), *values.items(), *_build_tail(build))


def _build_tail(build: Build) -> Values:
    """Facts a build states about itself, carried by each of its cells."""
    tail = [("uses", ",".join(build.uses))] if build.uses else []
    return (*tail, ("needs-gpu", "true")) if build.needs_gpu else tuple(tail)


def _resolve(
    cell: Cell, untouched: bool, manifest: Manifest, index: RuleIndex, event: str, profile: EventProfile | None
) -> Cell:
    if cell.excluded is not None:  # by the manifest
        return cell
    reason = _event_exclusion(cell.values, event, profile) if profile else ""
    if reason:
        return replace(cell, excluded=reason, excluded_by="event")
    return cell if untouched else _apply_rules(cell, manifest, index)


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
        changed = False
        for rule in fresh:
            applied.add(rule.id)
            cell = cell.apply(rule)
            if cell.excluded is not None:
                return cell
            if _changes_values(rule):
                changed = True
                break
        if not changed:  # same values, same facts: another pass would find no fresh rule
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
    """What decides a cell's build: its values and what rules added (env, flags follow)."""
    return (cell.values, cell.rule_env, cell.rule_flags)
