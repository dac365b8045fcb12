"""Scanning real log files with real RE2: hits, lines and context exact at any chunk size."""

from __future__ import annotations

import io
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
import re2

from ci_matrix.diagnose.cleaning import clean
from ci_matrix.diagnose.hits import Hit
from ci_matrix.diagnose.scanner import COUNT_LIMIT, Scanner, Signature

SIGNATURES = (
    Signature("rustc-ice#0", r"error: internal compiler error: (?P<msg>.+)"),
    Signature("could-not-compile#0", r"^error: could not compile `(?P<crate>[\w-]+)`"),
    Signature("nvcc-arch#0", r"nvcc fatal\s*: Unsupported gpu architecture 'compute_(?P<arch>\d+)'"),
    Signature("llvm-stack#0", r"Stack dump:\n0\.\s+Program arguments: (?P<args>[^\n]+)"),
    Signature("iree-hal#0", r"(?i)failed to legalize operation 'hal\.(?P<op>[\w.]+)'"),
)
FILLER = (
    "   Compiling serde v1.0.197",
    "/usr/bin/c++ -O2 -std=c++17 -c src/kernel.cu -o kernel.o",
    "warning: unused variable: `x`",
    "  --> src/lib.rs:12:9",
    "[12/40] Building CUDA object CMakeFiles/gemm.dir/gemm.cu.o",
    "",
)
FAILURES = (
    "error: internal compiler error: unexpected panic",
    "error: could not compile `rust-gpu` (lib) due to 1 previous error",
    "  error: could not compile `indented` is not at a line start",
    "nvcc fatal   : Unsupported gpu architecture 'compute_89'",
    "Stack dump:\n0.\tProgram arguments: rustc --crate-name spirv",
    "error: FAILED TO LEGALIZE OPERATION 'hal.executable.export'",
)


def scan(path: Path, signatures=SIGNATURES, **options) -> dict[str, Hit]:
    with path.open("rb") as stream:
        return Scanner(signatures).scan(stream, **options)


def write(tmp_path: Path, data: bytes, name: str = "build.log") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def reference(data: bytes, signatures=SIGNATURES, context: int = 3) -> dict[str, Hit]:
    """The same answer computed the slow, obvious way: the whole log in memory at once."""
    text = clean(data).decode()
    lines = text.split("\n")
    hits = {}
    for sig in signatures:
        matches = list(re2.compile("(?m)" + sig.pattern).finditer(text))
        if not matches:
            continue
        last = matches[-1]
        line = text.count("\n", 0, last.start()) + 1
        end_line = line + text.count("\n", last.start(), last.end() - 1)
        after = lines[end_line : end_line + context]
        if end_line + context >= len(lines) and after and after[-1] == "":
            after = after[:-1]  # the empty string after the final newline is not a line
        hits[sig.key] = Hit(
            key=sig.key,
            line=line,
            end_line=end_line,
            text="\n".join(lines[line - 1 : end_line]),
            groups={k: v or "" for k, v in last.groupdict().items()},
            before=tuple(lines[max(0, line - 1 - context) : line - 1]),
            after=tuple(after),
            count=len(matches),
        )
    return hits


def as_plain(hits: dict[str, Hit]) -> dict[str, tuple]:
    return {key: (h.line, h.end_line, h.text, dict(h.groups), h.before, h.after, h.count) for key, h in hits.items()}


def random_log(seed: int, lines: int = 400) -> bytes:
    rng = random.Random(seed)
    out = []
    for n in range(lines):
        pool = FAILURES if rng.random() < 0.08 else FILLER
        out.append(f"{rng.choice(pool)} {n}" if rng.random() < 0.5 else rng.choice(pool))
    return ("\n".join(out) + "\n").encode()


def test_a_hit_has_its_line_text_captures_and_context(tmp_path: Path) -> None:
    log = b"a\nb\nc\nd\nnvcc fatal   : Unsupported gpu architecture 'compute_89'\ne\nf\n"
    hit = scan(write(tmp_path, log))["nvcc-arch#0"]
    assert (hit.line, hit.end_line) == (5, 5)
    assert hit.text == "nvcc fatal   : Unsupported gpu architecture 'compute_89'"
    assert dict(hit.groups) == {"arch": "89"}
    assert hit.before == ("b", "c", "d")
    assert hit.after == ("e", "f")
    assert hit.count == 1


def test_the_last_occurrence_wins_and_all_are_counted(tmp_path: Path) -> None:
    log = b"".join(b"error: internal compiler error: panic %d\nfiller\n" % n for n in range(1, 6))
    hit = scan(write(tmp_path, log))["rustc-ice#0"]
    assert (hit.line, hit.count, hit.groups["msg"]) == (9, 5, "panic 5")


def test_a_multi_line_signature_reports_both_lines(tmp_path: Path) -> None:
    log = b"x\nStack dump:\n0.\tProgram arguments: rustc --crate-name spirv\ny\n"
    hit = scan(write(tmp_path, log))["llvm-stack#0"]
    assert (hit.line, hit.end_line) == (2, 3)
    assert hit.text == "Stack dump:\n0.\tProgram arguments: rustc --crate-name spirv"
    assert hit.groups["args"] == "rustc --crate-name spirv"


def test_caret_means_line_start_and_case_matters_unless_asked(tmp_path: Path) -> None:
    log = b"  error: could not compile `indented`\nERROR: COULD NOT COMPILE `x`\n"
    log += b"error: Failed To Legalize Operation 'hal.interface'\n"
    hits = scan(write(tmp_path, log))
    assert "could-not-compile#0" not in hits
    assert hits["iree-hal#0"].groups["op"] == "interface"


@pytest.mark.parametrize("chunk_size", [192, 1 << 23])
def test_the_end_of_a_log_ends_its_last_line(tmp_path: Path, chunk_size: int) -> None:
    # A log pasted from an issue seldom ends with a newline; a signature that reads a line and
    # its line end (cargo's candidates, then what it printed under them) must see the last one.
    signature = Signature("candidates#0", r"candidate versions found which didn.t match: [^\n]*\n")
    log = b"x" * 300 + b"\nerror: failed to select a version\ncandidate versions found which didn't match: 1.1.0"
    path = write(tmp_path, log)
    with path.open("rb") as stream:
        hit = Scanner([signature]).scan(stream, chunk_size=chunk_size)["candidates#0"]
    assert (hit.line, hit.text) == (3, "candidate versions found which didn't match: 1.1.0")


@pytest.mark.parametrize("chunk_size", [192, 200, 257, 1000, 4096, 1 << 23])
@pytest.mark.parametrize("seed", range(6))
def test_any_chunk_size_gives_the_whole_log_answer(tmp_path: Path, seed: int, chunk_size: int):
    log = random_log(seed)
    hits = scan(write(tmp_path, log), chunk_size=chunk_size)
    assert as_plain(hits) == as_plain(reference(log))


def test_a_multi_line_signature_across_every_boundary_is_found_once(tmp_path: Path) -> None:
    head = b"Stack dump:\n0.\tProgram arguments: rustc\n"
    for pad in range(0, 260, 7):  # moves the two lines across the 192-byte boundary
        log = b"p" * pad + b"\n" + head + b"tail\n"
        hit = scan(write(tmp_path, log), chunk_size=192)["llvm-stack#0"]
        assert (hit.line, hit.end_line, hit.count) == (2, 3, 1), pad
        assert hit.before == ("p" * pad,)
        assert hit.after == ("tail",)


def test_context_lines_come_from_neighbouring_chunks(tmp_path: Path) -> None:
    lines = [f"line {n:03}".encode() for n in range(1, 101)]
    lines[49] = b"error: internal compiler error: here"
    hit = scan(write(tmp_path, b"\n".join(lines) + b"\n"), chunk_size=192, context=5)["rustc-ice#0"]
    assert hit.line == 50
    assert hit.before == tuple(f"line {n:03}" for n in range(45, 50))
    assert hit.after == tuple(f"line {n:03}" for n in range(51, 56))


def test_colour_stamps_and_crlf_are_cleaned_before_matching(tmp_path: Path) -> None:
    log = (
        b"2024-05-01T12:34:56.1234567Z    Compiling rust-gpu\r\n"
        b"2024-05-01T12:34:57.1234567Z \x1b[1m\x1b[91merror\x1b[0m\x1b[1m: could not compile "
        b"`rustc_codegen_spirv`\x1b[0m\r\n"
    )
    hit = scan(write(tmp_path, log))["could-not-compile#0"]
    assert hit.line == 2
    assert hit.text == "error: could not compile `rustc_codegen_spirv`"
    assert hit.before == ("   Compiling rust-gpu",)


def test_curled_quotes_match_either_way_round(tmp_path: Path) -> None:
    # a pattern written from a UTF-8 locale's GCC matches the C locale's log, and the other way
    gcc = [Signature("utf8", "error: \u2018\\w+\u2019 was not declared"), Signature("c", "error: 'x' was not")]
    hits = scan(write(tmp_path, "a.cu:1:5: error: \u2018x\u2019 was not declared\n".encode()), gcc)
    assert sorted(hits) == ["c", "utf8"] and hits["c"].text == "a.cu:1:5: error: 'x' was not declared"
    assert sorted(scan(write(tmp_path, b"a.cu:1:5: error: 'x' was not declared\n", "c.log"), gcc)) == ["c", "utf8"]


def test_invalid_utf8_and_nul_bytes_do_not_hide_a_failure(tmp_path: Path) -> None:
    log = b"\xff\xfe\x00garbage\n\0\0error: internal compiler error: bad \xc3\x28 byte\0\n"
    hit = scan(write(tmp_path, log))["rustc-ice#0"]
    assert hit.line == 2
    assert hit.groups["msg"] == "bad \ufffd( byte"


def test_a_clean_log_has_no_hits_and_a_scanner_is_reusable(tmp_path: Path) -> None:
    scanner = Scanner(SIGNATURES)
    failing = write(tmp_path, b"error: internal compiler error: x\n", "failing.log")
    passing = write(tmp_path, "\n".join(FILLER).encode() * 100, "passing.log")
    with failing.open("rb") as stream:
        assert set(scanner.scan(stream)) == {"rustc-ice#0"}
    with passing.open("rb") as stream:
        assert scanner.scan(stream) == {}
    assert scan(write(tmp_path, b"", "empty.log")) == {}


def test_a_match_inside_an_overlong_line_is_found_once_across_cuts(tmp_path: Path) -> None:
    needle = Signature("needle#0", r"NEEDLE-(?P<n>\d+)")
    for offset in range(180, 200):  # puts the needle across the 192-byte cut
        log = b"a" * offset + b"NEEDLE-42" + b"b" * 500 + b"\nnext\n"
        hit = scan(write(tmp_path, log), (needle,), chunk_size=192)["needle#0"]
        assert (hit.line, hit.count, hit.groups["n"]) == (1, 1, "42"), offset
        assert hit.after == ("next",)


def test_a_100_mb_line_is_scanned_fast_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "huge.log"
    with path.open("wb") as out:
        out.write(b"NEEDLE-1 ")
        for _ in range(100):
            out.write(b"a" * (1 << 20))
        out.write(b" NEEDLE-2\nerror: internal compiler error: after the long line\n")
    code = (
        "import re, sys, time\n"
        "from ci_matrix.diagnose.scanner import Scanner, Signature\n"
        "sigs = [Signature('needle#0', r'NEEDLE-(?P<n>\\d+)'),"
        " Signature('ice#0', r'internal compiler error: (?P<msg>.+)')]\n"
        "started = time.perf_counter()\n"
        "with open(sys.argv[1], 'rb') as f: hits = Scanner(sigs).scan(f)\n"
        "print(time.perf_counter() - started, hits['needle#0'].count, hits['needle#0'].line,"
        " len(hits['needle#0'].text), hits['ice#0'].line, len(hits['ice#0'].before[0]),"
        # VmHWM, not ru_maxrss: ru_maxrss keeps the high-water mark of the pytest process
        # that started this one, so it would measure the test runner, not the scan.
        " int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1]) // 1024)\n"
    )
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    seconds, count, line, width, ice_line, before_width, peak_mb = done.stdout.split()
    assert (count, line, ice_line) == ("2", "1", "2")
    assert int(width) <= 1000 and int(before_width) <= 1000  # excerpts of the 100 MB line
    assert int(peak_mb) < 120, f"peak RSS {peak_mb} MB"
    assert wall < 10 and float(seconds) < 5


def test_a_pattern_re2_rejects_names_its_key() -> None:
    with pytest.raises(ValueError, match=r"signature backref#1: RE2 rejects .*\\1"):
        Scanner([Signature("ok#0", "fine"), Signature("backref#1", r"(a)\1")])


def test_a_pattern_matching_nothing_at_all_is_refused() -> None:
    with pytest.raises(ValueError, match=r"signature empty#0: .* matches an empty string"):
        Scanner([Signature("empty#0", r"(?m)^\s*$")])


def test_duplicate_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate signature keys: a#0"):
        Scanner([Signature("a#0", "x"), Signature("a#0", "y")])


def test_a_flood_of_one_failure_still_reports_its_last_line(tmp_path: Path) -> None:
    log = b"error: internal compiler error: again\n" * 50_000
    log += b"error: internal compiler error: last\nend\n"
    hit = scan(write(tmp_path, log))["rustc-ice#0"]
    assert (hit.line, hit.groups["msg"], hit.after) == (50_001, "last", ("end",))
    assert hit.count >= COUNT_LIMIT  # exact up to the limit, a lower bound past it


@pytest.mark.parametrize("chunk_size", [192, 300, 1 << 20])
def test_last_only_signatures_find_the_last_match_wherever_it_lies(chunk_size: int) -> None:
    # Evidence is located once, at the end or when too many pieces wait: the answer must be
    # the whole log's, whatever the pieces (a match in an overlap only, pieces held back).
    lines = [f"line {n}" for n in range(400)]
    lines[3] = "release 11.8, V11.8.89"
    lines[250] = "release 12.4, V12.4.131"
    lines[390] = "toolchain nightly-2024-04-24"
    sigs = [
        Signature("@banner", r"release (?P<v>\d+\.\d+), V", last_only=True),
        Signature("@tc", r"toolchain (?P<t>\S+)", last_only=True),
        Signature("r#0", r"line 39\d"),
    ]
    hits = Scanner(sigs).scan(io.BytesIO(("\n".join(lines) + "\n").encode()), chunk_size=chunk_size)
    assert (hits["@banner"].line, hits["@banner"].groups["v"]) == (251, "12.4")
    assert (hits["@tc"].line, hits["@tc"].groups["t"]) == (391, "nightly-2024-04-24")
    assert (hits["r#0"].line, hits["r#0"].count) == (400, 9)


def test_more_waiting_pieces_than_held_are_settled_early_and_right() -> None:
    lines = [f"filler {n}" for n in range(600)]
    for k in range(8):  # eight facts, each last stated in another piece
        lines[60 * k + 7] = f"fact{k} = {k}"
    sigs = [Signature(f"@f{k}", rf"fact{k} = (?P<v>\d)", last_only=True) for k in range(8)]
    hits = Scanner(sigs).scan(io.BytesIO(("\n".join(lines) + "\n").encode()), chunk_size=192)
    assert {key: (hit.line, hit.groups["v"]) for key, hit in hits.items()} == {
        f"@f{k}": (60 * k + 8, str(k)) for k in range(8)
    }


ESCAPES = (b"\x1b[0m", b"\x1b[1m\x1b[31m", b"\x1b[38;5;196m", b"\x1b(B", b"\x1bM", b"\x1b", b"\x1b[K", b"\x1b[?25l")


def coloured(data: bytes, seed: int, rate: float = 0.08) -> bytes:
    """``data`` with escape sequences put between characters at random, as a terminal would
    (at line starts, inside words, between a key word and its colon)."""
    rng = random.Random(seed)
    out = bytearray()
    for byte in data:
        if rng.random() < rate:
            out += rng.choice(ESCAPES)
        out.append(byte)
    return bytes(out)


@pytest.mark.parametrize("chunk_size", [192, 257, 4096])
@pytest.mark.parametrize("seed", range(8))
def test_escapes_anywhere_in_a_line_give_the_answer_of_the_cleaned_log(tmp_path: Path, seed: int, chunk_size: int):
    # The Set reads escapes in place and only pieces with a hit are stripped: the hits, their
    # lines, captures and context must be those of the log cleaned as a whole first.
    log = coloured(random_log(seed), seed)
    hits = scan(write(tmp_path, log), chunk_size=chunk_size)
    assert hits and as_plain(hits) == as_plain(reference(log))


def test_knowledge_base_signatures_match_through_escapes_as_on_clean_text() -> None:
    # Every built-in signature and extractor on every fixture log of the knowledge base, coloured: the
    # scan finds what it finds in the same log cleaned first.
    from ci_matrix.edges import files
    from ci_matrix.edges.logs import scanner_for

    scanner = scanner_for(tuple(files.trusted_builtin_rules()))  # signatures and evidence extractors
    assert scanner._lazy  # every one of them steps over escapes
    fixtures = sorted((Path(files.__file__).resolve().parent.parent / "knowledge" / "fixtures").rglob("*.log"))
    found = 0
    for n, fixture in enumerate(fixtures):
        data = coloured(clean(fixture.read_bytes()), n, rate=0.05)  # GitHub's stamps come before any colour
        hits = scanner.scan(io.BytesIO(data))
        assert as_plain(hits) == as_plain(scanner.scan(io.BytesIO(clean(data)))), fixture.name
        found += bool(hits)
    assert found > 100


def test_a_pattern_that_cannot_step_over_escapes_makes_the_scan_clean_first(tmp_path: Path) -> None:
    sigs = (*SIGNATURES, Signature("posix#0", r"exit code [[:digit:]]+"))
    scanner = Scanner(sigs)
    assert not scanner._lazy
    log = b"\x1b[31mexit\x1b[0m code 1\n\x1b[1merror\x1b[0m: internal compiler error: x\n"
    hits = scanner.scan(io.BytesIO(log))
    assert (hits["posix#0"].line, hits["rustc-ice#0"].text) == (1, "error: internal compiler error: x")


# Dense enough in colour that a piece keeps its escapes for the escape-tolerant Set.
COLOURED_FILLER = b"\x1b[2mfi\x1b[0mll\x1b[1mer\x1b[0m"


def test_an_escape_the_set_steps_over_but_cleaning_keeps_does_not_hide_the_earlier_fact() -> None:
    # A CSI with more parameter bytes than cleaning accepts loses only its ESC there, so the
    # cleaned line reads "relea[111…1mse 2"; the Set, looser, steps over it and sees
    # "release 2". The extractor decides on the cleaned piece: line 1 stays the answer.
    lines = [b"release 1"] + [COLOURED_FILLER] * 400 + [b"relea\x1b[" + b"1" * 70 + b"mse 2"] + [COLOURED_FILLER] * 40
    sigs = [Signature("@release", r"release (?P<v>\d)", last_only=True)]
    hits = Scanner(sigs).scan(io.BytesIO(b"\n".join(lines) + b"\n"), chunk_size=1024)
    assert (hits["@release"].line, hits["@release"].groups["v"]) == (1, "1")


def test_a_word_boundary_broken_by_colour_does_not_hide_the_earlier_fact() -> None:
    # The escape-tolerant Set drops word boundaries, so it sees "@tool" in the coloured last line; the
    # cleaned line reads "xtool 2", where the extractor does not match: line 1 stays the answer.
    lines = [b"tool 1"] + [COLOURED_FILLER] * 400 + [b"x\x1b[0mtool 2"] + [COLOURED_FILLER] * 40
    sigs = [Signature("@tool", r"\btool (?P<v>\d)", last_only=True)]
    hits = Scanner(sigs).scan(io.BytesIO(b"\n".join(lines) + b"\n"), chunk_size=1024)
    assert (hits["@tool"].line, hits["@tool"].groups["v"]) == (1, "1")


def test_a_hyperlink_escape_hides_neither_a_failure_nor_shows_its_target(tmp_path: Path) -> None:
    # OSC 8 hyperlinks (cargo's, in a terminal that asks for them) and window titles: their
    # text is removed by cleaning, and what the Set steps over, the signatures look at again.
    log = (
        b"\x1b]8;;file:///src/lib.rs\x1b\\error\x1b]8;;\x1b\\: could not compile `x`\n"
        b"\x1b]0;error: internal compiler error: title\x07done\n"
    )
    hits = scan(write(tmp_path, log))
    assert hits["could-not-compile#0"].text == "error: could not compile `x`"
    assert "rustc-ice#0" not in hits
    assert as_plain(hits) == as_plain(reference(log))


EVIDENCE = (
    *(Signature("@" + s.key, s.pattern, last_only=True) for s in SIGNATURES),
    Signature("@word", r"\bCompiling\b (?P<crate>\w+)", last_only=True),  # a boundary that colour can break
)


@pytest.mark.parametrize("chunk_size", [4096, 9000])
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("with_counted", [False, True])
def test_evidence_in_pieces_that_keep_their_escapes_is_the_last_match_of_the_cleaned_log(
    tmp_path: Path, seed: int, chunk_size: int, with_counted: bool
) -> None:
    # Pieces dense in colour keep their escapes; evidence seen there is confirmed on the lines
    # where its escape-tolerant form matches, and the piece is stripped only when located.
    # The last match, its line and captures must be those of the log cleaned as a whole.
    log = coloured(random_log(seed, lines=3000), seed, rate=0.1)
    signatures = EVIDENCE + (SIGNATURES if with_counted else ())
    hits = scan(write(tmp_path, log), signatures, chunk_size=chunk_size, context=0)
    expected = reference(log, signatures, context=0)
    assert hits and set(hits) == set(expected)
    for key, hit in hits.items():
        want = expected[key]
        assert (hit.line, hit.end_line, hit.text, dict(hit.groups)) == (
            want.line, want.end_line, want.text, dict(want.groups)), key
        if not key.startswith("@"):
            assert hit.count == want.count, key


def test_many_patterns_seen_by_their_literal_run_are_confirmed_by_one_set(tmp_path: Path) -> None:
    # Six patterns share the literal run a Set looks for; a piece holding it for all of them asks
    # one Set of their confirm forms which match, and only those are located.
    from ci_matrix.diagnose import scanner as scanner_module

    sigs = [Signature(f"s{n}", rf"shared literal text: (?:\w+ )?tail{n}\b") for n in range(6)]
    log = b"shared literal text: no tail here\n" * 50 + b"shared literal text: x tail3\n" + b"filler\n" * 10
    before = scanner_module._confirm_set.cache_info()
    hits = scan(write(tmp_path, log), sigs)
    assert sorted(hits) == ["s3"] and (hits["s3"].line, hits["s3"].count) == (51, 1)
    assert scanner_module._confirm_set.cache_info().misses == before.misses + 1
    hits = scan(write(tmp_path, log), sigs)  # the same candidates again: the Set is kept
    assert scanner_module._confirm_set.cache_info().misses == before.misses + 1


def test_ordinary_verbose_build_lines_ask_no_rule_signature_to_be_located() -> None:
    # The scanner's Set looks for each signature's longest literal run; a run that every line of
    # a verbose build holds (cargo -v's "-L dependency=", rustup's x86_64-unknown-linux-gnu paths)
    # makes each piece of such a log pay a search for that signature (and, from four of them, a
    # second Set pass). Counted, not timed: which rule signatures the Set reports on these lines.
    from ci_matrix.diagnose.evidence import KEY_PREFIX
    from ci_matrix.edges import files
    from ci_matrix.edges.logs import scanner_for

    toolchain = "/home/runner/.rustup/toolchains/stable-x86_64-unknown-linux-gnu"
    target = "/home/runner/work/p/p/target/debug/deps"
    lines = [
        f"     Running `{toolchain}/bin/rustc --crate-name serde --edition=2021 src/lib.rs --crate-type lib"
        f" -C debuginfo=2 --out-dir {target} -L dependency={target} --extern serde_derive={target}/x.so`",
        "   Compiling serde v1.0.210",
        "/usr/local/cuda-12.4/bin/nvcc -I/work/cutlass/include -O3 -gencode arch=compute_86,code=sm_86"
        " -x cu -c /work/k.cu -o k.o",
        "[12/40] Building CUDA object CMakeFiles/k.dir/k.cu.o",
        "iree-compile m.mlir --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu",
        "test tests::case_1 ... ok",
        "    Finished `dev` profile [unoptimized + debuginfo] target(s) in 41.20s",
    ]
    scanner = scanner_for(files.trusted_builtin_rules())
    text = ("\n".join(lines) + "\n").encode() * 200
    reported = scanner._matcher(text)(text) or []  # the Set pass is what is counted
    keys = [scanner._compiled[i].key for i in reported]
    assert [key for key in keys if not key.startswith(KEY_PREFIX)] == []  # evidence is meant to be there
