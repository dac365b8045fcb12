"""Cell facts: the names that rules, include/exclude and event profiles speak about.

A cell's values are text (what the user wrote, normalised). Its facts add what can be
derived from them (the platform's os, a nightly's date) and are typed, so that rules
compare dates as dates, versions as versions and archs by compute capability.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from ci_matrix.core.values import arch_order, parse_date, parse_toolchain, parse_version

#: Axis values a cell carries, in the order that makes cell ids and the cross product.
AXES = (
    "build",
    "platform",
    "rust-toolchain",
    "rust-profile",
    "rust-backend",
    "rust-target",
    "rust-features",
    "cuda-version",
    "cuda-arch",
    "iree-target",
    "iree-version",
)
#: Facts a build states about itself: the libraries it uses, whether it runs GPU code.
BUILD_FACTS = ("uses", "needs-gpu")
#: Facts derived from the axis values.
DERIVED = ("os", "cpu", "gpu", "rust-channel", "rust-date", "rust-version")
#: Facts only a build log shows, read by the knowledge base's evidence extractors: the
#: compiler's host triple, a nightly's commit date, whether rustc reported an error of its
#: own, the GPU the program ran on and its runtime (cuda, hip), the flags of the failing
#: iree-compile command, whether the package index could be reached at all.
LOG_FACTS = (
    "rust-host",
    "rust-commit-date",
    "rust-error",
    "gpu-capability",
    "gpu-runtime",
    "iree-compile-flags",
    "mlir-tool",  # an MLIR compiler other than iree-compile that reported the error
    "package-index",  # "unreachable": pip gave up on the index, so "from versions: none" says nothing
    "cargo-min-version",  # the oldest cargo that prints a message the log holds
    "wsl",  # wsl1 | wsl2 | wsl (version not shown): Linux under Windows, whose GPU is the host's
)
#: Facts that hold a set of values; a condition's value asks whether the set contains it.
SET_FACTS = frozenset(("uses", "iree-compile-flags"))


def parse_release(text: str) -> tuple[int, ...]:
    """A version padded to three parts: 1.78 and 1.78.0 compare equal."""
    version = parse_version(text)
    return version + (0,) * (3 - len(version))


_TYPED: dict[str, Callable[[str], Any]] = {
    "rust-date": parse_date,
    "rust-version": parse_release,
    "cuda-version": parse_release,
    "iree-version": parse_release,
    "cuda-arch": arch_order,
    "rust-commit-date": parse_date,
    "cargo-min-version": parse_release,
    "gpu-capability": arch_order,
}


def known_facts(extra_axes: tuple[str, ...] = ()) -> frozenset[str]:
    """Every fact name a condition may use, given a project's extra axes."""
    return frozenset(AXES + BUILD_FACTS + DERIVED + LOG_FACTS + extra_axes)


def is_ordered(fact: str) -> bool:
    """Whether a fact can be compared with `<` and `>`."""
    return fact in _TYPED


@cache
def typed(fact: str, text: str) -> Any:
    """The comparable value of a fact written as text; raises ValueError when malformed."""
    parse = _TYPED.get(fact)
    return parse(text) if parse else text


@dataclass(frozen=True)
class Platform:
    """A platform: the facts it gives a cell and the runner labels that run it."""

    name: str
    os: str
    cpu: str
    gpu: str
    runs_on: tuple[str, ...]
    rust_target: str


def derive(values: Mapping[str, str], platforms: Mapping[str, Platform]) -> dict[str, Any]:
    """Typed facts of a cell: its values plus the facts derived from them."""
    facts: dict[str, Any] = {k: typed(k, v) for k, v in values.items() if k not in _TYPED or v}
    platform = platforms.get(values.get("platform", ""))
    if platform is not None:
        facts.update(os=platform.os, cpu=platform.cpu, gpu=platform.gpu)
    if "uses" in facts:
        facts["uses"] = frozenset(values["uses"].split(","))
    toolchain = values.get("rust-toolchain")
    if toolchain:
        facts.update(_toolchain_facts(toolchain))
    return facts


@cache
def _toolchain_facts(name: str) -> dict[str, Any]:
    toolchain = parse_toolchain(name)
    facts: dict[str, Any] = {"rust-channel": toolchain.channel}
    if toolchain.date is not None:
        facts["rust-date"] = toolchain.date
    if toolchain.version is not None:
        facts["rust-version"] = toolchain.version + (0,) * (3 - len(toolchain.version))
    return facts
