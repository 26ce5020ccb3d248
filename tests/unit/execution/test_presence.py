"""PresenceInputV1 encoding (CIP-11 §7.2): both kinds, the smaller chosen, every invalid form rejected."""

from __future__ import annotations

import pytest

from cowboy_node.types.presence import decode_presence, encode_presence
from cowboy_protocol.types.validation_errors import DecodeError


def test_empty_registry_encodes_as_empty_bitmap() -> None:
    assert encode_presence((), 0) == bytes([0x01, 0x00])


def test_bitmap_is_lsb_first() -> None:
    # indices 0, 3, 9 of 10 -> byte0 = 0b00001001, byte1 = 0b00000010
    assert encode_presence([9, 0, 3], 10) == bytes([0x01, 0x00, 0x09, 0x02])


def test_sparse_chosen_when_smaller() -> None:
    # 1 of 5000 present: bitmap 2+625 bytes, sparse 2+4+4 bytes
    assert encode_presence([4242], 5000) == bytes([0x01, 0x01]) + (1).to_bytes(4, "big") + (4242).to_bytes(4, "big")


def test_both_kinds_decode_to_the_same_set() -> None:
    bitmap = bytes([0x01, 0x00, 0x09, 0x02])
    sparse = bytes([0x01, 0x01]) + b"".join(i.to_bytes(4, "big") for i in (3, 0, 3, 9))
    assert decode_presence(bitmap, 10) == frozenset({0, 3, 9})
    assert decode_presence(sparse, 10) == frozenset({0, 3, 9})


@pytest.mark.parametrize("data,n", [
    (b"", 0),                                               # too short
    (b"\x01", 0),                                           # no kind
    (b"\x02\x00", 0),                                       # unknown version
    (b"\x01\x02", 0),                                       # unknown kind
    (b"\x01\x00\x00", 0),                                   # wrong bitmap length
    (b"\x01\x00", 3),                                       # wrong bitmap length (needs 1 byte)
    (b"\x01\x00\x08", 3),                                   # bit 3 set beyond |registry| = 3
    (b"\x01\x01\x00\x00\x00", 3),                           # sparse without a full count
    (b"\x01\x01\x00\x00\x00\x01", 3),                       # sparse length != 4 + 4·count
    (b"\x01\x01\x00\x00\x00\x02" + b"\x00\x00\x00\x01" * 2, 3),   # duplicate index
    (b"\x01\x01\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x01", 3),  # not ascending
    (b"\x01\x01\x00\x00\x00\x01\x00\x00\x00\x03", 3),       # index ≥ |registry|
])
def test_invalid_forms_are_rejected(data: bytes, n: int) -> None:
    with pytest.raises(DecodeError) as e:
        decode_presence(data, n)
    assert e.value.code == "invalid_presence_input"
