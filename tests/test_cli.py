"""The command line as a user runs it: render, explain, validate, rules, and their exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ci_matrix.cli import main
from tests.conftest import EXAMPLE, REPO

EXAMPLE_ARGS = ["--manifest", "examples/ci-matrix.yml"]
SEED_RULES = (
    "rust-gpu-aarch64-debug-segfault",
    "cranelift-variadic-macos-arm64",
    "iree-llvm-cpu-backend-flag",
    "cutlass-cuda-older-than-11-8",
    "torchao-marlin-qqq-sm75",
)


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run `ci-matrix ARGS...` in the repository root: (exit code, stdout, stderr)."""
    monkeypatch.chdir(REPO)

    def run(*argv: str, environ: dict[str, str] | None = None) -> tuple[int, str, str]:
        code = main(list(argv), environ=environ or {})
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_python_dash_m_renders_the_example():
    done = subprocess.run(
        [sys.executable, "-m", "ci_matrix", "render", *EXAMPLE_ARGS],
        cwd=REPO, capture_output=True, text=True, check=False, timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (REPO / "tests" / "golden" / "example.default.table.txt").read_text(encoding="utf-8")


def test_python_dash_m_reports_a_broken_manifest_without_a_traceback():
    done = subprocess.run(
        [sys.executable, "-m", "ci_matrix", "render", "--manifest", "tests/example-files/negative/bad-cuda.yml"],
        cwd=REPO, capture_output=True, text=True, check=False, timeout=60,
    )
    assert done.returncode == 78
    assert done.stderr.startswith("ci-matrix: error: 4 problems\ntests/example-files/negative/bad-cuda.yml:6:26: ")
    assert "Traceback" not in done.stderr


def test_explain_a_worked_around_cell(cli):
    code, out, err = cli("explain", *EXAMPLE_ARGS, "model-linux-x86_64-iree-llvm-cpu")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:4] == [
        "cell:      model-linux-x86_64-iree-llvm-cpu",
        "name:      model · linux-x86_64 · iree llvm-cpu",
        "status:    worked around",
        "requested: build=model, platform=linux-x86_64, iree-target=llvm-cpu",
    ]
    assert lines[4].startswith("rule:      iree-llvm-cpu-backend-flag (workaround) ci_matrix/knowledge/iree.yaml:")
    assert "           see https://github.com/iree-org/iree/issues/20283" in lines
    assert lines[-4:] == [
        "runs-on:   ubuntu-24.04",
        "flags:     iree-compile: --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu",
        "command:   iree-compile --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu "
        "--iree-llvmcpu-target-cpu=generic model.mlir -o model-linux-x86_64-iree-llvm-cpu.vmfb",
        "setup:     IREE 3.13.0 (iree-base-compiler, iree-base-runtime from PyPI, own virtual environment)",
    ]


def test_explain_a_cell_excluded_by_a_rule(cli):
    code, out, _ = cli("explain", *EXAMPLE_ARGS, "kernels-macos-arm64-cuda-12.4-sm_80")
    assert code == 0
    lines = out.splitlines()
    assert lines[2:4] == [
        "status:    excluded",
        "reason:    NVIDIA dropped macOS after CUDA 10.2, and no toolkit ever ran on Apple silicon (cuda-not-on-macos)",
    ]
    assert lines[5].startswith("rule:      cuda-not-on-macos (exclusion) ci_matrix/knowledge/platforms.yaml:")
    assert not any(line.startswith(("runs-on:", "command:")) for line in lines)  # it does not run


def test_explain_a_cell_that_a_workaround_made_a_duplicate(cli):
    code, out, _ = cli("explain", *EXAMPLE_ARGS, "rust-crate-macos-arm64-rust-nightly-2024-04-01-debug")
    assert code == 0
    assert "reason:    after its workarounds it is the same build as " \
           "rust-crate-macos-arm64-rust-nightly-2024-04-01-release (duplicate)" in out.splitlines()
    assert "           rust-profile: debug -> release (in release builds the optimiser folds the load that " \
           "crashes LLVM; the pinned toolchain is kept)" in out.splitlines()


def test_explain_says_why_an_event_drops_a_cell(cli):
    code, out, _ = cli("explain", *EXAMPLE_ARGS, "--event", "pull_request", "model-linux-arm64-iree-vulkan-spirv")
    assert code == 0
    assert "reason:    excluded on pull_request (events.pull_request.exclude) (event)" in out.splitlines()
    _, out, _ = cli("explain", *EXAMPLE_ARGS, "model-linux-arm64-iree-vulkan-spirv")
    assert "status:    built as requested" in out.splitlines()


def test_explain_as_json(cli):
    code, out, _ = cli("explain", *EXAMPLE_ARGS, "--format", "json", "kernels-linux-x86_64-cuda-12.4-sm_75")
    assert code == 0
    record = json.loads(out)
    assert record["status"] == "worked-around"
    assert record["rules"] == ["qgemm-needs-sm80"]
    assert record["flags"]["nvcc"] == ["-gencode=arch=compute_75,code=[sm_75]", "-DQGEMM_GUARD_BELOW_SM80"]
    assert record["changes"][0]["references"] == ["https://github.com/pytorch/ao/pull/1651"]


def test_explain_an_unknown_cell_suggests_the_closest(cli):
    code, out, err = cli("explain", *EXAMPLE_ARGS, "kernels-linux-x86_64-cuda-12.4-sm80")
    assert (code, out) == (64, "")
    assert err == (
        "ci-matrix: error: no cell 'kernels-linux-x86_64-cuda-12.4-sm80' in this manifest "
        "(did you mean 'kernels-linux-x86_64-cuda-12.4-sm_80'?); `ci-matrix render` lists them\n"
    )


def test_ignore_rule_on_the_command_line(cli):
    code, out, _ = cli("explain", *EXAMPLE_ARGS, "--ignore-rule", "iree-llvm-cpu-backend-flag",
                       "model-linux-x86_64-iree-llvm-cpu")
    assert code == 0
    assert "status:    built as requested" in out.splitlines()
    code, out, err = cli("render", *EXAMPLE_ARGS, "--ignore-rule", "iree-llvm-cpu-backend-flg")
    assert (code, out) == (64, "")
    assert err == ("ci-matrix: error: --ignore-rule iree-llvm-cpu-backend-flg: no such rule "
                   "(did you mean 'iree-llvm-cpu-backend-flag'?)\n")


def test_validate_good_files(cli):
    assert cli("validate", "examples/ci-matrix.yml", "examples/rules/kernels.yml") == (0, "ok: 2 files valid\n", "")
    assert cli("validate", *EXAMPLE_ARGS) == (0, "ok: 1 file valid\n", "")


def test_validate_checks_ci_matrix_yml_by_default(cli, tmp_path, monkeypatch):
    (tmp_path / "ci-matrix.yml").write_text("builds: {a: {platforms: [linux-x86_64], run: make}}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert cli("validate") == (0, "ok: 1 file valid\n", "")


def test_validate_a_bad_file(cli):
    code, out, err = cli("validate", "examples/ci-matrix.yml", "tests/example-files/negative/unknown-names.yml")
    assert (code, out) == (78, "")
    assert err.splitlines()[:2] == [
        "ci-matrix: error: 3 problems",
        "tests/example-files/negative/unknown-names.yml:4:31: builds.model.platforms[1]: unknown platform "
        "'macos-arm46' (did you mean 'macos-arm64'?)",
    ]


def test_rules_lists_the_knowledge_base_by_id(cli):
    code, out, _ = cli("rules")
    assert code == 0
    ids = [line.split()[0] for line in out.splitlines()[:-2] if line]
    assert set(SEED_RULES) <= set(ids)
    assert len(ids) == len(set(ids))
    assert out.endswith(f"\n\n{len(ids)} rules\n")


def test_rules_with_a_manifest_adds_the_projects_rules(cli):
    _, out, _ = cli("rules", "--format", "json", *EXAMPLE_ARGS)
    records = json.loads(out)
    ids = [r["id"] for r in records]
    assert ids[-1] == "qgemm-needs-sm80"
    assert set(SEED_RULES) <= set(ids)
    by_id = {r["id"]: r for r in records}
    assert by_id["torchao-marlin-qqq-sm75"]["kind"] == "exclusion"
    assert by_id["rust-gpu-aarch64-debug-segfault"]["workaround"]["set"] == {"rust-profile": "release"}


def test_version(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["--version"], environ={})
    assert stopped.value.code == 0
    assert capsys.readouterr().out == "ci-matrix 0.1.0\n"


def test_render_imports_no_github_client_and_no_regex_engine_it_does_not_need() -> None:
    code = (
        "import sys, io, contextlib\n"
        "from ci_matrix.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['render', '--manifest', {str(EXAMPLE)!r}, '--format', 'github']) == 0\n"
        "print(sorted(m for m in ('github3', 'requests', 're2', 'ruamel.yaml') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_diagnosing_a_log_loads_no_schema_validator_and_no_github_client(tmp_path) -> None:
    # A failed cell's diagnosis reads only the built-in rules' compiled data: jsonschema (some
    # 100 ms of imports) is for files a user wrote, and is loaded only when one is checked.
    log = tmp_path / "build.log"
    log.write_text("nvcc fatal   : Unsupported gpu architecture 'compute_35'\n", encoding="utf-8")
    code = (
        "import sys, io, contextlib\n"
        "from ci_matrix.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    assert main(['diagnose', {str(log)!r}], environ={{}}) == 0\n"
        "assert 'cuda-arch-kepler-removed-in-cuda-12' in out.getvalue(), out.getvalue()\n"
        "print(sorted(m for m in ('jsonschema', 'github3', 'requests', 'ruamel.yaml') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert done.stdout.strip() == "[]"


def test_pre_commit_hook_runs_validate_on_the_files_it_is_given(tmp_path) -> None:
    import yaml

    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    hook = next(h for h in hooks if h["id"] == "ci-matrix-validate")
    assert hook["entry"] == "ci-matrix validate" and hook["pass_filenames"] is True
    files = [str(EXAMPLE), str(REPO / "examples" / "rules" / "kernels.yml")]
    assert main(["validate", *files]) == 0
    broken = tmp_path / "ci-matrix.yml"
    broken.write_text("builds:\n  a:\n    platforms: [linux-x86_65]\n    run: x\n", encoding="utf-8")
    assert main(["validate", *files, str(broken)]) == 78


def test_explain_says_what_setup_installs_or_why_it_cannot(cli, tmp_path):
    code, out, _ = cli("explain", *EXAMPLE_ARGS, "kernels-linux-x86_64-cuda-11.8-sm_75")
    assert code == 0
    assert "setup:     CUDA 11.8 from NVIDIA's redistributables 11.8.0 linux-x86_64" in out  # each source, in order
    assert "setup:       if that cannot be reached: Debian's nvidia-cuda-toolkit compiler package" in out
    manifest = tmp_path / "ci-matrix.yml"
    manifest.write_text('version: 1\nbuilds:\n  k:\n    platforms: [linux-x86_64]\n    uses: [cutlass]\n'
                        '    cuda: {versions: ["11.2"], archs: [sm_80]}\n    run: [[nvcc, --version]]\n')
    code, out, _ = cli("explain", "--manifest", str(manifest), "k-linux-x86_64-cuda-11.2-sm_80")
    assert "setup:     CUDA 11.8 from" in out  # after the CUTLASS rule's workaround
    code, out, _ = cli("explain", "--manifest", str(manifest), "--ignore-rule", "cutlass-cuda-older-than-11-8",
                       "k-linux-x86_64-cuda-11.2-sm_80")
    assert "setup:     cannot be set up: CUDA 11.2 cannot be set up" in out
