"""Turn a raw build log into clean text, one bounded piece at a time.

A log as GitHub serves it carries timestamp prefixes, ANSI colour codes and CRLF line ends,
and a log from a pull request may hold anything: invalid UTF-8, NUL bytes, a 100 MB line.
Cleaning makes signatures match what a person sees, and cutting the stream into pieces of
at most ``chunk_size`` bytes keeps memory bounded whatever the log holds.

The fixed patterns below that rewrite text use Python's ``re`` because its ``sub`` runs in
C, where google-re2's Python ``sub`` loops in Python per match (too slow for a coloured log
of millions of escapes). They are safe on untrusted input. In the escape and stamp patterns
every repetition is bounded and each one is followed by a byte it cannot contain, so a
failed attempt costs a bounded number of steps. The linked-digits pattern's URL run is
bounded too (2,048 bytes) and stops at a blank, a parenthesis or a bracket, which every link
start holds. The bold-line pattern has one unbounded run,
to the end of a line that starts with "**": a failed try walks back over that line once,
and only such lines are tried. The total stays linear. Signatures themselves only ever run
on RE2.
"""

from __future__ import annotations

import codecs
import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import BinaryIO

import re2

# CSI (ESC [ params intermediates final), OSC and APC (ESC ] or ESC _, text, BEL or ST: Buildkite
# stamps each line with an APC, "ESC _bk;t=1745322209921 BEL"), charset selection
# (ESC ( B), and any other two-byte escape; a lone ESC that starts nothing is dropped too.
# A run of escapes is one match (colour codes come in runs: bold, then red), and the
# pattern starts with a literal ESC so that sre skips to it at memchr speed.
_ESCAPE = (
    rb"\x1b(?:\[[0-?]{0,64}[ -/]{0,16}[@-~]"
    rb"|[\]_][^\x07\x1b\n]{0,4096}(?:\x07|\x1b\\)"
    rb"|[()*+#][0-9A-Za-z]"
    rb"|[@-Z\\-_]"
    rb"|)"  # an empty last alternative, not a trailing "?", keeps sre on its fast path
)
_ANSI = re.compile(_ESCAPE + rb"(?:" + _ESCAPE + rb")*")
# What a signature steps over in text that still holds escapes (ci_matrix.diagnose.tolerant):
# an ESC, then any parameter or intermediate bytes, brackets included, in any order, then a
# final byte, each part optional. Every run _ANSI removes, OSC aside, is a run of this, so a
# rewritten signature matches the raw text wherever the original matches the cleaned one.
# It is small and tight, so that the rewritten Set compiles fast and its DFA stays small on
# hostile bytes. An OSC's (or APC's) text may hold anything: a piece with one (_OSC_PROBE, an
# RE2 pass of a few milliseconds) has its escapes removed before it is matched.
ESCAPE_RUN_RE2 = r"(?:\x1b[ -?\[\]]*[@-~]?)*"
_OSC_PROBE = re2.compile(rb"\x1b[\]_]")
# What CI systems and people put in front of the line a tool printed; a signature must see the
# tool's own line, so a run of these at a line's start goes (up to four: a GitHub stamp before
# Docker's prefix, a quote of a quote):
# - an ISO 8601 stamp: GitHub Actions and Azure Pipelines ("2024-05-01T12:34:56.1234567Z "),
#   kubectl --timestamps, GitLab's runner 17+ with its stream marker ("...Z 00O ", "...Z 01E+"),
#   Jenkins' timestamper in brackets ("[2024-05-01T12:34:56.123Z] "), a space for the T;
# - a clock time, bare or in brackets ("12:34:56 ", "[12:34:56.789] "), and the two spaces
#   Jenkins' timestamper puts after its clock ("10:10:05  + make");
# - Docker BuildKit's plain progress, step and seconds ("#8 12.345 "), and the seconds alone on
#   the failed step's lines that its error summary repeats ("0.886 error: failed to parse ...");
# - pytest's mark on the lines of a failure's exception ("E   ", "E       ": the indent of its
#   source line less one), where a build run from a test (a CompilerToolError, a
#   CalledProcessError with its output) prints the tool's lines;
# - a markdown quote ("> "), as a log quoted in an issue or a reply arrives;
# - Ray's prefix on what a worker process printed ("(pid=4121) ", "(RayTrainWorker pid=4121,
#   ip=10.0.0.5) "), where a distributed training job's NCCL or CUDA lines arrive;
# - the rank torchrun and vLLM put before each line a worker printed ("[rank0]: Traceback ...",
#   PyTorch 2.2 on; "[default0]:" before), and Open MPI's --tag-output ("[1,0]<stderr>:");
# - CTest's test number in verbose output ("20: Error: CUDA error 35: ..."; srun --label's task
#   number reads the same);
# - Docker Compose's service name and bar ("ollama-1  | ", "web_1  | "), and a Nix build's
#   derivation name ("rustc-1.75.0> ", nix build -L, nix log);
# - MSBuild's node number in a parallel build as Visual Studio shows it ("1>C:\src\x.cpp(12): error C2065").
# Each form is bounded, so a failed try costs a few steps; only a piece where RE2 finds one after
# a line end is rewritten.
# The second space after a clock goes only before a line's text: "12:34:56 " then an indented
# line keeps its indentation (the probe, which only tells whether to look, reads it as optional).
_JENKINS_SPACE = rb"(?: (?=[^ \n]))?"
_STAMP_FORMS = (
    rb"\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?\]?(?: \d\d[OE][+ ]| )"
    rb"|\[?\d\d:\d\d:\d\d(?:[.,]\d{1,9})?\]? " + _JENKINS_SPACE +
    rb"|#\d{1,5} \d{1,6}\.\d{1,3} "
    rb"|\d{1,6}\.\d{3} "
    rb"|E   (?:    )?"
    rb"|> "
    rb"|\((?:[A-Za-z_][\w.]{0,63} )?pid=\d{1,9}(?:, ip=[0-9a-f.:]{3,39})?\) "
)
_LAUNCHER_FORMS = (
    rb"\[rank\d{1,6}\]: ?|\[default\d{1,6}\]:|\[\d{1,6},\d{1,6}\]<std(?:out|err)>:"
    rb"|\d{1,4}: |\d{1,4}>"
    rb"|[A-Za-z][\w.-]{0,63} {1,64}\| "
    rb"|[a-z][\w.+-]{0,80}> "
)
_STAMP_BODY = rb"(?:" + _STAMP_FORMS + rb"){1,4}"
_STAMP_AFTER_NEWLINE = re.compile(rb"\n" + _STAMP_BODY)
_STAMP_AT_START = re.compile(_STAMP_BODY)
# The launchers' forms are tried only in a piece where RE2 sees one at a line's start (the
# stamps' own pass, which a GitHub log needs on every line, stays as short as it was), and
# then with the stamps' forms, in any order.
_PREFIX_BODY = rb"(?:" + _STAMP_FORMS + rb"|" + _LAUNCHER_FORMS + rb"){1,4}"
_PREFIX_AFTER_NEWLINE = re.compile(rb"\n" + _PREFIX_BODY)
_PREFIX_AT_START = re.compile(_PREFIX_BODY)
_LAUNCHER_AT_START = re.compile(_LAUNCHER_FORMS)
# RE2's DFA tells a log without prefixes in one fast pass (sre would try at every newline): one
# probe for both kinds (a pattern that starts with a line end keeps RE2 on its fast path, where
# "(?:^|\n)" would cost it five times as much), then the launchers' alone where it saw either.
_PREFIX_PROBE = re2.compile(rb"\n(?:" + _STAMP_FORMS.replace(_JENKINS_SPACE, b"") + rb"|" + _LAUNCHER_FORMS + rb")")
_LAUNCHER_PROBE = re2.compile(rb"\n(?:" + _LAUNCHER_FORMS + rb")")
# A log as GitHub serves it (the API, the run's archive, `gh run view --log`) opens each step's log
# with a UTF-8 byte-order mark before the first line's stamp, and a job's whole log, made of its
# steps' logs, holds one where each step starts (makoni/actioneer-gtk#13, plengauer/Thoth#1509). It
# is never a tool's text: it goes wherever it stands, so that the stamp after it goes too. RE2
# tells a piece without one in microseconds (bytes' own search for it takes milliseconds).
_BOM = b"\xef\xbb\xbf"
_BOM_PROBE = re2.compile(_BOM)
# `gh run view --log` and `--log-failed` print each line of a job's log after the job's name and
# the step's, a tab after each (cli/cli, pkg/cmd/run/view: "build (ubuntu-22.04)\tRun cargo
# build\t2024-05-01T12:34:56.1234567Z error: ..."; the step reads "UNKNOWN STEP" where GitHub's
# archive holds only the job's log). The names go where GitHub's stamp follows them; the stamp
# then goes as on any GitHub line. Each name is a bounded run without a tab, tried only at a
# line's start, and only in a piece where RE2 finds a tab before a stamp.
_GH_CLI_PROBE = re2.compile(rb"\t\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
_GH_CLI_NAMES = re.compile(rb"(?m)^[^\t\n]{1,1024}\t[^\t\n]{0,1024}\t(?=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)")
# A line a person set in markdown bold ("**/__w/_temp/....sh: 2: nvidia-smi: not found**", an
# error line pasted outside a code block) reads without the marks; a banner of asterisks ("*** Check
# failure stack trace: ***", "*****") has a third one and stays. Most pieces hold no asterisk at
# all (memchr: microseconds); one that does asks RE2 for a line that starts with "**" (a third
# of a millisecond for 2 MiB, where a "(?m)^" pattern is read byte by byte: 6 ms).
_BOLD_PROBE = re2.compile(rb"\n\*\*[^*\n]")
_BOLD_LINE = re.compile(rb"(?m)^\*\*([^*\n](?:[^\n]*[^*\n \t])?)\*\*[ \t]*$")
# A line a person set as inline code ("`error: linking with `cc` failed: exit status: 1`", an
# error line quoted in an issue's text, "> `Error: The process '/usr/bin/git' failed with exit
# code 1`") reads without its two backticks, so that a signature spanning it and the next line
# (CMake's wrapped messages, an error and its exit line) sees the tool's text. Markdown wraps
# a line that holds backticks in two ("`` error: failed to read `/x/Cargo.toml` ``"), and
# people often in one all the same; either way only the wrapping goes. A fence ("```") stays,
# and so does a line in three ("```Memory access fault```": what is left would read as one in
# one, and cleaning must give the same text when run again) and a backtick a tool printed
# inside the line. A line is judged on its text without escape sequences, and one that loses
# its marks loses its escapes too: cleaning gives the same text whether escapes go before or
# after this (see clean), and again when run twice. Tried only where a line starts with a
# backtick, after nothing but escape sequences, as for bold.
# The test for candidates is two RE2 searches for a literal (a tenth of a millisecond for
# 1 MiB, where an RE2 pattern with alternatives, or bytes' own search for a two-byte needle
# whose first byte is common, takes one to two): a backtick at a line's start, or one right
# after a colour code ("m`": a line whose colour codes end just before its backtick).
_TICK_AT_LINE_START = re2.compile(rb"\n`")
_TICK_AFTER_COLOUR = re2.compile(rb"m`")
_TICK_CANDIDATE = re.compile(rb"(?m)^(?:\x1b[ -?\[\]]{0,64}[@-~]?){0,16}`[^\n]*")
_TICK_LINE = re.compile(rb"(?:``[ ]?([^` \n](?:[^\n]*?[^ \n])?)[ ]?``|`([^`\n](?:[^\n]*[^\n \t])?)`)[ \t]*")

# A log copied from a job's page on GitHub (or Gitea) and pasted into an issue: the page links
# line numbers, and the paste turns digits in the text that look like one into markdown links,
# which split a token: "exit code [12](https://github.com/o/r/runs/5585057436?check_suite_focus=
# true#step:2:12)8" was "exit code 128", "GLIBCXX_[3](https://github.com/o/r/actions/runs/9807280807
# /job/27080810941#step:8:3).4.20" was "GLIBCXX_3.4.20", "The version '[3](https://git.example/o/r/
# actions/runs/6#jobstep-2-3).12.0'" was '3.12.0'. The link goes, its digits stay. An RE2 probe for
# a link's start (RE2 finds its literal run in microseconds for 2 MiB) keeps sre off other pieces.
# The URL's run stops at a blank, a parenthesis or a bracket, so a failed try is bounded by the
# distance to the next link.
_STEP_LINK_PROBE = re2.compile(rb"\]\(https?://")
_STEP_LINK = re.compile(
    rb"\[(\d{1,9})\]\(https?://[^\s()\[\]]{1,2048}?#(?:step:\d{1,6}:\d{1,9}|jobstep-\d{1,6}-\d{1,9})\)"
)
# A line that starts with something other than a space: almost every piece has one at once, and
# is then not indented as a whole (see _dedent). _INDENT: a line's spaces before its text.
_UNINDENTED_LINE = re2.compile(rb"(?m)^[^ \n]")
_INDENT = re.compile(rb"(?m)^ +(?=[^ \n])")

# A piece's first _ONE_BY_ONE_MAX escapes are removed one by one (about 16 ms); past that,
# in bulk: the sequences seen at least _BULK_MIN_SEEN times in a sample of _SAMPLE_BYTES,
# at most _BULK_SEQUENCES of them.
_ONE_BY_ONE_MAX = 1 << 16
_BULK_SEQUENCES = 4
_BULK_MIN_SEEN = 16
_SAMPLE_BYTES = 64 << 10
# A piece whose first _SAMPLE_BYTES hold at most this many ESC bytes is stripped at once
# even when the scanner could read its escapes in place: a few costs microseconds.
_FEW_ESCAPES = 64

# Up to this many CRs in a piece are turned into line ends one by one (see _line_ends); up
# to this many lines with invalid UTF-8 are repaired one by one (see _valid_utf8).
_CR_ONE_BY_ONE_MAX = 1 << 12
# A byte seen at most _SPARSE times in a piece's first _SAMPLE_BYTES is looked for with
# bytes.find (memchr: many GB/s) one occurrence at a time, up to _SPARSE_STEPS of them;
# bytes.count, bytes.split and sre's scans step through every byte (about 1 GB/s).
_SPARSE = 64
_SPARSE_STEPS = 1 << 12
_BAD_LINES_MAX = 1 << 10
_UTF8_WINDOW = 16 << 10

# Typographic marks that stand where a tool printed ASCII. GCC quotes a name with U+2018 and
# U+2019 in a UTF-8 locale and with ' in the C locale; a Discourse forum (NVIDIA's, PyTorch's,
# the Rust users') typesets a log pasted outside a code block: quotes curl, "--" becomes an en
# dash, "---" an em dash, "..." an ellipsis. Signatures are written as the tools print in ASCII,
# and see these marks as that ASCII (a pattern that holds one is read the same way: ascii_marks).
_MARKS = {
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u2013": "--",
    "\u2014": "---",
    "\u2026": "...",
}
_MARK_BYTES = {mark.encode(): ascii.encode() for mark, ascii in _MARKS.items()}
_MARK_LEAD = b"\xe2"  # every mark's UTF-8 starts with this byte, and is 3 bytes long

# How much of a log's start tells its indentation (see indentation).
HEAD_BYTES = 64 << 10

# How far back from a forced cut to look for an escape sequence it would split.
_ESCAPE_REACH = 96


def clean(raw: bytes, *, at_line_start: bool = True, escapes: bool = True, indent: int = 0) -> bytes:
    """Return ``raw`` cleaned: valid UTF-8, ``\\n`` line ends, no ANSI codes, stamps or NULs.

    ``at_line_start`` says whether ``raw`` begins a line (a piece cut from the middle
    of an overlong line does not, and must keep its first bytes). ``escapes=False`` leaves
    the escape sequences of a piece dense in them for :func:`strip_escapes` to remove
    later, where they matter (the scanner's signatures step over them: see
    ``ESCAPE_RUN_RE2``), unless it holds an OSC sequence or ``indent`` is set (the log's own
    indentation, see :func:`indentation`, taken off every line after the escapes). Escapes go
    last, so the text is the same whether they go now or later.
    """
    data = _valid_utf8(raw.replace(b"\0", b"") if b"\0" in raw else raw)
    # UTF-8 repair goes before the CRs become line ends: a CR is ASCII, so it cuts an
    # invalid sequence exactly as a newline does, and a line of binary noise with CRs in
    # it is then one repair instead of one per CR.
    if b"\r" in data:
        data = _line_ends(data)
    data = _strip_stamps(data, at_line_start=at_line_start)
    if not data.isascii():
        data = _ascii_marks(data)
    # An indented log (rare) loses its escapes at once: its indentation is taken off the text
    # without them, which the escape-tolerant signatures would not see.
    if escapes or indent or b"\x1b" not in data or _few_escapes(data) or _OSC_PROBE.search(data) is not None:
        data = strip_escapes(data)
        if not indent:
            return data
        # The stamps of a timestamped log pasted as an indented block come after its
        # indentation: they go once it is taken off.
        return _strip_stamps(_dedent(data, indent, at_line_start=at_line_start), at_line_start=at_line_start)
    return data


def _few_escapes(data: bytes) -> bool:
    """Whether removing ``data``'s escapes now is cheap: its first window holds few of them."""
    return data.count(b"\x1b", 0, _SAMPLE_BYTES) <= _FEW_ESCAPES


def strip_escapes(data: bytes) -> bytes:
    """Return ``data`` without its ANSI escape sequences (only a piece that holds an escape
    byte pays for it)."""
    return _strip_ansi(data) if b"\x1b" in data else data


def _strip_ansi(data: bytes) -> bytes:
    """Remove escape sequences exactly, at a cost bounded whatever their number.

    Where escapes are rare (a few in a piece of other text), bytes.find skips from one to
    the next. Otherwise ``re`` splits the piece, about a quarter of a microsecond per
    escape, so at most ``_ONE_BY_ONE_MAX`` escapes of a piece go one by one. Past that, the piece is a flood
    (a log in dense colour, or one built to stall us): its most repeated sequences are
    removed in bulk, one C-speed pass each, and any left lose just their ESC byte.
    """
    if _sparse(data, b"\x1b"):
        return _cut_sparse(data, b"\x1b", _escape_end, _strip_ansi_bulk)
    return _strip_ansi_bulk(data)


def _strip_ansi_bulk(data: bytes) -> bytes:
    parts = _ANSI.split(data, _ONE_BY_ONE_MAX)
    if len(parts) <= _ONE_BY_ONE_MAX:
        return b"".join(parts)
    rest = parts.pop()
    for sequence in _common_escapes(rest):
        rest = rest.replace(sequence, b"")
    parts.append(rest.translate(None, b"\x1b"))
    return b"".join(parts)


def _common_escapes(data: bytes) -> list[bytes]:
    """Return the escape sequences that a sample of ``data`` repeats often."""
    first = data.find(b"\x1b")
    if first < 0:
        return []
    sample = Counter(_ANSI.findall(data, first, first + _SAMPLE_BYTES))
    return [seq for seq, seen in sample.most_common(_BULK_SEQUENCES) if seen >= _BULK_MIN_SEEN]


def _escape_end(data: bytes, pos: int) -> tuple[int, bytes]:
    """The run of escapes at ``pos`` is removed: where it ends, and nothing in its place."""
    match = _ANSI.match(data, pos)
    return (match.end() if match else pos + 1), b""


def _cr_end(data: bytes, pos: int) -> tuple[int, bytes]:
    """A CR at ``pos`` (with the LF after it, if any) becomes one line end."""
    return (pos + 2 if data[pos + 1 : pos + 2] == b"\n" else pos + 1), b"\n"


def _sparse(data: bytes, byte: bytes, start: int = 0) -> bool:
    """Whether ``byte`` is rare in the first window of ``data[start:]`` (then bytes.find
    skips to it)."""
    return data.count(byte, start, start + _SAMPLE_BYTES) <= _SPARSE


def _cut_sparse(
    data: bytes, byte: bytes, cut: Callable[[bytes, int], tuple[int, bytes]], rest: Callable[[bytes], bytes]
) -> bytes:
    """Return ``data`` with what ``cut`` says replaced at each ``byte``, found with bytes.find.

    ``cut(data, pos)`` gives where the replaced stretch ends and what takes its place. Past
    ``_SPARSE_STEPS`` occurrences, the byte is not sparse after all: ``rest`` cleans the
    remainder in bulk, so the Python steps stay bounded.
    """
    view, kept = memoryview(data), list[bytes | memoryview]()
    done, pos = 0, data.find(byte)
    for _ in range(_SPARSE_STEPS):
        if pos < 0:
            break
        end, put = cut(data, pos)
        kept += [view[done:pos], put]
        done = end
        pos = data.find(byte, done)
    else:
        if pos >= 0:
            return b"".join([*kept, rest(data[done:])])
    return b"".join([*kept, view[done:]])


def count_newlines(data: bytes, start: int = 0) -> int:
    """Return how many newlines ``data[start:]`` holds, at memchr speed where lines are long."""
    if not _sparse(data, b"\n", start):
        return data.count(b"\n", start)
    count, pos = 0, data.find(b"\n", start)
    for _ in range(_SPARSE_STEPS):
        if pos < 0:
            return count
        count, pos = count + 1, data.find(b"\n", pos + 1)
    return count + (data.count(b"\n", pos) if pos >= 0 else 0)


def _strip_stamps(data: bytes, *, at_line_start: bool) -> bytes:
    """Drop byte-order marks, the job and step names that `gh run view --log` puts before
    GitHub's stamps (see _GH_CLI_NAMES), the stamps and prefixes (see _STAMP_BODY) from every
    line that has them, the bold marks or backticks around a line (see _BOLD_LINE, _TICK_LINE)
    and the links a web page put on digits (see _STEP_LINK)."""
    if not data.isascii() and _BOM_PROBE.search(data) is not None:
        data = data.replace(_BOM, b"")
    if _GH_CLI_PROBE.search(data) is not None:
        data = _without_gh_cli_names(data, at_line_start=at_line_start)
    if at_line_start:
        first = _STAMP_AT_START.match(data)
        if first is not None:
            data = data[first.end() :]
    launcher_first = at_line_start and _LAUNCHER_AT_START.match(data) is not None
    prefixed = _PREFIX_PROBE.search(data) is not None
    if prefixed:
        data = _STAMP_AFTER_NEWLINE.sub(b"\n", data)
    if launcher_first or (prefixed and _LAUNCHER_PROBE.search(data) is not None):
        if at_line_start:
            first = _PREFIX_AT_START.match(data)
            if first is not None:
                data = data[first.end() :]
        data = _PREFIX_AFTER_NEWLINE.sub(b"\n", data)
    if b"*" in data and (data.startswith(b"**") or _BOLD_PROBE.search(data) is not None):
        data = _BOLD_LINE.sub(rb"\1", data)
    if b"`" in data and (
        data.startswith(b"`") or _TICK_AT_LINE_START.search(data) is not None
        or _TICK_AFTER_COLOUR.search(data) is not None
    ):
        data = _TICK_CANDIDATE.sub(_untick, data)
    if _STEP_LINK_PROBE.search(data) is not None:
        data = _STEP_LINK.sub(rb"\1", data)
    return data


def _without_gh_cli_names(data: bytes, *, at_line_start: bool) -> bytes:
    """``data`` without the job and step names before each line's stamp (not on a first line
    that starts inside a line)."""
    first = 0 if at_line_start else data.find(b"\n") + 1
    if not (at_line_start or first):
        return data
    return data[:first] + _GH_CLI_NAMES.sub(b"", data[first:])


def _untick(line: re.Match[bytes]) -> bytes:
    """A line's text without the backticks that set it as inline code, or the line as it was."""
    text = strip_escapes(line[0])
    ticked = _TICK_LINE.fullmatch(text)
    return line[0] if ticked is None else ticked[1] or ticked[2]


def indentation(head: bytes) -> int:
    """The indentation that every line of a log's ``head`` shares: a log pasted as an indented
    markdown block or under a list item. Taken off every line of the log (see :func:`clean`),
    it gives back the tool's own columns, which signatures and extractors read (rustc -vV's
    ``host:``, an error indented under cargo's ``--- stderr``). Worked out once per log, from
    its first window, so that every piece loses the same."""
    data = clean(head[: head.rfind(b"\n") + 1] or head)
    if _UNINDENTED_LINE.search(data) is not None:
        return 0
    return min(map(len, _INDENT.findall(data)), default=0)


def _dedent(data: bytes, indent: int, *, at_line_start: bool) -> bytes:
    """Take up to ``indent`` spaces off the start of each line (not off a piece that starts
    inside a line)."""
    first = 0 if at_line_start else data.find(b"\n") + 1
    if not (at_line_start or first):
        return data
    return data[:first] + re.sub(rb"(?m)^ {1,%d}" % indent, b"", data[first:])


def ascii_marks(text: str) -> str:
    """Return ``text`` with the typographic marks that stand for ASCII (``_MARKS``) as that ASCII."""
    for mark, ascii in _MARKS.items():
        text = text.replace(mark, ascii)
    return text


def _ascii_marks(data: bytes) -> bytes:
    """Return ``data`` with its typographic marks as ASCII: where their lead byte is rare,
    bytes.find skips from one to the next; otherwise one ``replace`` pass per mark."""
    if _MARK_LEAD not in data:
        return data
    if _sparse(data, _MARK_LEAD):
        return _cut_sparse(data, _MARK_LEAD, _mark_end, _ascii_marks_bulk)
    return _ascii_marks_bulk(data)


def _mark_end(data: bytes, pos: int) -> tuple[int, bytes]:
    """A mark at ``pos`` becomes its ASCII; another character with the same lead byte stays."""
    ascii = _MARK_BYTES.get(data[pos : pos + 3])
    return (pos + 3, ascii) if ascii is not None else (pos + 1, _MARK_LEAD)


def _ascii_marks_bulk(data: bytes) -> bytes:
    for mark, ascii in _MARK_BYTES.items():
        data = data.replace(mark, ascii)
    return data


def _line_ends(data: bytes) -> bytes:
    """Return ``data`` with CRLF and lone CR (progress bars) as LF, so no text hides behind a CR.

    Where CRs are rare, bytes.find skips from one to the next; otherwise the piece is cut at
    each CR, one pass plus a step per CR; a piece of many CRs (a Windows log) takes two
    ``replace`` passes instead.
    """
    if _sparse(data, b"\r"):
        return _cut_sparse(data, b"\r", _cr_end, _line_ends_bulk)
    return _line_ends_bulk(data)


def _line_ends_bulk(data: bytes) -> bytes:
    parts = data.split(b"\r", _CR_ONE_BY_ONE_MAX)
    if len(parts) > _CR_ONE_BY_ONE_MAX:
        return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return b"\n".join([parts[0], *(part[1:] if part[:1] == b"\n" else part for part in parts[1:])])


def _valid_utf8(data: bytes) -> bytes:
    """Return ``data`` as valid UTF-8, invalid sequences replaced by U+FFFD.

    Only the lines that hold an invalid sequence are decoded with replacement and encoded
    again (a newline never lies inside a UTF-8 sequence, so lines repair independently);
    the rest is checked in windows, so that an error never copies more than one window.
    Past ``_BAD_LINES_MAX`` such lines in a piece, the rest of it is repaired in one go.
    """
    if data.isascii():
        return data
    view, kept = memoryview(data), list[bytes | memoryview]()
    done = pos = repairs = 0  # done: where the bytes not yet kept start; pos: checked up to here
    while pos < len(data):
        end = pos + _UTF8_WINDOW
        try:
            pos += codecs.utf_8_decode(view[pos:end], "strict", end >= len(data))[1]
        except UnicodeDecodeError as exc:
            if repairs == _BAD_LINES_MAX:
                return b"".join([*kept, _replaced(view[done:])])
            bad = pos + exc.start
            line_start = max(done, data.rfind(b"\n", done, bad) + 1)
            line_end = data.find(b"\n", bad) + 1 or len(data)
            kept += [view[done:line_start], _replaced(view[line_start:line_end])]
            done = pos = line_end
            repairs += 1
    return b"".join([*kept, view[done:]]) if kept else data


def _replaced(raw: memoryview) -> bytes:
    return bytes(raw).decode("utf-8", "replace").encode("utf-8")


def clean_pieces(stream: BinaryIO, chunk_size: int, *, escapes: bool = True) -> Iterator[bytes]:
    """Yield the cleaned log in pieces of about ``chunk_size`` bytes or less.

    Each piece ends at a line end, except where one line alone is longer than
    ``chunk_size``: that line is cut into pieces, and only its first piece is
    treated as a line start. ``escapes`` as for :func:`clean`. The end of the log ends
    its last line: a log pasted from an issue seldom has a final newline, and a signature
    that reads a line and its line end (a message, then what cargo printed under it) must
    still see the last one.
    """
    head = stream.read(HEAD_BYTES)
    indent, at_line_start = indentation(head), True
    for raw in raw_pieces(stream, chunk_size, head=head):
        yield clean(raw, at_line_start=at_line_start, escapes=escapes, indent=indent)
        at_line_start = raw.endswith((b"\n", b"\r"))
    if not at_line_start:
        yield b"\n"


def raw_pieces(stream: BinaryIO, chunk_size: int, *, head: bytes = b"") -> Iterator[bytes]:
    """Yield ``head`` then ``stream`` in pieces that end after a newline, of less than
    ``2 * chunk_size``.

    A line longer than ``chunk_size`` is cut into pieces of ``chunk_size`` bytes or less,
    so memory stays bounded however long a line is.
    """
    if chunk_size < 2 * _ESCAPE_REACH:
        raise ValueError(f"chunk_size must be at least {2 * _ESCAPE_REACH} bytes")
    rest = b""  # the unfinished last line: never holds a newline
    for block in _blocks(stream, chunk_size, head):
        end = block.rfind(b"\n") + 1
        if end:
            yield rest + memoryview(block)[:end]  # one copy, not two
            rest = block[end:]
        else:
            rest += block
        while len(rest) >= chunk_size:
            cut = _forced_cut(rest, 0, chunk_size)
            yield rest[:cut]
            rest = rest[cut:]
    if rest:
        yield rest


def _blocks(stream: BinaryIO, size: int, head: bytes) -> Iterator[bytes]:
    """``head`` (bytes already read from ``stream``), then the rest of ``stream``, ``size`` bytes
    at a time."""
    for start in range(0, len(head), size):
        yield head[start : start + size]
    while block := stream.read(size):
        yield block


def _forced_cut(data: bytes, start: int, limit: int) -> int:
    """Return a cut inside an overlong line that splits no character, escape or CRLF."""
    cut = limit
    escape = data.rfind(b"\x1b", limit - _ESCAPE_REACH, limit)
    if escape > start:
        cut = escape
    for _ in range(3):  # a UTF-8 character is at most 4 bytes: back up over its tail
        if cut <= start + 1 or cut >= len(data) or (data[cut] & 0xC0) != 0x80:
            break
        cut -= 1
    if data[cut - 1] == 0x0D:
        cut -= 1  # keep "\r\n" together so it cleans to one line end
    return cut
