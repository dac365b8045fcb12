"""The cheap paths of cleaning (CRs cut one by one, only the lines with invalid UTF-8
repaired) give exactly what the plain whole-piece transformations give."""

from __future__ import annotations

import random

import pytest

from ci_matrix.diagnose import cleaning


def plain_line_ends(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def plain_utf8(data: bytes) -> bytes:
    return data.decode("utf-8", "replace").encode("utf-8")


ALPHABET = [b"a", b"\n", b"\r", b"\r\n", b"\xff", b"\xc3", b"\xa9", b"\xc3\xa9", b"\xe2\x82", b"\xe2\x82\xac",
            b"\xf0\x9f\x98", b"\xf0\x9f\x98\x80", b"\xed\xa0\x80", b"\x80\x80\x80\x80", b" "]  # fmt: skip


def noise(rng: random.Random, size: int) -> bytes:
    return b"".join(rng.choice(ALPHABET) for _ in range(size))


@pytest.mark.parametrize("seed", range(200))
def test_line_ends_and_utf8_repair_match_the_plain_transformations(seed: int) -> None:
    data = noise(random.Random(seed), 1 + seed * 3)
    assert cleaning._line_ends(data) == plain_line_ends(data)
    assert cleaning._valid_utf8(data) == plain_utf8(data)


@pytest.mark.parametrize("seed", range(5))
def test_pieces_larger_than_a_window_with_characters_across_its_edges(seed: int) -> None:
    rng = random.Random(seed)
    text = "é€😀a\n".encode() * (cleaning._UTF8_WINDOW // 3)  # characters straddle each window edge
    data = bytearray(text)
    for _ in range(40):
        data[rng.randrange(len(data))] = rng.choice(b"\xff\x80\xc3\xe2\n")
    assert cleaning._valid_utf8(bytes(data)) == plain_utf8(bytes(data))


def test_many_crs_and_many_bad_lines_take_the_whole_piece_path() -> None:
    data = b"x\xff\r\n" * (cleaning._CR_ONE_BY_ONE_MAX + 10)
    assert cleaning._line_ends(data) == plain_line_ends(data)
    assert cleaning._valid_utf8(data) == plain_utf8(data)


def test_valid_utf8_is_returned_unchanged() -> None:
    data = "café ☕ naïve\n".encode() * 100
    assert cleaning._valid_utf8(data) is data


@pytest.mark.parametrize("seed", range(100))
def test_utf8_repair_before_line_ends_gives_the_same_text(seed: int) -> None:
    """clean() repairs UTF-8 before it turns CRs into line ends (one repair per line of
    noise, not one per CR in it): a CR cuts a sequence exactly as a newline does."""
    data = noise(random.Random(seed), 1 + seed * 5)
    expected = plain_utf8(plain_line_ends(data))
    assert cleaning._line_ends(cleaning._valid_utf8(data)) == expected
    assert cleaning.clean(data) == expected
