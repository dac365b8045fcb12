"""build_report and accept (pure), with the fields that issue 10 adds to a finding (`reached-by`,
`confidence`, `evidence`) and to a diagnosis (`draft`): enums are shown only when they are one of
their values; evidence text and drafts are log text, shown only inside code blocks."""

from __future__ import annotations

from typing import Any

import pytest

from ci_matrix.core.grid import anchor_name
from ci_matrix.edges.files import trusted_builtin_rules
from ci_matrix.report import accept, build_report

MANIFEST = """\
builds:
  rust-crate:
    platforms: [linux-x86_64]
    rust: {toolchains: [stable, beta], profiles: [debug], backends: [llvm]}
    run: [cargo build]
"""
EVIL = "``` </details> [x](https://evil.example) @octo-org/everyone"


@pytest.fixture(scope="module")
def cells(plan_of: Any) -> Any:
    return plan_of(MANIFEST)


def _record(cell: str, **fields: Any) -> dict[str, Any]:
    return {"cell": cell, "outcome": "failed", "exit-code": 101, "findings": [], "tail": [], **fields}


def _finding(**fields: Any) -> dict[str, Any]:
    return {"rule": "rustc-ice", "matched-by": "log", "title": EVIL, "explanation": EVIL, "fix": EVIL,
            "references": [EVIL], **fields}


def test_enums_are_shown_evidence_only_in_a_code_block(cells: Any) -> None:
    stable, beta = (c.id for c in cells.cells)
    evidence = [{"fact": "rust-channel", "value": EVIL, "source": "cell"},
                {"fact": "log", "value": "", "source": "log", "line": 7, "text": EVIL}]
    finding = _finding(**{"reached-by": "signature+evidence", "confidence": "medium", "evidence": evidence})
    results = accept([("a.json", _record(stable, findings=[finding]))], cells, trusted_builtin_rules())
    report = build_report(results, cells, "")
    known = report.sections[1]
    assert f"**`{stable}`**: matched by its log signature and the cell's evidence (confidence: medium)\n" in known
    assert "    ```text\n    rust-channel = ``\u200b` </details>" in known
    assert "    log line 7: ``\u200b` </details> [x](https://evil.example) @octo-org/everyone\n    ```" in known
    assert known.count("evil.example") == 2  # the two evidence lines, inside the code block
    assert f"[❌](#{anchor_name(stable)})" in report.sections[0] and beta not in report.sections[1]


def test_a_fallback_finding_says_its_line_is_often_noise(cells: Any) -> None:
    stable = cells.cells[0].id
    finding = _finding(**{"reached-by": "fallback", "confidence": "low"})
    report = build_report(accept([("a.json", _record(stable, findings=[finding]))], cells,
                                 trusted_builtin_rules()), cells, "")
    assert (f"**`{stable}`**: matched by a line that is often only noise: nothing else in the log explains the "
            "failure (confidence: low)") in report.sections[1]


@pytest.mark.parametrize("value", [EVIL, [EVIL], {"x": EVIL}])
def test_a_value_outside_an_enum_is_not_shown(cells: Any, value: Any) -> None:
    stable = cells.cells[0].id
    finding = _finding(**{"reached-by": value, "confidence": value})
    report = build_report(accept([("a.json", _record(stable, findings=[finding]))], cells,
                                 trusted_builtin_rules()), cells, "")
    assert report.sections[1].endswith(f"**`{stable}`**: matched by its log signature")
    assert "evil" not in report.text


def test_a_draft_is_shown_only_in_a_code_block(cells: Any) -> None:
    beta = cells.cells[1].id
    draft = f"- id: new-rule\n  signatures: ['{EVIL}']\n```\n@octo-org/everyone"
    results = accept([("b.json", _record(beta, tail=[EVIL], draft=draft))], cells, trusted_builtin_rules())
    unknown = build_report(results, cells, "").sections[1]
    block = unknown.split("A draft rule for this failure (review it before adding it):\n\n```text\n")[1]
    assert block.startswith("- id: new-rule\n  signatures: ['``\u200b` </details> [x](https://evil.example)")
    assert block.split("\n```\n")[0].endswith("``\u200b`\n@octo-org/everyone")
    assert unknown.count("</details>") == 1 + 2  # the skeleton's own, and twice inside code blocks


def test_a_cell_that_failed_in_setup_says_so_with_what_setup_did(cells: Any) -> None:
    beta = cells.cells[1].id
    record = _record(beta, stage="setup", setup=["Rust beta: rustup failed @octo-org/everyone"], tail=["x"])
    report = build_report(accept([("b.json", record)], cells, trusted_builtin_rules()), cells, "")
    assert (f"<summary><code>{beta}</code> exit 101, before its build: its toolchains could not be set up"
            "</summary>\n\n```text\nRust beta: rustup failed @octo-org/everyone\nx\n```") in report.sections[1]
