"""The catalog: which platforms, toolkits, archs and targets exist (data, not code)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ci_matrix.core.facts import Platform


@dataclass(frozen=True)
class Catalog:
    """What exists; a manifest value outside it is an error, never a guess."""

    platforms: Mapping[str, Platform]
    cuda_versions: tuple[str, ...]
    cuda_archs: frozenset[int]
    iree_devices: Mapping[str, str]  # IREE target -> --iree-hal-target-device value
    rust_backends: tuple[str, ...]
    rust_targets: frozenset[str]


def platform_from(name: str, spec: Mapping[str, Any]) -> Platform:
    """A Platform from its catalog or manifest entry."""
    runs_on = spec["runs-on"]
    labels = (runs_on,) if isinstance(runs_on, str) else tuple(str(x) for x in runs_on)
    return Platform(
        name=name,
        os=str(spec["os"]),
        cpu=str(spec["cpu"]),
        gpu=str(spec["gpu"]),
        runs_on=labels,
        rust_target=str(spec.get("rust-target", "")),
    )


def catalog_from(data: Mapping[str, Any]) -> Catalog:
    """The Catalog of a schema-valid catalog document."""
    return Catalog(
        platforms={name: platform_from(name, spec) for name, spec in data["platforms"].items()},
        cuda_versions=tuple(str(v) for v in data["cuda"]["versions"]),
        cuda_archs=frozenset(int(a) for a in data["cuda"]["archs"]),
        iree_devices={str(k): str(v["device"]) for k, v in data["iree"]["targets"].items()},
        rust_backends=tuple(str(b) for b in data["rust"]["backends"]),
        rust_targets=frozenset(str(t) for t in data["rust"]["targets"]),
    )
