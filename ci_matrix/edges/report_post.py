"""The pure half of posting a report: fitting text into GitHub's limits, and deciding what a
failed request means (retry now, wait as told, or give up). No network here; `github_api` does it.

Sizes are measured in UTF-8 bytes. GitHub states some limits in characters and some in bytes;
a text within N bytes is within N characters too, so one conservative measure serves both.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import requests
from github3 import exceptions as gh_errors

COMMENT_BODY_LIMIT = 65_536  # issue and pull request comments ("Body is too long" beyond)
OUTPUT_TEXT_LIMIT = 65_535  # check run output.summary and output.text
TITLE_LIMIT = 255  # annotation titles (characters)
ANNOTATION_MESSAGE_LIMIT = 64 * 1024  # annotation messages ("64 KB")
ANNOTATIONS_PER_REQUEST = 50  # check run create/update: 422 beyond

SECTION_SEPARATOR = "\n\n"
TRUNCATION_NOTE = "\n\n… (truncated to fit GitHub's limit; the job's step summary has the full text)"

READ_ONLY_MESSAGE = "Resource not accessible by integration"

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


def batches(items: Sequence[Item], size_per_batch: int = ANNOTATIONS_PER_REQUEST) -> list[Sequence[Item]]:
    """`items` in consecutive slices of at most `size_per_batch` (one empty batch for no items)."""
    if not items:
        return [items]
    return [items[start : start + size_per_batch] for start in range(0, len(items), size_per_batch)]


class PostStatus(enum.Enum):
    """How posting ended."""

    POSTED = "posted"  # created or updated
    UNCHANGED = "unchanged"  # the sticky comment already said exactly this
    FORBIDDEN = "forbidden"  # read-only token (fork pull request): fall back, say so
    TIMED_OUT = "timed-out"  # GitHub did not answer in time, even after retries
    FAILED = "failed"  # anything else; the outcome's message says what


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff: first_delay, 2x, 4x ... capped at max_delay, `attempts` tries in all."""

    attempts: int = 4
    first_delay: float = 2.0
    max_delay: float = 30.0
    max_retry_after: float = 120.0  # a longer Retry-After gives up rather than stall the job

    def delay(self, verdict: Verdict, attempt: int) -> float | None:
        """Seconds to wait before the next attempt, or None to give up now."""
        if not verdict.retry or attempt >= self.attempts:
            return None
        if verdict.retry_after is None:
            return min(self.first_delay * 2.0 ** (attempt - 1), self.max_delay)
        return verdict.retry_after if verdict.retry_after <= self.max_retry_after else None


@dataclass(frozen=True)
class Verdict:
    """What a failed request means for posting."""

    status: PostStatus  # the outcome if we give up
    message: str
    retry: bool
    retry_after: float | None = None  # seconds the server asked us to wait


def classify(exc: Exception) -> Verdict:
    """Retry 5xx, timeouts and rate limits (with the server's delay); never a read-only 403."""
    if isinstance(exc, gh_errors.ConnectionError):
        if isinstance(exc.exception, requests.Timeout):
            return Verdict(PostStatus.TIMED_OUT, "GitHub did not answer in time", retry=True)
        reason = type(exc.exception).__name__
        return Verdict(PostStatus.FAILED, f"could not reach GitHub ({reason})", retry=True)
    if isinstance(exc, gh_errors.GitHubError):
        return _classify_answer(exc.code, str(exc.msg), exc.response)
    reason = f"{type(exc).__name__}: {exc}"
    return Verdict(PostStatus.FAILED, f"unexpected answer from GitHub ({reason})", retry=False)


def _classify_answer(code: int, text: str, response: requests.Response | None) -> Verdict:
    message = f"HTTP {code}: {text}"
    retry_after = _retry_after(response.headers if response is not None else {})
    # Secondary rate limits come as 403 or 429 with Retry-After; primary ones say "rate limit".
    limited = code == 429 or (code == 403 and (retry_after is not None or "rate limit" in text))
    if code >= 500 or limited:
        return Verdict(PostStatus.FAILED, message, retry=True, retry_after=retry_after)
    if code == 403 and READ_ONLY_MESSAGE in text:
        note = " (a read-only token, as pull requests from forks get)"
        return Verdict(PostStatus.FORBIDDEN, message + note, retry=False)
    status = PostStatus.FORBIDDEN if code == 403 else PostStatus.FAILED
    return Verdict(status, message, retry=False)


def _retry_after(headers: Mapping[str, Any]) -> float | None:
    value = headers.get("Retry-After")
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff
