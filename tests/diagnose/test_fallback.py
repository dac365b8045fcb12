"""Fallback signatures: a line that is often printed where its failure is not the cause (a
warning the program goes on after) names its rule only where nothing else explains the log.

Driven through `ci-matrix diagnose --manifest` with a project rule file, as a project would
write one, and checked against schemas/diagnosis.schema.json, which the report reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.test_run import ci_matrix

ROOT = Path(__file__).resolve().parents[2]

RULES = """\
rules:
  - id: plugin-not-loaded
    title: "The plugin's compiled extension did not load"
    domain: cuda
    diagnosis:
      signatures:
        - 'plugin ops are unavailable: no compiled extension'
      fallback-signatures:
        - 'WARNING\\[PLUGIN\\]: cannot load the compiled extension'
      explanation: The compiled extension was built for another torch.
      fix: Reinstall the plugin for the installed torch.
    references: [https://example.invalid/plugin/1]
"""

WARNING = "WARNING[PLUGIN]: cannot load the compiled extension (built for torch 2.2.0+cu121, you have 2.2.0+cpu)\n"


def project(tmp_path: Path, log: str) -> list[str]:
    """Write the rule file, a manifest that lists it and the log; the `diagnose` arguments for them."""
    (tmp_path / "rules.yml").write_text(RULES, encoding="utf-8")
    (tmp_path / "ci-matrix.yml").write_text(
        "builds:\n  app:\n    platforms: [linux-x86_64]\n    run: python app.py\nrules: [rules.yml]\n", encoding="utf-8"
    )
    (tmp_path / "build.log").write_text(log, encoding="utf-8")
    return ["diagnose", str(tmp_path / "build.log"), "--manifest", str(tmp_path / "ci-matrix.yml")]


def diagnose(tmp_path: Path, log: str) -> dict:
    done = ci_matrix(*project(tmp_path, log), "--format", "json", timeout=120)
    assert done.returncode in (0, 1), done.stderr
    record = json.loads(done.stdout)
    schema = json.loads((ROOT / "ci_matrix" / "schemas" / "diagnosis.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(record, schema)
    return record


def test_the_warning_alone_names_its_rule_with_low_confidence(tmp_path: Path) -> None:
    found = diagnose(tmp_path, "loading model\n" + WARNING + "Traceback (most recent call last):\nKilled\n")["findings"]
    assert [(f["rule"], f["reached-by"], f["confidence"]) for f in found] == [("plugin-not-loaded", "fallback", "low")]


def test_the_warning_beside_a_known_failure_is_left_out(tmp_path: Path) -> None:
    log = WARNING + "OSError: [Errno 28] No space left on device\n"
    rules = [f["rule"] for f in diagnose(tmp_path, log)["findings"]]
    assert rules and "plugin-not-loaded" not in rules


@pytest.mark.parametrize("order", ["warning first", "warning last"])
def test_the_rules_own_signature_outranks_its_fallback(tmp_path: Path, order: str) -> None:
    failure = "NotImplementedError: plugin ops are unavailable: no compiled extension\n"
    log = WARNING + failure if order == "warning first" else failure + WARNING
    found = diagnose(tmp_path, log)["findings"]
    assert [(f["rule"], f["reached-by"]) for f in found] == [("plugin-not-loaded", "signature")]


def test_the_text_output_says_the_line_is_often_noise(tmp_path: Path) -> None:
    done = ci_matrix(*project(tmp_path, WARNING), timeout=120)
    assert "low confidence: a line that is often only noise" in done.stdout


REFINING = """\
  - id: plugin-not-loaded-on-macos
    title: "The plugin has no compiled extension for macOS"
    domain: cuda
    diagnosis:
      scope: {os: macos}
      refines: [plugin-not-loaded]
      explanation: The plugin ships no macOS build of its extension.
      fix: Use the plugin on Linux.
    references: [https://example.invalid/plugin/2]
"""


def refining_project(tmp_path: Path, log: str) -> list[str]:
    args = project(tmp_path, log)
    rules = tmp_path / "rules.yml"
    text = rules.read_text(encoding="utf-8").replace("      signatures:\n", "      generic: true\n      signatures:\n")
    rules.write_text(text + REFINING, encoding="utf-8")
    return args


MACOS = "  File \"/Users/ana/venv/lib/python3.11/site-packages/plugin/__init__.py\", line 3\n"


def test_a_fallback_line_refined_by_the_log_stays_a_fallback(tmp_path: Path) -> None:
    done = ci_matrix(*refining_project(tmp_path, MACOS + WARNING), "--format", "json", timeout=120)
    found = json.loads(done.stdout)["findings"]
    assert [(f["rule"], f["reached-by"], f["confidence"]) for f in found] == [
        ("plugin-not-loaded-on-macos", "fallback", "low")
    ]


def test_a_fallback_line_refined_by_the_log_is_left_out_beside_a_known_failure(tmp_path: Path) -> None:
    log = MACOS + WARNING + "OSError: [Errno 28] No space left on device\n"
    done = ci_matrix(*refining_project(tmp_path, log), "--format", "json", timeout=120)
    rules = [f["rule"] for f in json.loads(done.stdout)["findings"]]
    assert rules and not {"plugin-not-loaded", "plugin-not-loaded-on-macos"} & set(rules)
