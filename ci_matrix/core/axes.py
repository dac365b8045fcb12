"""Checking and normalising one axis value against the catalog."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ci_matrix.core.catalog import Catalog
from ci_matrix.core.document import did_you_mean
from ci_matrix.core.facts import Platform
from ci_matrix.core.values import parse_arch, parse_toolchain, parse_version


def _platform(text: str, catalog: Catalog, platforms: Mapping[str, Platform]) -> str:
    if text not in platforms:
        raise ValueError(f"unknown platform {text!r}{did_you_mean(text, platforms)}")
    return text


def _toolchain(text: str, catalog: Catalog, platforms: Mapping[str, Platform]) -> str:
    return parse_toolchain(text).name


def _cuda_version(text: str, catalog: Catalog, platforms: Mapping[str, Platform]) -> str:
    version = parse_version(text)
    if ".".join(str(p) for p in version[:2]) not in catalog.cuda_versions:
        hint = did_you_mean(text, catalog.cuda_versions)
        raise ValueError(f"unknown CUDA version {text!r}; no such toolkit release{hint}")
    return text


def _release(text: str, catalog: Catalog, platforms: Mapping[str, Platform]) -> str:
    parse_version(text)
    return text


def _cuda_arch(text: str, catalog: Catalog, platforms: Mapping[str, Platform]) -> str:
    arch = parse_arch(text)
    if arch.capability not in catalog.cuda_archs:
        known = [f"sm_{a}" for a in sorted(catalog.cuda_archs)]
        hint = did_you_mean(f"sm_{arch.capability}", known)
        raise ValueError(f"unknown CUDA arch {text!r}: no GPU has compute capability {arch.capability}{hint}")
    return str(arch)


def _choice(noun: str, choices: Callable[[Catalog], object]) -> Callable[..., str]:
    def check(text: str, catalog: Catalog, platforms: Mapping[str, Platform]) -> str:
        known = choices(catalog)
        assert isinstance(known, (tuple, frozenset, dict))
        if text not in known:
            raise ValueError(f"unknown {noun} {text!r}{did_you_mean(text, [str(k) for k in known])}")
        return text

    return check


def _enum(noun: str, options: tuple[str, ...]) -> Callable[..., str]:
    return _choice(noun, lambda _catalog: options)


_CHECKS: dict[str, Callable[[str, Catalog, Mapping[str, Platform]], str]] = {
    "platform": _platform,
    "rust-toolchain": _toolchain,
    "rust-profile": _enum("Rust profile", ("debug", "release")),
    "rust-backend": _choice("codegen backend", lambda c: c.rust_backends),
    "rust-target": _choice("Rust target", lambda c: c.rust_targets),
    "cuda-version": _cuda_version,
    "cuda-arch": _cuda_arch,
    "iree-target": _choice("IREE target", lambda c: c.iree_devices),
    "iree-version": _release,
}


def normalise(axis: str, value: object, catalog: Catalog, platforms: Mapping[str, Platform]) -> str:
    """The normalised text of an axis value; raises ValueError saying what was expected."""
    text = value if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
    check = _CHECKS.get(axis)
    return check(text, catalog, platforms) if check else text
