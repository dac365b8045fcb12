"""What reading evidence from the log costs the scanner: the diagnosis scan with the
knowledge base's evidence extractors against the same scan with signatures only, paired.

    python bench/evidence.py [--size-mb 200] [--runs 7] [--baseline-tree DIR]

The log is bench/diagnose.py's normal build log (compiler output, colour codes, a few real
failure lines). Each run is a fresh subprocess that compiles the scanner, then times one
scan of the file (interpreter start-up and RE2 compilation excluded). The variants run
alternately (A, B, A, B, ...) and the medians are compared:
- `evidence`: what `ci-matrix diagnose` runs: every signature and every extractor;
- `signatures`: the same signatures without the extractors, in the same code;
- `before` (with --baseline-tree, a checkout of the commit before evidence existed): that
  checkout's own scanner and knowledge base.
Target (issue 10): `evidence` at most 1.10x `signatures` (and x `before`).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from diagnose import normal_block, write_log  # noqa: E402
from fresh import first_figure  # noqa: E402

TARGET = 1.10
_WORKER = """
import sys, time
from pathlib import Path
from ci_matrix.edges import files, logs
rules = tuple(files.trusted_builtin_rules())
if sys.argv[2] == "signatures":
    from ci_matrix.diagnose.engine import signatures
    from ci_matrix.diagnose.scanner import Scanner
    scanner = Scanner(signatures(rules))
else:
    scanner = logs.scanner_for(rules)
with open(sys.argv[1], "rb") as stream:
    start = time.perf_counter()
    hits = scanner.scan(stream)
    print(time.perf_counter() - start, len(hits))
"""


def evidence_block(rng: random.Random, size: int) -> bytes:
    """A verbose build log in which extractors match on most lines: cargo -v's rustc command
    lines (rustup paths, target/debug), nvcc command lines (-gencode, /usr/local/cuda-12.4)
    and iree-compile command lines."""
    lines, total = [], 0
    while total < size:
        n = rng.randint(1, 999)
        kind = rng.random()
        if kind < 0.4:
            toolchain = f"nightly-2024-04-{n % 28 + 1:02d}-x86_64-unknown-linux-gnu"
            target = "/home/runner/work/p/p/target/debug/deps"
            line = (f"     Running `/home/runner/.rustup/toolchains/{toolchain}/bin/rustc --crate-name c{n} "
                    f"--edition=2021 src/lib.rs --crate-type lib -C debuginfo=2 --out-dir {target} "
                    f"-L dependency={target}`")
        elif kind < 0.7:
            line = (f"/usr/local/cuda-12.4/bin/nvcc -I/work/cutlass/include -O3 -gencode arch=compute_{80 + n % 10},"
                    f"code=sm_{80 + n % 10} -x cu -c /work/k{n}.cu -o k{n}.o")
        elif kind < 0.8:
            line = (f"iree-compile m{n}.mlir --iree-hal-target-device=local "
                    "--iree-hal-local-target-device-backends=llvm-cpu")
        else:
            line = f"\x1b[1m\x1b[32m   Compiling\x1b[0m c{n} v0.{n % 40}.{n % 9} (/work/c{n})"
        lines.append(line.encode() + b"\n")
        total += len(lines[-1])
    return b"".join(lines)


def scan_seconds(tree: Path, log: Path, variant: str) -> float:
    """One timed scan in a fresh interpreter whose ci_matrix comes from `tree`."""
    return first_figure(tree, _WORKER, str(log), variant)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--runs", type=int, default=7, help="paired runs of each variant")
    parser.add_argument("--baseline-tree", type=Path, default=None, help="checkout of the code before evidence")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or Path(tmp)
        rng = random.Random(1)
        logs = {"normal": work / "normal.log", "evidence-heavy": work / "evidence.log"}
        write_log(logs["normal"], args.size_mb << 20, [normal_block(rng, 1 << 20) for _ in range(8)],
                  sprinkle=True, seed=1)
        write_log(logs["evidence-heavy"], args.size_mb << 20, [evidence_block(rng, 1 << 20) for _ in range(8)],
                  sprinkle=True, seed=2)
        variants = [("evidence", ROOT), ("signatures", ROOT)]
        if args.baseline_tree is not None:
            variants.append(("before", args.baseline_tree.resolve()))
        for kind, log in logs.items():
            times: dict[str, list[float]] = {name: [] for name, _ in variants}
            for _ in range(args.runs):
                for name, tree in variants:
                    times[name].append(scan_seconds(tree, log, name))
            report(kind, args, times)
    return 0


def report(kind: str, args: argparse.Namespace, times: dict[str, list[float]]) -> None:
    """Medians, every run, and the ratios against the target."""
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"scan of a {args.size_mb} MiB {kind} log, median of {args.runs} paired runs (seconds):")
    for name, values in times.items():
        print(f"  {name:<11} {medians[name]:7.3f}   runs: {' '.join(f'{v:.3f}' for v in values)}")
    for base in (b for b in ("signatures", "before") if b in medians):
        ratio = medians["evidence"] / medians[base]
        verdict = "met" if ratio <= TARGET else "MISSED"
        print(f"  evidence / {base}: {ratio:.3f}x (target <= {TARGET:.2f}x: {verdict})")


if __name__ == "__main__":
    sys.exit(main())
