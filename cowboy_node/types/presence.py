"""PresenceInputV1 (CIP-11 §7.2): the committed set of present runners of a block.

Bytes: ``version (0x01) ‖ kind ‖ body`` over the registry index basis of the
parent block (element i ↔ registry index i).
 - kind 0x00 bitmap: exactly ceil(n/8) bytes, bit j of byte b (LSB first) is
   index 8·b + j; bits at positions ≥ n MUST be 0.
 - kind 0x01 sparse: u32 BE count, then count strictly ascending u32 BE indices < n.
Decoders accept either kind and never re-canonicalise; encoders pick the smaller.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from cowboy_protocol.types.validation_errors import DecodeError

PRESENCE_VERSION = 0x01
KIND_BITMAP = 0x00
KIND_SPARSE = 0x01
_U32 = struct.Struct(">I")


def encode_presence(present: Iterable[int], registry_size: int) -> bytes:
    """Smaller of the two encodings of the set ``present`` (ties: bitmap)."""
    idx = sorted(set(present))
    if idx and (idx[0] < 0 or idx[-1] >= registry_size):
        raise ValueError("present index outside the registry")
    bitmap = bytearray((registry_size + 7) // 8)
    for i in idx:
        bitmap[i >> 3] |= 1 << (i & 7)
    bitmap_len = 2 + len(bitmap)
    sparse_len = 2 + 4 + 4 * len(idx)
    if bitmap_len <= sparse_len:
        return bytes([PRESENCE_VERSION, KIND_BITMAP]) + bytes(bitmap)
    return bytes([PRESENCE_VERSION, KIND_SPARSE]) + _U32.pack(len(idx)) + b"".join(_U32.pack(i) for i in idx)


def decode_presence(data: bytes, registry_size: int) -> frozenset[int]:
    """Strictly decode to the set of present registry indices; raises DecodeError for every invalid form."""
    if len(data) < 2:
        raise DecodeError("presence_input: shorter than version and kind", code="invalid_presence_input")
    if data[0] != PRESENCE_VERSION:
        raise DecodeError(f"presence_input: unknown version {data[0]:#04x}", code="invalid_presence_input")
    kind, body = data[1], data[2:]
    if kind == KIND_BITMAP:
        if len(body) != (registry_size + 7) // 8:
            raise DecodeError("presence_input: wrong bitmap length", code="invalid_presence_input")
        out = set()
        for b, byte in enumerate(body):
            for j in range(8):
                if byte >> j & 1:
                    i = 8 * b + j
                    if i >= registry_size:
                        raise DecodeError("presence_input: bit set beyond the registry", code="invalid_presence_input")
                    out.add(i)
        return frozenset(out)
    if kind == KIND_SPARSE:
        if len(body) < 4:
            raise DecodeError("presence_input: sparse body without count", code="invalid_presence_input")
        (count,) = _U32.unpack_from(body)
        if len(body) != 4 + 4 * count:
            raise DecodeError("presence_input: sparse length != 4 + 4·count", code="invalid_presence_input")
        prev = -1
        out = set()
        for k in range(count):
            (i,) = _U32.unpack_from(body, 4 + 4 * k)
            if i <= prev:
                raise DecodeError("presence_input: sparse indices not strictly ascending",
                                  code="invalid_presence_input")
            if i >= registry_size:
                raise DecodeError("presence_input: index beyond the registry", code="invalid_presence_input")
            out.add(i)
            prev = i
        return frozenset(out)
    raise DecodeError(f"presence_input: unknown kind {kind:#04x}", code="invalid_presence_input")
