"""pytest fixtures for the loopback GitHub API.

Register with `pytest_plugins = ["tests.github_api.conftest_plugin"]` in tests/conftest.py.
`github_api` starts a fresh server per test and fails the test at teardown if the server saw any
request that GitHub's OpenAPI description (or one of GitHub's documented limits) refuses.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.github_api import spec
from tests.github_api.server import ApiServer
from tests.tooling import missing_tool


@pytest.fixture(scope="session")
def github_api_description() -> spec.ApiDescription:
    """GitHub's description, trimmed and compiled once per session; skips when not installed."""
    try:
        return spec.load_from_environment()
    except spec.SpecNotFound as exc:
        missing_tool(f"GitHub's OpenAPI description is not available: {exc}")


@pytest.fixture
def github_api(github_api_description: spec.ApiDescription) -> Iterator[ApiServer]:
    """A running loopback API; its `base_url` is what GITHUB_API_URL would be."""
    server = ApiServer(github_api_description).start()
    try:
        yield server
    finally:
        server.stop()
    if server.violations:
        listed = "\n  ".join(server.violations)
        pytest.fail(f"the loopback GitHub API refused {len(server.violations)} request(s):\n  {listed}")
