"""Typed axis values in the field's own terms: Rust toolchains, CUDA versions and archs.

Each parser takes the text a user wrote and returns a normalised value, or raises
`ValueError` with a message that says what was expected.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})\Z")
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?\Z")
_TOOLCHAIN_EXPECTED = "stable, beta, nightly, nightly-YYYY-MM-DD, beta-YYYY-MM-DD or 1.xx(.y)"


def parse_date(text: str) -> dt.date:
    """Parse `YYYY-MM-DD`, rejecting impossible dates such as 2024-02-30."""
    m = _DATE.match(text)
    if not m:
        raise ValueError(f"expected a date YYYY-MM-DD, got {text!r}")
    try:
        return dt.date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a real date ({exc})") from None


def parse_version(text: str) -> tuple[int, ...]:
    """Parse `MAJOR.MINOR` or `MAJOR.MINOR.PATCH` into a comparable tuple."""
    m = _VERSION.match(text)
    if not m:
        raise ValueError(f"expected a version like 11.8 or 1.78.0, got {text!r}")
    return tuple(int(g) for g in m.groups() if g is not None)


@dataclass(frozen=True)
class Toolchain:
    """A rustup toolchain name with the facts rules compare."""

    name: str
    channel: str  # stable | beta | nightly | version
    date: dt.date | None
    version: tuple[int, ...] | None


def parse_toolchain(text: str) -> Toolchain:
    """Parse a rustup toolchain name: a channel, a dated channel or a numbered release."""
    if text in ("stable", "beta", "nightly"):
        return Toolchain(text, text, None, None)
    channel, _, rest = text.partition("-")
    if channel in ("nightly", "beta") and rest:
        try:
            return Toolchain(text, channel, parse_date(rest), None)
        except ValueError as exc:
            raise ValueError(f"malformed toolchain {text!r}: {exc}") from None
    if text[:1].isdigit():
        version = parse_version(text)
        if version[0] != 1:
            raise ValueError(f"unknown Rust version {text!r}; Rust releases are numbered 1.xx(.y)")
        return Toolchain(text, "version", None, version)
    raise ValueError(f"unknown toolchain {text!r}; expected {_TOOLCHAIN_EXPECTED}")


@dataclass(frozen=True, order=True)
class Arch:
    """A CUDA target architecture.

    `capability` is the compute capability times ten (sm_80 -> 80); `variant` is the
    arch-specific suffix (`a`, `f`); `sass` says whether machine code is built, `ptx`
    whether PTX is embedded for JIT on later GPUs.
    """

    capability: int
    variant: str = ""
    sass: bool = True
    ptx: bool = False

    def __str__(self) -> str:
        base = f"sm_{self.capability}{self.variant}"
        if not self.sass:
            return f"compute_{self.capability}{self.variant}"
        return base + ("+ptx" if self.ptx else "")

    def gencode(self) -> tuple[str, ...]:
        """nvcc `-gencode` arguments that build this arch."""
        cc = f"{self.capability}{self.variant}"
        codes = ([f"sm_{cc}"] if self.sass else []) + ([f"compute_{cc}"] if self.ptx else [])
        return (f"-gencode=arch=compute_{cc},code=[{','.join(codes)}]",)


_ARCH_FORMS = (
    (re.compile(r"sm_(\d{2,3})([af]?)(\+ptx)?\Z", re.I), True),
    (re.compile(r"compute_(\d{2,3})([af]?)\Z", re.I), False),
)
_ARCH_DOTTED = re.compile(r"(\d{1,2})\.(\d)([af]?)(\+ptx)?\Z", re.I)
_ARCH_EXPECTED = "sm_80, 8.0, 80, compute_80 or 8.0+PTX"


def parse_arch(text: str | int | float) -> Arch:
    """Normalise the spellings projects use for a CUDA arch: sm_80, 8.0, 80, compute_80, 8.0+PTX."""
    raw = str(text).strip()
    for pattern, sass in _ARCH_FORMS:
        m = pattern.match(raw)
        if m:
            ptx = (not sass) or bool(m.lastindex and m.lastindex >= 3 and m[3])
            return Arch(int(m[1]), m[2].lower(), sass, ptx)
    m = _ARCH_DOTTED.match(raw)
    if m:
        return Arch(int(m[1]) * 10 + int(m[2]), m[3].lower(), True, bool(m[4]))
    if raw.isdigit() and len(raw) in (2, 3):
        return Arch(int(raw))
    raise ValueError(f"unknown CUDA arch {raw!r}; expected {_ARCH_EXPECTED}")


def arch_order(text: str) -> tuple[int, str]:
    """An arch as rules compare it: by compute capability, then its variant (sm_90 < sm_90a).

    Whether SASS or PTX is built does not change which GPU an arch is for.
    """
    arch = parse_arch(text)
    return arch.capability, arch.variant


def runs_on(arch: Arch, capability: int) -> bool:
    """Whether code built for `arch` can run on a GPU of this compute capability (x10).

    SASS runs on the same major version at an equal or later minor; arch-specific (`a`)
    SASS only on exactly its GPU; embedded PTX is compiled by the driver for any later GPU.
    """
    if arch.ptx and capability >= arch.capability:
        return True
    if not arch.sass:
        return False
    if arch.variant == "a":
        return capability == arch.capability
    same_major = capability // 10 == arch.capability // 10
    return same_major and capability >= arch.capability


_TRIPLE_CPU = {"aarch64": "arm64", "arm64": "arm64", "arm64e": "arm64", "x86_64": "x86_64", "amd64": "x86_64"}
_TRIPLE_OS = (("apple-darwin", "macos"), ("linux", "linux"), ("windows", "windows"))


def triple_platform(triple: str) -> tuple[str, str] | None:
    """The (os, cpu) of a target triple such as `aarch64-apple-darwin`, in the catalog's
    terms; None for a triple that names no platform ci-matrix knows (`aarch64-fuchsia`)."""
    cpu = _TRIPLE_CPU.get(triple.partition("-")[0])
    os_name = next((name for marker, name in _TRIPLE_OS if marker in triple), None)
    if cpu is None or os_name is None:
        return None
    return os_name, cpu
