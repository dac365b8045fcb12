"""`render_json` writes cells from memoised pieces; its text must be exactly what the standard
library's `json.dumps(plan_record(plan), indent=2)` gives, on every kind of cell."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from ci_matrix.core.matrix import Plan, plan
from ci_matrix.core.render import plan_record, render_json
from ci_matrix.edges.files import catalog, load_project
from tests.conftest import REPO, PlanMaker

_SPEC = importlib.util.spec_from_file_location("bench_render", REPO / "bench" / "render.py")
assert _SPEC is not None and _SPEC.loader is not None
bench_render = importlib.util.module_from_spec(_SPEC)  # the benchmark's manifest generator
_SPEC.loader.exec_module(bench_render)

MANIFESTS = [REPO / "examples" / "ci-matrix.yml", REPO / "tests" / "e2e" / "ci-matrix.yml"] + [
    path for path in sorted((REPO / "tests" / "example-files" / "positive").glob("*.yml"))
    if "builds:" in path.read_text(encoding="utf-8")
]  # fmt: skip
EVENTS = ["", "pull_request", "push", "schedule"]


def stdlib_text(the_plan: Plan) -> str:
    return json.dumps(plan_record(the_plan), indent=2, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("event", EVENTS)
@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_the_text_is_the_standard_librarys(manifest: Path, event: str) -> None:
    project = load_project(manifest)
    the_plan = plan(project.manifest, project.rules, catalog(), event)
    assert render_json(the_plan) == stdlib_text(the_plan)


def test_the_benchmarks_plan_with_workarounds_and_exclusions(tmp_path: Path) -> None:
    (tmp_path / "rules.yml").write_text(bench_render.rules_text(30), encoding="utf-8")
    manifest = tmp_path / "ci-matrix.yml"
    manifest.write_text(bench_render.manifest_text(3000, "rules.yml"), encoding="utf-8")
    project = load_project(manifest)
    the_plan = plan(project.manifest, project.rules, catalog())
    assert {c.excluded is None and bool(c.changes) for c in the_plan.cells} == {True, False}
    assert render_json(the_plan) == stdlib_text(the_plan)


def test_unicode_quotes_and_an_axis_named_like_a_record_key(plan_of: PlanMaker) -> None:
    the_plan = plan_of(
        """
        builds:
          quoting:
            platforms: [linux-x86_64]
            axes:
              status: ["ünïcode \\"quoted\\"", "tab\\there"]
            run: echo "{status}"
        """
    )
    assert render_json(the_plan) == stdlib_text(the_plan)


def test_a_plan_without_cells() -> None:
    assert render_json(Plan("push", ())) == stdlib_text(Plan("push", ()))


def test_every_cell_excluded_by_the_event(plan_of: PlanMaker) -> None:
    the_plan = plan_of(
        """
        builds:
          only-nightly:
            platforms: [linux-x86_64]
            rust: {toolchains: [stable]}
            run: cargo build
        events:
          pull_request:
            builds: []
        """,
        event="pull_request",
    )
    assert the_plan.cells and not the_plan.runnable
    assert render_json(the_plan) == stdlib_text(the_plan)
