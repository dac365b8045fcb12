"""A hit of a signature as the scanner reports it: where it is, its line and context.

The scanner reads a log in buffers (:class:`Buffer`: a piece behind the tail of the one
before); once a signature's match is located in one, :func:`found_at` takes its line, the
context lines around it and its captures, each capped at ``TEXT_LIMIT`` characters, so a
hostile line of 100 MB costs a bounded excerpt. Context lines after a hit may lie in the next
buffer: :func:`complete_after` adds them when it comes.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ci_matrix.diagnose.cleaning import strip_escapes

TEXT_LIMIT = 1000  # characters kept of a hit's text, of each context line and each capture
_NEWLINE = 0x0A
_Regex = Any  # google-re2 ships no type hints


@dataclass(frozen=True)
class Hit:
    """The last place a signature matched in a log, with its context and how often it did."""

    key: str
    line: int
    end_line: int
    text: str
    groups: Mapping[str, str]
    before: tuple[str, ...]
    after: tuple[str, ...]
    count: int  # exact up to COUNT_LIMIT matches per piece of the log, a lower bound past it
    matched: str = ""  # the text the pattern matched (capped), where a line holds much more


@dataclass(frozen=True)
class Buffer:
    """What one pass sees: a byte of left context, the previous tail, then the new piece."""

    data: bytes
    first_line: int  # line number of data[1]
    accept_after: int  # a match counts here when accept_after < its end (earlier ones did)
    ends_line: bool
    ring: tuple[str, ...]  # the lines just before data[1], for context
    tail: int = 0  # bytes of data[1:] carried from the previous buffer
    newlines: int = 0  # newlines in data[1:] (removing escapes removes none)

    @functools.cached_property
    def escaped(self) -> bool:
        """Whether the buffer holds an escape byte: looked for once, however many steps ask."""
        return b"\x1b" in self.data

    def stripped(self) -> Buffer:
        """This buffer without escape sequences (line numbers do not move: none holds a
        newline); worked out once, whichever step first needs it."""
        if not self.escaped:
            return self
        done: Buffer | None = self.__dict__.get("_stripped")
        if done is None:
            tail, piece = strip_escapes(self.data[1 : 1 + self.tail]), strip_escapes(self.data[1 + self.tail :])
            shift = self.tail - len(tail)
            done = dataclasses.replace(
                self, data=self.data[:1] + tail + piece, accept_after=self.accept_after - shift, tail=len(tail)
            )
            object.__setattr__(self, "_stripped", done)  # a cache, not state: the buffer stays as it was
        return done

    def end(self, final: bool) -> int:
        """Where a match must end to count here (one at a cut inside a line waits)."""
        return len(self.data) if self.ends_line or final else len(self.data) - 1


@dataclass(frozen=True)
class Found:
    hit: Hit
    missing_after: int  # context lines after the hit that lie in pieces not read yet


def last_match(regex: _Regex, data: bytes, start: int, until: int) -> Any:
    """Return the last match in ``data[start:until]``, looking back from the end in growing
    windows that begin at a line start (so a match is never cut off at its front)."""
    window = 256
    while True:
        begin = max(start, data.rfind(b"\n", start, max(start, until - window)) + 1)
        last = None
        for match in regex.finditer(data, begin):
            if match.end() > until:
                break
            last = match
        if last is not None or begin == start:
            return last
        window *= 16


def found_at(key: str, buf: Buffer, match: Any, line: int, context: int, final: bool) -> Found:
    data = buf.data
    start, end = match.span()
    last = max(start, end - 1)  # the last matched byte (a match never is empty)
    line_start = max(1, data.rfind(b"\n", 1, start) + 1)
    line_end = data.find(b"\n", last)
    line_end = len(data) if line_end < 0 else line_end
    before = lines_before(data, line_start, context)
    if len(before) < context:
        before = [*buf.ring, *before][-context:] if context else []
    after, complete = _lines_after(data, line_end + 1, context, final)
    hit = Hit(
        key=key,
        line=line,
        end_line=line + data.count(b"\n", start, last),
        text=_excerpt(data, line_start, line_end, start),
        groups=_groups(match),
        before=tuple(before),
        after=tuple(after),
        count=0,
        matched=_decode(data[start : min(end, start + 4 * TEXT_LIMIT)])[:TEXT_LIMIT],
    )
    return Found(hit, 0 if complete else context - len(after))


def _groups(match: Any) -> Mapping[str, str]:
    """Named captures as text; a group that took no part in the match is empty."""
    values = {name: _decode(value or b"")[:TEXT_LIMIT] for name, value in match.groupdict().items()}
    return MappingProxyType(values)


def complete_after(found: Found, buf: Buffer, final: bool) -> Found:
    """Add context lines after ``found`` from the next buffer, which holds them."""
    pos = 1
    for _ in range(found.hit.end_line + 1 + len(found.hit.after) - buf.first_line):
        pos = buf.data.find(b"\n", pos) + 1
        if pos == 0:
            return found
    lines, complete = _lines_after(buf.data, pos, found.missing_after, final)
    hit = dataclasses.replace(found.hit, after=(*found.hit.after, *lines))
    return Found(hit, 0 if complete else found.missing_after - len(lines))


def lines_before(data: bytes, pos: int, count: int) -> list[str]:
    """Return up to ``count`` lines that end just before ``pos``, ``data[1:]`` only."""
    found: list[str] = []
    stop = pos - 1 if data[pos - 1] == _NEWLINE else pos
    while pos > 1 and len(found) < count:
        start = max(1, data.rfind(b"\n", 1, stop) + 1)
        found.append(_excerpt(data, start, stop, start))
        pos, stop = start, start - 1
    found.reverse()
    return found


def _lines_after(data: bytes, pos: int, count: int, final: bool) -> tuple[list[str], bool]:
    """Return up to ``count`` whole lines from ``pos`` on, and whether that is all of them."""
    found: list[str] = []
    while len(found) < count:
        newline = data.find(b"\n", pos)
        if newline < 0:
            if final and pos < len(data):
                found.append(_excerpt(data, pos, len(data), pos))
            return found, final
        found.append(_excerpt(data, pos, newline, pos))
        pos = newline + 1
    return found, True


def _excerpt(data: bytes, start: int, stop: int, focus: int) -> str:
    """Return ``data[start:stop]`` as text of at most ``TEXT_LIMIT`` characters around ``focus``."""
    if stop - start > 4 * TEXT_LIMIT:  # a UTF-8 character is at most 4 bytes
        start = max(start, focus - TEXT_LIMIT // 4)
        stop = min(stop, start + 4 * TEXT_LIMIT)
    return _decode(data[start:stop])[:TEXT_LIMIT]


def _decode(raw: bytes) -> str:
    """Text to show: context lines may come from a piece whose escapes were never removed."""
    return strip_escapes(raw).decode("utf-8", "replace")
