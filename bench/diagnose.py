"""Benchmark `ci-matrix diagnose`'s scanner against GNU grep on generated build logs.

    python bench/diagnose.py [--size-mb 40] [--repeat 5] [--chunk-mb 2] [--workdir DIR]

Generates a realistic build log (compiler output, some of it in colour, a few real failure
lines), an adversarial one (runs of 'a', near-miss prefixes of every pattern, whitespace
runs, random bytes) and an escape flood, then times the scanner (in a fresh subprocess,
whose ru_maxrss is its peak memory) and `LC_ALL=C grep -E -c -f` on the same files in the
same run, alternating (scan, grep, scan, grep, ...), and prints medians. The patterns are
every signature of ci_matrix/knowledge/*.yaml, topped up with realistic synthetic ones to
at least 120.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
MIN_PATTERNS = 120
TARGET_GREP_RATIO = 1.5
TARGET_PEAK_MB = 100
TARGET_ADVERSARIAL_RATIO = 2.0

SYNTHETIC = [
    r"error: could not compile `(?P<crate>[\w-]+)`",
    r"thread 'rustc' panicked at (?P<where>[^\n]+)",
    r"LLVM ERROR: (?P<msg>.+)",
    r"nvcc fatal\s*: Unsupported gpu architecture 'compute_(?P<arch>\d+)'",
    r"ptxas error\s*: Entry function '(?P<fn>[^']+)' uses too much shared data",
    r"no kernel image is available for execution on the device",
    r"Segmentation fault \(core dumped\)",
    r"error: linking with `(?P<linker>[^`]+)` failed: exit status: \d+",
    r"undefined reference to `(?P<sym>[^']+)'",
    r"fatal error: (?P<header>[\w/.+-]+\.h): No such file or directory",
    r"CMake Error at (?P<file>[^:]+):(?P<line>\d+)",
    r"error: identifier \"(?P<id>\w+)\" is undefined",
    r"Assertion `(?P<cond>.+)' failed\.",
    r"^error: aborting due to (?P<n>\d+) previous errors?",
    r"c\+\+: fatal error: Killed signal terminated program cc1plus",
    r"CUDA error: (?P<err>[\w ]+)",
    r"ptxas fatal\s*: Value 'sm_(?P<sm>\d+)' is not defined for option 'gpu-name'",
    r"(?i)error: process didn't exit successfully: `(?P<cmd>[^`]+)` \(signal: (?P<sig>\d+)",
    r"Stack dump:\n0\.\s+Program arguments: (?P<args>.+)",
    r"error: linking with `cc` failed[^\n]*\n(?:[^\n]*\n){0,5}[^\n]*undefined reference",
]
SYNTHETIC += [rf"error\[E0{code}\]: (?P<msg>[^\n]{{1,200}})" for code in range(300, 340)]
SYNTHETIC += [rf"nvcc (?:fatal|error)\s*: .*compute_{arch}\b" for arch in range(30, 95, 3)]
SYNTHETIC += [rf"error: failed to legalize operation '(?:stablehlo|linalg)\.op{n}'" for n in range(40)]

CRATES = ["serde", "tokio", "syn", "quote", "libc", "rand", "regex", "memchr", "cutlass", "half"]
FILES = ["src/lib.rs", "src/main.rs", "kernels/gemm.cu", "src/codegen/mod.rs", "csrc/attn.cu"]
FAILURE_LINES = [
    b"error: internal compiler error: compiler/rustc_codegen_ssa/src/mir/operand.rs:123:9\n",
    b"nvcc fatal   : Unsupported gpu architecture 'compute_89'\n",
    b"error: could not compile `rustc_codegen_spirv` (lib) due to 1 previous error\n",
    b"Stack dump:\n0.\tProgram arguments: rustc --crate-name spirv_std --edition=2021\n",
    b"No space left on device\n",
]


def knowledge_patterns() -> list[str]:
    """Every signature of every rule file in ci_matrix/knowledge/."""
    found: list[str] = []
    for path in sorted((ROOT / "ci_matrix" / "knowledge").glob("*.yaml")):
        for rule in (yaml.safe_load(path.read_text()) or {}).get("rules") or []:
            found += (rule.get("diagnosis") or {}).get("signatures") or []
    return found


def evidence_patterns() -> list[str]:
    """Every evidence extractor of ci_matrix/knowledge/evidence/: `ci-matrix diagnose` scans
    for them in the same pass (only their last match is kept)."""
    found: list[str] = []
    for path in sorted((ROOT / "ci_matrix" / "knowledge" / "evidence").glob("*.yaml")):
        found += [e["pattern"] for e in (yaml.safe_load(path.read_text()) or {}).get("evidence") or []]
    return found


def all_patterns() -> tuple[list[str], int]:
    real = knowledge_patterns()
    topped = real + SYNTHETIC[: max(0, MIN_PATTERNS - len(real))]
    return topped, len(real)


# --- patterns for grep -E -------------------------------------------------------------

_CLASS_ESCAPES = {"d": "0-9", "w": "[:alnum:]_", "s": "[:space:]", "S": "", "n": ""}


def to_ere(pattern: str) -> str | None:
    """Translate an RE2 pattern to GNU ERE; None for one grep cannot express (multi-line)."""
    pattern = pattern.replace(r"[^\n]", ".")
    # A grep line holds no newline, so a negated class need not exclude one.
    pattern = re.sub(r"(\[\^[^\]]*?)\\n", r"\1", pattern)
    if r"\n" in pattern:
        return None
    fold = pattern.startswith("(?i)")
    out, i, text = [], 0, pattern.removeprefix("(?i)").removeprefix("(?m)")
    while i < len(text):
        piece, i = _ere_token(text, i, fold)
        out.append(piece)
    return "".join(out)


def _ere_token(text: str, i: int, fold: bool) -> tuple[str, int]:
    named = re.match(r"\(\?(?:P<\w+>|:|i:)", text[i:])
    if named:
        return "(", i + named.end()
    if text[i] == "[":
        return _ere_class(text, i)
    if text[i] == "\\":
        escaped = text[i + 1]
        return ("[0-9]" if escaped == "d" else "\\" + escaped), i + 2
    if text[i] == "?" and text[i - 1] in "*+?}":
        return "", i + 1  # lazy quantifier: ERE has none, and lines match the same
    char = text[i]
    return (f"[{char.lower()}{char.upper()}]" if fold and char.isalpha() else char), i + 1


def _ere_class(text: str, i: int) -> tuple[str, int]:
    body, k, negate, bracket = [], i + 1, "", ""
    if text[k] == "^":
        negate = "^"
        k += 1
    while text[k] != "]" or not (body or bracket):
        if text[k] == "\\" and text[k + 1] == "]":
            bracket = "]"  # a literal ] must come first in an ERE bracket expression
            k += 2
        elif text[k] == "\\":
            body.append(_CLASS_ESCAPES.get(text[k + 1], text[k + 1]))
            k += 2
        else:
            body.append(text[k])
            k += 1
    return "[" + negate + bracket + "".join(body) + "]", k + 1


# --- logs ------------------------------------------------------------------------------


def normal_block(rng: random.Random, size: int) -> bytes:
    """Compiler output as a CI log shows it; cargo's lines in colour."""
    lines, total = [], 0
    while total < size:
        crate, file, n = rng.choice(CRATES), rng.choice(FILES), rng.randint(1, 999)
        kind = rng.random()
        if kind < 0.35:
            line = f"\x1b[1m\x1b[32m   Compiling\x1b[0m {crate} v0.{n % 40}.{n % 9} (/work/{crate})"
        elif kind < 0.6:
            line = (
                f"/usr/bin/c++ -DNDEBUG -I/work/include -O2 -std=c++17 -fPIC "
                f"-o CMakeFiles/{crate}.dir/{file}.o -c /work/{file}"
            )
        elif kind < 0.7:
            line = f"warning: unused variable: `x{n}`\n  --> {file}:{n}:{n % 80}"
        elif kind < 0.85:
            line = f"[{n}/1000] Building CUDA object CMakeFiles/{crate}.dir/{file}.o"
        else:
            line = f"test {crate}::tests::case_{n} ... ok"
        lines.append(line.encode() + b"\n")
        total += len(lines[-1])
    return b"".join(lines)


def adversarial_block(rng: random.Random, size: int, patterns: list[str]) -> bytes:
    """Lines that make backtracking engines explode and give DFAs many states."""
    prefixes = [_literal_prefix(p) for p in patterns]
    makers = [
        lambda: b"a" * rng.randint(1000, 20000) + b"!",
        lambda: b"error: " + b"a" * rng.randint(1000, 8000),
        lambda: b"nvcc fatal" + b" " * rng.randint(1000, 8000) + b": x",
        lambda: b" ".join(rng.choice(prefixes) for _ in range(200)),
        lambda: b"(" * 2000 + b"[" * 2000 + b"`" * 2000,
        lambda: bytes(rng.randrange(256) for _ in range(2000)).replace(b"\n", b" "),
        lambda: b"error[E0" + b"3" * 4000 + b"]",
        lambda: b"0.\t" + b"\t " * 3000,
    ]
    lines, total = [], 0
    while total < size:
        lines.append(rng.choice(makers)() + b"\n")
        total += len(lines[-1])
    return b"".join(lines)


def _literal_prefix(pattern: str) -> bytes:
    """The pattern's literal start less its last two characters: a near miss."""
    literal = re.match(r"(?:[^\\\[\](){}.*+?^$|]|\\[^dwsSbBn])*", pattern.removeprefix("(?i)"))
    text = re.sub(r"\\(.)", r"\1", literal.group() if literal else "")
    return (text[:-2] if len(text) > 4 else "error:").encode()


def flood_block(rng: random.Random, size: int) -> bytes:
    """An escape flood: a colour code every few bytes (informational, not a target)."""
    codes = [b"\x1b[1m", b"\x1b[0m", *(b"\x1b[38;5;%dm" % n for n in range(4))]
    return b"".join(rng.choice(codes) + b"ab" for _ in range(size // 8)) + b"\n"


def write_log(path: Path, size: int, blocks: list[bytes], sprinkle: bool, seed: int) -> None:
    rng = random.Random(seed)
    with path.open("wb") as out:
        written = 0
        while written < size:
            block = rng.choice(blocks)
            out.write(block)
            written += len(block)
            if sprinkle and rng.random() < 0.1:
                out.write(rng.choice(FAILURE_LINES))


# --- measuring ---------------------------------------------------------------------------


def worker(patterns_file: str, log: str, chunk_mb: int) -> None:
    """Scan one log in this fresh process; print seconds, peak RSS and hit count as JSON."""
    sys.path.insert(0, str(ROOT))
    from ci_matrix.diagnose.scanner import Scanner, Signature

    loaded = json.loads(Path(patterns_file).read_text())
    started = time.perf_counter()
    scanner = Scanner([Signature(f"p{n}#0", p) for n, p in enumerate(loaded["signatures"])]
                      + [Signature(f"@e{n}", p, last_only=True) for n, p in enumerate(loaded["evidence"])])
    with Path(log).open("rb") as stream:
        hits = scanner.scan(stream, chunk_size=chunk_mb << 20)
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "peak_mb": peak_rss_mb(), "hits": len(hits)}))


def peak_rss_mb() -> float:
    """This process's peak resident memory.

    ``ru_maxrss`` keeps the high-water mark of the process before ``exec``, i.e. of the
    benchmark that forked it (about 100 MB of generated log blocks), so Linux's per-exec
    ``VmHWM`` is read first; ``ru_maxrss`` only where there is no /proc.
    """
    import resource

    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_scan(patterns_file: Path, log: Path, chunk_mb: int) -> dict[str, float]:
    argv = [sys.executable, __file__, "--worker", str(patterns_file), str(log), str(chunk_mb)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def run_grep(ere_file: Path, log: Path) -> float:
    # -c counts every matching line: grep must read the whole file (with -q, or output to
    # /dev/null, it would stop at the first match).
    env = {**os.environ, "LC_ALL": "C"}
    started = time.perf_counter()
    argv = ["grep", "-E", "-c", "-f", str(ere_file), str(log)]
    done = subprocess.run(argv, env=env, capture_output=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode > 1:  # 0: lines matched, 1: none; 2: grep refused a pattern and timed nothing
        raise SystemExit(f"grep failed: {done.stderr.decode(errors='replace').strip()}")
    return seconds


def measure(args: argparse.Namespace, work: Path) -> None:
    patterns, real = all_patterns()
    evidence = evidence_patterns()
    ere = [to_ere(p) for p in patterns + evidence]
    (work / "patterns.json").write_text(json.dumps({"signatures": patterns, "evidence": evidence}))
    (work / "patterns.ere").write_text("".join(e + "\n" for e in ere if e is not None))
    skipped = sum(e is None for e in ere)
    print(
        f"patterns: {len(patterns)} signatures ({real} from ci_matrix/knowledge, "
        f"{len(patterns) - real} synthetic) and {len(evidence)} evidence extractors, as diagnose scans; "
        f"grep -E gets {len(ere) - skipped} ({skipped} multi-line ones skipped: grep matches single lines only)"
    )
    logs = generate(args, work, patterns)
    results = {name: time_log(args, work, path) for name, path in logs.items()}
    report(results, args.repeat)


def generate(args: argparse.Namespace, work: Path, patterns: list[str]) -> dict[str, Path]:
    size = args.size_mb << 20
    rng = random.Random(args.seed)
    started = time.perf_counter()
    logs = {"normal": work / "normal.log", "adversarial": work / "adversarial.log", "escape flood": work / "flood.log"}
    write_log(logs["normal"], size, [normal_block(rng, 4 << 20) for _ in range(3)], True, 1)
    write_log(logs["adversarial"], size, [adversarial_block(rng, 4 << 20, patterns) for _ in range(2)], False, 2)
    write_log(logs["escape flood"], size, [flood_block(rng, 4 << 20)], False, 3)
    print(f"generated {len(logs)} logs of {args.size_mb} MiB in {work} ({time.perf_counter() - started:.1f} s)")
    return logs


def time_log(args: argparse.Namespace, work: Path, log: Path) -> dict[str, float]:
    """Scanner and grep on one log, paired (scan, grep, scan, grep, ...): medians, and the
    median of the per-pair ratios, so that a noisy moment weighs on both sides."""
    scans: list[dict[str, float]] = []
    greps: list[float] = []
    for _ in range(args.repeat):
        scans.append(run_scan(work / "patterns.json", log, args.chunk_mb))
        greps.append(run_grep(work / "patterns.ere", log))
    seconds = [s["seconds"] for s in scans]
    return {
        "scan": statistics.median(seconds),
        "grep": statistics.median(greps),
        "ratio": statistics.median(s / g for s, g in zip(seconds, greps, strict=True)),
        "scan_spread": max(seconds) - min(seconds),
        "peak_mb": max(s["peak_mb"] for s in scans),
        "hits": scans[0]["hits"],
        "mb": log.stat().st_size / (1 << 20),
    }


def report(results: dict[str, dict[str, float]], repeat: int) -> None:
    normal = results["normal"]
    print()
    print(f"medians of {repeat} paired runs (scan, grep, scan, grep, ...); scan/grep: median of the pairs' ratios")
    print(f"{'log':<14}{'MiB':>7}{'scan s':>9}{'(range)':>9}{'grep s':>9}{'scan/grep':>11}{'peak MB':>9}{'hits':>6}")
    for name, r in results.items():
        print(
            f"{name:<14}{r['mb']:>7.0f}{r['scan']:>9.3f}{r['scan_spread']:>9.3f}{r['grep']:>9.3f}"
            f"{r['ratio']:>11.2f}{r['peak_mb']:>9.1f}{r['hits']:>6.0f}"
        )
    checks = [
        ("scan / grep on the normal log", normal["ratio"], TARGET_GREP_RATIO, "x"),
        ("peak memory of a scan", max(r["peak_mb"] for r in results.values()), TARGET_PEAK_MB, " MB"),
        (
            "adversarial / normal scan time",
            results["adversarial"]["scan"] / normal["scan"],
            TARGET_ADVERSARIAL_RATIO,
            "x",
        ),
    ]
    print()
    print(f"{'figure':<34}{'measured':>10}{'target':>10}  verdict")
    for label, value, target, unit in checks:
        verdict = "met" if value <= target else "MISSED"
        print(f"{label:<34}{value:>9.2f}{unit:<1}{'<= ' + str(target) + unit.strip():>10}  {verdict}")
    flood = results["escape flood"]["scan"] / normal["scan"]
    print(f"{'escape flood / normal (info)':<34}{flood:>9.2f}x")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=40,
                        help="size of each log (MiB); at 200, grep with every signature takes minutes per pass")
    parser.add_argument("--repeat", type=int, default=5, help="paired runs (scan, grep) per log; medians kept")
    parser.add_argument("--chunk-mb", type=int, default=2, help="scanner chunk size (MiB)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workdir", type=Path, help="keep the logs here (default: a temp dir)")
    args = parser.parse_args()
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
        measure(args, args.workdir)
    else:
        with tempfile.TemporaryDirectory(prefix="ci-matrix-bench-") as work:
            measure(args, Path(work))


if __name__ == "__main__":
    main()
