"""What a user sees when a manifest or rule file is wrong: every problem at once, each at
`file:line:col: path: message`, with "did you mean" where a close name exists, exit code 78
(64 for a missing manifest) and never a traceback.

The files under tests/example-files/ are the cases: every `negative/X.yml` must fail with
exactly the stderr stored in `negative/X.expected`; every `positive/*.yml` must validate.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ci_matrix.cli import main
from ci_matrix.edges.files import load_project
from ci_matrix.errors import ConfigError, ExitCode, Problem

EXAMPLE_FILES = Path(__file__).resolve().parent.parent / "example-files"
NEGATIVE = sorted((EXAMPLE_FILES / "negative").glob("*.yml"))
POSITIVE = sorted((EXAMPLE_FILES / "positive").glob("*.yml"))


def run_cli(argv, capsys):
    code = main(argv, environ={})
    out, err = capsys.readouterr()
    return code, out, err


def test_there_are_example_files():
    assert len(NEGATIVE) >= 8
    assert len(POSITIVE) >= 3
    assert sorted(p.stem for p in (EXAMPLE_FILES / "negative").glob("*.expected")) == [p.stem for p in NEGATIVE]


@pytest.mark.parametrize("path", NEGATIVE, ids=lambda p: p.stem)
def test_negative_example_fails_with_exactly_its_expected_messages(path, capsys, monkeypatch):
    monkeypatch.chdir(path.parent)  # messages name the file as the user passed it
    code, out, err = run_cli(["validate", path.name], capsys)
    assert err == (path.parent / f"{path.stem}.expected").read_text(encoding="utf-8")
    assert code == ExitCode.CONFIG == 78
    assert out == ""


@pytest.mark.parametrize("path", POSITIVE, ids=lambda p: p.stem)
def test_positive_example_validates(path, capsys, monkeypatch):
    monkeypatch.chdir(path.parent)
    assert run_cli(["validate", path.name], capsys) == (0, "ok: 1 file valid\n", "")


def test_validate_reports_the_problems_of_every_file_together(capsys, monkeypatch):
    monkeypatch.chdir(EXAMPLE_FILES / "negative")
    code, _, err = run_cli(["validate", "yaml-syntax.yml", "unknown-names.yml"], capsys)
    assert code == 78
    assert err.splitlines() == [
        "ci-matrix: error: 4 problems",
        "yaml-syntax.yml:5:8: YAML syntax error: expected ',' or ']', but got ':'",
        "unknown-names.yml:4:31: builds.model.platforms[1]: unknown platform 'macos-arm46' "
        "(did you mean 'macos-arm64'?)",
        "unknown-names.yml:6:17: builds.model.iree.targets[0]: unknown IREE target 'llvm-cpo' "
        "(did you mean 'llvm-cpu'?)",
        "unknown-names.yml:6:27: builds.model.iree.targets[1]: unknown IREE target 'vulkan' "
        "(did you mean 'vulkan-spirv'?)",
    ]


def test_problems_are_located_values(tmp_path):
    path = tmp_path / "ci-matrix.yml"
    path.write_text("builds:\n  k:\n    platforms: [linux-x86_64]\n    cuda: {versions: [12.4], archs: [sm_81]}\n"
                    "    run: nvcc k.cu\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_project(path)
    assert caught.value.problems == (
        Problem(str(path), 4, 38, "builds.k.cuda.archs[0]",
                "unknown CUDA arch 'sm_81': no GPU has compute capability 81 (did you mean 'sm_89'?)"),
    )
    assert caught.value.exit_code == 78


def test_render_of_a_broken_manifest_exits_78_without_a_traceback(capsys, monkeypatch):
    monkeypatch.chdir(EXAMPLE_FILES / "negative")
    code, out, err = run_cli(["render", "--manifest", "bad-toolchain.yml", "--format", "github"], capsys)
    assert code == 78
    assert out == ""
    assert err == Path("bad-toolchain.expected").read_text(encoding="utf-8")
    assert "Traceback" not in err


@pytest.mark.parametrize("command", [["render"], ["explain", "some-cell"], ["rules", "--manifest"]])
def test_a_missing_manifest_is_a_usage_error(command, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [*command, "nope.yml"] if command[-1] == "--manifest" else [*command, "--manifest", "nope.yml"]
    code, out, err = run_cli(argv, capsys)
    assert code == ExitCode.USAGE == 64
    assert err == "ci-matrix: error: nope.yml: no manifest here; pass --manifest PATH or create ci-matrix.yml\n"
    assert out == ""


def test_without_manifest_option_the_default_file_is_named(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(["render"], capsys)
    assert code == 64
    assert err == ("ci-matrix: error: ci-matrix.yml: no manifest here; pass --manifest PATH or create "
                   "ci-matrix.yml\n")


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_yaml_floats_are_kept_as_written(plan_of):
    the_plan = plan_of(
        """\
        builds:
          crate:
            platforms: [linux-x86_64]
            rust: {toolchains: [1.80, 1.8]}
            run: cargo build
          kernels:
            platforms: [linux-x86_64]
            cuda: {versions: [12.4], archs: [8.0, 8.6+PTX]}
            run: nvcc k.cu
        """
    )
    assert [c.id for c in the_plan.cells] == [
        "crate-linux-x86_64-rust-1.80-debug",
        "crate-linux-x86_64-rust-1.8-debug",
        "kernels-linux-x86_64-cuda-12.4-sm_80",
        "kernels-linux-x86_64-cuda-12.4-sm_86+ptx",
    ]
    first = the_plan.cells[0]
    assert first.value("rust-toolchain") == "1.80"
    assert ("RUSTUP_TOOLCHAIN", "1.80") in first.env


def test_a_project_rule_speaking_of_an_unknown_fact_is_located_in_its_file(tmp_path, capsys):
    write(tmp_path, "rules.yml", """\
        rules:
          - id: old-archs
            title: archs below sm_80 are not supported
            when: {cuda-arc: "< sm_80"}
            action: {exclude: too old}
            references: [https://example.com]
        """)
    manifest = write(tmp_path, "ci-matrix.yml", """\
        rules: [rules.yml]
        builds:
          k:
            platforms: [linux-x86_64]
            cuda: {versions: ["12.4"], archs: [sm_75]}
            run: nvcc k.cu
        """)
    code, _, err = run_cli(["render", "--manifest", str(manifest)], capsys)
    assert code == 78
    assert err.splitlines() == [
        "ci-matrix: error: 2 problems",
        f"{tmp_path / 'rules.yml'}:4:12: rules[0].when.cuda-arc: unknown fact 'cuda-arc' (did you mean 'cuda-arch'?)",
        f"{tmp_path / 'rules.yml'}:4:22: rules[0].when.cuda-arc: 'cuda-arc' cannot be compared with '<'; "
        "compare it with a value",
    ]


def test_a_rule_id_used_twice_names_both_places(tmp_path, capsys):
    write(tmp_path, "rules.yml", """\
        rules:
          - id: cuda-not-on-macos
            title: a project rule reusing a built-in id
            when: {os: macos}
            action: {exclude: no}
            references: [https://example.com]
        """)
    manifest = write(tmp_path, "ci-matrix.yml", """\
        rules: [rules.yml]
        builds: {k: {platforms: [linux-x86_64], run: make}}
        """)
    code, _, err = run_cli(["render", "--manifest", str(manifest)], capsys)
    assert code == 78
    assert err.splitlines()[1] == (
        f"{tmp_path / 'rules.yml'}:2:1: rule id 'cuda-not-on-macos' is already used by the built-in rule at "
        "ci_matrix/knowledge/platforms.yaml:4"
    )


def test_event_profiles_name_only_existing_builds(tmp_path, capsys):
    manifest = write(tmp_path, "ci-matrix.yml", """\
        events:
          pull_request: {builds: [crates]}
        builds:
          crate: {platforms: [linux-x86_64], run: cargo build}
        """)
    code, _, err = run_cli(["render", "--manifest", str(manifest)], capsys)
    assert code == 78
    assert err.splitlines()[1:] == [
        f"{manifest}:2:27: events.pull_request.builds[0]: unknown build 'crates' (did you mean 'crate'?)",
    ]


def test_an_exclude_may_only_name_axes_of_its_build(tmp_path, capsys):
    manifest = write(tmp_path, "ci-matrix.yml", """\
        builds:
          crate:
            platforms: [linux-x86_64]
            rust: {toolchains: [stable]}
            exclude: [{rust-toolchian: stable}, {platform: linux-x86-64}]
            run: cargo build
        """)
    code, _, err = run_cli(["render", "--manifest", str(manifest)], capsys)
    assert code == 78
    assert err.splitlines()[1:] == [
        f"{manifest}:5:16: builds.crate.exclude[0].rust-toolchian: 'rust-toolchian' is not an axis of this build "
        "(did you mean 'rust-toolchain'?)",
        f"{manifest}:5:52: builds.crate.exclude[1].platform: unknown platform 'linux-x86-64' "
        "(did you mean 'linux-x86_64'?)",
    ]
