"""Signatures rewritten to step over escape sequences: they match the raw text wherever the
original matches the cleaned text, and refuse syntax that RE2 and Python read differently."""

from __future__ import annotations

import io
import random
import subprocess
import sys
from pathlib import Path

import pytest
import re2

from ci_matrix.diagnose import scanner as scanner_module
from ci_matrix.diagnose.cleaning import clean
from ci_matrix.diagnose.scanner import Scanner, Signature
from ci_matrix.diagnose.tolerant import escape_tolerant, set_forms
from ci_matrix.edges import files, logs

FIXTURES = Path(files.__file__).resolve().parent.parent / "knowledge" / "fixtures"

PATTERNS = [
    r"^error: could not compile `(?P<crate>[\w-]+)`",
    r"(?i)failed to legalize operation '(?P<op>[\w.]+)'",
    r"nvcc fatal\s*: Unsupported gpu architecture '(?:compute|sm)_(?P<arch>\d{2,3})[af]?'",
    r"Stack dump:\n0\.\s+Program arguments: [^\n]*iree-compile",
    r"release (?P<v>\d+\.\d+), V\d+(?:\.\d+)*$",
    r"\bcuda-(?P<v>1[0-3])\.\d\b",
    r"(?:error|warning): [^:\n]{1,80}?: not found",
]
TEXTS = [
    "error: could not compile `rustc_codegen_spirv` (lib)",
    "error: Failed To Legalize Operation 'stream.executable'",
    "nvcc fatal   : Unsupported gpu architecture 'compute_90a'",
    "Stack dump:\n0.\tProgram arguments: /opt/iree-compile --iree-hal-target-device=local",
    "Cuda compilation tools, release 12.4, V12.4.131",
    "found cuda-12.4 in /usr/local",
    "error: linker cc: not found",
]
ESCAPES = [b"\x1b[0m", b"\x1b[1m\x1b[31m", b"\x1b[38;5;9m", b"\x1b(B", b"\x1b[K"]


def colour(text: str, rng: random.Random) -> bytes:
    out = bytearray()
    for byte in text.encode():
        if rng.random() < 0.3:
            out += rng.choice(ESCAPES)
        out.append(byte)
    return bytes(out) + rng.choice(ESCAPES)


@pytest.mark.parametrize("seed", range(40))
def test_what_matches_the_cleaned_text_matches_the_raw_text(seed: int) -> None:
    rng = random.Random(seed)
    for pattern, text in zip(PATTERNS, TEXTS, strict=True):
        raw = colour(text, rng)
        assert re2.search("(?m)" + pattern, clean(raw)), (pattern, raw)
        assert re2.search("(?m)" + escape_tolerant(pattern), raw), (pattern, raw)


def test_on_text_without_escapes_the_rewrite_means_the_same() -> None:
    for pattern, text in zip(PATTERNS, TEXTS, strict=True):
        rewritten = re2.compile("(?m)" + escape_tolerant(pattern))
        assert rewritten.search(text) and not rewritten.search(text.replace("e", "E").replace("1", "x")[::-1])


@pytest.mark.parametrize("pattern", [r"exit [[:digit:]]+", r"\pL+ failed", r"\Qa.b\E", r"(?U)a+", r"(?<n>x)", r"a\z"])
def test_syntax_read_differently_by_re2_and_python_is_refused(pattern: str) -> None:
    assert escape_tolerant(pattern) is None


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        (r"envs\\[^\\]+\\Scripts\\python\.exe", rb"C:\envs\rp\Scripts\python.exe"),
        (r"C:\\Qt\\bin", rb"C:\Qt\bin"),
        (r"x\\\\zlib", rb"x\\zlib"),
    ],
)
def test_a_backslash_escaped_before_such_a_letter_is_only_a_backslash(pattern: str, text: bytes) -> None:
    # "\\python" is a literal backslash and "python", not RE2's \p: the pattern can step over escapes
    rewritten = escape_tolerant(pattern)
    assert rewritten is not None and re2.compile(pattern).search(text)
    assert re2.compile(rewritten).search(text.replace(b"\\", b"\x1b[1m\\\x1b[0m", 1))


def test_a_repeat_that_already_runs_over_escapes_is_left_as_it_is() -> None:
    # A smaller DFA: `[^\n]*` and `.+` take escapes as they come; a bounded repeat, or a
    # class that leaves out a byte an escape may hold, still steps over them.
    assert escape_tolerant(r"a[^\n]*b").count("\\x1b") == 2
    assert escape_tolerant(r"a.+?b").count("\\x1b") == 2
    assert escape_tolerant(r"a[^\n]{0,9}b").count("\\x1b") == 3
    assert escape_tolerant(r"a[^']*b").count("\\x1b") == 3
    raw = b"a1\x1b[0m2\x1b[31mb"
    for pattern in (r"a[^\n]*b", r"a.+?b", r"a[^\n]{0,9}b", r"a[^']*b"):
        assert re2.search(escape_tolerant(pattern), raw) and re2.search(pattern, clean(raw)), pattern


def test_a_pattern_with_a_wide_gap_is_looked_for_by_its_most_literal_part() -> None:
    # "A[^\n]*B" keeps a DFA state per line after A; the Set looks for the part with the most
    # literal characters, which every match of the whole holds at the same place.
    forms = set_forms(r"(?:Error|error while loading)[^\n]*?\blib(?:cudart|cublas)\.so\.\d+: cannot open")
    assert not forms.exact and "Error" not in forms.plain and "cannot" in forms.plain
    multi = set_forms(r"failed to download from `?https?://[^\n]*\n(?:[^\n]*\n){0,4}?[^\n]*Timeout was reached")
    assert not multi.exact and "download" in multi.plain and "Timeout" not in multi.plain
    assert set_forms(r"\bcuda-(?P<v>1[0-3])\.\d\b").exact  # narrow repeats and boundaries stay
    assert set_forms(r"ab[^\n]*cd").exact  # no part literal enough: the whole pattern
    for pattern, text in zip(PATTERNS, TEXTS, strict=True):
        assert re2.search("(?m)" + set_forms(pattern).plain, text), pattern


def test_evidence_seen_by_its_core_alone_does_not_hide_the_earlier_fact() -> None:
    # The Set sees "version 2" in the last piece, where the whole pattern does not match.
    lines = [b"version 1 final"] + [b"filler"] * 300 + [b"version 2 draft"]
    sigs = [Signature("@v", r"version (?P<v>\d+)[^\n]*final", last_only=True)]
    hits = Scanner(sigs).scan(io.BytesIO(b"\n".join(lines) + b"\n"), chunk_size=512)
    assert (hits["@v"].line, hits["@v"].groups["v"]) == (1, "1")


def test_a_set_looks_for_the_longest_literal_run_every_match_holds() -> None:
    # A Set of literals is a trie for RE2's DFA: classes, choices and repeats around them
    # would make it build states on every word that starts like them.
    forms = set_forms(r"error: could not compile `(?P<c>[\w-]+)` \(lib\)")
    assert forms.plain == r"error\x{3a}\x{20}could\x{20}not\x{20}compile\x{20}\x{60}" and not forms.exact
    assert set_forms(r"\bfailed(?: to run)? custom build command for `").plain.endswith(r"command\x{20}for\x{20}\x{60}")
    assert set_forms(r"x(?:abcdefghij)+y").plain == "abcdefghij"  # the one round a repeat holds
    assert set_forms(r"(?i)error: linking with `cc` failed").plain.startswith("(?i)")
    assert set_forms(r"plain literal text").exact  # the literal is the whole pattern
    for short in (r"error(?:ab|cd)efgh", r"ab(?:cdefghijklm)?n", r"(?i:abcdefghijkl)m"):
        assert set_forms(short).plain == short  # no run long enough that every match holds


def test_a_set_looks_for_a_pattern_without_the_tail_it_need_not_see() -> None:
    # An optional or repeated tail matched to the end of a line keeps the Set's DFA in a
    # match state at every step; whether the pattern matches does not depend on it.
    assert set_forms(r"(?P<args>iree-cc\s+[^\n]*)").plain.endswith(r"cc[\s])")
    assert set_forms(r"release (?P<v>\d+\.\d+), V\d+(?:\.\d+)*").plain.endswith(r"V[\d]")
    assert set_forms(r"error: (?:a|b[^\n]*)").plain.endswith("(?:a|b)")
    assert set_forms(r"x{3,9}y?").plain == "(?:x){3}"
    for kept in (r"iree-cc\s+\S*$", r"\d+ errors?\b", r"(?:a|b?)c"):
        assert set_forms(kept).plain == kept


def test_the_set_forms_of_the_knowledge_base_match_where_its_patterns_do() -> None:
    scanner = logs.scanner_for(tuple(files.trusted_builtin_rules()))
    texts = [clean(path.read_bytes()) for path in sorted(FIXTURES.glob("*/*.log"))]
    assert len(texts) > 300
    # Two RE2 Sets, of the Set forms and of the patterns, say which match each text (a search per
    # pattern and text took a minute).
    compiled = scanner._compiled
    plains = scanner_module._compile_set(["(?m)" + c.plain for c in compiled])
    patterns = scanner_module._compile_set([c.regex.pattern for c in compiled])
    seen = 0
    for text in texts:
        plain, pattern = set(plains.Match(text) or ()), set(patterns.Match(text) or ())
        seen += bool(pattern)
        exact = {i for i in plain | pattern if compiled[i].exact}
        # Where the Set's word is final it must be the pattern's; elsewhere it must see every match.
        assert {compiled[i].key for i in exact if (i in plain) != (i in pattern)} == set()
        assert {compiled[i].key for i in pattern - plain} == set()
    assert seen > len(texts) // 2  # the Sets did read them (a Set out of memory matches nothing)
    assert 100 < sum(c.exact for c in compiled) < len(compiled)


def test_the_escape_tolerant_set_looks_for_a_short_head_every_match_holds() -> None:
    # That Set's word is never final (a piece it flags is stripped and the signatures decide),
    # so it looks for 16 characters of a literal run, or a head per branch of a choice: each
    # character costs about ten RE2 instructions there (49 MB of Set at 955 signatures before).
    forms = set_forms(r"error: could not compile `(?P<c>[\w-]+)` \(lib\)")
    assert forms.tolerant is not None and forms.tolerant.count("\\x1b") == 16
    assert re2.search("(?m)" + forms.tolerant, b"\x1b[1m\x1b[31merror\x1b[0m: could not compile `x`")
    choice = r"(?:network failure seems to have happened|failed to fetch `https://x`)\s*\n[^\n]*(?:Timeout|SSL)"
    tolerant = set_forms(choice).tolerant
    assert tolerant is not None and tolerant.count("\\x1b") == 32  # two heads of 16
    for raw in (b"\x1b[33mnetwork failure\x1b[0m seems", b"failed to \x1b[1mfetch `https://x`"):
        assert re2.search("(?m)" + tolerant, raw), raw
    assert set_forms(r"ab[^\n]*cd").tolerant.count("\\x1b") > 2  # no head: the pattern itself


def test_python_3_10s_regex_parser_modules_give_the_same_forms() -> None:
    # pyproject.toml allows Python 3.10, the python3 of Ubuntu 22.04 runners, which the action
    # uses by default; it has no re._parser, so tolerant.py falls back to sre_parse there (it
    # once raised ImportError at `ci-matrix diagnose`). Here that fallback runs, with re._parser
    # and re._constants made unimportable and 3.10's module names standing for them.
    if sys.version_info < (3, 11):  # on 3.10 itself the fallback is what runs
        from ci_matrix.diagnose import tolerant

        assert tolerant.sre_parse.__name__ == "sre_parse"
        return
    code = (
        "import re, sys, types\n"
        "for old, new in (('re._constants', 'sre_constants'), ('re._parser', 'sre_parse')):\n"
        "    module = types.ModuleType(new)\n"
        "    module.__dict__.update((k, v) for k, v in vars(sys.modules[old]).items() if k[:2] != '__')\n"
        "    sys.modules[new] = module; sys.modules[old] = None; delattr(re, old[3:])\n"
        "from ci_matrix.diagnose import tolerant\n"
        "assert tolerant.sre_parse.__name__ == 'sre_parse', tolerant.sre_parse.__name__\n"
        "print(repr(tolerant.set_forms(sys.argv[1])))\n"
    )
    pattern = r"error\[E0(?:463|514)\]: can't find crate for `(?:core|std)`(?: \w+)?$"
    root = Path(__file__).resolve().parents[2]
    argv = [sys.executable, "-c", code, pattern]
    fallback = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=root)
    assert fallback.stdout.strip() == repr(set_forms(pattern))
