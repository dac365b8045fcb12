"""A rule draft for an unclassified failure: `ci-matrix rules draft LOG [--cell ID]`.

From the log's first error line that says what went wrong (not a linker driver's, build
tool's or container build's summary of it), a signature with the volatile parts generalised
(paths, hex addresses, temporary files, versions, hashes, durations and sizes, numbers); from
the cell and the facts the log shows, the rule's `when`; from the line's words or those facts,
its domain; and a fixture: the lines around the error. The
draft validates as a project rule file and passes `ci-matrix rules test`; its explanation,
fix and reference are for the person who knows the failure to write.

Pure: text in, text out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import re2
import yaml

from ci_matrix.diagnose.evidence import Evidence

FIXTURE_BEFORE = 8
FIXTURE_AFTER = 12
SIGNATURE_LIMIT = 160  # characters of the error line a signature is built from
LINE_LIMIT = 500  # characters of each line read for error words (what says what went wrong comes first)
# What marks a line as an error, in the words compilers, build tools and runtimes use.
_ERROR_LINE = re.compile(
    r"(?:\b(?:error|fatal|FATAL|ERROR|Error)\b(?:\[[A-Z]?\d+\])?\s*:"
    r"|\b(?:fatal )?error [A-Z]{1,4}\d{3,5}\s*:"  # MSVC's coded errors: cl's C1083, link's LNK2019, MSBuild's
    r"|\berror while\b|\berror=\d+|^\s*#error\b"  # the loader's, THC's, the preprocessor's #error
    r"|\bpanicked at\b|Segmentation fault|\bAssertion\b.*\bfailed\b|^Traceback \(most recent call last\)"
    r"|\bundefined reference to\b|\bKilled\b|\bFAILED\b|^Undefined symbols for architecture\b"
    r"|^\s*(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception)\b(?::|$)"  # a Python exception's last line
    r"|\b(?:ld|ld\.lld|ld64\.lld|rust-lld|lld-link)(?:\.exe)?: (?!warning)"  # a linker's own message
    r"|\.(?:c|cc|cpp):\d+: [A-Z][A-Z_]{3,}; "  # IREE's runtime status ("…/hip_allocator.c:507: RESOURCE_EXHAUSTED; …")
    r"|\bCMake Error\b|\bError response from daemon\b|^E: |\bnpm ERR!|^Err:\d+ )"  # CMake, Docker, apt, npm
)
# Words that say something failed, for a log whose error lines only relay (or that has none).
_FAILURE_WORDS = re.compile(
    r"(?i:\bfail(?:ed|ure|s)?\b|\bcannot\b|\bcan't\b|\bcould ?n[o']t\b|\bunable to\b|\bnot found\b"
    r"|\bno such file\b|\bpermission denied\b|\bnot supported\b|\bunsupported\b|\b(?:not |in)compatible\b"
    r"|\binsufficient\b|\bmismatch\b|\bout of (?:memory|resources?|heap space)\b|\btoo (?:old|new|many)\b"
    r"|\bunknown (?:command|option|argument|switch)|\bnot recognized\b|\bexceeded\b|\btimed out\b"
    r"|\bcore dumped\b|\bbad CPU type\b|\bunresolved external\b|\bmay not be installed\b"
    r"|\brate limit\b|\bshutdown signal\b|\bsubmit a bug report\b|\bnot (?:available|installed)\b)"
    r"|^[EF]\d{4} \d\d:\d\d:\d\d|\b[A-Z][A-Z_]*_ERROR_[A-Z_]+\b"  # glog's E/F lines; CUDA_ERROR_NO_DEVICE
)
# Error lines that only relay a failure told above or below them: a driver's or build tool's
# summary, a container build's wrapper, a traceback's header. A draft built from one of these
# would match every failure of its kind; the line that says what went wrong is preferred.
_RELAY_LINE = re.compile(
    r"(?:linker command failed with exit code|collect2: error: ld returned"
    r"|error: [Cc]ould not compile `|error: aborting due to|[Ee]rror: [Pp]rocess completed with exit code"
    r"|^Traceback \(most recent call last\)|failed to solve: |did not complete successfully: exit code"
    r"|\bmake(?:\[\d+\])?: \*\*\*|^ninja: build stopped|error: subprocess-exited-with-error"
    r"|ERROR: Command errored out|ERROR: Failed building wheel|CalledProcessError|^\s*Error: Process completed"
    r"|^FAILED: |^\s*error: failed to run custom build command|^##\[error\]Process completed"
    r"|returned a non-zero code|exited with code \d+|Error \d+\s*$"
    r"|error: linking with `[^`]*` failed|error: test failed, to rerun|error: failed to compile `"
    r"|\bfatal error LNK1120:|[Ee]rror: The process '[^']*' failed with exit code|-- FAILED\.\s*$"
    r"|CompilerToolError: Error invoking IREE compiler tool|^\s*fatal: not a git repository"
    r"|error: metadata-generation-failed|error: legacy-install-failure|^FAILURE: Build failed with an exception"
    r"|^Solving environment: failed|^warning: build failed, waiting for other jobs|^error: build failed\s*$"
    r"|(?:error|Error|ERROR)\s*:\s*$)"  # "I get this error:", "RuntimeError:": what follows says what went wrong
)
# A line whose message is below it: CMake's heading (the message indented under it), a panic's
# location (Rust 1.73 and later print the message on the next line; older ones open a quote
# there), a bare exception name.
_HEADING = re.compile(r"\bCMake Error\b.*:\s*$")
_MESSAGE_BELOW = re.compile(r"\bpanicked at (?:[^']*:\d+:\d+:|')\s*$|(?:Error|Exception):\s*$")
# cargo's chain of causes below its summary ("error: failed to ..."): the last says what went wrong.
_CARGO_SUMMARY = re.compile(r"^\s*error: ")
_CAUSED_BY = re.compile(r"^\s*Caused by:\s*(.*)$")
_QUOTED = re.compile(r"^\s*>")  # a quoted reply's prose (an e-mail, a forum post)
# Volatile parts of a line, most specific first, each with the RE2 that stands for it.
_VOLATILE = (
    (re.compile(r"0x[0-9a-fA-F]+"), r"0x[0-9a-fA-F]+"),
    (re.compile(r"(?:[A-Za-z]:)?(?:[/\\][^\s'\"`:;,()\[\]<>]+)+"), r"[^\s'\"`]+"),  # paths, temp files
    (re.compile(r"\b\d+(?:\.\d+)?(?=(?:ms|s|m|h|[KMGT]i?B|[kMG]?B)\b)"), r"\d+(?:\.\d+)?"),  # durations, sizes
    (re.compile(r"\b\d+(?:\.\d+)+(?:[-+][0-9A-Za-z.]+)?\b"), r"[0-9][0-9A-Za-z.+-]*"),  # versions
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b"), r"[0-9a-f]+"),  # hashes
    (re.compile(r"(?<![A-Za-z_])\d+(?![A-Za-z_])"), r"\d+"),  # numbers, not digits inside names (fp8_e4m3)
)
# Facts worth a `when`: where the failure was seen, as the cell or the log says.
_WHEN_FACTS = ("platform", "os", "cpu", "rust-toolchain", "rust-channel", "rust-date", "rust-version",
               "rust-profile", "rust-backend", "rust-target", "cuda-version", "cuda-arch", "gpu-capability",
               "iree-target", "iree-version")


# A draft's domain: the tool its error line names, else the facts seen (the cell's or the log's).
_DOMAIN_WORDS = (
    ("runner", re.compile(r"\b(?:docker|podman|buildx|daemon|apt-get|dpkg|npm|git|GITHUB_\w+)\b|^E: |^Err:\d+ "
                          r"|\b(?:manifest unknown|pull access denied)\b")),
    ("iree", re.compile(r"\biree[-_]|\bIREE\b|\bmlir\b|\bMLIR\b")),
    ("cuda", re.compile(r"\b(?:nvcc|ptxas|cudafe\+\+|cicc|nvlink|nvrtc|cuda\w*|CUDA\w*|cublas\w*|cudnn\w*"
                        r"|NCCL|nccl|lib(?:cu|nv)\w+)\b")),
    ("rust", re.compile(r"\b(?:rustc|cargo|rustup|rust-lld|clippy|rustdoc)\b|\.rs:\d+|error\[E\d{4}\]"
                        r"|\bCargo\.(?:lock|toml)\b|\bcrates\.io\b")),
)
_DOMAIN_FACTS = (("iree", "iree-"), ("cuda", "cuda-"), ("cuda", "gpu-"), ("rust", "rust-"))


def domain_of(line: str, when: Mapping[str, str], around: str = "") -> str:
    """The domain a draft is filed under: from its error line's words, else its facts, else the
    words of the lines around it, else runner."""
    for domain, words in _DOMAIN_WORDS:
        if words.search(line):
            return domain
    for domain, prefix in _DOMAIN_FACTS:
        if any(fact.startswith(prefix) for fact in when):
            return domain
    for domain, words in _DOMAIN_WORDS:
        if words.search(around):
            return domain
    return "runner"


@dataclass(frozen=True)
class Draft:
    """A proposed rule: its YAML text, its id, and the fixture log it names."""

    rule_id: str
    yaml: str
    fixture_file: str
    fixture: str


def error_line(lines: list[str]) -> int | None:
    """The index of the line a draft is built from: the first error line that says what went
    wrong, else the first line that says something failed ("Failed to initialize NVML", "nvcc:
    not found"), else the first that only relays a failure (a linker driver's "linker command
    failed", a container build's "failed to solve"); None where no line reads as either.
    Quoted prose (a reply's `> ` lines) is passed over while anything else reads as an error.
    Where the line chosen heads a message below it (CMake's "CMake Error at ...:", a panic's
    location) or cargo lists its causes below it ("Caused by:"), the line that says what went
    wrong is taken from there."""
    heads = [line[:LINE_LIMIT] for line in lines]  # a hostile line costs no more than a long one
    errors = [i for i, line in enumerate(heads) if _ERROR_LINE.search(line)]
    failures = [i for i, line in enumerate(heads) if _FAILURE_WORDS.search(line)]
    if not errors and not failures:
        return None
    for found in (errors, failures):
        told = [i for i in _unquoted(heads, found) if not _RELAY_LINE.search(heads[i])]
        if told:
            return _cause_below(heads, told[0])
    return _cause_below(heads, _unquoted(heads, errors or failures)[0])


def _unquoted(lines: list[str], found: list[int]) -> list[int]:
    """The lines of ``found`` outside quoted prose (all of them where all are quoted)."""
    return [i for i in found if not _QUOTED.match(lines[i])] or found


def _cause_below(lines: list[str], index: int) -> int:
    """The line that says what went wrong, for the error line at ``index``: the line below a
    heading, the last of cargo's causes, else the line itself."""
    following = [i for i in range(index + 1, min(len(lines), index + 40)) if lines[i].strip()]
    causes = [i for i in following if _CAUSED_BY.match(lines[i])]
    if causes and _CARGO_SUMMARY.match(lines[index]) and causes[0] in following[:3]:
        last = causes[-1]
        told = _CAUSED_BY.match(lines[last])
        if told and told.group(1).strip():
            return last
        return next((i for i in following if i > last), last)
    if not following:
        return index
    below = lines[following[0]]
    if (_HEADING.search(lines[index]) and below[:1].isspace()) or _MESSAGE_BELOW.search(lines[index]):
        return following[0]
    return index


def draft_line(lines: list[str]) -> tuple[int, bool]:
    """The index of the line a draft is built from, and whether it reads as an error: the
    error line, else the log's last line that is not blank."""
    found = error_line(lines)
    if found is not None:
        return found, True
    return max((i for i, text in enumerate(lines) if text.strip()), default=0), False


def signature_of(line: str) -> str:
    """An RE2 signature matching `line` and its variants: volatile parts generalised (the
    line itself, escaped, where the generalised pattern would not match it)."""
    text = line.strip()[:SIGNATURE_LIMIT]
    parts, pos = [], 0
    for start, end, replacement in _volatile_spans(text):
        parts += [_literal(text[pos:start]), replacement]
        pos = end
    parts.append(_literal(text[pos:]))
    pattern = "".join(parts)
    if not _matches(pattern, text):
        pattern = _literal(text)
    return pattern


def _literal(text: str) -> str:
    return re.sub(r"([\\.^$|?*+()\[\]{}])", r"\\\1", text)


def _matches(pattern: str, text: str) -> bool:
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options).search(text) is not None
    except re2.error:
        return False


def _volatile_spans(text: str) -> list[tuple[int, int, str]]:
    """Non-overlapping volatile spans, the more specific kinds taking precedence."""
    taken: list[tuple[int, int, str]] = []
    for pattern, replacement in _VOLATILE:
        for m in pattern.finditer(text):
            if not any(m.start() < end and start < m.end() for start, end, _ in taken):
                taken.append((m.start(), m.end(), replacement))
    return sorted(taken)


def rule_id(line: str, taken: Iterable[str]) -> str:
    """A readable id from the error line's words, not used by any rule yet."""
    words = re.findall(r"[a-z]{2,}", re.sub(r"(?:[/\\]\S+)", " ", line.lower()))
    base = "draft-" + "-".join(words[:5]) if words else "draft-failure"
    used, candidate, n = set(taken), base, 2
    while candidate in used:
        candidate, n = f"{base}-{n}", n + 1
    return candidate


def when_of(cell: Mapping[str, str] | None, log: Mapping[str, Evidence]) -> dict[str, str]:
    """Where the failure was seen: the cell's values, then what the log adds."""
    found = {fact: str(value) for fact, value in (cell or {}).items() if fact in _WHEN_FACTS and value}
    for fact in _WHEN_FACTS:
        if fact not in found and fact in log:
            found[fact] = log[fact].value
    return found


def draft(
    log_text: str,
    *,
    source: str,
    cell: Mapping[str, str] | None,
    log_facts: Mapping[str, Evidence],
    taken_ids: Iterable[str],
) -> Draft:
    """The rule draft for a failed build's log."""
    lines = log_text.splitlines()
    index, found = draft_line(lines)
    line = lines[index] if lines else ""
    ident = rule_id(line, taken_ids)
    fixture_file = f"{ident}/match.log"
    fixture = "\n".join(lines[max(0, index - FIXTURE_BEFORE) : index + FIXTURE_AFTER + 1]) + "\n"
    when = when_of(cell, log_facts)
    domain = domain_of(line, when, fixture)
    rule: dict[str, object] = {"id": ident, "title": f"Draft: {line.strip()[:100]}", "domain": domain}
    if when:
        rule["when"] = when
    rule |= {
        "diagnosis": {
            "signatures": [signature_of(line)],
            "explanation": "Draft: say what causes this failure.",
            "fix": "Draft: say how to avoid or work around it.",
        },
        "references": [f"Draft: the upstream issue or documentation of this failure (seen in {source})"],
        "fixtures": [{"file": fixture_file, "expect": "match", "source": source}],
    }
    if cell:
        fixtures = rule["fixtures"]
        assert isinstance(fixtures, list)
        fixtures[0]["cell"] = {k: v for k, v in cell.items() if k in _WHEN_FACTS and v}
    text = yaml.safe_dump([rule], sort_keys=False, allow_unicode=True, width=100)
    no_error = (
        "# No line of this log reads as an error (is it the log of a failed build?): the signature\n"
        "# below is its last line. Put the failing line there instead.\n"
        if not found else ""
    )
    header = no_error + (
        "# A rule for this failure, drafted by ci-matrix: put it under `rules:` in a project rule\n"
        f"# file and its fixture at fixtures/{fixture_file} beside that file\n"
        "# (`ci-matrix rules draft LOG --write FILE` does both), then write the explanation, fix and\n"
        "# reference, and widen or narrow the signature. `when` says where it was seen: add an\n"
        "# action (workaround or exclude) to act on such cells, or move it to diagnosis.scope to\n"
        "# recognise the failure only there.\n"
    )
    return Draft(ident, header + text, fixture_file, fixture)
