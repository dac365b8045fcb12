"""Tests that need a real tool skip where it is missing, except in CI: `.ci/test` sets
CI_MATRIX_REQUIRE_TOOLS=1, and there a missing tool fails the run instead of hiding it."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def missing_tool(reason: str) -> NoReturn:
    """Skip (locally) or fail (in CI) a test whose tool is not installed."""
    if os.environ.get("CI_MATRIX_REQUIRE_TOOLS") == "1":
        pytest.fail(f"required tool missing in CI: {reason}")
    pytest.skip(reason)
