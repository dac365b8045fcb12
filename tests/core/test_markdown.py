"""core/markdown.py, one context at a time: each escaped text is rendered by cmark-gfm (the library
GitHub renders comments and check runs with) and must come out as exactly the text it was, with no
link, tag or mention; the same strings unescaped are shown to be dangerous, so the test can fail."""

from __future__ import annotations

import html as html_module
import re

import pytest

from ci_matrix.core import markdown as md
from tests.tooling import missing_tool

try:
    import cmarkgfm
    from cmarkgfm.cmark import Options
except ImportError:  # pragma: no cover - the test extras install it
    cmarkgfm = None

ZW = md.ZWSP
ATTACKS = [
    "x` [pwn](https://evil.example) `",  # closes a code span, then a live link
    "https://ok) [Click](https://evil.example",  # a second link inside a link target
    "@octo-org/everyone and @octocat",  # mentions
    "fixes #123 and acme/widgets#7",  # cross-references
    "<img src=x onerror=alert(1)><details open>",  # HTML
    "see https://evil.example or www.evil.example or mail@evil.example",  # autolinks
    "a | b || c",  # table cells
    "**bold** _em_ ~~del~~ `code` \\` [ref]: https://evil.example",  # inline markup, a link definition
    "line one\nline two\r\n\n# heading",  # line breaks
    "&lt; &amp; &#64;octocat",  # entities
]


@pytest.fixture(autouse=True)
def _cmark() -> None:
    if cmarkgfm is None:
        missing_tool("cmarkgfm is not installed (pip install -e '.[test]')")


def _html(markdown: str) -> str:
    rendered: str = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    return rendered


def _visible(html: str) -> str:
    """The text a reader sees: tags dropped, entities decoded, zero-width spaces removed."""
    return html_module.unescape(re.sub(r"<[^>]+>", "", html)).replace(ZW, "").strip()


def _dangerous(html: str) -> list[str]:
    """Links, images, raw tags the report does not write, and mentions outside code."""
    found = re.findall(r"<(?:a|img|details|script)\b[^>]*>", html)
    prose = re.sub(r"<code>.*?</code>|<pre>.*?</pre>", "", html, flags=re.DOTALL)
    return found + re.findall(r"(?<![\w`])@[A-Za-z0-9]|(?<![\w&])#\d", _visible_keep_zw(prose))


def _visible_keep_zw(html: str) -> str:
    return html_module.unescape(re.sub(r"<[^>]+>", "", html))


@pytest.mark.parametrize("attack", ATTACKS[:6])  # the others are markup, not a link, tag or mention
def test_the_attacks_are_dangerous_unescaped(attack: str) -> None:
    assert _dangerous(_html(f"- **`{attack}`** {attack}"))  # as the report wrote them before


@pytest.mark.parametrize("attack", ATTACKS)
def test_text_renders_as_itself_in_a_paragraph(attack: str) -> None:
    html = _html(f"- why: {md.text(attack)}")
    assert _dangerous(html) == []
    assert _visible(html) == "why: " + " ".join(attack.replace("\r\n", "\n").split("\n")).replace("\n", " ")


@pytest.mark.parametrize("attack", ATTACKS)
def test_text_renders_as_itself_in_a_table_cell(attack: str) -> None:
    html = _html(f"| a | b |\n|---|---|\n| {md.text(attack)} | x |")
    assert _dangerous(html) == []
    assert html.count("<td>") == 2
    assert _visible(html.split("<td>")[1]) == " ".join(attack.replace("\r\n", "\n").split("\n"))


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_code_span_holds_the_whole_text(attack: str) -> None:
    html = _html(f"cell {md.code(attack)} end")
    assert re.findall(r"<a |<img|<details", html) == []
    [inside] = re.findall(r"<code>(.*?)</code>", html, flags=re.DOTALL)
    assert _visible(inside) == md.clean(attack).strip()


def test_a_code_span_in_a_table_keeps_its_pipes() -> None:
    html = _html(f"| a |\n|---|\n| {md.code('x | y', table=True)} |")
    assert "<td><code>x | y</code></td>" in html


@pytest.mark.parametrize("attack", ATTACKS)
def test_link_text_cannot_add_a_link(attack: str) -> None:
    html = _html(md.link(attack, "https://github.com/acme/widgets/issues/1"))
    assert re.findall(r'href="([^"]*)"', html) == ["https://github.com/acme/widgets/issues/1"]


def test_a_link_target_cannot_become_a_second_link() -> None:
    html = _html(md.link("1", "https://ok) [Click](https://evil.example"))
    assert html.count("<a ") == 1 and "Click</a>" not in html


@pytest.mark.parametrize("target", ["javascript:alert(1)", "data:text/html,x", "//evil.example", "evil.example"])
def test_only_http_links_are_links(target: str) -> None:
    assert "<a " not in _html(md.link("ref", target))


@pytest.mark.parametrize("attack", ATTACKS)
def test_html_text_stays_text_inside_the_report_skeleton(attack: str) -> None:
    html = _html(f"<details><summary><code>{md.html(attack)}</code></summary>\n\nbody\n\n</details>")
    assert html.count("<details>") == 1 and "<img" not in html and "<details open" not in html
    summary = html.split("<summary>")[1].split("</summary>")[0]
    assert re.findall(r"(?<![\w`])@[A-Za-z0-9]|(?<![\w&])#\d", _visible_keep_zw(summary)) == []


@pytest.mark.parametrize("line", [*ATTACKS, "```", "````", "~~~", "``` ```", "`" * 40, "<!-- ci-matrix:report -->"])
def test_a_code_block_holds_every_line(line: str) -> None:
    block = "\n".join(["- x", "", *md.code_block([line, "after"], "  "), "", "- y"])
    html = _html(block)
    assert html.count("<pre") == 1 and "after" in html.split("</pre>")[0]
    assert "<!--" not in block  # the report's marker stays unique


def test_lines_are_capped_and_cleaned() -> None:
    assert md.capped("x" * 1000) == "x" * (md.LINE_LIMIT - 1) + "…"
    assert md.clean("a\u202eb\x1b[0m\x00c\rd\ne") == "a\ufffdb\ufffd[0m\ufffdc d e"
    assert md.code("\udcff\udcfe.json") == "`\ufffd\ufffd.json`"  # a file name that was not UTF-8


def test_anchor_ids_are_plain() -> None:
    assert md.anchor_id("ci-matrix-model-linux-x86_64-iree-llvm-cpu") == "ci-matrix-model-linux-x86-64-iree-llvm-cpu"
    assert md.anchor_id("\" onmouseover=\"x") == "onmouseover-x"
