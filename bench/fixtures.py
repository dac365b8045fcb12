"""What diagnosing a short log costs: `ci-matrix rules test`'s work, and `ci-matrix diagnose`'s on
a pasted excerpt, where the scan is short and the per-log work around it counts.

    python bench/fixtures.py [--logs 600] [--runs 7] [--starts 15] [--baseline-tree DIR]

The logs are the knowledge base's own fixture files (the first N, in a fixed order), the
same files for every variant. Each run is a fresh subprocess that loads its tree's knowledge
base, compiles its scanner with one diagnosis, then times the diagnosis of every log
(`edges.logs.diagnose_log`, as `rules test` and `diagnose` call it). The variants run
alternately (A, B, A, B, ...) and the medians of the milliseconds per log are compared:
- `tree`: this checkout;
- `before` (with --baseline-tree, e.g. an export of an earlier commit): that checkout's code and
  knowledge base.
Then the cold start of the command itself, `python -m ci_matrix diagnose LOG` on one short
fixture log in a fresh process (interpreter, imports, knowledge base, scanner compiled, the
log diagnosed, the report written), for each variant and `python -c pass`, alternately, as
medians of `--starts` runs: what a user waits for at a prompt, and each failed cell pays once.
Informational: no target (the knowledge base grows between trees; compare like with like).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from fresh import first_figure  # noqa: E402

FIXTURES = ROOT / "ci_matrix" / "knowledge" / "fixtures"

_WORKER = """
import io, sys, time
from pathlib import Path
from ci_matrix.edges import files, logs
rules = files.trusted_builtin_rules()
platforms = files.catalog().platforms
datas = [Path(p).read_bytes() for p in Path(sys.argv[1]).read_text(encoding="utf-8").splitlines()]
logs.diagnose_log(io.BytesIO(datas[0]), rules, None, platforms, exit_code=1)  # compiles the scanner
start = time.perf_counter()
for data in datas:
    logs.diagnose_log(io.BytesIO(data), rules, None, platforms, exit_code=1)
print((time.perf_counter() - start) / len(datas) * 1000)
"""


def fixture_logs(count: int) -> list[Path]:
    """The first `count` fixture logs of this tree, in a fixed order."""
    return sorted(FIXTURES.glob("*/*.log"))[:count]


def ms_per_log(tree: Path, listing: Path) -> float:
    """One timed pass in a fresh interpreter whose ci_matrix comes from `tree`."""
    return first_figure(tree, _WORKER, str(listing))


def cold_start(tree: Path | None, log: Path) -> float:
    """Seconds of `python -m ci_matrix diagnose LOG` with `tree`'s ci_matrix, in a fresh
    process (None: `python -c pass`)."""
    argv = [sys.executable, "-m", "ci_matrix", "diagnose", str(log)] if tree else [sys.executable, "-c", "pass"]
    env = {**os.environ, "PYTHONPATH": str(tree or ROOT)}
    started = time.perf_counter()
    subprocess.run(argv, env=env, cwd=tree or ROOT, capture_output=True, check=False)
    return time.perf_counter() - started


def report_starts(variants: list[tuple[str, Path]], log: Path, starts: int) -> None:
    times: dict[str, list[float]] = {"python -c pass": [], **{name: [] for name, _ in variants}}
    for _ in range(starts):
        times["python -c pass"].append(cold_start(None, log))
        for name, tree in variants:
            times[name].append(cold_start(tree, log))
    print(f"cold start of `ci-matrix diagnose` on {log.relative_to(FIXTURES)} ({log.stat().st_size} bytes), "
          f"median of {starts} paired runs (milliseconds):")
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, values in times.items():
        print(f"  {name:<15} {medians[name] * 1000:7.1f}   runs: {' '.join(f'{v * 1000:.0f}' for v in values)}")
    if "before" in medians:
        print(f"  tree / before: {medians['tree'] / medians['before']:.3f}x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", type=int, default=600, help="fixture logs diagnosed in each run")
    parser.add_argument("--runs", type=int, default=7, help="paired runs of each variant")
    parser.add_argument("--starts", type=int, default=15, help="paired cold starts of `ci-matrix diagnose`")
    parser.add_argument("--baseline-tree", type=Path, default=None, help="checkout to compare with")
    args = parser.parse_args(argv)
    paths = fixture_logs(args.logs)
    variants = [("tree", ROOT)]
    if args.baseline_tree is not None:
        variants.append(("before", args.baseline_tree.resolve()))
    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / "logs.txt"
        listing.write_text("\n".join(str(p) for p in paths), encoding="utf-8")
        times: dict[str, list[float]] = {name: [] for name, _ in variants}
        for _ in range(args.runs):
            for name, tree in variants:
                times[name].append(ms_per_log(tree, listing))
    size = sum(p.stat().st_size for p in paths) / len(paths)
    print(f"diagnosis of {len(paths)} fixture logs (mean {size / 1024:.1f} KiB), median of {args.runs} paired runs "
          "(milliseconds per log):")
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, values in times.items():
        print(f"  {name:<7} {medians[name]:7.2f}   runs: {' '.join(f'{v:.2f}' for v in values)}")
    if "before" in medians:
        print(f"  tree / before: {medians['tree'] / medians['before']:.3f}x")
    report_starts(variants, paths[0], args.starts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
