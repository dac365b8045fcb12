"""Reading the diagnosis files that a run uploaded as artifacts: attacker input for a fork's run.

Only regular files named `*.json` count (anything else but a folder is ignored, named), at most
MAX_FILES of them, each at most MAX_FILE_BYTES, UTF-8 JSON that `schemas/diagnosis.schema.json`
accepts. Files named after a cell of the plan
(`<cell id>.json`, as `run` writes them) are read first, so that a flood of other files cannot
crowd them out. Symlinks are never followed (not even to a folder), devices and pipes are never
opened, and every file left out is named with the reason. What the records may say is decided
next, in `report.accept`.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

from ci_matrix.report import Ignored

MAX_FILES = 1024  # 256 cells (GitHub's limit per matrix job) times 4 shards
MAX_FILE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Loaded:
    """Schema-valid records by file name (relative to the folder), and the files left out."""

    records: tuple[tuple[str, Mapping[str, Any]], ...]
    ignored: tuple[Ignored, ...]


def read_diagnoses(folder: Path, schema: Mapping[str, Any], cells: Collection[str]) -> Loaded:
    """Every usable diagnosis file under `folder` (artifacts download into subfolders): those
    named after one of `cells` first, each group in name order."""
    validator = jsonschema.Draft202012Validator(schema)
    candidates, ignored = _candidates(folder)
    candidates.sort(key=lambda name: (Path(name).stem not in cells, name))
    records: list[tuple[str, Mapping[str, Any]]] = []
    for index, name in enumerate(candidates):
        if index >= MAX_FILES:
            ignored.append(Ignored(name, f"more than {MAX_FILES:,} diagnosis files"))
            continue
        record, reason = _load(folder / name, validator)
        if record is None:
            ignored.append(Ignored(name, reason))
        else:
            records.append((name, record))
    return Loaded(tuple(records), tuple(ignored))


def _candidates(folder: Path) -> tuple[list[str], list[Ignored]]:
    """Names of the regular `*.json` files; every other entry but a folder is ignored, named
    (`run` writes nothing else into the diagnoses folder)."""
    names: list[str] = []
    ignored: list[Ignored] = []
    for name, mode in _walk(folder):
        if stat.S_ISLNK(mode):
            ignored.append(Ignored(name, "a symbolic link"))
        elif not stat.S_ISREG(mode):
            ignored.append(Ignored(name, "not a regular file"))
        elif not name.endswith(".json"):
            ignored.append(Ignored(name, "not a .json file"))
        else:
            names.append(name)
    return names, ignored


def _walk(folder: Path) -> Iterator[tuple[str, int]]:
    """(relative name, lstat mode) of every entry below `folder`, without following symlinks."""
    if not folder.is_dir():
        return
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs.sort()
        for entry in sorted(files) + [d for d in dirs if Path(root, d).is_symlink()]:
            path = Path(root, entry)
            try:
                yield str(path.relative_to(folder)), path.lstat().st_mode
            except OSError:
                continue


def _load(path: Path, validator: jsonschema.Draft202012Validator) -> tuple[Mapping[str, Any] | None, str]:
    data, reason = _read(path)
    if data is None:
        return None, reason
    try:
        record = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "not UTF-8"
    except (ValueError, RecursionError):
        return None, "not JSON (or nested too deeply)"
    error = jsonschema.exceptions.best_match(validator.iter_errors(record))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_schema_path)  # the schema's words, not the file's
        return None, f"does not match schemas/diagnosis.schema.json ({where})"
    return record, ""


def _read(path: Path) -> tuple[bytes | None, str]:
    """The file's bytes; never follows a symlink or blocks on a pipe that replaced the file."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        return None, f"cannot be opened ({exc.strerror})"
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None, "not a regular file"
        if info.st_size > MAX_FILE_BYTES:
            return None, "larger than 1 MiB"
        data = handle.read(MAX_FILE_BYTES + 1)
    return (data, "") if len(data) <= MAX_FILE_BYTES else (None, "larger than 1 MiB")
