"""Schema helpers shared by every canonical map in ``types``.

Protocol maps use small unsigned-integer keys (DESIGN.md §4 "Encoding").
These helpers check the exact key set and the type and range of each value,
so a decoded map with a missing, extra or mistyped field is rejected with a
:class:`DecodeError` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cowboy_protocol.codec import CodecError, decode
from cowboy_protocol.types.validation_errors import DecodeError

U8_MAX = (1 << 8) - 1
U16_MAX = (1 << 16) - 1
U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1
U128_MAX = (1 << 128) - 1
ADDRESS_LEN = 20
HASH_LEN = 32


def expect_map(value: object, keys: frozenset[int], name: str) -> Mapping[int, Any]:
    """Return ``value`` as a map after checking it has exactly the integer ``keys``."""
    if not isinstance(value, dict):
        raise DecodeError(f"{name}: expected a map", field=name)
    # CBOR true/false are not the integers 1/0, though Python compares them equal.
    if any(isinstance(k, bool) for k in value):
        raise DecodeError(f"{name}: map keys must be unsigned integers, not booleans", field=name)
    actual = frozenset(value.keys())
    if actual != keys:
        missing = sorted(k for k in keys if k not in actual)
        extra = sorted(repr(k) for k in actual if k not in keys)
        raise DecodeError(f"{name}: missing keys {missing}, unexpected keys {extra}", field=name)
    return value


def decode_map(data: bytes, keys: frozenset[int], name: str) -> Mapping[int, Any]:
    """Strictly decode canonical CBOR ``data`` to a map with exactly ``keys``: bytes that are not canonical CBOR
    are a :class:`DecodeError` naming ``name`` too (not the codec's own error)."""
    try:
        value = decode(data)
    except CodecError as e:
        raise DecodeError(f"{name}: {e}", field=name) from None
    return expect_map(value, keys, name)


def expect_uint(value: object, name: str, maximum: int = U64_MAX) -> int:
    """Check an unsigned integer in ``[0, maximum]`` (bools are not integers here)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise DecodeError(f"{name}: expected an unsigned integer", field=name)
    if value < 0 or value > maximum:
        raise DecodeError(f"{name}: {value} out of range [0, {maximum}]", field=name)
    return value


def expect_bytes(value: object, name: str, length: int | None = None, max_len: int | None = None) -> bytes:
    """Check a byte string, optionally of an exact ``length`` or at most ``max_len`` bytes."""
    if not isinstance(value, bytes):
        raise DecodeError(f"{name}: expected a byte string", field=name)
    if length is not None and len(value) != length:
        raise DecodeError(f"{name}: expected {length} bytes, got {len(value)}", field=name)
    if max_len is not None and len(value) > max_len:
        raise DecodeError(f"{name}: longer than {max_len} bytes", field=name)
    return value


def expect_text(value: object, name: str, max_len: int = 256) -> str:
    """Check a text string of at most ``max_len`` UTF-8 bytes."""
    if not isinstance(value, str):
        raise DecodeError(f"{name}: expected a text string", field=name)
    if len(value.encode()) > max_len:
        raise DecodeError(f"{name}: longer than {max_len} bytes", field=name)
    return value


def expect_optional_bytes(value: object, name: str, max_len: int) -> bytes | None:
    """``None`` (CBOR null) or a byte string of at most ``max_len`` bytes."""
    if value is None:
        return None
    return expect_bytes(value, name, max_len=max_len)


def encode_u128(value: int) -> bytes:
    """Token amounts (balances, transfers, fees paid) are u128, carried as 16 big-endian bytes.

    CBOR integers stop at 2^64-1, which is only ~18.4 CBY in wei; the profile
    forbids bignum tags, so amounts use a fixed-width byte string instead.
    """
    if value < 0 or value > U128_MAX:
        raise ValueError(f"amount {value} out of u128 range")
    return value.to_bytes(16, "big")


def decode_u128(value: object, name: str) -> int:
    """Inverse of :func:`encode_u128`; rejects any length other than 16."""
    raw = expect_bytes(value, name, length=16)
    return int.from_bytes(raw, "big")
