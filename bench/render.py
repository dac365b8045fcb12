"""Benchmark of the core: expansion + rules for 100,000 raw combinations against 200 rules,
and the cold start of `ci-matrix render` next to `python -c pass`, measured in one run.

    python bench/render.py [--combinations 100000] [--rules 200] [--repeat 5]

Targets (issue 2): the plan under 1 s; the cold start at most 5x `python -c pass`.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ci_matrix.core.matrix import plan
from ci_matrix.core.render import render_json
from ci_matrix.edges.files import catalog, load_project

ROOT = Path(__file__).resolve().parent.parent
PLATFORMS = ["linux-x86_64", "linux-arm64", "macos-arm64", "windows-x86_64", "linux-x86_64-gpu"]


def manifest_text(combinations: int, rule_file: str) -> str:
    """A manifest whose one build (a Rust crate with CUDA kernels) expands to about
    `combinations` raw cells: 5 platforms x N nightlies x 2 profiles x 2 backends x
    4 CUDA versions x 5 archs x 2 Python versions x 5 feature sets."""
    nightlies = max(1, combinations // (5 * 2 * 2 * 4 * 5 * 2 * 5))
    toolchains = [f"nightly-{2020 + i // 12}-{1 + i % 12:02d}-01" for i in range(nightlies)]
    return f"""
rules: [{rule_file}]
builds:
  big:
    platforms: [{", ".join(PLATFORMS)}]
    rust:
      toolchains: [{", ".join(toolchains)}]
      profiles: [debug, release]
      backends: [llvm, cranelift]
      features: ["", simd, gpu, "simd,gpu", serde]
    cuda:
      versions: ["11.8", "12.4", "12.8", "13.0"]
      archs: [sm_75, sm_80, sm_86, sm_89, sm_90]
    axes:
      python: ["3.11", "3.12"]
    run: cargo build --profile {{cargo-profile}}
"""


def rules_text(count: int) -> str:
    """`count` rules with the shapes of the real ones: dates, platforms, profiles, backends."""
    rules = []
    for i in range(count):
        year, month = 2020 + i % 6, 1 + i % 12
        action = (
            "exclude: synthetic exclusion"
            if i % 10 == 0
            else f"workaround: {{env: {{BENCH_{i}: x}}, flags: {{cargo: [--bench-{i}]}}}}"
        )
        rules.append(
            f"""  - id: bench-{i}
    title: synthetic rule {i}
    domain: rust
    when:
      platform: {PLATFORMS[i % len(PLATFORMS)]}
      rust-date: ">= {year}-{month:02d}-01, < {year}-{month + 1 if month < 12 else 12:02d}-15"
      rust-profile: {"debug" if i % 2 else "release"}
      rust-backend: [{"llvm" if i % 3 else "cranelift"}]
      cuda-arch: "{"< sm_80" if i % 4 else ">= sm_89"}"
    action: {{{action}}}
    references: [https://example.invalid/{i}]"""
        )
    return "rules:\n" + "\n".join(rules) + "\n"


def time_plan(manifest: Path, repeat: int) -> tuple[float, int, int]:
    """Median seconds of plan() (expansion + rules), raw cells and runnable cells."""
    project = load_project(manifest)
    cat = catalog()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = plan(project.manifest, project.rules, cat)
        times.append(time.perf_counter() - start)
    return statistics.median(times), len(result.cells), len(result.runnable)


def time_json(manifest: Path) -> float:
    project = load_project(manifest)
    result = plan(project.manifest, project.rules, catalog())
    start = time.perf_counter()
    render_json(result)
    return time.perf_counter() - start


def cold_start(argv: list[str], repeat: int) -> float:
    """Median wall seconds of a fresh process."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--combinations", type=int, default=100_000)
    parser.add_argument("--rules", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "rules.yml").write_text(rules_text(args.rules), encoding="utf-8")
        manifest = folder / "ci-matrix.yml"
        manifest.write_text(manifest_text(args.combinations, "rules.yml"), encoding="utf-8")
        seconds, cells, runnable = time_plan(manifest, args.repeat)
        json_seconds = time_json(manifest)
    example = ["-m", "ci_matrix", "render", "--manifest", str(ROOT / "examples/ci-matrix.yml"), "--format", "github"]
    baseline = cold_start([sys.executable, "-c", "pass"], args.repeat * 2)
    ours = cold_start([sys.executable, *example], args.repeat * 2)
    print(f"plan: {cells:,} raw cells x {args.rules} project rules (+ built-in): {seconds:.3f} s median "
          f"of {args.repeat}; {runnable:,} runnable   target < 1 s   {'OK' if seconds < 1 else 'MISSED'}")
    print(f"render --format json of that plan: {json_seconds:.3f} s (not part of the target)")
    print(f"cold start: python -c pass {baseline * 1000:.0f} ms; ci-matrix render (example) {ours * 1000:.0f} ms; "
          f"ratio {ours / baseline:.2f}x   target <= 5x   {'OK' if ours <= 5 * baseline else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
