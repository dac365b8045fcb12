"""The file edge: reading the manifest, rule files, the catalog and the schemas.

Everything here reads files and hands text to the pure core; every problem of every
file is collected and raised together as one ConfigError.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ci_matrix.core.catalog import Catalog, catalog_from
from ci_matrix.core.document import Document, parse_yaml, schema_problems
from ci_matrix.core.facts import known_facts
from ci_matrix.core.knowledge import Rule, duplicate_ids, rules_from_document
from ci_matrix.core.manifest import Manifest, manifest_from
from ci_matrix.errors import ConfigError, Problem, UsageError

DEFAULT_MANIFEST = "ci-matrix.yml"
_PACKAGE = resources.files("ci_matrix")


@functools.cache
def schema(name: str) -> Mapping[str, Any]:
    """A JSON Schema shipped in the package, e.g. `manifest`."""
    text = (_PACKAGE / "schemas" / f"{name}.schema.json").read_text(encoding="utf-8")
    loaded: Mapping[str, Any] = json.loads(text)
    return loaded


def load_document(text: str, file: str, schema_name: str) -> tuple[Document | None, list[Problem]]:
    """Parse and schema-check one YAML document."""
    document, problems = parse_yaml(text, file)
    if document is None:
        return None, problems
    if not isinstance(document.root, dict):
        return None, [Problem(file, 1, 1, "", "expected a mapping at the top of the file")]
    return document, schema_problems(document, schema(schema_name))


@functools.cache
def catalog() -> Catalog:
    """The built-in catalog of platforms, toolkits, archs and targets."""
    text = (_PACKAGE / "data" / "catalog.yaml").read_text(encoding="utf-8")
    document, problems = load_document(text, "ci_matrix/data/catalog.yaml", "catalog")
    if document is None or problems:
        raise ConfigError(problems)
    return catalog_from(document.root)


def builtin_rule_files() -> list[tuple[str, str]]:
    """(name, text) of every built-in rule file, in name order."""
    folder = _PACKAGE / "knowledge"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".yaml")), key=lambda f: f.name)
    return [(f"ci_matrix/knowledge/{f.name}", f.read_text(encoding="utf-8")) for f in files]


def knowledge_fixture(name: str) -> bytes:
    """The bytes of a built-in rule fixture log (`knowledge/fixtures/...`)."""
    return (_PACKAGE / "knowledge" / "fixtures" / name).read_bytes()


def read_rules(
    files: Iterable[tuple[str, str]], facts: frozenset[str]
) -> tuple[list[Rule], list[Problem]]:
    """Rules of several rule files, with every problem of all of them."""
    rules: list[Rule] = []
    problems: list[Problem] = []
    for name, text in files:
        document, found = load_document(text, name, "rules")
        problems += found
        if document is not None and not found:
            more, found = rules_from_document(document, facts)
            rules += more
            problems += found
    for first, again in duplicate_ids(rules):
        file, _, line = again.origin.rpartition(":")
        message = f"rule id {again.id!r} is already used at {first.origin}"
        problems.append(Problem(file, int(line), 1, "", message))
    return rules, problems


@dataclass(frozen=True)
class Project:
    """A loaded manifest with the knowledge base that applies to it."""

    manifest: Manifest
    rules: tuple[Rule, ...]
    root: Path  # folder of the manifest; project paths are relative to it


def load_project(path: Path) -> Project:
    """Read the manifest at `path` and the rule files it names; raise ConfigError on problems."""
    text = _read_manifest_text(path)
    document, problems = load_document(text, str(path), "manifest")
    if document is None or problems:
        raise ConfigError(problems)
    manifest, problems = manifest_from(document, catalog())
    facts = known_facts(manifest.extra_axes if manifest else ())
    local = [
        _read_rule_file(path.parent, name) for name in (manifest.rule_files if manifest else ())
    ]
    rules, rule_problems = read_rules([*builtin_rule_files(), *local], facts)
    problems += rule_problems
    if manifest is None or problems:
        raise ConfigError(problems)
    return Project(manifest, tuple(rules), path.parent)


def _read_manifest_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(
            f"{path}: no manifest here; pass --manifest PATH or create {DEFAULT_MANIFEST}"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the manifest: {exc}") from None


def _read_rule_file(root: Path, name: str) -> tuple[str, str]:
    path = root / name
    try:
        return str(path), path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Problem(str(path), 0, 0, "", f"cannot read rule file: {exc}")]) from None


def builtin_rules() -> list[Rule]:
    """The built-in knowledge base; its files are checked by the test suite."""
    rules, problems = read_rules(builtin_rule_files(), known_facts())
    if problems:
        raise ConfigError(problems)
    return rules


def check_file(path: Path) -> list[Problem]:
    """Every problem of one manifest or rule file (a file with top-level `rules:` and no
    `builds:` is a rule file)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [Problem(str(path), 0, 0, "", f"cannot read: {exc}")]
    document, problems = parse_yaml(text, str(path))
    if document is None:
        return problems
    root = document.root
    if isinstance(root, dict) and "rules" in root and "builds" not in root:
        return read_rules([(str(path), text)], known_facts(tuple(_axes_named_anywhere(root))))[1]
    try:
        load_project(path)
    except ConfigError as exc:
        return list(exc.problems)
    return []


def _axes_named_anywhere(root: Mapping[str, Any]) -> list[str]:
    """A project rule file may speak of the project's own axes; validate lets any name
    through that is written like one, and `load_project` checks it against the manifest."""
    names: list[str] = []
    for rule in root.get("rules", []) or []:
        when = rule.get("when") if isinstance(rule, dict) else None
        for clause in when if isinstance(when, list) else [when] if isinstance(when, dict) else []:
            names += [str(k) for k in clause if isinstance(clause, dict)]
    return names
