"""After setup, preflight checks that what runs is what the cell asked for: a tools folder
that claims to be finished but holds another nvcc (a stale or tampered cache) fails the cell
before its build instead of building with the wrong toolkit."""

from __future__ import annotations

import json
from pathlib import Path

from ci_matrix.core.provision import needs_of, recipe
from ci_matrix.edges.files import toolkits
from tests.test_run import ci_matrix, record_of

KERNELS = """\
version: 1
builds:
  kernels:
    platforms: [linux-x86_64]
    cuda: {versions: ["13.0"], archs: [sm_80]}
    run:
      - [nvcc, --version]
"""


def test_a_cached_toolkit_that_is_not_the_cells_fails_before_the_build(tmp_path: Path) -> None:
    manifest = tmp_path / "ci-matrix.yml"
    manifest.write_text(KERNELS, encoding="utf-8")
    cuda = needs_of({"cuda-version": "13.0"}, toolkits(), "linux", "x86_64").cuda
    assert cuda is not None
    source = cuda.sources[0]  # PyPI
    folder = tmp_path / "tools" / "cuda" / "13.0"
    nvcc = folder / "pypi" / source.root / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.0, V12.0.140'\n", encoding="utf-8")
    nvcc.chmod(0o755)
    (folder / ".ci-matrix-setup.json").write_text(json.dumps(recipe(source)), encoding="utf-8")

    diagnosis = tmp_path / "d.json"
    done = ci_matrix("run", "--manifest", str(manifest), "--cell", "kernels-linux-x86_64-cuda-13.0-sm_80",
                     "--setup", "--diagnosis", str(diagnosis), "--log", str(tmp_path / "build.log"),
                     env={"PATH": "/usr/bin:/bin", "CI_MATRIX_TOOLS": str(tmp_path / "tools"), "HOME": str(tmp_path)})
    assert done.returncode == 69, done.stdout + done.stderr
    assert "CUDA 13.0: already set up" in done.stdout  # the marker was trusted ...
    record = record_of(diagnosis)
    assert record["stage"] == "setup"
    assert record["tools"]["nvcc"] == "12.0.140"  # ... and preflight caught what really runs
    assert any("asks for CUDA 13.0 but nvcc on PATH is CUDA 12.0" in line for line in record["tail"])
    assert "Cuda compilation tools" not in (tmp_path / "build.log").read_text()  # the build never ran
