"""Fixtures shared by the whole suite. Keep this file small: tests build what they need."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from ci_matrix.core.matrix import Plan, plan
from ci_matrix.edges.files import catalog, load_project

pytest_plugins = ["tests.github_api.conftest_plugin"]

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "ci-matrix.yml"

PlanMaker = Callable[..., Plan]


@pytest.fixture(scope="session")
def plan_of(tmp_path_factory: pytest.TempPathFactory) -> PlanMaker:
    """`plan_of(manifest_text, event="")`: write the manifest to a fresh folder, load it as
    the command line does (`load_project`) and expand it. Session-scoped so that modules can
    build their plans once: loading the built-in knowledge base takes a noticeable moment."""

    def make(text: str, event: str = "", files: dict[str, str] | None = None) -> Plan:
        folder = tmp_path_factory.mktemp("project")
        for name, content in (files or {}).items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(textwrap.dedent(content), encoding="utf-8")
        path = folder / "ci-matrix.yml"
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        project = load_project(path)
        return plan(project.manifest, project.rules, catalog(), event)

    return make
