"""Assign each real-log corpus entry to the development or the test half, once.

    python bench/corpus_split.py

Entries are taken per domain in the order of the sha256 of their id and dealt alternately
to `dev` and `test`, so each domain is split in half by a rule nobody chose per entry.
An entry that already has a split keeps it (issue 10's named cases are `dev` from the
start: they were read while writing the signatures). An entry marked `read_before_split: true`
(its thread was read while writing a rule) goes to `dev` and is not counted in the dealing.
Run before writing signatures for new entries; never move an entry from `test` to `dev`.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import yaml

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "corpus"


def split(entries: list[dict]) -> int:
    """Give every entry without a split one; return how many were assigned."""
    read = [e for e in entries if e.get("read_before_split") and "split" not in e]
    for entry in read:
        entry["split"] = "dev"
    dealt = [e for e in entries if not e.get("read_before_split")]
    fresh = sorted((e for e in dealt if "split" not in e), key=lambda e: hashlib.sha256(e["id"].encode()).hexdigest())
    dev = sum(1 for e in dealt if e.get("split") == "dev")
    test = sum(1 for e in dealt if e.get("split") == "test")
    for entry in fresh:
        entry["split"] = "dev" if dev <= test else "test"
        dev, test = (dev + 1, test) if entry["split"] == "dev" else (dev, test + 1)
    return len(read) + len(fresh)


def main() -> int:
    for index in sorted(CORPUS.glob("index-*.yaml")):
        entries = yaml.safe_load(index.read_text(encoding="utf-8")) or []
        count = split(entries)
        if count:
            text = yaml.safe_dump(entries, sort_keys=False, allow_unicode=True, width=120)
            index.write_text(text, encoding="utf-8")
        halves = {s: sum(1 for e in entries if e["split"] == s) for s in ("dev", "test")}
        print(f"{index.name}: {count} assigned; dev {halves['dev']}, test {halves['test']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
