"""Signatures that step over ANSI escape sequences, so the scanner's RE2 pass can run on
the log as it comes and only the few pieces where something matched are cleaned.

Removing colour codes costs Python a step per escape (about 0.2 µs), which on a coloured
CI log is most of a scan. ``escape_tolerant(pattern)`` rewrites a signature so that after
every character it may match, and after a line start, it also steps over a run of escape
sequences (``ESCAPE_RUN_RE2``, a superset of what cleaning removes). Whatever the original
matches in the cleaned text, the rewrite matches in the raw text. It may match more
(word boundaries are dropped, and an escape's bytes may be read either way), so it only
says where to look: the original pattern, on the cleaned piece, has the last word.

The pattern is parsed with Python's own regular-expression parser, whose tree for the
RE2 subset the knowledge base uses is the same as RE2's; syntax where the two differ is
refused (``None``), and the scanner then cleans every piece first, as it always did.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

try:  # Python 3.11 and newer
    from re import _constants as sre  # type: ignore[attr-defined]
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # Python 3.10 (the oldest pyproject.toml allows): the same modules, older names
    import sre_constants as sre
    import sre_parse

from ci_matrix.diagnose.cleaning import ESCAPE_RUN_RE2

# Syntax that RE2 and Python read differently (POSIX classes, Unicode classes, quoting,
# RE2's \C and \z, Perl's named groups and RE2's ungreedy flag): refused, not guessed.
_UNSAFE = re.compile(r"\[\[:|(?<!\\)(?:\\\\)*\\[pPQECz]|\(\?<|\(\?U")  # a backslash escaped itself is a literal
_CATEGORIES = {
    sre.CATEGORY_DIGIT: r"\d",
    sre.CATEGORY_NOT_DIGIT: r"\D",
    sre.CATEGORY_SPACE: r"\s",
    sre.CATEGORY_NOT_SPACE: r"\S",
    sre.CATEGORY_WORD: r"\w",
    sre.CATEGORY_NOT_WORD: r"\W",
}
_FLAGS = ((re.IGNORECASE, "i"), (re.DOTALL, "s"))


class _Unsupported(Exception):
    pass


def escape_tolerant(pattern: str) -> str | None:
    """Return ``pattern`` rewritten to step over escape runs, or None where it cannot be."""
    return _forms(pattern, core=False).tolerant


@dataclass(frozen=True)
class SetForms:
    """What a scanner's RE2 Sets look for on behalf of one signature.

    ``plain``: for cleaned text; ``tolerant``: for text that still holds escapes, a short
    part every match holds, rewritten to step over them (None: the pattern cannot be
    rewritten; that Set's word is never final); ``exact``: whether ``plain`` means the pattern itself (a
    Set's word is then final on a piece without escapes); ``confirm``: the pattern as a Set
    can read it whole (its tail trimmed, or its most literal part where a wide gap splits
    it), to ask which of several patterns whose literal runs a piece holds match there.
    """

    plain: str
    tolerant: str | None
    exact: bool
    confirm: str = ""


def set_forms(pattern: str) -> SetForms:
    """The forms of ``pattern`` a Set looks for.

    A Set looks for a pattern's longest run of literal characters when it has one of at
    least ``_MIN_LITERAL_RUN``: every match holds it, and the pattern itself decides
    afterwards. A Set of literals is a trie for RE2's DFA, with few states whatever the
    text; a Set of whole patterns, their classes, choices and repeats, builds states on
    every word that starts like one of them, and its DFA's walk slows with each pattern
    the knowledge base gains (with 488 patterns: 1.6x slower on a build log, 3x on hostile
    text). Otherwise, a pattern of two parts joined by a wide gap (``A[^\\n]*B``,
    ``A\\n(?:[^\\n]*\\n){0,6}B``) would keep a DFA state for "A was seen" on every line
    after A, so a Set looks only for the part with the most literal characters.
    """
    return _forms(pattern, core=True)


def _forms(pattern: str, *, core: bool) -> SetForms:
    """``pattern``'s Set forms; ``core``: whether a gapped pattern may stand by its core."""
    if _UNSAFE.search(pattern):
        return SetForms(pattern, None, True, pattern)
    try:
        tree = sre_parse.parse(pattern)
        flags = _flags(tree.state.flags, 0)
        whole = list(tree)
        gap = _core(whole) if core else None
        read = _trimmed(whole if gap is None else gap) if core else whole
        confirm = pattern if read == whole else flags + _sequence(read, "")
        run = _literal_run(whole) if core else None
        short = read if run is None else run
        plain = confirm if run is None else flags + _sequence(run, "")
        exact = gap is None and (run is None or run == whole)
        head = _tolerant_head(whole) if core else None
        return SetForms(plain, flags + _sequence(short if head is None else head, ESCAPE_RUN_RE2), exact, confirm)
    except (re.error, _Unsupported, KeyError, RecursionError):
        return SetForms(pattern, None, True, pattern)


def _trimmed(items: list[Any]) -> list[Any]:
    """``items`` less the tail a Set need not see: a pattern matches wherever it does
    without its optional tail (``[^\\n]*``, ``(?:…)?``), or with one round of a repeated
    one (``\\d+``). Such a tail matched on every byte to the end of a line keeps the Set's
    DFA in a match state that it must report again at each step."""
    items = list(items)
    while items:
        op, arg = items[-1]
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            low, _, sub = arg
            if low > 1:
                items[-1] = (sre.MAX_REPEAT, (low, low, sub))
                return items
            items[-1:] = list(sub) if low == 1 else []
        elif op is sre.SUBPATTERN:
            group, on, off, sub = arg
            inner = _trimmed(list(sub))
            if inner:
                items[-1] = (op, (group, on, off, inner))
                return items
            items.pop()
        elif op is sre.BRANCH:
            branches = [_trimmed(list(branch)) for branch in arg[1]]
            if all(branches):
                items[-1] = (op, (None, branches))
                return items
            items.pop()
        else:
            return items
    return items


_MIN_CORE = 6  # literal characters a part needs to stand for its pattern
_MIN_LITERAL_RUN = 10  # characters a run of literals needs to stand for its pattern
_TOLERANT_CHARS = 16  # characters of a literal run the escape-tolerant Set looks for


def _literal_run(items: list[Any]) -> list[Any] | None:
    """The longest run of literal characters that every match of ``items`` holds, or None
    when it is shorter than ``_MIN_LITERAL_RUN``."""
    best = _longest_run(items)
    return best if len(best) >= _MIN_LITERAL_RUN else None


def _longest_run(items: list[Any]) -> list[Any]:
    """The longest run of literal characters that every match of ``items`` holds."""
    runs: list[list[Any]] = []
    last = _runs(items, runs, [])
    return max([*runs, last], key=len)


def _tolerant_head(items: list[Any]) -> list[Any] | None:
    """What the escape-tolerant Set looks for: the first ``_TOLERANT_CHARS`` characters of
    the longest literal run every match holds, else a choice of such heads, one for each
    branch of a choice every match goes through (None when there is neither).

    That Set's word is never final (a piece it reads is stripped and the signatures
    decide), so any part every match holds will do, and a short one keeps its program
    small: the rewrite steps over an escape run after every character, about ten RE2
    instructions each, and over whole patterns the Set held 49 MB at 955 signatures."""
    best = _longest_run(items)
    if len(best) >= _MIN_CORE:
        return best[:_TOLERANT_CHARS]
    # No such run: a choice every match goes through will do, each branch by its own head.
    for op, arg in items:
        while op is sre.SUBPATTERN and not arg[1] and not arg[2] and len(arg[-1]) == 1:
            op, arg = next(iter(arg[-1]))
        if op is sre.BRANCH:
            heads = [_tolerant_head(list(branch)) for branch in arg[1]]
            if all(head is not None for head in heads):
                return [(sre.BRANCH, (None, heads))]
    return None


def _runs(items: list[Any], done: list[list[Any]], current: list[Any]) -> list[Any]:
    """Collect into ``done`` the runs of consecutive literals of ``items`` that every match
    holds, the groups without flags of their own read through; returns the run still open."""
    for op, arg in items:
        if op is sre.LITERAL:
            current.append((op, arg))
        elif op is sre.SUBPATTERN and not arg[1] and not arg[2]:
            current = _runs(list(arg[-1]), done, current)
        else:
            done.append(current)
            current = []
            if op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and arg[0] >= 1:  # its one round is held
                done.append(_runs(list(arg[2]), done, []))
    return current


def _core(items: list[Any]) -> list[Any] | None:
    """The top-level stretch of ``items`` between wide gaps with the most literal
    characters, or None when there is no gap or no stretch literal enough."""
    parts: list[list[Any]] = [[]]
    for op, arg in items:
        if _is_wide_gap(op, arg):
            parts.append([])
        else:
            parts[-1].append((op, arg))
    if len(parts) == 1:
        return None
    best = max(parts, key=_literals)
    return best if _literals(best) >= _MIN_CORE else None


def _is_wide_gap(op: Any, arg: Any) -> bool:
    """A repeat that may run over most of a line, or over lines."""
    if op not in (sre.MAX_REPEAT, sre.MIN_REPEAT):
        return False
    _, high, items = arg
    if high is not sre.MAXREPEAT and high < 8:
        return False
    return any(o is sre.LITERAL and a == 0x0A for o, a in _walk(items)) or (
        len(items) == 1 and (items[0][0] in (sre.ANY, sre.NOT_LITERAL) or _is_negated_class(*items[0]))
    )


def _is_negated_class(op: Any, arg: Any) -> bool:
    return op is sre.IN and bool(arg) and arg[0][0] is sre.NEGATE


def _walk(items: Any) -> Any:
    for op, arg in items:
        yield op, arg
        if op is sre.SUBPATTERN:
            yield from _walk(arg[-1])
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            yield from _walk(arg[2])
        elif op is sre.BRANCH:
            for branch in arg[1]:
                yield from _walk(branch)


def _literals(items: list[Any]) -> int:
    """Literal characters every match of ``items`` holds (not those inside a choice or a
    repeat)."""
    count = 0
    for op, arg in items:
        if op is sre.LITERAL:
            count += 1
        elif op is sre.SUBPATTERN:
            count += _literals(list(arg[-1]))
    return count


def _flags(on: int, off: int, scoped: bool = False) -> str:
    added = "".join(letter for flag, letter in _FLAGS if on & flag)
    removed = "".join(letter for flag, letter in _FLAGS if off & flag)
    if not (added or removed or scoped):
        return ""
    return "(?" + added + ("-" + removed if removed else "") + (":" if scoped else ")")


def _sequence(items: Any, step: str) -> str:
    """RE2 syntax for ``items``; ``step`` follows every atom and line start (an escape run,
    or nothing)."""
    return "".join(_item(op, arg, step) for op, arg in items)


def _item(op: Any, arg: Any, step: str) -> str:
    if op in (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN, sre.CATEGORY):
        return _atom(op, arg) + step
    if op is sre.AT:
        return _anchor(arg, step)
    if op is sre.SUBPATTERN:  # a capture is not needed to tell whether a pattern matches
        _, on, off, items = arg
        return _flags(on, off, scoped=True) + _sequence(items, step) + ")"
    if op is sre.BRANCH:
        return "(?:" + "|".join(_sequence(items, step) for items in arg[1]) + ")"
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
        low, high, items = arg
        lazy = "?" if op is sre.MIN_REPEAT else ""
        if high is sre.MAXREPEAT and len(items) == 1 and _takes_any_escape(*items[0]):
            # `[^\n]*` already runs over escapes: stepping over them too only grows the DFA
            return "(?:" + _atom(*items[0]) + ")" + _quantifier(low, high) + lazy
        return "(?:" + _sequence(items, step) + ")" + _quantifier(low, high) + lazy
    raise _Unsupported(str(op))


def _takes_any_escape(op: Any, arg: Any) -> bool:
    """Whether one atom matches every byte an escape run may hold (ESC and printable ASCII):
    `.` and negated classes that leave those bytes alone."""
    if op is sre.ANY:
        return True
    if op is sre.NOT_LITERAL:  # how the parser writes `[^\n]`
        arg = [(sre.NEGATE, None), (sre.LITERAL, arg)]
    elif op is not sre.IN or not arg or arg[0][0] is not sre.NEGATE:
        return False
    excluded = []
    for item, value in arg[1:]:
        if item is sre.LITERAL:
            excluded.append((value, value))
        elif item is sre.RANGE:
            excluded.append(value)
        else:
            return False
    return all(high < 0x1B or 0x1B < low <= high < 0x20 or low > 0x7E for low, high in excluded)


def _atom(op: Any, arg: Any) -> str:
    if op is sre.LITERAL:
        return _char(arg)
    if op is sre.NOT_LITERAL:
        return "[^" + _char(arg) + "]"
    if op is sre.ANY:
        return "."
    if op is sre.CATEGORY:
        return _CATEGORIES[arg]
    return "[" + "".join(_class_item(o, a) for o, a in arg) + "]"


def _class_item(op: Any, arg: Any) -> str:
    if op is sre.NEGATE:
        return "^"
    if op is sre.LITERAL:
        return _char(arg)
    if op is sre.RANGE:
        return _char(arg[0]) + "-" + _char(arg[1])
    if op is sre.CATEGORY:
        return _CATEGORIES[arg]
    raise _Unsupported(str(op))


def _anchor(at: Any, step: str) -> str:
    if at is sre.AT_BEGINNING:
        return "^" + step
    if at is sre.AT_END:
        return "$"
    if at in (sre.AT_BOUNDARY, sre.AT_NON_BOUNDARY):
        if not step:
            return r"\b" if at is sre.AT_BOUNDARY else r"\B"
        return ""  # an escape between two characters moves a word boundary: look anyway
    raise _Unsupported(str(at))


def _quantifier(low: int, high: Any) -> str:
    if high is sre.MAXREPEAT:
        return {0: "*", 1: "+"}.get(low, f"{{{low},}}")
    if (low, high) == (0, 1):
        return "?"
    return f"{{{low}}}" if low == high else f"{{{low},{high}}}"


def _char(code: int) -> str:
    char = chr(code)
    return char if char.isascii() and char.isalnum() else f"\\x{{{code:x}}}"
