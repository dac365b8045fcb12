"""How well `ci-matrix rules draft` picks the line a rule should be written from, on the
real-log corpus (tests/corpus):

    python bench/drafts.py                           # the held-out test half
    python bench/drafts.py --split dev --failures    # the development half, with the misses
    python bench/drafts.py --split dev --round 30    # one collection round

For an unclassified failure the draft builds its signature from the log's first error line
that says what went wrong. Its ground truth here: the logs whose expected rule ci-matrix
names first, where that rule's matched line is the line a person chose to key the failure
on. Each such log is drafted as if no rule had matched it, and the draft counts as keyed
right when its error line is (or holds, or is held by) a line of that match, or is a line
that rule names on its own (another occurrence of the same failure). Printed per
domain and overall: keyed right, keyed on another error line, no error line found (and the
log's last line, the draft's fallback, not the rule's either).
"""

from __future__ import annotations

import argparse
import io
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from corpus import CORPUS, diagnosis, entries  # noqa: E402

from ci_matrix.core.knowledge import Rule  # noqa: E402
from ci_matrix.diagnose.draft import draft_line  # noqa: E402
from ci_matrix.edges import files, logs  # noqa: E402


def keyed(entry: dict[str, Any], rules: list[Rule]) -> tuple[str, str, str] | None:
    """(outcome, the draft's line, the rule's line) for one known log its rule names first;
    None for the others. Outcome: right, other (an error line, not the rule's), none (no line
    reads as an error, and the log's last line, which the draft then takes, is not the rule's)."""
    found = diagnosis(entry, rules)
    expect = str(entry["expect"]).removeprefix("new:")
    if not found.findings or found.findings[0].rule != expect or not found.findings[0].text.strip():
        return None
    key = [line.strip() for line in found.findings[0].text.splitlines() if line.strip()]
    with (CORPUS / entry["file"]).open("rb") as stream:
        lines = logs.draft_text(stream).splitlines()
    index, reads_as_error = draft_line(lines)
    chosen = lines[index].strip() if lines else ""
    right = any(chosen and (chosen in k or k in chosen) for k in key) or _names(chosen, expect, rules)
    return ("right" if right else "other" if reads_as_error else "none"), chosen, key[0]


def _names(line: str, rule: str, rules: list[Rule]) -> bool:
    """Whether the rule names the line on its own (another occurrence of the failure it keys on)."""
    found = logs.diagnose_log(io.BytesIO(line.encode() + b"\n"), rules, None, files.catalog().platforms,
                              exit_code=1)
    return any(f.rule == rule for f in found.findings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("test", "dev", "all"), default="test")
    parser.add_argument("--round", type=int, dest="round_", metavar="N", help="only collection round N")
    parser.add_argument("--failures", action="store_true", help="list the misses (development half only)")
    args = parser.parse_args(argv)
    if args.failures and args.split != "dev":
        print("failures are listed for the development half only", file=sys.stderr)
        return 2
    rules = list(files.trusted_builtin_rules())
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    misses = []
    for entry in entries(args.split, args.round_):
        if entry["kind"] != "known":
            continue
        result = keyed(entry, rules)
        if result is None:
            continue
        outcome, chosen, key = result
        for group in (entry["domain"], "overall"):
            counts[group][outcome] += 1
        if outcome != "right":
            misses.append(f"{outcome.upper()} {entry['id']}\n    draft: {chosen[:160]}\n    rule:  {key[:160]}")
    print(f"rule drafts on the real-log corpus, {args.split} half: the line a draft is built from")
    print(f"{'':10} {'keyed right':>16} {'another line':>13} {'no error line':>14}")
    for group in sorted(counts, key=lambda g: (g == "overall", g)):
        c = counts[group]
        total = sum(c.values())
        print(f"{group:10} {c['right']:>5}/{total:<4} {c['right'] / total:>5.0%} {c['other']:>13} {c['none']:>14}")
    if args.failures:
        print("\n".join(misses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
