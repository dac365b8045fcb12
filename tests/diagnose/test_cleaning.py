"""Cleaning a raw build log: what a person sees is what signatures match."""

from __future__ import annotations

import io

import pytest

from ci_matrix.diagnose import cleaning
from ci_matrix.diagnose.cleaning import clean, clean_pieces, raw_pieces
from ci_matrix.edges import files
from ci_matrix.edges.logs import diagnose_log


def test_colour_codes_are_removed_and_text_kept() -> None:
    raw = b"\x1b[1m\x1b[91merror\x1b[0m\x1b[1m: could not compile `foo`\x1b[0m\x1b[K\n"
    assert clean(raw) == b"error: could not compile `foo`\n"


def test_hyperlinks_and_charset_escapes_are_removed() -> None:
    raw = b"see \x1b]8;;https://x.dev\x07docs\x1b]8;;\x1b\\ \x1b(Bnow\n"
    assert clean(raw) == b"see docs now\n"


def test_github_timestamps_are_removed_only_at_line_start() -> None:
    raw = (
        b"2024-05-01T12:34:56.1234567Z error: boom\n"
        b"2024-05-01T12:34:57.0000000Z built at 2024-05-01T12:34:57.0000000Z ok\n"
    )
    assert clean(raw) == b"error: boom\nbuilt at 2024-05-01T12:34:57.0000000Z ok\n"


def test_a_piece_from_the_middle_of_a_line_keeps_its_first_bytes() -> None:
    raw = b"2024-05-01T12:34:56.1234567Z tail of a long line\n"
    assert clean(raw, at_line_start=False) == raw


def test_crlf_and_lone_cr_become_line_ends() -> None:
    assert clean(b"one\r\ntwo\rthree\r\n") == b"one\ntwo\nthree\n"


def test_nul_bytes_are_dropped() -> None:
    assert clean(b"err\0or: \0boom\n") == b"error: boom\n"


def test_invalid_utf8_is_replaced_and_valid_utf8_kept() -> None:
    assert clean(b"caf\xc3\xa9 \xff\xfe ok\n") == "café \ufffd\ufffd ok\n".encode()


def test_an_escape_flood_is_cleaned_in_a_bounded_number_of_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    # Python steps per escape are what a flood could make unbounded: at most
    # _ONE_BY_ONE_MAX escapes go one by one, the rest in a few whole-piece passes.
    flood = b"\x1b[1mA\x1b[38;5;9mB" * (1 << 20)  # 16 MiB, an escape every 6 bytes
    splits: list[int] = []
    real = cleaning._ANSI

    class Counting:
        def split(self, data: bytes, maxsplit: int = 0) -> list[bytes]:
            splits.append(maxsplit)
            return real.split(data, maxsplit)

        def findall(self, data: bytes, *bounds: int) -> list[bytes]:
            return real.findall(data, *bounds)

    monkeypatch.setattr(cleaning, "_ANSI", Counting())
    cleaned = clean(flood)
    assert splits == [cleaning._ONE_BY_ONE_MAX]
    assert b"\x1b" not in cleaned
    assert cleaned == b"AB" * (1 << 20)


def test_pieces_of_a_long_line_are_bounded_and_rejoin_exactly() -> None:
    line = ("é" * 5000 + "\r\n").encode() * 3 + b"x" * 3000
    pieces = list(raw_pieces(io.BytesIO(line), 1024))
    assert b"".join(pieces) == line
    assert all(len(piece) < 2 * 1024 for piece in pieces)
    for piece in pieces:
        piece.decode("utf-8")  # no character is cut in two
        assert not piece.endswith(b"\r")  # CRLF stays together


def test_pieces_end_at_line_ends_when_lines_are_short() -> None:
    log = b"".join(b"line %d\n" % n for n in range(1000))
    pieces = list(raw_pieces(io.BytesIO(log), 512))
    assert b"".join(pieces) == log
    assert all(piece.endswith(b"\n") for piece in pieces)


def test_cleaned_pieces_strip_stamps_only_where_lines_start() -> None:
    stamp = b"2024-05-01T12:34:56.1234567Z "
    # The second piece starts exactly at the second stamp, inside the first line.
    log = stamp + b"a" * (256 - len(stamp)) + stamp + b"b\n" + stamp + b"next\n"
    pieces = list(clean_pieces(io.BytesIO(log), 256))
    assert pieces[1].startswith(stamp)
    assert b"".join(pieces) == b"a" * (256 - len(stamp)) + stamp + b"b\nnext\n"


def test_a_tiny_chunk_size_is_refused() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        list(raw_pieces(io.BytesIO(b"x"), 16))


@pytest.mark.parametrize(
    "prefix",
    [
        b"2024-05-01T12:34:56.1234567Z ",  # GitHub Actions, Azure Pipelines
        b"2024-05-01T12:34:56.123456789Z ",  # kubectl logs --timestamps
        b"2026-09-30T19:38:19.213893Z 00O ",  # GitLab runner 17+, stdout
        b"2026-09-30T19:38:19.213982Z 01E+",  # GitLab, stderr, continuing the line before
        b"[2024-05-01T12:34:56.123Z] ",  # Jenkins timestamper
        b"2024-05-01 12:34:56,123 ",  # Python logging's asctime
        b"12:34:56 ",
        b"[12:34:56.789] ",
        b"#12 3.456 ",  # Docker BuildKit, plain progress
        b"0.886 ",  # Docker BuildKit's error summary: the failed step's lines, with their seconds
        b"> ",  # a markdown quote
        b"E       ",  # pytest's mark on a failure's exception lines
        b"E   ",
        b"> > ",
        b"2024-05-01T12:34:56.1234567Z #8 12.34 ",  # docker build inside a GitHub job
        b"(pid=4121) ",  # Ray: what a worker process printed
        b"(RayTrainWorker pid=4121, ip=10.0.0.5) ",
        b"2024-05-01T12:34:56.1234567Z (TaskRunner pid=77) ",  # a Ray job inside a GitHub job
        b"[rank0]: ",  # torchrun and vLLM: what rank 0 printed (PyTorch 2.2 on)
        b"[default3]:",  # torchrun before
        b"[1,0]<stderr>:",  # Open MPI's --tag-output (Horovod)
        b"20: ",  # CTest's verbose output: test 20's lines
        b"ollama-1  | ",  # Docker Compose v2
        b"web_1  | ",  # Docker Compose v1
        b"rustc-1.75.0> ",  # nix build -L
        b"2024-05-01T12:34:56.1234567Z 20: ",  # ctest -V in a GitHub job
        b"1>",  # MSBuild's node number in a parallel build (Visual Studio's output)
    ],
)
def test_line_prefixes_of_ci_systems_and_quotes_are_removed(prefix: bytes) -> None:
    raw = b"first\n" + prefix + b"error: boom\n" + prefix + b"  --> src/main.rs:1:1\n"
    assert clean(prefix + raw) == b"first\nerror: boom\n  --> src/main.rs:1:1\n"


def test_jenkins_clock_and_its_two_spaces_go_before_a_line_s_text() -> None:
    # the timestamper's clock, then two spaces; an indented line keeps all but one of its own
    raw = b"10:10:05  + make\n10:10:06  error: boom\n12:34:56   --> src/main.rs:1:1\n"
    assert clean(raw) == b"+ make\nerror: boom\n  --> src/main.rs:1:1\n"


def test_a_line_set_in_markdown_bold_reads_without_the_marks() -> None:
    # an error line pasted outside a code block and set in bold; banners of asterisks stay
    raw = b"**/__w/_temp/x.sh: 2: nvidia-smi: not found**\n> **Error: boom** \n"
    raw += b"*** Check failure stack trace: ***\n**********CUDA**********\nmake: *** [a.o] Error 1\n"
    assert clean(raw) == (
        b"/__w/_temp/x.sh: 2: nvidia-smi: not found\nError: boom\n"
        b"*** Check failure stack trace: ***\n**********CUDA**********\nmake: *** [a.o] Error 1\n"
    )


def test_a_line_set_as_inline_code_reads_without_its_backticks() -> None:
    # an error line quoted in an issue's text as inline code (in one backtick or markdown's two),
    # bare or in a quote; a fence, a line in three and backticks inside a line stay
    raw = b"`error: linking with `cc` failed: exit status: 1`\n> `Error: The process '/usr/bin/git' failed`\n"
    raw += b"`` error: failed to read `/x/Cargo.toml` ``\n`error: failed to read `/y/Cargo.toml``\n"
    raw += b"```\n```rust\n```Memory access fault```\nsee `foo` here\n"
    assert clean(raw) == (
        b"error: linking with `cc` failed: exit status: 1\nError: The process '/usr/bin/git' failed\n"
        b"error: failed to read `/x/Cargo.toml`\nerror: failed to read `/y/Cargo.toml`\n"
        b"```\n```rust\n```Memory access fault```\nsee `foo` here\n"
    )
    assert clean(clean(raw)) == clean(raw)  # a scan of a log cleaned twice reads the same text


@pytest.mark.parametrize("raw", [
    b"\x1b[31m`error: foo`\x1b[0m\n",
    b"`\x1b[1merror: foo\x1b[0m`\n",
    b"`\x1b[K``\x1bM./x.sh -v```\n",  # a line in three, an escape between two of its marks
])
def test_a_line_in_backticks_reads_the_same_with_or_without_its_colours(raw: bytes) -> None:
    assert clean(raw) == clean(cleaning.strip_escapes(raw)) == clean(clean(raw))


def test_a_signature_spanning_lines_matches_them_quoted_as_inline_code() -> None:
    # CMake's message and its indented second line, each quoted as inline code in an issue
    log = b'`CMake Error in src/CMakeLists.txt:`\n`  CUDA_ARCHITECTURES is empty for target "EXPlib".`\n'
    found = diagnose_log(io.BytesIO(log), list(files.trusted_builtin_rules()), None, files.catalog().platforms,
                         exit_code=1)
    assert [f.rule for f in found.findings][:1] == ["cmake-cuda-architectures-empty"]


def test_digits_a_job_page_linked_to_a_line_read_as_the_digits() -> None:
    # a log copied from a job's page on GitHub or Gitea and pasted into an issue: digits in the
    # text became links to a line of the step; other links and brackets stay
    raw = (
        b"exit code [12](https://github.com/o/r/runs/5585057436?check_suite_focus=true#step:2:12)8\n"
        b"GLIBCXX_[3](https://github.com/o/r/actions/runs/9807280807/job/27080810941#step:8:3).4.20' not found\n"
        b"::error::The version '[3](https://git.example:50443/o/r/actions/runs/6#jobstep-2-3).12.0' was not found\n"
        b"see [12](https://github.com/o/r/issues/12) and [x](https://e.org/#step:1:2) [1] (https://a#step:1:1)\n"
    )
    assert clean(raw) == (
        b"exit code 128\nGLIBCXX_3.4.20' not found\n::error::The version '3.12.0' was not found\n"
        b"see [12](https://github.com/o/r/issues/12) and [x](https://e.org/#step:1:2) [1] (https://a#step:1:1)\n"
    )


def test_byte_order_marks_of_a_log_as_github_serves_it_go_with_the_stamps_after_them() -> None:
    # each step's log opens with a BOM; a job's log holds one where each of its steps starts
    raw = b"\xef\xbb\xbf2024-05-01T12:34:56.1234567Z Run cargo build\n2024-05-01T12:34:57.0Z ok\n"
    raw += b"\xef\xbb\xbf2024-05-01T12:35:00.0000000Z error: linker `cc` not found\n"
    assert clean(raw) == b"Run cargo build\nok\nerror: linker `cc` not found\n"


@pytest.mark.parametrize("step", [b"Run cargo build --locked", b"UNKNOWN STEP", b""])
def test_gh_run_view_log_job_and_step_names_go_before_github_s_stamps(step: bytes) -> None:
    # `gh run view --log` / `--log-failed`: "<job>\t<step>\t<the log's line>"
    names = b"build (ubuntu-22.04, stable)\t" + step + b"\t"
    raw = names + b"\xef\xbb\xbf2024-05-01T12:34:56.1234567Z error: linker `cc` not found\n"
    raw += names + b"2024-05-01T12:34:56.2000000Z   |\n"
    raw += names + b"2024-05-01T12:34:56.3000000Z   = note: No such file or directory (os error 2)\n"
    assert clean(raw) == b"error: linker `cc` not found\n  |\n  = note: No such file or directory (os error 2)\n"
    # a piece cut from the middle of a line keeps its first bytes, names and all
    assert clean(raw, at_line_start=False).startswith(names)


def test_tab_separated_text_without_github_s_stamp_is_kept() -> None:
    raw = b"name\tvalue\t2024-05-01\nfoo\tbar\t12:34:56 x\n[13:04:45]\t++ ./demo --use_gpu=true\n"
    raw += b"a\tb\tc 2024-05-01T12:34:56.1Z\n"
    assert clean(raw) == raw


def test_text_that_only_looks_like_a_prefix_is_kept() -> None:
    raw = b"#include <cuda.h>\n#12 DONE 0.3s\n>> redirect\n12:34 lunch\nbuilt at 12:34:56 ok\nE 12\nE  x\n"
    raw += b"3.14 pi\n1.5s\n(pid=12)\n(pid 12) exited\n(two words pid=12) x\n"
    # source lines under rustc's and GCC's gutters, a markdown table, a shell pipeline, a prompt
    raw += b"99 | #![cfg_attr(feature = \"stdsimd\", feature(stdsimd))]\n   12 | int x = f();\n| a | b |\n"
    raw += b"cargo build 2>&1 | tee build.log\n>>> import torch\n[rank] x\n12345: x\n12345>x\n"
    assert clean(raw) == raw


@pytest.mark.parametrize("repeat", [1, 200])  # few marks (one by one) and many (one pass per mark)
def test_typographic_marks_read_as_the_ascii_they_stand_for(repeat: int) -> None:
    # GCC in a UTF-8 locale, and a log pasted on a Discourse forum outside a code block
    typeset = "error: \u2018foo\u2019 was not declared \u2013arch=sm_70 \u201cx\u201d\u2026 \u2014\n".encode()
    ascii = b"error: 'foo' was not declared --arch=sm_70 \"x\"... ---\n"
    assert clean(typeset * repeat) == ascii * repeat
    other = "\u2501\u2501 12.3 MB \u2022 caf\u00e9 \u2018\n".encode()  # box drawing, a bullet stay
    assert clean(other * repeat) == "\u2501\u2501 12.3 MB \u2022 caf\u00e9 '\n".encode() * repeat


def test_buildkite_stamps_are_removed_wherever_they_stand() -> None:
    raw = b"\x1b_bk;t=1745322209921\x07error: boom\n\x1b_bk;t=1745322209922\x07next \x1b_bk;t=1\x07line\n"
    assert clean(raw) == b"error: boom\nnext line\n"
    assert clean(raw, escapes=False) == b"error: boom\nnext line\n"  # its text may hold anything


def test_a_log_indented_as_a_whole_is_dedented_once_for_all_its_pieces() -> None:
    log = b"".join(b"    line %d\n      deeper %d\n\n" % (n, n) for n in range(200))
    assert cleaning.indentation(log) == 4
    pieces = b"".join(clean_pieces(io.BytesIO(log), 192))
    assert pieces == b"".join(b"line %d\n  deeper %d\n\n" % (n, n) for n in range(200))


def test_a_timestamped_log_pasted_as_an_indented_block_loses_its_stamps_too() -> None:
    # GitHub's stamps come after the markdown block's indentation: a signature anchored at the
    # line start (rustc's "error[E0554]:") must see the tool's own line.
    log = b"".join(b"    2024-05-01T12:34:%02d.1234567Z error[E0554]: line %d\n" % (n % 60, n) for n in range(100))
    assert cleaning.indentation(log) == 4
    pieces = b"".join(clean_pieces(io.BytesIO(log), 192))
    assert pieces == b"".join(b"error[E0554]: line %d\n" % n for n in range(100))


def test_a_log_with_one_line_at_its_margin_is_not_dedented() -> None:
    log = b"    Compiling foo\n  --> src/lib.rs\nerror: boom\n    more\n"
    assert cleaning.indentation(log) == 0
    assert b"".join(clean_pieces(io.BytesIO(log), 192)) == log


def test_indentation_is_read_from_the_log_start_not_from_each_piece() -> None:
    # A later stretch of indented lines (cargo's --- stderr) keeps its indentation.
    log = b"error: failed to run custom build command\n" + b"  --- stderr\n" * 100 + b"  error: x\n"
    assert b"".join(clean_pieces(io.BytesIO(log), 192)) == log


def test_a_dedented_piece_that_starts_inside_a_line_keeps_its_first_bytes() -> None:
    assert clean(b"  tail\n  next\n", at_line_start=False, indent=2) == b"  tail\nnext\n"
