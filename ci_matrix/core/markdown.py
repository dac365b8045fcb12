"""Escaping for every markdown context that ci-matrix writes into (pure).

The report is posted with a write token, so text that did not come from the base repository must
never become markup there: no link, no HTML, no notifying mention, and no way out of the code span
or code block it is shown in. GitHub renders comments and check runs with cmark-gfm (CommonMark,
tables, autolinks, HTML) and then turns `@name`, `@org/team` and `#123` in text into mentions
and cross-references that notify. Each function here makes text safe for one context:

- `text`: inline text (a paragraph, list item, table cell, link text, heading);
- `code`: an inline code span (also inside a table cell);
- `link`: a link whose target is http(s) only;
- `html`: text inside the report's own HTML skeleton (`<summary>`, `<code>`);
- `code_line` / `code_block`: log lines inside a fenced code block they cannot close.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote

ZWSP = "\u200b"  # zero-width space: breaks a mention or autolink without showing
LINE_LIMIT = 400  # characters of one log line shown; longer lines end in an ellipsis

# Control characters, bidirectional overrides ("Trojan Source") and lone surrogates (a file name
# that was not UTF-8) are shown as U+FFFD.
_UNSAFE_CHARS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
# Markdown punctuation that may start inline markup; a backslash makes each literal.
# An underscore between letters or digits cannot start emphasis: `x86_64` stays as it is.
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*\[\]#|~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
# What GitHub would autolink or resolve in text: mentions, cross-references, URLs, www., e-mail.
_NOTIFYING = re.compile(r"(@|#(?=\d)|:(?=/)|(?i:www)(?=\.))")
_BACKTICK_RUN = re.compile(r"``(?=`)")
_HTML_COMMENT = re.compile(r"<!(?=--)")
_SAFE_URL = re.compile(r"https?://[^/\s]", re.IGNORECASE)


def clean(value: object) -> str:
    """One line of visible text: line breaks become spaces, control characters U+FFFD."""
    flat = str(value).replace("\r\n", " ").replace("\r", " ").replace("\n", " ")
    return _UNSAFE_CHARS.sub("\ufffd", flat)


def capped(value: object, limit: int = LINE_LIMIT) -> str:
    """`clean(value)` cut to `limit` characters, ending in an ellipsis when cut."""
    line = clean(value)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _quiet(line: str) -> str:
    """No mention, cross-reference or autolink: a zero-width space after what would start one."""
    return _NOTIFYING.sub(lambda m: m.group(0) + ZWSP, line)


def text(value: object) -> str:
    """Inline text that renders as itself: no markup, HTML, link or mention (safe in table cells)."""
    line = _quiet(clean(value)).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", line)


def code(value: object, *, table: bool = False) -> str:
    """An inline code span holding `value`, which no backtick in it can close.

    The fence is one backtick longer than the longest run inside. In a GFM table (`table=True`)
    `|` is escaped: there even a code span ends at an unescaped pipe, and `\\|` renders as `|`.
    Mentions are broken too: GitHub does not resolve them in code, but a text cut to fit a limit
    could end inside the span and leave the rest of it as prose.
    """
    line = _quiet(clean(value))
    line = line.replace("|", "\\|") if table else line
    longest = max((len(run) for run in re.findall(r"`+", line)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if line.startswith(("`", " ")) or line.endswith(("`", " ")) or not line else ""
    return f"{fence}{pad}{line}{pad}{fence}"


def url(target: str) -> str | None:
    """`target` percent-encoded for a link destination, or None unless it is http(s)."""
    target = clean(target).strip()
    if not _SAFE_URL.match(target):
        return None
    return quote(target, safe="/:?#@!$&*+,;=%-._~")


def link(label: str, target: str) -> str:
    """`[label](target)`, or the label as text alone when the target is not an http(s) URL."""
    destination = url(target)
    return f"[{text(label)}]({destination})" if destination else text(label)


def anchor_link(label: str, anchor: str) -> str:
    """A link to an anchor of the same page (`anchor` made of [a-z0-9-] by `anchor_id`)."""
    return f"[{text(label)}](#{anchor_id(anchor)})"


def anchor_id(name: str) -> str:
    """An HTML id from `name`: lower-case letters, digits and hyphens."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "x"


def html(value: object) -> str:
    """Text inside an HTML element of the report (`<summary>`, `<code>`): entities for HTML's
    special characters, one line (a blank line would end the HTML block), mentions broken."""
    line = _quiet(clean(value)).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return line.replace('"', "&quot;").replace("'", "&#39;")


def code_line(value: object, limit: int = LINE_LIMIT) -> str:
    """A log line for a ``` code block: capped, one line, no run of three backticks (which
    would close the block) and no `<!--` (the report's marker is an HTML comment)."""
    return _HTML_COMMENT.sub("<!" + ZWSP, _BACKTICK_RUN.sub("``" + ZWSP, capped(value, limit)))


def code_block(lines: Iterable[object], indent: str = "", limit: int = LINE_LIMIT) -> list[str]:
    """A fenced ```text block of log lines that none of them can close, each line indented."""
    body = [f"{indent}{code_line(line, limit)}" for line in lines]
    return [f"{indent}```text", *body, f"{indent}```"]
