"""The package's own data files (catalog, toolkit catalogue) are valid against their schemas."""

from __future__ import annotations

from importlib import resources

import jsonschema
import pytest

from ci_matrix.core.document import fast_load
from ci_matrix.edges import files


@pytest.mark.parametrize("name", ["catalog", "toolkits"])
def test_package_data_matches_its_schema(name: str) -> None:
    data = fast_load((resources.files("ci_matrix") / "data" / f"{name}.yaml").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(files.schema(name)).validate(data)


def test_every_cuda_release_in_the_catalogue_is_a_known_toolkit() -> None:
    known = set(files.catalog().cuda_versions)
    assert set(files.toolkits().cuda) <= known
