"""The layout shows the architecture: the use cases (plan, run, setup, diagnose, report) do
not import each other in a circle, and only the command line knows the command line."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ci_matrix"


def top_level_imports() -> dict[str, set[str]]:
    """For each top-level module of the package, the top-level modules it imports (anywhere)."""
    modules = {p.stem for p in PACKAGE.glob("*.py")} | {p.name for p in PACKAGE.iterdir() if p.is_dir()}
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.glob("*.py"):
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ci_matrix"):
                parts = node.module.split(".")
                names = [parts[1]] if len(parts) > 1 else [a.name for a in node.names]
                found |= {n for n in names if n in modules and n != path.stem}
        graph[path.stem] = found
    return graph


def test_use_cases_import_no_cycle() -> None:
    graph = top_level_imports()
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for dep in sorted(graph.get(module, ())):
            assert state.get(dep) != "open", " -> ".join([*path, module, dep])
            if dep not in state:
                visit(dep, [*path, module])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [])


def test_only_the_command_line_knows_the_commands() -> None:
    importers = {m for m, deps in top_level_imports().items() if "commands" in deps}
    assert importers <= {"cli"}
