"""Rendering: golden files of the example, GitHub's limits (256 cells, 1 MB), shards.

Golden files: tests/golden/ holds the example (examples/ci-matrix.yml) rendered in every
format, for the default event and for `--event pull_request`; the test compares them byte
for byte. After an intended change, regenerate them and review the diff:

    CI_MATRIX_UPDATE_GOLDEN=1 python -m pytest tests/core/test_render.py
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from ci_matrix.cli import main
from tests.conftest import REPO

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
UPDATE = os.environ.get("CI_MATRIX_UPDATE_GOLDEN") == "1"
SUFFIX = {"table": "table.txt", "json": "json", "github": "github.json", "markdown": "md", "yaml": "yaml"}


def render(argv, capsys, monkeypatch, cwd=REPO):
    monkeypatch.chdir(cwd)
    code = main(["render", *argv], environ={})
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("event", ["default", "pull_request"])
@pytest.mark.parametrize("fmt", list(SUFFIX))
def test_example_renders_as_its_golden_file(fmt, event, capsys, monkeypatch):
    argv = ["--manifest", "examples/ci-matrix.yml", "--format", fmt]
    argv += [] if event == "default" else ["--event", event]
    code, out, err = render(argv, capsys, monkeypatch)
    assert (code, err) == (0, "")
    golden = GOLDEN / f"example.{event}.{SUFFIX[fmt]}"
    if UPDATE:
        golden.write_text(out, encoding="utf-8")
    assert out == golden.read_text(encoding="utf-8"), f"{golden.name} differs; see this file's docstring"


def test_goldens_agree_with_each_other():
    github = json.loads((GOLDEN / "example.default.github.json").read_text(encoding="utf-8"))
    plan = json.loads((GOLDEN / "example.default.json").read_text(encoding="utf-8"))
    runnable = [c for c in plan["cells"] if c["status"] != "excluded"]
    assert [c["id"] for c in github["include"]] == [c["id"] for c in runnable]
    assert plan["counts"] == {"cells": 61, "runnable": 38, "worked-around": 6, "excluded": 23}
    pr = json.loads((GOLDEN / "example.pull_request.json").read_text(encoding="utf-8"))
    assert pr["event"] == "pull_request"
    assert pr["counts"]["runnable"] < plan["counts"]["runnable"]


def test_github_entries_carry_everything_a_job_needs(capsys, monkeypatch):
    _, out, _ = render(["--manifest", "examples/ci-matrix.yml", "--format", "github"], capsys, monkeypatch)
    entries = {e["id"]: e for e in json.loads(out)["include"]}
    assert entries["model-linux-x86_64-iree-llvm-cpu"] == {
        "id": "model-linux-x86_64-iree-llvm-cpu",
        "name": "model · linux-x86_64 · iree llvm-cpu",
        "runs-on": ["ubuntu-24.04"],
        "build": "model",
        "platform": "linux-x86_64",
        "iree-target": "llvm-cpu",
        "env": {},
        "flags": {
            "iree-compile": ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu"],
        },
        "commands": [["iree-compile", "--iree-hal-target-device=local",
                      "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=generic",
                      "model.mlir", "-o",
                      "model-linux-x86_64-iree-llvm-cpu.vmfb"]],
        "working-directory": "iree-model",
        "rules": ["iree-llvm-cpu-backend-flag"],
    }
    nightly = entries["rust-crate-linux-x86_64-rust-nightly-2024-04-01-debug-cranelift"]
    assert nightly["env"] == {"RUSTUP_TOOLCHAIN": "nightly-2024-04-01", "RUSTFLAGS": "-Zcodegen-backend=cranelift"}
    assert entries["kernel-tests-linux-x86_64-gpu-cuda-13.0-sm_90"]["runs-on"] == ["self-hosted", "linux", "x64", "gpu"]
    assert entries["kernel-tests-linux-x86_64-gpu-cuda-13.0-sm_90"]["needs-gpu"] == "true"
    assert len(out.encode("utf-16-le")) < 1_000_000
    assert out.count("\n") == 1 and "\n" not in out[:-1]  # one line: fit for $GITHUB_OUTPUT


def many_cells(folder: Path, count: int, extra: str = "") -> Path:
    values = ", ".join(f'"{i}"' for i in range(count))
    path = folder / "ci-matrix.yml"
    path.write_text(textwrap.dedent(f"""\
        {extra}
        builds:
          b:
            platforms: [linux-x86_64]
            axes: {{n: [{values}]}}
            run: ./test {{n}}
        """), encoding="utf-8")
    return path


def test_more_than_256_cells_without_max_cells_is_a_clear_error(tmp_path, capsys, monkeypatch):
    many_cells(tmp_path, 300)
    code, out, err = render(["--format", "github"], capsys, monkeypatch, cwd=tmp_path)
    assert (code, out) == (64, "")
    assert err == (
        "ci-matrix: error: the matrix has 300 cells and GitHub runs at most 256 per job; narrow the manifest "
        "(exclude, events) or split it with --max-cells N (see README: sharding)\n"
    )


def test_256_cells_fit_in_one_matrix(tmp_path, capsys, monkeypatch):
    many_cells(tmp_path, 256)
    code, out, _ = render(["--format", "github"], capsys, monkeypatch, cwd=tmp_path)
    assert code == 0
    assert len(json.loads(out)["include"]) == 256


@pytest.mark.parametrize(("argv", "extra"), [(["--max-cells", "100"], ""), ([], "max-cells: 100")])
def test_max_cells_splits_the_matrix_into_shards_one_per_line(tmp_path, capsys, monkeypatch, argv, extra):
    many_cells(tmp_path, 300, extra)
    code, out, err = render(["--format", "github", *argv], capsys, monkeypatch, cwd=tmp_path)
    assert (code, err) == (0, "")
    shards = [json.loads(line) for line in out.splitlines()]
    assert [len(s["include"]) for s in shards] == [100, 100, 100]
    ids = [e["id"] for s in shards for e in s["include"]]
    assert ids == [f"b-linux-x86_64-n-{i}" for i in range(300)]


@pytest.mark.parametrize("value", ["0", "-5", "257"])
def test_max_cells_outside_githubs_limit_is_refused(tmp_path, capsys, monkeypatch, value):
    many_cells(tmp_path, 10)
    code, out, err = render(["--format", "github", "--max-cells", value], capsys, monkeypatch, cwd=tmp_path)
    assert (code, out) == (64, "")
    assert err == f"ci-matrix: error: --max-cells {value}: a shard holds 1 to 256 cells (GitHub's limit per job)\n"


def test_a_matrix_over_one_megabyte_is_refused(tmp_path, capsys, monkeypatch):
    big_env = "x" * 3000
    many_cells(tmp_path, 200)
    path = tmp_path / "ci-matrix.yml"
    path.write_text(path.read_text(encoding="utf-8").replace("    run:", f"    env: {{BIG: {big_env}}}\n    run:"),
                    encoding="utf-8")
    code, out, err = render(["--format", "github"], capsys, monkeypatch, cwd=tmp_path)
    assert (code, out) == (64, "")
    assert err.startswith("ci-matrix: error: the matrix is 1,2")
    assert err.endswith(" bytes as GitHub counts them (UTF-16) and a job's outputs are capped at 1 MB; "
                        "narrow the manifest or move commands out of it\n")


EMPTY = """\
    events:
      pull_request: {builds: [docs]}
    builds:
      kernels:
        platforms: [macos-arm64]
        cuda: {versions: ["12.4"], archs: [sm_80]}
        run: nvcc k.cu
      docs:
        platforms: [linux-x86_64]
        exclude: [{platform: linux-x86_64}]
        run: make docs
    """


def test_an_empty_matrix_renders_as_an_empty_include_and_the_table_says_why(tmp_path, capsys, monkeypatch):
    (tmp_path / "ci-matrix.yml").write_text(textwrap.dedent(EMPTY), encoding="utf-8")
    code, out, _ = render(["--format", "github"], capsys, monkeypatch, cwd=tmp_path)
    assert (code, out) == (0, '{"include":[]}\n')
    code, out, _ = render(["--format", "table"], capsys, monkeypatch, cwd=tmp_path)
    assert out == (
        "CELL                                 STATUS    RULES / REASON\n"
        "kernels-macos-arm64-cuda-12.4-sm_80  excluded  NVIDIA dropped macOS after CUDA 10.2, and no toolkit ever "
        "ran on Apple silicon\n"
        "docs-linux-x86_64                    excluded  excluded by the manifest (builds.docs.exclude[0])\n"
        "\n"
        "0 cells run (0 worked around), 2 excluded\n"
    )


def test_render_reads_the_event_from_github_event_name(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    argv = ["render", "--manifest", "examples/ci-matrix.yml", "--format", "json"]
    assert main(argv, environ={"GITHUB_EVENT_NAME": "pull_request"}) == 0
    out, _ = capsys.readouterr()
    assert out == (GOLDEN / "example.pull_request.json").read_text(encoding="utf-8")
