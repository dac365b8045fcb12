"""GitHub's official OpenAPI description, trimmed to the endpoints the loopback server serves.

Building an openapi-core validator over the whole 13 MB description takes about 20 s (most of
it validating the description itself); over the dozen paths we serve, with the components they
reference, it takes well under a second. The trimmed description is built once per process.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openapi_core import OpenAPI

ENV_VAR = "CI_MATRIX_OPENAPI_JSON"
NPM_PACKAGE_FILE = Path("@octokit/openapi/generated/api.github.com.json")

# Every path the server answers, spelled exactly as in the description.
SERVED_PATHS = (
    "/user",
    "/repos/{owner}/{repo}",
    "/repos/{owner}/{repo}/pulls/{pull_number}",
    "/repos/{owner}/{repo}/issues/{issue_number}",
    "/repos/{owner}/{repo}/issues/{issue_number}/comments",
    "/repos/{owner}/{repo}/issues/comments/{comment_id}",
    "/repos/{owner}/{repo}/check-runs",
    "/repos/{owner}/{repo}/check-runs/{check_run_id}",
    "/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations",
)


class SpecNotFound(LookupError):
    """The OpenAPI description is not installed; tests that need it are skipped."""


@dataclass(frozen=True)
class ApiDescription:
    """The trimmed description, its validator and the response examples it ships."""

    source: Path
    document: Mapping[str, Any]
    openapi: OpenAPI

    def example(self, name: str) -> Any:
        """A deep copy of `components/examples/<name>/value` (GitHub's own sample payloads)."""
        examples = self.document["components"]["examples"]
        return json.loads(json.dumps(examples[name]["value"]))


def locate(environ: Mapping[str, str]) -> Path:
    """Find api.github.com.json: `$CI_MATRIX_OPENAPI_JSON`, else under `npm root -g`."""
    from_env = environ.get(ENV_VAR)
    local = environ.get("CI_MATRIX_NODE_MODULES")  # set by .ci/test, which npm-installs it there
    if from_env:
        candidate = Path(from_env)
    elif local and (Path(local) / NPM_PACKAGE_FILE).is_file():
        candidate = Path(local) / NPM_PACKAGE_FILE
    else:
        candidate = _npm_root() / NPM_PACKAGE_FILE
    if not candidate.is_file():
        raise SpecNotFound(f"{candidate} not found (npm install -g @octokit/openapi, or set {ENV_VAR})")
    return candidate


def _npm_root() -> Path:
    npm = shutil.which("npm")
    if npm is None:
        raise SpecNotFound(f"npm is not on PATH and {ENV_VAR} is not set")
    result = subprocess.run([npm, "root", "-g"], capture_output=True, text=True, check=False, timeout=60)
    if result.returncode != 0:
        raise SpecNotFound(f"`npm root -g` failed: {result.stderr.strip()}")
    return Path(result.stdout.strip())


@functools.cache
def load(source: Path) -> ApiDescription:
    """Read, trim and compile the description at `source` (cached: once per process)."""
    with source.open(encoding="utf-8") as handle:
        full = json.load(handle)
    document = trim(full, SERVED_PATHS)
    return ApiDescription(source=source, document=document, openapi=OpenAPI.from_dict(document))


def load_from_environment() -> ApiDescription:
    """`load(locate(os.environ))`: the one place the test server reads the environment."""
    return load(locate(os.environ))


def trim(full: Mapping[str, Any], paths: tuple[str, ...]) -> dict[str, Any]:
    """Keep `paths` and every component they reference, transitively; drop webhooks."""
    document = {key: value for key, value in full.items() if key not in ("paths", "components", "webhooks")}
    document["paths"] = {path: full["paths"][path] for path in paths}
    components: dict[str, dict[str, Any]] = {}
    pending = set(_references(document["paths"]))
    seen: set[str] = set()
    while pending:
        reference = pending.pop()
        seen.add(reference)
        _, _, kind, name = reference.split("/", 3)
        node = full["components"][kind][name]
        components.setdefault(kind, {})[name] = node
        pending |= set(_references(node)) - seen
    # The examples that fill response bodies are referenced from responses, so they are kept.
    document["components"] = components
    return document


def _references(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        reference = node.get("$ref")
        if isinstance(reference, str):
            yield reference
        for value in node.values():
            yield from _references(value)
    elif isinstance(node, list):
        for value in node:
            yield from _references(value)
