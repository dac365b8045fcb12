"""Fitting a report into GitHub's size limits: pure text functions, no network.

Sizes are measured in UTF-8 bytes. GitHub states some limits in characters and some in bytes;
a text within N bytes is within N characters too, so one conservative measure serves both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

COMMENT_BODY_LIMIT = 65_536  # issue and pull request comments ("Body is too long" beyond)
OUTPUT_TEXT_LIMIT = 65_535  # check run output.summary and output.text
TITLE_LIMIT = 255  # annotation titles (characters)
ANNOTATION_MESSAGE_LIMIT = 64 * 1024  # annotation messages ("64 KB")
ANNOTATIONS_PER_REQUEST = 50  # check run create/update: 422 beyond

SECTION_SEPARATOR = "\n\n"
TRUNCATION_NOTE = (
    "\n\n… (truncated to fit GitHub's limit; the job's step summary has the full text)"
)

Item = TypeVar("Item")


def size(text: str) -> int:
    """The size GitHub's limits are checked against here: UTF-8 bytes."""
    return len(text.encode("utf-8"))


def truncate(text: str, limit: int, note: str = TRUNCATION_NOTE) -> str:
    """`text` if it fits in `limit` bytes, else its head (cut between characters) and `note`."""
    if size(text) <= limit:
        return text
    if size(note) >= limit:
        note = ""  # no room to explain; the cut text alone must still fit
    head = text.encode("utf-8")[: limit - size(note)].decode("utf-8", errors="ignore")
    return head + note


def truncate_title(title: str, limit: int = TITLE_LIMIT) -> str:
    """A title within `limit` characters, ending in an ellipsis when cut."""
    return title if len(title) <= limit else title[: limit - 1] + "…"


def sticky_body(marker: str, sections: Sequence[str], limit: int = COMMENT_BODY_LIMIT) -> str:
    """The comment body: the marker, then as many whole sections as fit, then a note on the cut.

    Whole sections are cut from the end, so the markdown that remains stays well-formed (no table
    or `<details>` cut in half) and the most important sections, which come first, survive. The
    marker always survives: it is how the next run finds this comment again.
    """
    for kept in range(len(sections), 0, -1):
        body = _join(marker, sections[:kept], len(sections) - kept)
        if size(body) <= limit:
            return body
    if not sections:
        return truncate(marker, limit)
    # Not even the first section fits whole: keep its head rather than post nothing useful.
    tail = _cut_note(len(sections) - 1) if len(sections) > 1 else ""
    room = limit - size(marker + SECTION_SEPARATOR + tail)
    return marker + SECTION_SEPARATOR + truncate(sections[0], room) + tail


def _join(marker: str, sections: Sequence[str], cut: int) -> str:
    return SECTION_SEPARATOR.join([marker, *sections]) + (_cut_note(cut) if cut else "")


def _cut_note(cut: int) -> str:
    noun = "section was" if cut == 1 else "sections were"
    return (
        f"{SECTION_SEPARATOR}---\n_{cut} more {noun} cut to keep this comment under GitHub's "
        f"{COMMENT_BODY_LIMIT:,}-character limit; the jobs' step summaries have the full report._"
    )


def batches(
    items: Sequence[Item], size_per_batch: int = ANNOTATIONS_PER_REQUEST
) -> list[Sequence[Item]]:
    """`items` in consecutive slices of at most `size_per_batch` (one empty batch for no items)."""
    if not items:
        return [items]
    return [items[start : start + size_per_batch] for start in range(0, len(items), size_per_batch)]
