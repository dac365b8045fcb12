"""Expanding a manifest into cells: GitHub's include/exclude semantics, deterministic order,
event profiles, ignored rules, stable ids, and a recorded reason for every excluded cell."""

from __future__ import annotations

import pytest

from tests.conftest import EXAMPLE

CORE_KEYS = ("id", "build", "platform")


def extra_values(cell):
    """The cell's values other than build and platform, as GitHub would list them."""
    return {k: v for k, v in cell.values if k not in ("build", "platform")}


# GitHub's documented example ("Expanding or adding matrix configurations"), with the
# platform every ci-matrix cell needs added to the two includes that become new cells.
GITHUB_DOCS_EXAMPLE = """\
    builds:
      fruit:
        platforms: [linux-x86_64]
        axes:
          fruit: [apple, pear]
          animal: [cat, dog]
        include:
          - color: green
          - color: pink
            animal: cat
          - fruit: apple
            shape: circle
          - fruit: banana
            platform: linux-x86_64
          - fruit: banana
            animal: cat
            platform: linux-x86_64
        run: echo {fruit} {animal} {color}
    """


def test_include_follows_githubs_documented_example(plan_of):
    cells = plan_of(GITHUB_DOCS_EXAMPLE).cells
    assert [extra_values(c) for c in cells] == [
        {"fruit": "apple", "animal": "cat", "color": "pink", "shape": "circle"},
        {"fruit": "apple", "animal": "dog", "color": "green", "shape": "circle"},
        {"fruit": "pear", "animal": "cat", "color": "pink"},
        {"fruit": "pear", "animal": "dog", "color": "green"},
        {"fruit": "banana"},
        {"fruit": "banana", "animal": "cat"},
    ]
    assert all(c.excluded is None for c in cells)
    assert cells[0].commands == (("echo", "apple", "cat", "pink"),)


def test_exclude_matches_partially_and_says_which_entry(plan_of):
    cells = plan_of(
        """\
        builds:
          b:
            platforms: [linux-x86_64, linux-arm64]
            axes: {python: ["3.11", "3.12"], numpy: ["1", "2"]}
            exclude:
              - {numpy: "1", python: "3.12"}
              - {platform: linux-arm64, python: "3.11"}
            run: pytest
        """
    ).cells
    excluded = {c.id: c.excluded for c in cells if c.excluded is not None}
    assert excluded == {
        "b-linux-x86_64-python-3.12-numpy-1": "excluded by the manifest (builds.b.exclude[0])",
        "b-linux-arm64-python-3.11-numpy-1": "excluded by the manifest (builds.b.exclude[1])",
        "b-linux-arm64-python-3.11-numpy-2": "excluded by the manifest (builds.b.exclude[1])",
        "b-linux-arm64-python-3.12-numpy-1": "excluded by the manifest (builds.b.exclude[0])",
    }
    assert {c.excluded_by for c in cells if c.excluded} == {"manifest"}


def test_exclude_is_applied_before_include(plan_of):
    cells = plan_of(
        """\
        builds:
          b:
            platforms: [linux-x86_64]
            axes: {python: ["3.11", "3.12"]}
            exclude: [{python: "3.12"}]
            include:
              - {python: "3.12", extra: "yes", platform: linux-x86_64}
            run: pytest
        """
    ).cells
    # The include matches only an excluded combination, so it becomes a new cell of its own.
    assert [(c.id, c.excluded is None, extra_values(c)) for c in cells] == [
        ("b-linux-x86_64-python-3.11", True, {"python": "3.11"}),
        ("b-linux-x86_64-python-3.12", False, {"python": "3.12"}),
        ("b-linux-x86_64-python-3.12-2", True, {"python": "3.12", "extra": "yes"}),
    ]


def test_include_never_overwrites_an_original_value_but_may_overwrite_an_added_one(plan_of):
    cells = plan_of(
        """\
        builds:
          b:
            platforms: [linux-x86_64]
            axes: {python: ["3.11", "3.12"]}
            include:
              - {python: "3.12", label: first}
              - {python: "3.12", label: second}
              - {python: "3.13", platform: linux-x86_64}
            run: pytest
        """
    ).cells
    assert [extra_values(c) for c in cells] == [
        {"python": "3.11"},
        {"python": "3.12", "label": "second"},
        {"python": "3.13"},
    ]


def test_the_first_declared_axis_varies_slowest_in_declared_order(plan_of):
    the_plan = plan_of(
        """\
        builds:
          crate:
            platforms: [linux-arm64, linux-x86_64]
            rust: {toolchains: [stable, beta], profiles: [release, debug]}
            run: cargo build
        """
    )
    assert [c.id for c in the_plan.cells] == [
        "crate-linux-arm64-rust-stable-release",
        "crate-linux-arm64-rust-stable-debug",
        "crate-linux-arm64-rust-beta-release",
        "crate-linux-arm64-rust-beta-debug",
        "crate-linux-x86_64-rust-stable-release",
        "crate-linux-x86_64-rust-stable-debug",
        "crate-linux-x86_64-rust-beta-release",
        "crate-linux-x86_64-rust-beta-debug",
    ]


def test_excluded_cells_keep_their_place_in_the_order(plan_of):
    cells = plan_of(
        """\
        builds:
          b:
            platforms: [linux-x86_64]
            axes: {n: ["1", "2", "3"]}
            exclude: [{n: "2"}]
            run: "true"
        """
    ).cells
    assert [(c.id, c.excluded_by) for c in cells] == [
        ("b-linux-x86_64-n-1", None),
        ("b-linux-x86_64-n-2", "manifest"),
        ("b-linux-x86_64-n-3", None),
    ]


def test_cell_ids_stay_the_same_when_a_value_is_added(plan_of):
    before = plan_of(
        """\
        builds:
          crate:
            platforms: [macos-arm64]
            rust: {toolchains: [nightly-2024-04-01]}
            run: cargo build
        """
    )
    after = plan_of(
        """\
        builds:
          crate:
            platforms: [macos-arm64, linux-x86_64]
            rust: {toolchains: [stable, nightly-2024-04-01], profiles: [debug, release], backends: [llvm, cranelift]}
            run: cargo build
        """
    )
    assert [c.id for c in before.cells] == ["crate-macos-arm64-rust-nightly-2024-04-01-debug"]
    assert {c.id for c in before.cells} < {c.id for c in after.cells}
    assert "crate-linux-x86_64-rust-stable-release-cranelift" in {c.id for c in after.cells}


def test_ids_that_would_collide_are_numbered(plan_of):
    cells = plan_of(
        """\
        builds:
          b:
            platforms: [linux-x86_64]
            axes: {flags: ["-O2 -g", "-O2_-g", "-o2/-g"]}
            run: make
        """
    ).cells
    assert [c.id for c in cells] == [
        "b-linux-x86_64-flags-o2-g",
        "b-linux-x86_64-flags-o2_-g",
        "b-linux-x86_64-flags-o2-g-2",
    ]


def test_the_same_input_gives_the_same_plan(plan_of):
    text = EXAMPLE.read_text(encoding="utf-8").replace("rules: [rules/kernels.yml]", "")
    first, second = plan_of(text), plan_of(text)
    assert [(c.id, c.values, c.env, c.flags, c.commands) for c in first.cells] == [
        (c.id, c.values, c.env, c.flags, c.commands) for c in second.cells
    ]


EVENTS = """\
    events:
      pull_request:
        builds: [crate]
        exclude: [{platform: linux-arm64}]
      push:
        only: [{rust-toolchain: stable}, {build: docs}]
      schedule: {}
    builds:
      crate:
        platforms: [linux-x86_64, linux-arm64]
        rust: {toolchains: [stable, nightly]}
        run: cargo build
      docs:
        platforms: [linux-x86_64]
        run: cargo doc
    """


@pytest.mark.parametrize(
    ("event", "runnable", "reasons"),
    [
        ("", ["crate-linux-x86_64-rust-stable-debug", "crate-linux-x86_64-rust-nightly-debug",
              "crate-linux-arm64-rust-stable-debug", "crate-linux-arm64-rust-nightly-debug", "docs-linux-x86_64"], {}),
        ("schedule", ["crate-linux-x86_64-rust-stable-debug", "crate-linux-x86_64-rust-nightly-debug",
                      "crate-linux-arm64-rust-stable-debug", "crate-linux-arm64-rust-nightly-debug",
                      "docs-linux-x86_64"], {}),
        ("workflow_dispatch", ["crate-linux-x86_64-rust-stable-debug", "crate-linux-x86_64-rust-nightly-debug",
                               "crate-linux-arm64-rust-stable-debug", "crate-linux-arm64-rust-nightly-debug",
                               "docs-linux-x86_64"], {}),
        (
            "pull_request",
            ["crate-linux-x86_64-rust-stable-debug", "crate-linux-x86_64-rust-nightly-debug"],
            {
                "crate-linux-arm64-rust-stable-debug": "excluded on pull_request (events.pull_request.exclude)",
                "crate-linux-arm64-rust-nightly-debug": "excluded on pull_request (events.pull_request.exclude)",
                "docs-linux-x86_64": "build 'docs' does not run on pull_request (events.pull_request.builds)",
            },
        ),
        (
            "push",
            ["crate-linux-x86_64-rust-stable-debug", "crate-linux-arm64-rust-stable-debug", "docs-linux-x86_64"],
            {
                "crate-linux-x86_64-rust-nightly-debug": "not selected for push (events.push.only)",
                "crate-linux-arm64-rust-nightly-debug": "not selected for push (events.push.only)",
            },
        ),
    ],
)
def test_event_profiles_select_cells_and_say_why_the_others_do_not_run(plan_of, event, runnable, reasons):
    the_plan = plan_of(EVENTS, event=event)
    assert [c.id for c in the_plan.runnable] == runnable
    assert {c.id: c.excluded for c in the_plan.cells if c.excluded} == reasons
    assert {c.excluded_by for c in the_plan.cells if c.excluded} <= {"event"}
    assert len(the_plan.cells) == 5  # dropped cells stay in the plan, with their reason


IREE = """\
    {ignore}
    builds:
      model:
        platforms: [linux-x86_64]
        iree: {{targets: [llvm-cpu]}}
        run: [[iree-compile, "{{iree-flags}}", m.mlir]]
    """


def test_ignore_rules_turns_a_built_in_rule_off(plan_of):
    applied = plan_of(IREE.format(ignore="")).cells[0]
    ignored = plan_of(IREE.format(ignore="ignore-rules: [iree-llvm-cpu-backend-flag]")).cells[0]
    assert applied.rule_ids == ("iree-llvm-cpu-backend-flag",)
    assert applied.commands == (
        ("iree-compile", "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
         "m.mlir"),
    )
    assert ignored.rule_ids == ()
    assert ignored.commands == (("iree-compile", "--iree-hal-target-device=local", "m.mlir"),)


def test_a_workaround_that_repeats_a_cell_excludes_the_copy_and_names_the_original(plan_of):
    cells = {
        c.id: c
        for c in plan_of(
            """\
            builds:
              gemm:
                platforms: [linux-x86_64]
                uses: [cutlass]
                cuda: {versions: ["11.6", "11.8"], archs: [sm_80]}
                run: nvcc gemm.cu
            """
        ).cells
    }
    copy = cells["gemm-linux-x86_64-cuda-11.6-sm_80"]
    assert copy.excluded == "after its workarounds it is the same build as gemm-linux-x86_64-cuda-11.8-sm_80"
    assert copy.excluded_by == "duplicate"
    assert copy.rule_ids == ("cutlass-cuda-older-than-11-8",)  # what changed it is still recorded
    assert copy.value("cuda-version") == "11.8"
    assert dict(copy.requested)["cuda-version"] == "11.6"
    assert cells["gemm-linux-x86_64-cuda-11.8-sm_80"].excluded is None


def test_two_cells_worked_around_into_one_keep_the_first(plan_of):
    cells = plan_of(
        """\
        builds:
          gemm:
            platforms: [linux-x86_64]
            uses: [cutlass]
            cuda: {versions: ["11.6", "11.7"], archs: [sm_80]}
            run: nvcc gemm.cu
        """
    ).cells
    assert [(c.id, c.value("cuda-version"), c.excluded) for c in cells] == [
        ("gemm-linux-x86_64-cuda-11.6-sm_80", "11.8", None),
        ("gemm-linux-x86_64-cuda-11.7-sm_80", "11.8",
         "after its workarounds it is the same build as gemm-linux-x86_64-cuda-11.6-sm_80"),
    ]


def test_every_excluded_cell_of_the_example_records_why(plan_of):
    the_plan = plan_of(
        EXAMPLE.read_text(encoding="utf-8"),
        event="pull_request",
        files={"rules/kernels.yml": (EXAMPLE.parent / "rules" / "kernels.yml").read_text(encoding="utf-8")},
    )
    excluded = [c for c in the_plan.cells if c.excluded is not None]
    assert {c.excluded_by for c in excluded} >= {"event", "duplicate", "cuda-not-on-macos", "iree-metal-only-on-macos"}
    for cell in excluded:
        assert cell.excluded.strip(), cell.id
        if cell.excluded_by not in ("manifest", "event", "duplicate"):
            assert cell.changes[-1].kind == "exclusion"
            assert cell.changes[-1].rule == cell.excluded_by
            assert cell.changes[-1].references, cell.id
    for cell in the_plan.runnable:
        assert all(change.kind == "workaround" and change.detail for change in cell.changes)
