"""``codec/fixed.py`` against the canonical codec: every piece it builds is byte-equal to ``encode``, every item
it reads is what ``decode`` reads, and it declines (``None``) exactly where it says it does."""

from __future__ import annotations

import enum
import itertools
import random

import pytest

from cowboy_protocol.codec import CodecError, decode, encode
from cowboy_protocol.codec.fixed import NULL, U64_MAX, array_head, byte_string, read_uint, text, uint

_BOUNDARIES = [0, 1, 23, 24, 255, 256, 65_535, 65_536, 2**32 - 1, 2**32, U64_MAX - 1, U64_MAX]


class _Small(enum.IntEnum):
    A = 5


def test_uint_is_encode_at_every_head_boundary_and_on_random_values() -> None:
    rng = random.Random(1)
    values = _BOUNDARIES + [rng.randrange(0, 1 << rng.choice((5, 8, 16, 32, 64))) for _ in range(5_000)]
    for v in values:
        assert uint(v) == encode(v), v


def test_uint_hand_derived_heads() -> None:
    # RFC 8949 §3.1: major type 0, argument in the initial byte below 24, then 1/2/4/8 following bytes.
    assert uint(23) == b"\x17"
    assert uint(24) == b"\x18\x18"
    assert uint(256) == b"\x19\x01\x00"
    assert uint(2**32) == b"\x1b\x00\x00\x00\x01\x00\x00\x00\x00"


@pytest.mark.parametrize("value", [-1, U64_MAX + 1, True, False, 1.0, "1", None, _Small.A])
def test_uint_declines_what_is_not_a_plain_u64(value: object) -> None:
    assert uint(value) is None


def test_byte_string_is_encode_for_every_length_class() -> None:
    rng = random.Random(2)
    for n in itertools.chain(range(0, 300), (65_535, 65_536)):
        b = rng.randbytes(n)
        assert byte_string(b) == encode(b), n


def test_text_is_encode_and_declines_lone_surrogates() -> None:
    rng = random.Random(3)
    alphabet = "aZ09 ü€𝄞\u0000\u07ff\uffff"
    for n in itertools.chain(range(0, 80), (300, 70_000)):
        s = "".join(rng.choice(alphabet) for _ in range(n))
        assert text(s) == encode(s), n
    with pytest.raises(CodecError):
        encode("\ud800")
    assert text("\ud800") is None
    assert text(b"x") is None


def test_array_head_then_items_is_encode_of_the_array() -> None:
    for n in (0, 1, 23, 24, 255, 256, 70_000):
        items = [i % 30 for i in range(n)]
        assert array_head(n) + b"".join(encode(i) for i in items) == encode(items), n
    assert encode(None) == NULL


def _decoded_uint_prefix(data: bytes) -> tuple[int, int] | None:
    """The (value, end) of the one prefix of ``data`` that ``decode`` reads as an unsigned integer, if any."""
    found = None
    for end in range(1, len(data) + 1):
        try:
            v = decode(data[:end])
        except CodecError:
            continue
        if type(v) is int and v >= 0:
            assert found is None  # a canonical item has one length
            found = (v, end)
    return found


def test_read_uint_agrees_with_decode_on_every_two_byte_input() -> None:
    for a, b in itertools.product(range(256), repeat=2):
        data = bytes((a, b))
        assert read_uint(data, 0) == _decoded_uint_prefix(data), data.hex()
    for a in range(256):
        assert read_uint(bytes((a,)), 0) == _decoded_uint_prefix(bytes((a,))), a
    assert read_uint(b"", 0) is None


def test_read_uint_agrees_with_decode_on_longer_heads_and_their_mutations() -> None:
    rng = random.Random(4)
    for v in _BOUNDARIES + [rng.randrange(1 << 64) for _ in range(300)]:
        enc = encode(v) + rng.randbytes(3)
        assert read_uint(enc, 0) == (v, len(encode(v)))
        for i in range(len(enc)):  # every one-byte mutation, and the input cut at every length
            for x in (0x00, 0x18, 0x19, 0x1A, 0x1B, 0x1C, 0x40, 0xFF, enc[i] ^ 0x01):
                data = enc[:i] + bytes((x,)) + enc[i + 1:]
                assert read_uint(data, 0) == _decoded_uint_prefix(data), data.hex()
            assert read_uint(enc[:i], 0) == _decoded_uint_prefix(enc[:i])


def test_read_uint_at_an_offset() -> None:
    data = b"\xa2\x00\x01\x01\x19\x01\x00"
    assert read_uint(data, 4) == (256, 7)
    assert read_uint(data, 7) is None
