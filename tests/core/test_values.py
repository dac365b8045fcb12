"""Typed axis values: Rust toolchains and CUDA archs, in the spellings projects use."""

from __future__ import annotations

import datetime as dt

import pytest

from ci_matrix.core.values import Arch, arch_order, parse_arch, parse_toolchain


@pytest.mark.parametrize(
    ("text", "channel", "date", "version"),
    [
        ("stable", "stable", None, None),
        ("beta", "beta", None, None),
        ("nightly", "nightly", None, None),
        ("nightly-2024-04-01", "nightly", dt.date(2024, 4, 1), None),
        ("nightly-2024-02-29", "nightly", dt.date(2024, 2, 29), None),  # a leap day exists
        ("beta-2024-05-01", "beta", dt.date(2024, 5, 1), None),
        ("1.78", "version", None, (1, 78)),
        ("1.78.0", "version", None, (1, 78, 0)),
        ("1.80", "version", None, (1, 80)),
    ],
)
def test_toolchains_are_parsed_in_rustup_terms(text, channel, date, version):
    toolchain = parse_toolchain(text)
    assert (toolchain.name, toolchain.channel, toolchain.date, toolchain.version) == (text, channel, date, version)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "nightly-2024-02-30",
            "malformed toolchain 'nightly-2024-02-30': '2024-02-30' is not a real date (day is out of range for month)",
        ),
        ("nightly-2023-02-29", "malformed toolchain 'nightly-2023-02-29': '2023-02-29' is not a real date "
                               "(day is out of range for month)"),
        ("nightly-24-01-01", "malformed toolchain 'nightly-24-01-01': expected a date YYYY-MM-DD, got '24-01-01'"),
        ("2.0", "unknown Rust version '2.0'; Rust releases are numbered 1.xx(.y)"),
        ("1.78.0.1", "expected a version like 11.8 or 1.78.0, got '1.78.0.1'"),
        ("stabel", "unknown toolchain 'stabel'; expected stable, beta, nightly, nightly-YYYY-MM-DD, "
                   "beta-YYYY-MM-DD or 1.xx(.y)"),
        ("", "unknown toolchain ''; expected stable, beta, nightly, nightly-YYYY-MM-DD, beta-YYYY-MM-DD or 1.xx(.y)"),
    ],
)
def test_malformed_toolchains_are_rejected_saying_why(text, message):
    with pytest.raises(ValueError) as caught:
        parse_toolchain(text)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("text", "normalised", "gencode"),
    [
        ("sm_80", "sm_80", "-gencode=arch=compute_80,code=[sm_80]"),
        ("SM_80", "sm_80", "-gencode=arch=compute_80,code=[sm_80]"),
        ("8.0", "sm_80", "-gencode=arch=compute_80,code=[sm_80]"),
        (8.0, "sm_80", "-gencode=arch=compute_80,code=[sm_80]"),
        ("80", "sm_80", "-gencode=arch=compute_80,code=[sm_80]"),
        (80, "sm_80", "-gencode=arch=compute_80,code=[sm_80]"),
        ("compute_80", "compute_80", "-gencode=arch=compute_80,code=[compute_80]"),
        ("8.0+PTX", "sm_80+ptx", "-gencode=arch=compute_80,code=[sm_80,compute_80]"),
        ("sm_80+ptx", "sm_80+ptx", "-gencode=arch=compute_80,code=[sm_80,compute_80]"),
        ("sm_90a", "sm_90a", "-gencode=arch=compute_90a,code=[sm_90a]"),
        ("9.0a", "sm_90a", "-gencode=arch=compute_90a,code=[sm_90a]"),
        ("10.0", "sm_100", "-gencode=arch=compute_100,code=[sm_100]"),
        ("sm_100f", "sm_100f", "-gencode=arch=compute_100f,code=[sm_100f]"),
        (" 7.5 ", "sm_75", "-gencode=arch=compute_75,code=[sm_75]"),
    ],
)
def test_cuda_arch_spellings_normalise_to_one_name_and_its_nvcc_flags(text, normalised, gencode):
    arch = parse_arch(text)
    assert str(arch) == normalised
    assert arch.gencode() == (gencode,)
    assert str(parse_arch(str(arch))) == normalised  # the normal form reads back as itself


@pytest.mark.parametrize("text", ["sm80", "sm_8", "8", "8.0.1", "gfx90a", "compute_80+PTX", "sm_80b", "ampere", ""])
def test_unknown_arch_spellings_are_rejected(text):
    with pytest.raises(ValueError) as caught:
        parse_arch(text)
    assert str(caught.value) == f"unknown CUDA arch {text.strip()!r}; expected sm_80, 8.0, 80, compute_80 or 8.0+PTX"


def test_archs_compare_by_compute_capability_then_variant():
    ordered = ["sm_75", "compute_80", "sm_80+ptx", "sm_86", "sm_90", "sm_90a", "sm_100"]
    assert sorted(ordered, key=arch_order) == ordered
    assert arch_order("8.0") == arch_order("compute_80") == arch_order("sm_80+ptx") == (80, "")
    assert arch_order("sm_90") < arch_order("sm_90a")


def test_an_arch_is_a_value_not_a_spelling():
    assert parse_arch("8.0") == parse_arch("80") == parse_arch("sm_80") == Arch(80)
    assert parse_arch("compute_80") == Arch(80, sass=False, ptx=True)
