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


def plain_strip_escapes(data: bytes) -> bytes:
    return cleaning._ANSI.sub(b"", data)


def sprinkled(rng: random.Random, size: int, extras: list[bytes], count: int, clean_head: int = 0) -> bytes:
    """Long ASCII lines with ``count`` of ``extras`` put at random places after ``clean_head``."""
    data = bytearray((b"x" * 3000 + b"\n") * (size // 3001))
    for _ in range(count):
        pos = rng.randrange(clean_head, len(data))
        data[pos:pos] = rng.choice(extras)
    return bytes(data)


EXTRAS = [b"\r", b"\r\n", b"\r\r", b"\x1b[1m", b"\x1b[0m\x1b[32m", b"\x1b", b"\x1b]8;;x\x07", b"\n", b"\n\n"]


@pytest.mark.parametrize(
    ("seed", "count", "clean_head"),
    [(0, 0, 0), (1, 5, 0), (2, 60, 0), (3, 200, 0), (4, 5000, 0), (5, 5000, 1 << 16), (6, 20000, 1 << 16)],
)
def test_sparse_bytes_found_one_by_one_give_the_bulk_answer(seed: int, count: int, clean_head: int) -> None:
    """CRs, escapes and newlines that are rare in a piece's first window are found with
    bytes.find, one at a time, up to a bounded number of steps (then in bulk), and the
    text and the line count are those of the plain whole-piece operations."""
    data = sprinkled(random.Random(seed), 1 << 20, EXTRAS, count, clean_head)
    assert cleaning._line_ends(data) == plain_line_ends(data)
    assert cleaning.strip_escapes(data) == plain_strip_escapes(data)
    for start in (0, 1, 5000):
        assert cleaning.count_newlines(data, start) == data.count(b"\n", start)
