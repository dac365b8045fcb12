"""The built-in knowledge base as data: valid against its schema, every fixture right, and
the rules page of the docs generated from it."""

from __future__ import annotations

import io
import re
import zlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from ci_matrix.commands import rules as rules_command
from ci_matrix.core.rule_listing import listing
from ci_matrix.diagnose.fixtures import as_expected, run_all, summary
from ci_matrix.edges import files
from ci_matrix.edges.files import builtin_rules, trusted_builtin_rules

DOCS = Path(__file__).resolve().parent.parent / "docs" / "rules.md"


def test_every_builtin_rule_file_is_valid_with_positions() -> None:
    # builtin_rules() goes through ruamel.yaml and the JSON Schema, like a project's files.
    checked = builtin_rules()
    fast = trusted_builtin_rules()
    assert [r.id for r in checked] == [r.id for r in fast]
    assert [r.origin for r in checked] == [r.origin for r in fast]


@pytest.mark.parametrize(
    ("listing", "loader"), [("builtin_rule_files", "trusted_builtin_rules"), ("evidence_files", "extractors")]
)
def test_a_broken_builtin_file_is_named_with_its_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, listing: str, loader: str
) -> None:
    # An edited install (or a rule being written) must say where, as a project's file does;
    # an evidence file that does not parse must not be dropped in silence either.
    from ci_matrix.edges import files
    from ci_matrix.errors import ConfigError

    broken = 'rules:\n  - id: x\n    title: a\n    note: see "x": y\n'
    monkeypatch.setattr(files, listing, lambda: [("ci_matrix/knowledge/broken.yaml", broken)])
    load = getattr(files, loader)
    load.cache_clear()
    try:
        with pytest.raises(ConfigError) as raised:
            load()
    finally:
        load.cache_clear()
    (problem,) = raised.value.problems
    assert (problem.file, problem.line) == ("ci_matrix/knowledge/broken.yaml", 4)
    assert "YAML syntax error" in problem.message


def test_a_builtin_rule_missing_a_required_key_is_named_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    # Valid YAML that the schema rejects: the fast path does not validate, so it must check in
    # full before it fails (a helper met a KeyError traceback on every command this way).
    from ci_matrix.errors import ConfigError

    broken = ("rules:\n  - id: x\n    title: a\n    domain: rust\n    diagnosis:\n"
              "      signatures: ['x failed']\n      fix: f\n    references: [https://example.org]\n")
    monkeypatch.setattr(files, "builtin_rule_files", lambda: [("ci_matrix/knowledge/broken.yaml", broken)])
    files.trusted_builtin_rules.cache_clear()
    try:
        with pytest.raises(ConfigError) as raised:
            files.trusted_builtin_rules()
    finally:
        files.trusted_builtin_rules.cache_clear()
    assert any(p.file == "ci_matrix/knowledge/broken.yaml" and p.line == 6 and "explanation" in p.message
               for p in raised.value.problems), raised.value.problems


def test_the_knowledge_base_covers_the_domains_users_meet() -> None:
    rules = builtin_rules()
    assert len(rules) >= 40
    domains = {r.domain for r in rules}
    assert {"rust", "cuda", "iree", "runner", "platform"} <= domains
    for rule in rules:
        assert rule.references, rule.id
        assert all(ref.startswith("https://") for ref in rule.references), rule.id


def test_every_signature_rule_has_a_match_and_a_near_miss_fixture() -> None:
    for rule in builtin_rules():
        if rule.diagnosis is None:
            continue
        expects = {f.expect for f in rule.fixtures}
        # a refining rule matches through its generic one; a rule of fallback lines only, through them
        if rule.diagnosis.signatures or rule.diagnosis.refines or rule.diagnosis.fallback:
            assert "match" in expects and "clean" in expects, rule.id
        else:
            assert "config-match" in expects, rule.id


def test_every_fixture_gets_exactly_its_rule_and_no_near_miss_matches() -> None:
    outcomes = run_all(builtin_rules())
    figures = summary(outcomes)
    wrong = [f"{o.fixture.file}: got {o.got}" for o in outcomes if not o.passed]
    assert wrong == []
    assert figures["expected-rule"] == figures["match-fixtures"] > 40
    assert figures["near-misses-clean"] == figures["near-misses"] > 40
    assert figures["unclassified-rate"] == 0.0


def test_rules_test_command_prints_the_figures_and_exits_0(monkeypatch: pytest.MonkeyPatch) -> None:
    # The whole knowledge base's fixtures run in the test above; here the command's report, on a
    # part of it (rules whose fixtures no other rule outranks, which needs that rule present).
    part = [r for r in builtin_rules() if r.diagnosis and all(f.expect != "outranked" for f in r.fixtures)][:12]
    monkeypatch.setattr(files, "builtin_rules", lambda: part)
    out = io.StringIO()

    class Args:
        action, format, manifest, builtin = "test", "text", None, False

    assert rules_command(Args(), {}, out) == 0  # type: ignore[arg-type]
    text = out.getvalue()
    fixtures = sum(len(r.fixtures) for r in part)
    assert "fixtures got exactly their rule" in text and "near-misses stayed clean" in text
    assert f"{fixtures} passed, 0 failed" in text
    # A rule that loses its signature fails its match fixtures, named one by one, and the command fails.
    assert part[0].diagnosis is not None
    broken = replace(part[0], diagnosis=replace(part[0].diagnosis, signatures=("never in any log",), fallback=()))
    monkeypatch.setattr(files, "builtin_rules", lambda: [broken, *part[1:]])
    out = io.StringIO()
    assert rules_command(Args(), {}, out) == 1  # type: ignore[arg-type]
    fail_lines = [line for line in out.getvalue().splitlines() if line.startswith("FAIL ")]
    assert fail_lines and all(f"expected {broken.id}, got" in line for line in fail_lines)


def _same(rules: tuple[object, ...]) -> str:
    """Rules as text to compare: every field, the compiled conditions' addresses left out."""
    return re.sub(r" at 0x[0-9a-f]+", "", repr(rules))


def test_the_compiled_knowledge_base_is_generated_from_the_rule_files() -> None:
    # Every command reads the built-in rules from it (JSON, some thirty times faster than the YAML).
    current = Path(str(files.COMPILED)).read_text(encoding="utf-8")
    _assert_generated(current, files.compiled_knowledge(), "python -m ci_matrix.edges.files")


@pytest.mark.parametrize("compiled", ["", "{}", '{"key": "stale", "files": []}', "not json"])
def test_a_compiled_knowledge_base_that_does_not_match_the_rule_files_is_ignored(
    compiled: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An edited rule file, or an install whose compiled.json is stale or broken, reads the YAML itself.
    from_yaml = trusted_builtin_rules.__wrapped__()
    stale = tmp_path / "compiled.json"
    stale.write_text(compiled, encoding="utf-8")
    monkeypatch.setattr(files, "COMPILED", stale)
    assert _same(trusted_builtin_rules.__wrapped__()) == _same(from_yaml)
    edited = tmp_path / "edited.json"
    edited.write_text(files.compiled_knowledge().replace("rustc", "RUSTC"), encoding="utf-8")
    monkeypatch.setattr(files, "COMPILED", edited)  # the right key, other data: still its key decides
    assert _same(trusted_builtin_rules.__wrapped__()) != _same(from_yaml)


def test_the_compiled_knowledge_base_gives_the_rules_the_yaml_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = trusted_builtin_rules.__wrapped__()
    monkeypatch.setattr(files, "COMPILED", Path("/nonexistent/compiled.json"))
    assert _same(compiled) == _same(trusted_builtin_rules.__wrapped__())
    assert [r.origin for r in compiled] == [r.origin for r in builtin_rules()]  # the same lines as the slow path


def test_the_shipped_set_forms_are_generated_from_the_rule_files_and_the_scanner_code() -> None:
    # Every diagnosis reads them instead of parsing some two thousand patterns again.
    current = Path(str(files.SET_FORMS)).read_text(encoding="utf-8")
    _assert_generated(current, files.set_forms_json(), "python -m ci_matrix.edges.files")


def _diagnosed(log: bytes) -> list[str]:
    from ci_matrix.edges import logs

    logs.scanner_for.cache_clear()
    files.shipped_set_forms.cache_clear()
    try:
        found = logs.diagnose_log(io.BytesIO(log), trusted_builtin_rules(), None, files.catalog().platforms)
    finally:
        logs.scanner_for.cache_clear()
        files.shipped_set_forms.cache_clear()
    return [f.rule for f in found.findings]


def test_set_forms_made_by_other_scanner_code_are_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An install whose set-forms.json is stale, broken or from another version of the code:
    # the scanner works the forms out itself, and a log is diagnosed as it always was.
    log = b"nvcc fatal   : Unsupported gpu architecture 'compute_35'\n"
    expected = _diagnosed(log)
    assert expected
    current = files.set_forms_json()
    # Forms that look for nothing: with this code's key they are trusted, and the log is missed ...
    poisoned = re.sub(r'^(".*": )\[.*\](,?)$', r'\1["never in any log", null, true, "never in any log"]\2',
                      current, flags=re.MULTILINE)
    assert poisoned != current
    shipped = tmp_path / "set-forms.json"
    monkeypatch.setattr(files, "SET_FORMS", shipped)
    shipped.write_text(poisoned, encoding="utf-8")
    assert _diagnosed(log) == []
    # ... so only forms made by this very code are read: another key, or no file that parses, is ignored.
    for text in [poisoned.replace(files._set_forms_key(), "0" * 64), "", "{}", "not json", current[:1000]]:
        shipped.write_text(text, encoding="utf-8")
        assert _diagnosed(log) == expected


def test_the_rules_page_is_generated_from_the_data() -> None:
    expected = listing(builtin_rules(), "markdown")
    _assert_generated(DOCS.read_text(encoding="utf-8"), expected, "ci-matrix rules --format markdown > docs/rules.md")


def _assert_generated(current: str, expected: str, command: str) -> None:
    """Fail, naming the first place they differ, where a generated file is not what ``command``
    writes (pytest's own diff of two texts of a megabyte runs for many minutes)."""
    if current == expected:
        return
    at = next(
        (i for i, (a, b) in enumerate(zip(current, expected, strict=False)) if a != b), min(len(current), len(expected))
    )
    pytest.fail(
        f"stale: regenerate with `{command}`; first difference at character {at}: "
        f"{current[max(0, at - 40) : at + 40]!r} != {expected[max(0, at - 40) : at + 40]!r}"
    )


# How a log reaches ci-matrix besides as the tool printed it: behind a CI system's line prefix,
# quoted in an issue, indented as a markdown block, marked as a pytest failure's exception (each
# rotates through its prefixes line by line), or typeset by a forum where it was pasted outside
# a code block (Discourse curls quotes and turns "--" into an en dash, "---" into an em dash,
# "..." into an ellipsis; GCC's quotes in a UTF-8 locale are the same curled ones); as GitHub
# serves a job's log (a stamp on every line, a byte-order mark where each step's log starts) and
# as `gh run view --log` prints it (the job's and the step's names before each of those lines:
# 373 of 5,402 fixtures read otherwise there before cleaning knew it, 21 as GitHub serves them);
# behind the prefix a launcher or test runner puts on each line (torchrun, Open MPI, CTest,
# Docker Compose, Nix, MSBuild's node number: about 9% of fixtures read otherwise before).
def _prefixed(*prefixes: bytes) -> Callable[[bytes], bytes]:
    def post(data: bytes) -> bytes:
        lines = data.split(b"\n")
        return b"\n".join(prefixes[n % len(prefixes)] + line for n, line in enumerate(lines))

    return post


def _served(names: bytes = b"") -> Callable[[bytes], bytes]:
    def serve(data: bytes) -> bytes:
        lines = data.split(b"\n")
        return b"\n".join(
            names + (b"\xef\xbb\xbf" if n % 40 == 0 else b"") + b"2024-05-01T12:34:%02d.%07dZ " % (n % 60, n) + line
            for n, line in enumerate(lines)
        )

    return serve


def _typeset(data: bytes) -> bytes:
    text = data.decode("utf-8", "replace")
    text = re.sub(r"'([^'\n]*)'", "\u2018\\1\u2019", text)
    text = re.sub(r'"([^"\n]*)"', "\u201c\\1\u201d", text)
    return text.replace("---", "\u2014").replace("--", "\u2013").replace("...", "\u2026").encode()


POSTED_FORMS = {
    "ci-prefixes": _prefixed(
        b"2024-05-01T12:34:56.1234567Z ",
        b"#12 3.456 ",
        b"[2024-05-01T12:34:56.123Z] ",
        b"2026-09-30T19:38:19.213893Z 00O ",
        b"12:34:56 ",
        b"(RayTrainWorker pid=4121, ip=10.0.0.5) ",
    ),
    "quoted": _prefixed(b"> "),
    "indented": _prefixed(b"    "),
    "in a pytest failure": _prefixed(b"E       "),
    "typeset by a forum": _typeset,
    "as GitHub serves it": _served(),
    "through gh run view --log": _served(b"build (ubuntu-22.04, stable)\tRun cargo build --locked\t"),
    "behind a launcher's prefix": _prefixed(
        b"[rank0]: ", b"[default1]:", b"[1,0]<stderr>:", b"20: ", b"ollama-1  | ", b"rustc-1.75.0> ", b"1>"
    ),
}
FORM_NAMES = sorted(POSTED_FORMS)


def test_every_fixture_gets_the_same_answer_as_users_post_it() -> None:
    from ci_matrix.diagnose.fixtures import fixture_bytes
    from ci_matrix.edges.files import catalog
    from ci_matrix.edges.logs import diagnose_log

    rules = trusted_builtin_rules()
    wrong = []
    tried = dict.fromkeys(FORM_NAMES, 0)
    for rule in rules:
        for fixture in rule.fixtures:
            if fixture.expect == "config-match":
                continue
            data, cell = fixture_bytes(rule, fixture), dict(fixture.cell) if fixture.cell else None
            # One form a fixture, always the same one (every form meets some 600 fixtures): all
            # five (now eight) on every fixture took three minutes of the suite's ten.
            form = FORM_NAMES[zlib.crc32(f"{rule.id} {fixture.file}".encode()) % len(FORM_NAMES)]
            found = diagnose_log(io.BytesIO(POSTED_FORMS[form](data)), rules, cell, catalog().platforms, exit_code=1)
            got = [f.rule for f in found.findings]
            tried[form] += 1
            if not as_expected(fixture.expect, rule.id, got):
                wrong.append(f"{fixture.file} {form}: got {got}")
    assert wrong == []
    assert min(tried.values()) > 300, tried
