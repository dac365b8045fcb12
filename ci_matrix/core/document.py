"""YAML documents that keep the position of every node, validated by a JSON Schema.

Every problem is collected, never just the first one, and each is located at
`file:line:col` with the path inside the document and what was expected.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from ci_matrix.errors import Problem

PathPart = str | int
Path = tuple[PathPart, ...]


def format_path(path: Iterable[PathPart]) -> str:
    """`("builds", "kernels", "archs", 1)` -> `builds.kernels.archs[1]`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` when a close name exists, else an empty string."""
    close = difflib.get_close_matches(str(word), sorted(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass(frozen=True)
class Document:
    """A parsed YAML file: its data (plain dicts and lists) and the positions of its nodes."""

    file: str
    root: Any

    @property
    def data(self) -> Any:
        """The document's content."""
        return self.root

    def position(self, path: Path, *, key: bool = False) -> tuple[int, int]:
        """1-based line and column of the node at `path` (of its key, when `key`)."""
        node, line, col = self.root, 1, 1
        for depth, part in enumerate(path):
            lc = getattr(node, "lc", None)
            try:
                child = node[part]
            except (KeyError, IndexError, TypeError):
                break
            if lc is not None:
                last = depth == len(path) - 1
                line, col = _child_position(lc, part, key and last)
            node = child
        return line, col

    def problem(self, path: Path, message: str, *, key: bool = False) -> Problem:
        """A problem located at the node at `path`."""
        line, col = self.position(path, key=key)
        return Problem(self.file, line, col, format_path(path), message)


def _child_position(lc: Any, part: PathPart, key: bool) -> tuple[int, int]:
    if isinstance(part, int):
        line, col = lc.item(part)
    else:
        line, col = lc.key(part) if key else lc.value(part)
    return line + 1, col + 1


class _FastLoader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader):  # type: ignore[misc]
    """PyYAML's C parser with YAML 1.2 core scalars, floats and dates kept as text, and
    duplicate keys refused: the same data ruamel.yaml gives, many times faster."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        keys = [self.construct_object(key, deep=deep) for key, _ in node.value]
        if len(keys) != len(set(map(str, keys))):
            raise yaml.constructor.ConstructorError(None, None, "duplicate key", node.start_mark)
        return super().construct_mapping(node, deep=deep)


_FastLoader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in (
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("int", r"^[-+]?[0-9]+$", "-+0123456789"),
    ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
):
    _FastLoader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(_pattern), list(_first))


def fast_load(text: str) -> Any:
    """The data of a YAML document without positions, or None when anything is off (a
    syntax error, a duplicate key): the caller then parses again with positions."""
    try:
        return yaml.load(text, Loader=_FastLoader)
    except yaml.YAMLError:
        return None


@functools.cache
def _round_trip() -> Any:
    """ruamel.yaml's round-trip loader, keeping floats and dates as the text written
    (`1.80` stays `1.80`, not 1.8). Imported only when positions are needed."""
    from ruamel.yaml.constructor import RoundTripConstructor

    class TextConstructor(RoundTripConstructor):
        pass

    for tag in ("float", "timestamp"):
        TextConstructor.add_constructor(f"tag:yaml.org,2002:{tag}", RoundTripConstructor.construct_yaml_str)
    return TextConstructor


def parse_yaml(text: str, file: str) -> tuple[Document | None, list[Problem]]:
    """Parse YAML text; a syntax error becomes a located problem instead of an exception."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError

    loader = YAML(typ="rt")
    loader.Constructor = _round_trip()
    try:
        root = loader.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        what = exc.problem or exc.context or "invalid YAML"
        return None, [Problem(file, line, col, "", f"YAML syntax error: {what}")]
    return Document(file, root), []


def schema_problems(document: Document, schema: Mapping[str, Any]) -> list[Problem]:
    """Every violation of `schema` in the document, located and explained."""
    import jsonschema  # only where a document is checked: the built-in files' fast path never is

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(document.root), key=_error_order)
    problems: list[Problem] = []
    for error in errors:
        problems.extend(_explain(document, error))
    return _dedupe(problems)


def _error_order(error: Any) -> tuple[int, ...]:
    return tuple(len(str(p)) for p in error.absolute_path)


def _dedupe(problems: Sequence[Problem]) -> list[Problem]:
    seen: dict[tuple[int, int, str], Problem] = {}
    for p in problems:
        seen.setdefault((p.line, p.column, p.message), p)
    return sorted(seen.values(), key=lambda p: (p.line, p.column, p.message))


def _explain(document: Document, error: Any) -> Iterator[Problem]:
    path: Path = tuple(error.absolute_path)
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    kind = error.validator
    if kind == "additionalProperties":
        yield from _unknown_keys(document, path, error.instance, schema)
    elif kind == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        for name in missing:
            yield document.problem(path, f"missing required key {name!r}")
    elif kind == "enum":
        yield document.problem(path, _enum_message(error.instance, error.validator_value, schema))
    elif kind in ("minItems", "minProperties") and not error.instance:
        yield document.problem(path, f"empty {_noun(schema, path)}: give at least one value")
    else:
        yield document.problem(path, _expected(error, schema))


def _unknown_keys(document: Document, path: Path, instance: Any, schema: Any) -> Iterator[Problem]:
    known = sorted(schema.get("properties", {}))
    for name in instance:
        if name in known:
            continue
        hint = did_you_mean(str(name), known)
        listing = ", ".join(known)
        yield document.problem(
            (*path, name), f"unknown key {name!r}; expected one of: {listing}{hint}", key=True
        )


def _enum_message(value: Any, choices: Sequence[Any], schema: Mapping[str, Any]) -> str:
    words = [str(c) for c in choices]
    hint = did_you_mean(str(value), words)
    return f"unknown {schema.get('title', 'value')} {value!r}; expected one of: {', '.join(words)}{hint}"


def _noun(schema: Mapping[str, Any], path: Path) -> str:
    title = schema.get("title")
    if isinstance(title, str):
        return title
    return str(path[-1]) if path else "document"


def _expected(error: Any, schema: Mapping[str, Any]) -> str:
    expected = schema.get("x-expected")
    if isinstance(expected, str):
        return f"expected {expected}, got {_show(error.instance)}"
    if error.validator == "type":
        want = error.validator_value
        want_text = " or ".join(want) if isinstance(want, list) else want
        return f"expected {_article(want_text)}, got {_show(error.instance)}"
    return str(error.message)


def _article(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + word


def _show(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    return repr(value) if isinstance(value, str) else f"{type(value).__name__} {value!r}"
