"""The matrix at a glance (core/grid.py `render_states`): one row per build and platform, one column
per toolchain/version/arch value, a mark per cell with a legend; failed cells link to their entry;
beyond MAX_ROWS rows and MAX_COLUMNS columns the rest is folded into counts."""

from __future__ import annotations

import re

from ci_matrix.core.grid import GRID_LIMIT, MAX_COLUMNS, MAX_ROWS, CellState, anchor_name, render_states

SMALL = """\
builds:
  rust-crate:
    platforms: [linux-x86_64, macos-arm64]
    rust: {toolchains: [stable, nightly-2024-06-01], profiles: [debug], backends: [llvm]}
    run: [cargo build]
  kernels:
    platforms: [linux-x86_64, macos-arm64]
    cuda: {versions: ["12.4", "13.0"], archs: [sm_80]}
    run: [nvcc]
"""


def _big(builds: int, values: int) -> str:
    axis = ", ".join(f'"v{i:02d}"' for i in range(values))
    build = "  b{:02d}:\n    platforms: [linux-x86_64]\n    axes: {{x: [{}]}}\n    run: [make]\n"
    return "builds:\n" + "".join(build.format(b, axis) for b in range(builds))


def test_one_row_per_build_and_platform_one_column_per_value(plan_of):
    plan = plan_of(SMALL)
    by_id = {c.id: c for c in plan.cells}
    failed = next(i for i in by_id if i.startswith("rust-crate-linux") and "nightly" in i)
    passed = next(i for i in by_id if i.startswith("rust-crate-linux") and "stable" in i)
    grid = render_states(plan.cells, {failed: CellState.KNOWN, passed: CellState.PASSED}, {failed})
    lines = grid.splitlines()
    assert lines[2] == ("| build · platform | stable debug llvm | nightly-2024-06-01 debug llvm "
                        "| 12.4 sm_80 | 13.0 sm_80 |")
    assert lines[4] == f"| rust-crate · linux-x86_64 | ✅ | [❌](#{anchor_name(failed)}) |   |   |"
    assert lines[6] == "| kernels · linux-x86_64 |   |   | ⬜ | ⬜ |"
    assert lines[7] == "| kernels · macos-arm64 |   |   | ⛔ | ⛔ |"  # no CUDA on macOS: excluded by a rule
    assert lines[0].startswith(f"**{len(plan.cells)}** cells: ✅ 1 passed · ❌ 1 failed, known cause")
    assert lines[-1] == ("<sub>✅ passed · 🔧 passed with a workaround · ❌ failed, known cause · "
                         "❓ failed, unclassified · ⛔ excluded · ⬜ no result</sub>")


def test_a_large_matrix_is_folded_into_counts(plan_of):
    plan = plan_of(_big(40, 30))  # 1,200 cells, 40 rows, 30 columns
    failed = {c.id for c in plan.cells[::7]}
    states = {c.id: CellState.KNOWN if c.id in failed else CellState.PASSED for c in plan.cells}
    grid = render_states(plan.cells, states, failed)
    table = [line for line in grid.splitlines() if line.startswith("|")]
    assert len(table) == 2 + MAX_ROWS + 1  # header, rule, rows, the folded rows
    assert all(line.count(" | ") == MAX_COLUMNS + 1 for line in table if not line.startswith("|---"))
    assert table[0].endswith(f"| +{30 - MAX_COLUMNS} more |")
    assert table[-1].startswith(f"| +{40 - MAX_ROWS} more rows | ")
    folded = sum(int(n) for n in re.findall(r"[✅❌](\d+)", "".join(table)))
    linked = sum(line.count("](#") for line in table)
    assert folded + linked + sum(line.count("| ✅ ") for line in table) == len(plan.cells)
    assert len(grid.encode("utf-8")) < GRID_LIMIT


def test_many_cells_in_one_slot_fall_back_to_counts_per_build(plan_of):
    plan = plan_of(_big(2, 3))
    many = list(plan.cells) * 2000  # the same cells again and again: each slot grows past the limit
    grid = render_states(many, {c.id: CellState.UNCLASSIFIED for c in plan.cells}, set())
    assert grid.startswith("**12000** cells: ❓ 12000 failed, unclassified\n\n- b00: ❓6000\n- b01: ❓6000\n")
    assert len(grid.encode("utf-8")) < GRID_LIMIT
