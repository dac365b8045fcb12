"""The file edge: reading the manifest, rule files, the catalog and the schemas.

Everything here reads files and hands text to the pure core; every problem of every
file is collected and raised together as one ConfigError.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ci_matrix.core.catalog import Catalog, catalog_from
from ci_matrix.core.document import Document, did_you_mean, fast_load, parse_yaml, schema_problems
from ci_matrix.core.facts import known_facts
from ci_matrix.core.knowledge import Rule, duplicate_ids, rules_from_document, unknown_refinements
from ci_matrix.core.manifest import Manifest, manifest_from
from ci_matrix.core.provision import Toolkits, toolkits_from
from ci_matrix.errors import ConfigError, Problem, UsageError

if TYPE_CHECKING:
    from ci_matrix.diagnose.evidence import Extractors
    from ci_matrix.diagnose.tolerant import SetForms

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
    # package data, checked against its schema by the tests
    return catalog_from(_builtin_data("ci_matrix/data/catalog.yaml", text))


@functools.cache
def toolkits() -> Toolkits:
    """Where `ci-matrix setup` gets each toolchain (`data/toolkits.yaml`)."""
    text = (_PACKAGE / "data" / "toolkits.yaml").read_text(encoding="utf-8")
    # package data, checked against its schema by the tests
    return toolkits_from(_builtin_data("ci_matrix/data/toolkits.yaml", text))


def builtin_rule_files() -> list[tuple[str, str]]:
    """(name, text) of every built-in rule file, in name order."""
    folder = _PACKAGE / "knowledge"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".yaml")), key=lambda f: f.name)
    return [(f"ci_matrix/knowledge/{f.name}", f.read_text(encoding="utf-8")) for f in files]


def evidence_files() -> list[tuple[str, str]]:
    """(name, text) of every built-in evidence file (`knowledge/evidence/*.yaml`)."""
    folder = _PACKAGE / "knowledge" / "evidence"
    found = sorted((f for f in folder.iterdir() if f.name.endswith(".yaml")), key=lambda f: f.name)
    return [(f"ci_matrix/knowledge/evidence/{f.name}", f.read_text(encoding="utf-8")) for f in found]


@functools.cache
def extractors() -> Extractors:
    """The knowledge base's evidence extractors (package data, checked against
    `schemas/evidence.schema.json` by the tests, read here on the fast path)."""
    from ci_matrix.diagnose.evidence import extractors_from, merged  # the scanner's side only

    return merged(extractors_from(_builtin_data(name, text)) for name, text in evidence_files())


def knowledge_fixture(name: str) -> bytes:
    """The bytes of a built-in rule fixture log (`knowledge/fixtures/...`)."""
    return (_PACKAGE / "knowledge" / "fixtures" / name).read_bytes()


def read_rules(files: Iterable[tuple[str, str]], facts: frozenset[str]) -> tuple[list[Rule], list[Problem]]:
    """Rules of several rule files, with every problem of all of them."""
    rules: list[Rule] = []
    problems: list[Problem] = []
    for name, text in files:
        fast = _fast_rules(text, name, facts)
        if fast is not None:
            rules += fast
            continue
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
    document: Document | None = None
    manifest, problems = _fast_manifest(text, str(path))
    if manifest is None:
        document, problems = load_document(text, str(path), "manifest")
        if document is None or problems:
            raise ConfigError(problems)
        manifest, problems = manifest_from(document, catalog())
    facts = known_facts(manifest.extra_axes if manifest else ())
    local = [_read_rule_file(path.parent, name) for name in (manifest.rule_files if manifest else ())]
    local_rules, rule_problems = read_rules(local, facts)
    rules = [*trusted_builtin_rules(), *local_rules]
    problems += rule_problems + _clashing_ids(local_rules) + _unknown_refinements(rules)
    ids = {r.id for r in rules}
    if document is None and manifest is not None and manifest.ignore_rules - ids:
        document, _ = parse_yaml(text, str(path))  # the fast path keeps no positions
    if document is not None:
        problems += _unknown_ignored(document, ids)
    if manifest is None or problems:
        raise ConfigError(problems)
    return Project(manifest, tuple(rules), path.parent)


def _clashing_ids(local_rules: Iterable[Rule]) -> list[Problem]:
    """Project rules reusing a built-in rule's id (clashes among them are read_rules' own)."""
    builtin = {r.id: r for r in trusted_builtin_rules()}
    problems = []
    for rule in local_rules:
        if rule.id in builtin:
            file, _, line = rule.origin.rpartition(":")
            message = f"rule id {rule.id!r} is already used by the built-in rule at {builtin[rule.id].origin}"
            problems.append(Problem(file, int(line), 1, "", message))
    return problems


def _unknown_refinements(rules: Iterable[Rule]) -> list[Problem]:
    """A `refines` id that names no rule would never refine anything."""
    problems = []
    for rule, target, hint in unknown_refinements(rules):
        file, _, line = rule.origin.rpartition(":")
        problems.append(Problem(file, int(line), 1, "", f"rule {rule.id!r} refines unknown rule {target!r}{hint}"))
    return problems


def _unknown_ignored(document: Document, known: set[str]) -> list[Problem]:
    """A misspelt id in `ignore-rules` would silently ignore nothing."""
    return [
        document.problem(("ignore-rules", i), f"unknown rule {rule_id!r}{did_you_mean(str(rule_id), known)}")
        for i, rule_id in enumerate(document.root.get("ignore-rules", []))
        if rule_id not in known
    ]


def _fast_rules(text: str, file: str, facts: frozenset[str]) -> list[Rule] | None:
    """A valid rule file read without positions (origins from its `id:` lines); None when
    anything is wrong, so that the slow path reports every problem where it is."""
    data = fast_load(text)
    if not isinstance(data, dict) or schema_problems(Document(file, data), schema("rules")):
        return None
    rules, problems = rules_from_document(Document(file, data), facts)
    if problems:
        return None
    lines = _id_lines(text)
    return [replace(rule, origin=f"{file}:{lines.get(rule.id, 1)}") for rule in rules]


def _fast_manifest(text: str, file: str) -> tuple[Manifest | None, list[Problem]]:
    """A valid manifest without keeping positions; None when anything is wrong, so that
    the slow path with ruamel.yaml reports every problem at its line and column."""
    data = fast_load(text)
    if not isinstance(data, dict):
        return None, []
    document = Document(file, data)
    if schema_problems(document, schema("manifest")):
        return None, []
    manifest, problems = manifest_from(document, catalog())
    return (manifest, []) if not problems else (None, [])


def _read_manifest_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no manifest here; pass --manifest PATH or create {DEFAULT_MANIFEST}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the manifest: {exc}") from None


def _read_rule_file(root: Path, name: str) -> tuple[str, str]:
    path = root / name
    try:
        return str(path), path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Problem(str(path), 0, 0, "", f"cannot read rule file: {exc}")]) from None


def builtin_rules() -> list[Rule]:
    """The built-in knowledge base, fully checked: schema, facts, positions."""
    rules, problems = read_rules(builtin_rule_files(), known_facts())
    problems += _unknown_refinements(rules)
    if problems:
        raise ConfigError(problems)
    return rules


def _builtin_data(name: str, text: str) -> Any:
    """The data of a built-in file read on the fast path; one that does not parse (an edited
    install, a rule being written) is parsed again to say where, as a project's file is."""
    data = fast_load(text)
    if data is None:
        _, problems = parse_yaml(text, name)
        raise ConfigError(problems or [Problem(name, 1, 1, "", "not a YAML document")])
    return data


@functools.cache
def trusted_builtin_rules() -> tuple[Rule, ...]:
    """The built-in knowledge base on the fast path of every command.

    The files ship with the package and the test suite checks them against the schema
    (`builtin_rules`), so here they are not re-validated, and their data comes from
    `knowledge/compiled.json` where that holds the files as they are (else from PyYAML's C
    parser): this keeps `ci-matrix render` starting in a fraction of the time ruamel.yaml and
    jsonschema would take over some thousand lines of rules.
    """
    found_files = builtin_rule_files()
    compiled = _compiled(found_files)
    if compiled is None:
        compiled = [(_builtin_data(name, text), _id_lines(text)) for name, text in found_files]
    rules: list[Rule] = []
    for (name, _), (data, lines) in zip(found_files, compiled, strict=True):
        try:
            found, problems = rules_from_document(Document(name, data), known_facts())
        except (KeyError, TypeError, ValueError, AttributeError):
            # A file that is not what the schema says (an edited install, a rule being written):
            # checked in full, to say where, rather than a traceback from the reader.
            builtin_rules()
            raise
        if problems:
            raise ConfigError(problems)
        rules += [replace(rule, origin=f"{name}:{lines.get(rule.id, 1)}") for rule in found]
    return tuple(rules)


COMPILED = _PACKAGE / "knowledge" / "compiled.json"


def _files_key(found_files: list[tuple[str, str]]) -> str:
    """What `compiled.json` must have been made from: a hash of every rule file's name and text."""
    digest = hashlib.sha256()
    for name, text in found_files:
        digest.update(f"{name}\0{len(text)}\0{text}".encode())
    return digest.hexdigest()


def compiled_knowledge() -> str:
    """The built-in rule files' data as JSON with the hash of their text, for
    `knowledge/compiled.json` (`python -m ci_matrix.edges.files` writes it): JSON reads some
    thirty times faster than the YAML it comes from, and a file that no longer matches the
    rule files is ignored, never trusted."""
    found_files = builtin_rule_files()
    datas = [{"data": _builtin_data(name, text), "lines": _id_lines(text)} for name, text in found_files]
    compiled = {"key": _files_key(found_files), "files": datas}
    return json.dumps(compiled, ensure_ascii=False, separators=(",", ":")) + "\n"


def _compiled(found_files: list[tuple[str, str]]) -> list[tuple[Any, dict[str, int]]] | None:
    """Each rule file's data and `id:` lines from `compiled.json`, or None where it is
    missing, unreadable or was made from other texts (a rule file edited since)."""
    try:
        compiled = json.loads(COMPILED.read_text(encoding="utf-8"))
        if compiled["key"] != _files_key(found_files) or len(compiled["files"]) != len(found_files):
            return None
        return [(each["data"], dict(each["lines"])) for each in compiled["files"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


_ID_LINE = re.compile(r"""^[ \t]*-?[ \t]*id:[ \t]*['"]?([a-z0-9-]+)['"]?\s*$""", re.MULTILINE)


def _id_lines(text: str) -> dict[str, int]:
    """The line of each `id:` in a rule file: the fast path keeps no positions (lines are
    counted from one `id:` to the next, not each from the start of the file)."""
    lines, line, pos = {}, 1, 0
    for m in _ID_LINE.finditer(text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        lines[m[1]] = line
    return lines


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


def add_draft(rule_file: Path, rule_yaml: str, fixture_name: str, fixture: str) -> None:
    """Append a drafted rule to a project rule file (created when missing) and write its fixture
    beside it; the file is checked afterwards, and left as it was when the result is invalid."""
    before = rule_file.read_text(encoding="utf-8") if rule_file.exists() else None
    base = before if before is not None and before.strip() else "rules:\n"
    indent = re.search(r"^([ \t]*)- id:", base, re.MULTILINE)
    pad = indent[1] if indent else "  "
    body = "".join(f"{pad}{line}\n" if line.strip() else "\n" for line in rule_yaml.splitlines())
    rule_file.parent.mkdir(parents=True, exist_ok=True)
    rule_file.write_text(base.rstrip("\n") + "\n\n" + body, encoding="utf-8")
    fixture_path = rule_file.parent / "fixtures" / fixture_name
    fixture_path.parent.mkdir(parents=True, exist_ok=True)
    fixture_path.write_text(fixture, encoding="utf-8")
    problems = check_file(rule_file)
    if problems:
        if before is None:
            rule_file.unlink()
        else:
            rule_file.write_text(before, encoding="utf-8")
        raise ConfigError(problems)


def rule_ids_in(path: Path) -> set[str]:
    """The rule ids a valid manifest (its project rules and the built-in ones) or rule file defines."""
    data = fast_load(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and "rules" in data and "builds" not in data:
        return {str(rule.get("id")) for rule in data.get("rules") or [] if isinstance(rule, dict)}
    return {r.id for r in load_project(path).rules}


def _axes_named_anywhere(root: Mapping[str, Any]) -> list[str]:
    """A project rule file may speak of the project's own axes; validate lets any name
    through that is written like one, and `load_project` checks it against the manifest."""
    names: list[str] = []
    for rule in root.get("rules", []) or []:
        when = rule.get("when") if isinstance(rule, dict) else None
        for clause in when if isinstance(when, list) else [when] if isinstance(when, dict) else []:
            names += [str(k) for k in clause if isinstance(clause, dict)]
    return names


SET_FORMS = _PACKAGE / "knowledge" / "set-forms.json"


def _set_forms_key() -> str:
    """What `set-forms.json` must have been made with: a hash of the code that works the
    forms out (`diagnose/tolerant.py` and the escape run it steps over)."""
    from ci_matrix.diagnose.cleaning import ESCAPE_RUN_RE2

    digest = hashlib.sha256((_PACKAGE / "diagnose" / "tolerant.py").read_bytes())
    digest.update(ESCAPE_RUN_RE2.encode())
    return digest.hexdigest()


def set_forms_json() -> str:
    """The Set forms of every built-in signature and evidence extractor, by pattern, with the
    hash of the code that worked them out, for `knowledge/set-forms.json` (`python -m
    ci_matrix.edges.files` writes it). One pattern a line, so that a rule's change is a few
    lines of its diff."""
    from ci_matrix.diagnose.engine import signatures
    from ci_matrix.diagnose.scanner import checked_set_forms

    # every pattern checked (RE2 takes it, it matches no empty string): the file vouches for them
    by_pattern = checked_set_forms([*signatures(trusted_builtin_rules()), *extractors().signatures()])
    lines = [json.dumps({"key": _set_forms_key()})[:-1] + ', "forms": {']
    for n, (pattern, forms) in enumerate(sorted(by_pattern.items())):
        entry = [forms.plain, forms.tolerant, forms.exact, forms.confirm]
        lines.append(json.dumps(pattern, ensure_ascii=False) + ": " + json.dumps(entry, ensure_ascii=False)
                     + ("," if n < len(by_pattern) - 1 else ""))
    return "\n".join([*lines, "}}"]) + "\n"


@functools.cache
def shipped_set_forms() -> Mapping[str, SetForms]:
    """The Set forms `set-forms.json` holds, by pattern, or none where it is missing,
    unreadable or was made by other code than this (each entry is keyed by its pattern, so
    rules edited since only miss theirs: the scanner works those out and checks them). A
    pattern found here was checked when the file was written, so the scanner compiles it
    only when a log may hold it."""
    from ci_matrix.diagnose.tolerant import SetForms

    try:
        shipped = json.loads(SET_FORMS.read_text(encoding="utf-8"))
        if shipped["key"] != _set_forms_key():
            return {}
        return {pattern: SetForms(plain, tolerant, exact, confirm)
                for pattern, (plain, tolerant, exact, confirm) in shipped["forms"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


if __name__ == "__main__":  # python -m ci_matrix.edges.files: rewrite knowledge/compiled.json and set-forms.json
    Path(str(COMPILED)).write_text(compiled_knowledge(), encoding="utf-8")
    Path(str(SET_FORMS)).write_text(set_forms_json(), encoding="utf-8")
