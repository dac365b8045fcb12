"""Evidence read from the log, conditions with three answers, refinement and confidence, as
`ci-matrix diagnose` shows them; the rule draft of an unclassified failure."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ci_matrix.cli import main
from ci_matrix.core.conditions import Conditions, Truth, compile_clause
from ci_matrix.diagnose.draft import LINE_LIMIT, error_line, signature_of
from ci_matrix.diagnose.evidence import Default, Evidence, combine
from ci_matrix.edges import files

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "ci_matrix" / "knowledge" / "fixtures"


def diagnose(capsys: pytest.CaptureFixture[str], log: Path, *extra: str) -> dict[str, Any]:
    """`ci-matrix diagnose LOG --format json`, checked against the diagnosis schema."""
    assert main(["diagnose", str(log), "--format", "json", *extra], {}) == 0
    record: dict[str, Any] = json.loads(capsys.readouterr().out)
    jsonschema.validate(record, files.schema("diagnosis"))
    return record


def facts_of(finding: dict[str, Any]) -> dict[str, tuple[str, str, int]]:
    return {e["fact"]: (e["value"], e["source"], e["line"]) for e in finding["evidence"]}


def conditions(*clauses: dict[str, Any]) -> Conditions:
    return Conditions(tuple(compile_clause(c) for c in clauses))


def test_conditions_hold_fail_or_are_unknown() -> None:
    window = conditions({"os": "macos", "rust-date": ">= 2024-02-14, <= 2024-05-20"}, {"rust-version": "== 1.78.0"})
    in_window = {"os": "macos", "rust-date": dt.date(2024, 4, 24)}
    assert window.evaluate(in_window).truth is Truth.HOLDS
    assert window.evaluate({"os": "linux", "rust-date": dt.date(2024, 4, 24), "rust-version": (1, 29, 0)}).truth \
        is Truth.FAILS
    unknown = window.evaluate({"os": "macos"})
    assert (unknown.truth, unknown.facts) == (Truth.UNKNOWN, ("rust-date",))
    # one clause contradicted, the other open: still unknown, not false
    assert window.evaluate({"os": "linux"}).truth is Truth.UNKNOWN


def test_all_of_several_conditions_on_one_fact() -> None:
    flags = conditions({"iree-compile-flags": {"all": ["--iree-hal-target-device=local",
                                                       {"not": "--iree-hal-local-target-device-backends"}]}})
    local = frozenset({"--iree-hal-target-device=local", "--iree-hal-target-device"})
    assert flags.evaluate({"iree-compile-flags": local}).truth is Truth.HOLDS
    with_backend = local | {"--iree-hal-local-target-device-backends"}
    assert flags.evaluate({"iree-compile-flags": with_backend}).truth is Truth.FAILS
    assert flags.evaluate({}).truth is Truth.UNKNOWN


def test_the_cell_wins_and_the_conflict_is_kept() -> None:
    log = {"cuda-version": Evidence("cuda-version", "13.0", "log", 3, "Cuda compilation tools, release 13.0, V13.0.88")}
    known = combine({"cuda-version": "12.4"}, files.catalog().platforms, log)
    assert known.values["cuda-version"] == (12, 4, 0)
    assert [(c.fact, c.cell, c.log.value, c.log.line) for c in known.conflicts] == [("cuda-version", "12.4", "13.0", 3)]


def test_derived_log_facts_and_defaults() -> None:
    path = Evidence("rust-toolchain", "nightly-2024-04-24", "log", 7, "…")
    host = Evidence("rust-host", "aarch64-apple-darwin", "log", 7, "…")
    commit = {"rust-channel": Evidence("rust-channel", "nightly", "log", 2, "…"),
              "rust-commit-date": Evidence("rust-commit-date", "2024-05-20", "log", 2, "…")}
    backend = Default("rust-backend", "llvm", ("rust-channel",), "rustc's default")
    known = combine(None, {}, {"rust-toolchain": path, "rust-host": host}, [backend])
    values = known.values
    assert (values["os"], values["cpu"], values["rust-date"]) == ("macos", "arm64", dt.date(2024, 4, 24))
    assert known.values["rust-backend"] == "llvm" and known.evidence["rust-backend"].source == "default"
    # `rustc 1.80.0-nightly (… 2024-05-20)` is nightly-2024-05-21: the first fixed one
    assert combine(None, {}, commit).values["rust-date"] == dt.date(2024, 5, 21)
    assert "rust-backend" not in combine(None, {}, {}, [backend]).values  # nothing says it is Rust


def test_rust_gpu_segfault_posted_without_an_llvm_frame(capsys: pytest.CaptureFixture[str]) -> None:
    record = diagnose(capsys, FIXTURES / "rust-gpu-aarch64-debug-segfault" / "issue-29-cargo.log")
    first = record["findings"][0]
    assert (first["rule"], first["reached-by"], first["confidence"], first["refined-from"]) == (
        "rust-gpu-aarch64-debug-segfault", "signature+evidence", "high", "rustc-crashed")
    assert facts_of(first) == {
        "os": ("macos", "log", 4), "cpu": ("arm64", "log", 4), "rust-channel": ("nightly", "log", 4),
        "rust-date": ("2024-04-24", "log", 4), "rust-profile": ("debug", "log", 4),
        "rust-backend": ("llvm", "default", 0)}
    assert any(e["match"].endswith("nightly-2024-04-24-aarch64-apple-darwin/") for e in first["evidence"])


def test_a_2018_linux_host_rules_the_apple_silicon_rule_out(capsys: pytest.CaptureFixture[str]) -> None:
    record = diagnose(capsys, FIXTURES / "rust-gpu-aarch64-debug-segfault" / "issue-52884-linux-host.log")
    assert [f["rule"] for f in record["findings"]] == ["rustc-sigsegv", "rustc-crashed"]
    assert [(r["rule"], {e["fact"]: e["value"] for e in r["evidence"]}) for r in record["ruled-out"]] == [
        ("rust-gpu-aarch64-debug-segfault", {"os": "linux", "cpu": "x86_64"})]


def test_iree_crash_with_the_local_device_and_no_backend(capsys: pytest.CaptureFixture[str]) -> None:
    record = diagnose(capsys, FIXTURES / "iree-compile-segfault-cpu-target" / "issue-20283.log")
    first = record["findings"][0]
    assert (first["rule"], first["refined-from"], first["confidence"]) == (
        "iree-compile-segfault-cpu-target", "iree-compile-crash", "high")
    assert facts_of(first)["iree-compile-flags"][1:] == ("log", 2)


def test_a_command_continued_on_the_next_line_does_not_tell_a_missing_flag(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    crash = (FIXTURES / "iree-compile-segfault-cpu-target" / "issue-20283.log").read_text(encoding="utf-8")
    log = tmp_path / "continued.log"
    log.write_text(
        "$ iree-compile model.mlir --iree-hal-target-device=local \\\n"
        "    --iree-hal-local-target-device-backends=llvm-cpu -o model.vmfb\n"
        + "".join(line for line in crash.splitlines(keepends=True) if "iree-compile " not in line),
        encoding="utf-8",
    )
    first = diagnose(capsys, log)["findings"][0]
    assert first["rule"] == "iree-compile-crash"
    assert "iree-compile-flags" not in facts_of(first)
    # the same command on one line does tell it
    log.write_text("$ iree-compile model.mlir --iree-hal-target-device=local -o model.vmfb\n"
                   + log.read_text(encoding="utf-8").split("\n", 2)[2], encoding="utf-8")
    assert diagnose(capsys, log)["findings"][0]["rule"] == "iree-compile-segfault-cpu-target"


def test_an_arch_rejection_without_a_version_in_sight_is_medium(capsys: pytest.CaptureFixture[str]) -> None:
    record = diagnose(capsys, FIXTURES / "cuda-arch-pre-turing-removed-in-cuda-13" / "no-banner-sm70.log")
    first = record["findings"][0]
    assert (first["rule"], first["confidence"], first["unknown"]) == (
        "cuda-arch-pre-turing-removed-in-cuda-13", "medium", ["cuda-version"])
    with_banner = diagnose(capsys, FIXTURES / "cuda-arch-pre-turing-removed-in-cuda-13" / "match.log")["findings"][0]
    assert (with_banner["confidence"], facts_of(with_banner)["cuda-version"]) == ("high", ("13.0", "log", 5))


@pytest.mark.parametrize(("fixture", "rule"), [
    ("cargo-edition-unsupported/cargo-1.95-edition-2027.log", "cargo-edition-unsupported"),
    ("cuda-arch-specific-feature-needs-suffix/match.log", "cuda-arch-specific-feature-needs-suffix"),
    ("cuda-arch-specific-feature-needs-suffix/match-arch-sm90a.log", "cuda-arch-specific-feature-needs-suffix"),
    ("cuda-out-of-memory/match.log", "cuda-out-of-memory"),
    ("cuda-out-of-memory/match-runtime.log", "cuda-out-of-memory"),
])
def test_issue_cases_named_from_the_log_alone(capsys: pytest.CaptureFixture[str], fixture: str, rule: str) -> None:
    first = diagnose(capsys, FIXTURES / fixture)["findings"][0]
    assert (first["rule"], first["confidence"]) == (rule, "high")


def test_a_conflict_between_cell_and_log_is_shown(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    manifest = tmp_path / "ci-matrix.yml"
    manifest.write_text("builds:\n  k:\n    platforms: [linux-x86_64]\n    cuda: {versions: ['12.4'], archs: [sm_70]}\n"
                        "    run: nvcc k.cu\n", encoding="utf-8")
    log = FIXTURES / "cuda-arch-pre-turing-removed-in-cuda-13" / "match.log"
    cell = "k-linux-x86_64-cuda-12.4-sm_70"
    assert main(["diagnose", str(log), "--manifest", str(manifest), "--cell", cell], {}) == 0
    text = capsys.readouterr().out
    assert "conflict: the cell says cuda-version = 12.4, the log says 13.0 (line 5); the cell's value was used" in text
    assert "ruled out: cuda-arch-pre-turing-removed-in-cuda-13" in text


def test_ignore_rule_is_accepted_by_diagnose_and_validate(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = FIXTURES / "cuda-out-of-memory" / "match.log"
    record = diagnose(capsys, log, "--ignore-rule", "cuda-out-of-memory")
    assert record["findings"][0]["rule"] == "cuda-out-of-memory"  # ignored rules still recognise their failure
    assert main(["diagnose", str(log), "--ignore-rule", "cuda-out-of-memroy"], {}) == 64
    assert "did you mean 'cuda-out-of-memory'" in capsys.readouterr().err
    manifest = ROOT / "examples" / "ci-matrix.yml"
    assert main(["validate", "--manifest", str(manifest), "--ignore-rule", "cutlass-cuda-older-than-11-8"], {}) == 0
    assert main(["validate", "--manifest", str(manifest), "--ignore-rule", "cutlass-cuda-older-than-11"], {}) == 64


def test_signatures_generalise_volatile_parts() -> None:
    line = "ptxas /tmp/tmpxft_000014b8_00000000-6_wg.ptx, line 27; error   : Instruction 'wgmma.fence' not supported"
    assert signature_of(line) == (r"ptxas [^\s'\"`]+, line \d+; error   : Instruction 'wgmma\.fence' not supported")
    assert signature_of("at 0x7f94deadbeef in libfoo.so.1.2.3") == (
        r"at 0x[0-9a-fA-F]+ in libfoo\.so\.[0-9][0-9A-Za-z.+-]*")


def test_a_draft_becomes_a_rule_that_passes_rules_test(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_text("$ make\ncc -c a.c\na.c:12:3: error: unknown type name 'foo_t'\n  12 | foo_t x;\n"
                   "make: *** [Makefile:3: all] Error 1\n", encoding="utf-8")
    record = diagnose(capsys, log)
    assert record["classified"] is False and "error: unknown type name" in record["draft"]
    rule_file = tmp_path / "ci" / "rules.yml"
    assert main(["rules", "draft", str(log), "--write", str(rule_file)], {}) == 0
    (tmp_path / "ci-matrix.yml").write_text("rules: [ci/rules.yml]\nbuilds:\n  b:\n    platforms: [linux-x86_64]\n"
                                            "    run: make\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["rules", "test", "--manifest", str(tmp_path / "ci-matrix.yml")], {}) == 0
    assert "0 failed" in capsys.readouterr().out
    again = diagnose(capsys, log, "--manifest", str(tmp_path / "ci-matrix.yml"))
    assert again["findings"][0]["rule"] == "draft-error-unknown-type-name-foo"


@pytest.mark.parametrize(
    ("log", "line", "domain"),
    [
        # rustc's note: Apple's ld says what went wrong, clang's driver only that the link failed
        ("  = note: clang: warning: argument unused during compilation: '-pie'\n"
         "          ld: unknown option: --as-needed\n"
         "          clang: error: linker command failed with exit code 1 (use -v to see invocation)\n"
         "error: could not compile `hello` (bin \"hello\") due to 1 previous error\n",
         "ld: unknown option: --as-needed", "runner"),
        # a Python traceback in a container build: its exception, not the header or BuildKit's wrapper
        ("Traceback (most recent call last):\n  File \"setup.py\", line 40, in <module>\n"
         "    arch_list[-1] += '+PTX'\nIndexError: list index out of range\n"
         "ERROR: failed to solve: process \"/bin/sh -c pip install .\" did not complete successfully: exit code: 1\n",
         "IndexError: list index out of range", "runner"),
        # a reply's prose above the tool's own line
        ("When I build I get this error:\n"
         "cargo:warning=protoc failed\nfoo.proto:1:10: Unrecognized syntax identifier \"proto3\".\n"
         "error: failed to run custom build command for `prost-build v0.11.0`\nprotoc: error: exit status 1\n",
         "protoc: error: exit status 1", "rust"),
        # CMake heads its message: the draft takes the message, not the heading
        ("-- The CUDA compiler identification is unknown\n"
         "CMake Error in /tmp/b/CMakeFiles/CMakeTmp/CMakeLists.txt:\n"
         "  CUDA_ARCHITECTURES is empty for target \"cmTC_5a1f2\".\n\n-- Configuring incomplete, errors occurred!\n",
         'CUDA_ARCHITECTURES is empty for target "cmTC_5a1f2".', "cuda"),
        # Docker's error about an image of CUDA is the registry's, not CUDA's
        ("Unable to find image 'nvidia/cuda:10.1-cudnn7-runtime' locally\n"
         "docker: Error response from daemon: manifest for nvidia/cuda:10.1-cudnn7-runtime not found: "
         "manifest unknown.\n",
         "docker: Error response from daemon: manifest for nvidia/cuda", "runner"),
        ("nvcc fatal   : Value 'sm_20' is not defined for option 'gpu-architecture'\n",
         "nvcc fatal   : Value 'sm_20' is not defined for option 'gpu-architecture'", "cuda"),
        # cargo's summary, then its causes: the last one says what went wrong
        ("    Updating crates.io index\nerror: failed to parse lock file at: /w/app/Cargo.lock\n\nCaused by:\n"
         "  lock file version 4 requires `-Znext-lockfile-bump`\n",
         "lock file version 4 requires `-Znext-lockfile-bump`", "rust"),
        # Rust 1.73 and later print a panic's message below its location
        ("error: failed to run custom build command for `cudarc v0.11.4`\n\n--- stderr\n"
         "thread 'main' panicked at /root/.cargo/registry/src/index.crates.io-6f17d22bba15001f/"
         "cudarc-0.11.4/build.rs:73:14:\n"
         "Unsupported cuda toolkit version: 11.5. Please raise a github issue.\n"
         "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
         "Unsupported cuda toolkit version: 11.5. Please raise a github issue.", "cuda"),
        # no line says "error": the one that says something failed
        ("$ nvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.144\n",
         "Failed to initialize NVML: Driver/library version mismatch", "runner"),
        # MSVC's coded errors; its warnings are not errors
        ("cl : Command line warning D9025 : overriding '/W3' with '/W4'\n"
         "C:\\src\\simd.cpp(365): fatal error C1002: compiler is out of heap space in pass 2\n",
         "fatal error C1002: compiler is out of heap space in pass 2", "runner"),
        # the loader's error, and a failure told above a wrapper that only says a step failed
        ("pkgx: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found (required by pkgx)\n"
         "Error: The process '/usr/bin/sudo' failed with exit code 1\n",
         "version `GLIBC_2.38' not found (required by pkgx)", "runner"),
        ("./server: error while loading shared libraries: libcudart.so.12: cannot open shared object file: "
         "No such file or directory\n",
         "error while loading shared libraries: libcudart.so.12", "cuda"),
    ],
)
def test_a_draft_is_built_from_the_line_that_says_what_went_wrong(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, log: str, line: str, domain: str
) -> None:
    path = tmp_path / "build.log"
    path.write_text(log, encoding="utf-8")
    assert main(["rules", "draft", str(path)], {}) == 0
    text = capsys.readouterr().out
    title = next(row for row in text.splitlines() if row.startswith("  title: "))
    assert line in title.replace("''", "'"), title
    assert f"  domain: {domain}\n" in text
    assert "No line of this log reads as an error" not in text


def test_error_words_are_read_from_each_line_s_start_only() -> None:
    # A hostile log's lines of "Assertion Assertion ..." (a pattern that re-reads the rest of a
    # line from every match) cost what their first LINE_LIMIT characters cost: the draft reads
    # no further, and an error told past that point is not one it sees.
    assert error_line(["x" * LINE_LIMIT + " error: late", "a.c:1:2: error: early"]) == 1
    assert error_line(["Assertion " * 30_000]) is None  # no "failed" within its first characters


def test_a_draft_of_a_log_with_no_error_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "build.log"
    path.write_text("warning: unused variable `x`\n  --> src/main.rs:2:9\n"
                    "    Finished `dev` profile [unoptimized + debuginfo] target(s) in 0.53s\n", encoding="utf-8")
    assert main(["rules", "draft", str(path)], {}) == 0
    text = capsys.readouterr().out
    assert text.startswith("# No line of this log reads as an error (is it the log of a failed build?)")
    assert r"target\(s\) in \d+(?:\.\d+)?s" in text  # a duration is volatile, all of it
    assert "  domain: rust\n" in text  # cargo's words, as the log's facts say too


def test_a_draft_with_a_cell_says_where_it_was_seen(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    manifest = tmp_path / "ci-matrix.yml"
    manifest.write_text("builds:\n  k:\n    platforms: [linux-x86_64]\n    cuda: {versions: ['12.4'], archs: [sm_80]}\n"
                        "    run: nvcc k.cu\n", encoding="utf-8")
    log = tmp_path / "k.log"
    log.write_text("$ nvcc k.cu\nk.cu(3): error: identifier \"__nv_fp8_e8m0\" is undefined\n", encoding="utf-8")
    assert main(["rules", "draft", str(log), "--manifest", str(manifest), "--cell", "k-linux-x86_64-cuda-12.4-sm_80"],
                {}) == 0
    text = capsys.readouterr().out
    assert "  when:\n    platform: linux-x86_64\n    cuda-version: '12.4'\n    cuda-arch: sm_80\n" in text
    assert r"""- 'k\.cu\(\d+\): error: identifier "__nv_fp8_e8m0" is undefined'""" in text
    assert "    cell:\n      platform: linux-x86_64\n" in text


def test_a_project_using_torch_mlir_still_gets_its_iree_legalization_failure(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Whether torch-mlir's own pipeline failed is read from the log (mlir-tool), not from the
    # project's `uses`: an IREE project that imports through torch-mlir keeps the finding.
    manifest = tmp_path / "ci-matrix.yml"
    manifest.write_text("builds:\n  m:\n    platforms: [linux-x86_64]\n    uses: [torch-mlir]\n"
                        "    iree: {targets: [llvm-cpu]}\n    run: iree-compile m.mlir\n", encoding="utf-8")
    folder = FIXTURES / "iree-legalization-failure"
    cell = ["--manifest", str(manifest), "--cell", "m-linux-x86_64-iree-llvm-cpu"]
    assert diagnose(capsys, folder / "match.log", *cell)["findings"][0]["rule"] == "iree-legalization-failure"
    assert not diagnose(capsys, folder / "near-miss-torch-mlir.log", *cell)["findings"]


def test_an_outranked_fixture_lets_a_noise_rule_be_found_but_not_named_first(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A rule whose text is sometimes only noise beside the real failure (a git warning beside a
    # compiler error) gets a fixture of that case: `clean` would fail, as the rule is still found.
    (tmp_path / "ci-matrix.yml").write_text(
        "rules: [ci/rules.yml]\nbuilds:\n  b:\n    platforms: [linux-x86_64]\n    run: make\n", encoding="utf-8"
    )
    fixtures = tmp_path / "ci" / "fixtures"
    fixtures.mkdir(parents=True)
    (fixtures / "noise-alone.log").write_text("warning: git remote prune failed\n", encoding="utf-8")
    (fixtures / "beside.log").write_text(
        "warning: git remote prune failed\nerror: widget frobnication failed\n", encoding="utf-8"
    )
    (fixtures / "real.log").write_text("error: widget frobnication failed\n", encoding="utf-8")

    def rules_file(expect: str) -> None:
        (tmp_path / "ci" / "rules.yml").write_text(
            "rules:\n"
            "  - id: git-prune-noise\n    title: git could not prune\n    domain: runner\n"
            "    diagnosis:\n      signatures: ['git remote prune failed']\n      priority: -1\n"
            "      explanation: e\n      fix: f\n    references: [https://example.org/a]\n"
            "    fixtures:\n      - {file: noise-alone.log, expect: match}\n"
            f"      - {{file: beside.log, expect: {expect}}}\n"
            "  - id: widget-frobnication\n    title: widgets\n    domain: runner\n"
            "    diagnosis:\n      signatures: ['widget frobnication failed']\n"
            "      explanation: e\n      fix: f\n    references: [https://example.org/b]\n"
            "    fixtures:\n      - {file: real.log, expect: match}\n      - {file: noise-alone.log, expect: clean}\n",
            encoding="utf-8",
        )

    manifest = str(tmp_path / "ci-matrix.yml")
    rules_file("outranked")
    assert main(["rules", "test", "--manifest", manifest], {}) == 0
    assert "0 failed" in capsys.readouterr().out
    rules_file("clean")  # the noise rule is among the findings, so a clean fixture fails
    assert main(["rules", "test", "--manifest", manifest], {}) == 1
    failure = "beside.log: expected not git-prune-noise, got widget-frobnication, git-prune-noise"
    assert failure in capsys.readouterr().out


def test_rules_test_of_a_project_runs_its_own_fixtures_and_builtin_adds_the_rest(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ci-matrix.yml").write_text(
        "rules: [ci/rules.yml]\nbuilds:\n  b:\n    platforms: [linux-x86_64]\n    run: make\n", encoding="utf-8"
    )
    (tmp_path / "ci" / "fixtures").mkdir(parents=True)
    (tmp_path / "ci" / "fixtures" / "real.log").write_text("error: widget frobnication failed\n", encoding="utf-8")
    (tmp_path / "ci" / "rules.yml").write_text(
        "rules:\n  - id: widget-frobnication\n    title: widgets\n    domain: runner\n"
        "    diagnosis:\n      signatures: ['widget frobnication failed']\n"
        "      explanation: e\n      fix: f\n    references: [https://example.org/b]\n"
        "    fixtures:\n      - {file: real.log, expect: match}\n",
        encoding="utf-8",
    )
    manifest = str(tmp_path / "ci-matrix.yml")
    assert main(["rules", "test", "--manifest", manifest], {}) == 0
    out = capsys.readouterr().out
    assert "1 passed, 0 failed" in out and "project's rules only (1 of" in out
    # --builtin: the built-in rules' fixtures too (a few of them here, for time).
    part = [r for r in files.trusted_builtin_rules() if r.diagnosis and not r.diagnosis.refines
            and all(f.expect != "outranked" for f in r.fixtures)][:5]
    monkeypatch.setattr(files, "trusted_builtin_rules", lambda: part)
    assert main(["rules", "test", "--manifest", manifest, "--builtin"], {}) == 0
    out = capsys.readouterr().out
    assert f"{1 + sum(len(r.fixtures) for r in part)} passed, 0 failed" in out and "project's" not in out


def test_a_generic_rule_is_named_with_medium_confidence_and_says_why(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Its line tells the symptom (a legalization failure), not which of the causes it lists.
    log = tmp_path / "compile.log"
    log.write_text("iree-compile model.mlir --iree-hal-target-backends=llvm-cpu\n"
                   "model.mlir:3:8: error: failed to legalize operation 'stablehlo.custom_call' that was explicitly"
                   " marked illegal\n", encoding="utf-8")
    finding = diagnose(capsys, log)["findings"][0]
    assert (finding["rule"], finding["generic"], finding["confidence"]) == ("iree-legalization-failure", True, "medium")
    main(["diagnose", str(log)], {})
    assert "medium confidence: its log signature; a symptom many causes share" in capsys.readouterr().out
    # A specific rule's own line is high confidence.
    specific = diagnose(capsys, FIXTURES / "cuda-out-of-memory" / "match.log")["findings"][0]
    assert (specific["rule"], specific["generic"], specific["confidence"]) == ("cuda-out-of-memory", False, "high")
