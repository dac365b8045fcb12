"""The wheel carries what the command line reads at run time: schemas, catalog, rules, fixtures."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_ships_schemas_knowledge_and_fixtures(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True)
    wheel = next(tmp_path.glob("ci_matrix-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for schema in ("manifest", "rules", "catalog", "diagnosis", "toolkits", "evidence"):
        assert f"ci_matrix/schemas/{schema}.schema.json" in names
    assert "ci_matrix/data/catalog.yaml" in names
    assert "ci_matrix/data/toolkits.yaml" in names
    assert "ci_matrix/knowledge/rust.yaml" in names
    assert {f"ci_matrix/knowledge/evidence/{domain}.yaml" for domain in ("rust", "cuda", "iree")} <= names
    assert "ci_matrix/knowledge/fixtures/cuda-no-kernel-image/match-h200.log" in names
    assert any(n.endswith("entry_points.txt") for n in names)
