"""Benchmark of the core: expansion + rules for 100,000 raw combinations against 200 rules,
the JSON render of that plan next to the standard library's encoder, and the cold start of
`ci-matrix render` next to `python -c pass`; each baseline measured in the same run, paired.

    python bench/render.py [--combinations 100000] [--rules 200] [--repeat 5] [--starts 15]

Targets (issue 12): the plan under 1 s, its JSON render under 2 s, the cold start at most
8x `python -c pass` (median of the paired ratios).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ci_matrix.core.matrix import Plan, plan
from ci_matrix.core.render import plan_record, render_json
from ci_matrix.edges.files import Project, catalog, load_project

ROOT = Path(__file__).resolve().parent.parent
COLD_START_TARGET = 8  # issue 12: at most 8x `python -c pass`, measured paired in one run
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


def time_plan(project: Project, repeat: int) -> tuple[list[float], Plan]:
    """Seconds of each plan() (expansion + rules), and the last plan."""
    cat = catalog()
    times, result = [], None
    for _ in range(repeat):
        result = None  # the previous plan is freed before the clock starts, not inside it
        start = time.perf_counter()
        result = plan(project.manifest, project.rules, cat)
        times.append(time.perf_counter() - start)
    assert result is not None
    return times, result


def time_json(project: Project, repeat: int) -> tuple[list[float], list[float], bool]:
    """Paired runs: render_json() and, as the baseline, the standard library's indenting
    encoder on the same record, each on a fresh plan (its cells' env, flags and commands
    are computed on first use, as in `ci-matrix render --format json`). Also whether
    the two texts are identical."""
    ours, stdlib, same = [], [], True
    for _ in range(repeat):
        fresh = plan(project.manifest, project.rules, catalog())
        start = time.perf_counter()
        text = render_json(fresh)
        ours.append(time.perf_counter() - start)
        fresh = plan(project.manifest, project.rules, catalog())
        start = time.perf_counter()
        baseline = json.dumps(plan_record(fresh), indent=2, ensure_ascii=False) + "\n"
        stdlib.append(time.perf_counter() - start)
        same = same and text == baseline
    return ours, stdlib, same


def cold_start(commands: list[list[str]], repeat: int) -> list[list[float]]:
    """Wall seconds of fresh processes, the commands alternating (A, B, A, B, ...)."""
    times: list[list[float]] = [[] for _ in commands]
    for _ in range(repeat):
        for argv, found in zip(commands, times, strict=True):
            start = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
            found.append(time.perf_counter() - start)
    return times


def spread(times: list[float], unit: float = 1.0, digits: int = 3) -> str:
    """Median, and the range, of a list of timings."""
    median, low, high = (round(x / unit, digits) for x in (statistics.median(times), min(times), max(times)))
    return f"{median} (min {low}, max {high})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--combinations", type=int, default=100_000)
    parser.add_argument("--rules", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5, help="runs of plan and of the JSON render (paired)")
    parser.add_argument("--starts", type=int, default=15, help="paired fresh processes for the cold start")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "rules.yml").write_text(rules_text(args.rules), encoding="utf-8")
        manifest = folder / "ci-matrix.yml"
        manifest.write_text(manifest_text(args.combinations, "rules.yml"), encoding="utf-8")
        project = load_project(manifest)
    plan_times, result = time_plan(project, args.repeat)
    ours, stdlib, same = time_json(project, args.repeat)
    example = ["-m", "ci_matrix", "render", "--manifest", str(ROOT / "examples/ci-matrix.yml"), "--format", "github"]
    baseline, render = cold_start([[sys.executable, "-c", "pass"], [sys.executable, *example]], args.starts)
    ratio = statistics.median(r / b for r, b in zip(render, baseline, strict=True))
    seconds, json_seconds = statistics.median(plan_times), statistics.median(ours)
    print(f"plan: {len(result.cells):,} raw cells x {args.rules} project rules (+ built-in), "
          f"{len(result.runnable):,} runnable: {spread(plan_times)} s, median of {args.repeat}"
          f"   target < 1 s   {'OK' if seconds < 1 else 'MISSED'}")
    print(f"render --format json of that plan, paired runs, median of {args.repeat}: {spread(ours)} s; "
          f"baseline json.dumps(indent=2) of the same record {spread(stdlib)} s; "
          f"identical text: {'yes' if same else 'NO'}   target < 2 s   "
          f"{'OK' if json_seconds < 2 and same else 'MISSED'}")
    print(f"cold start, paired, median of {args.starts}: python -c pass {spread(baseline, 1e-3, 1)} ms; "
          f"ci-matrix render (example) {spread(render, 1e-3, 1)} ms; ratio {ratio:.2f}x (median of the pairs)"
          f"   target <= {COLD_START_TARGET}x   {'OK' if ratio <= COLD_START_TARGET else 'MISSED'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
