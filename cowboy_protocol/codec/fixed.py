"""Pieces of canonical CBOR for fixed-shape records, built and read without the generic codec's machinery.

The records a transfer touches (an account, its receipt and event, the transaction body) each have one shape,
so their canonical encoding is a fixed template of heads and payloads. The generic :func:`~cowboy_protocol.codec.
encode` pays for type dispatch, a dict per map and a sort of its keys; :func:`~cowboy_protocol.codec.decode` for
its container bookkeeping. The helpers here produce or read single items directly.

Contract (what the differential tests in ``tests/unit/codec_fixed/`` check): every encoder returns exactly the
bytes ``encode`` returns for the same value, or ``None`` when it declines (a value outside the fast path: wrong
type, out of range, not UTF-8), so the caller falls back to ``encode`` and gets its result or its error
unchanged. Every reader returns exactly what ``decode`` would give for that item, or ``None`` when the bytes at
that position are anything else (not canonical, truncated, another type), so the caller falls back to
``decode``. Nothing here raises for bad input, and :mod:`cowboy_protocol.codec.cbor` is not changed.
"""

from __future__ import annotations

from typing import Final

# The canonical encoder's own head writer, byte table and readers: one definition of the shortest head.
from cowboy_protocol.codec.cbor import _BYTE, _head, _unpack_H, _unpack_I, _unpack_Q

__all__ = [
    "NULL",
    "U64_MAX",
    "array_head",
    "byte_string",
    "read_uint",
    "text",
    "uint",
]

U64_MAX: Final = (1 << 64) - 1
NULL: Final = b"\xf6"
"""``encode(None)``."""

def uint(n: object) -> bytes | None:
    """``encode(n)`` for an ``int`` (exactly, not a subclass) in ``[0, U64_MAX]``; else ``None``."""
    if type(n) is not int or n < 0 or n > U64_MAX:
        return None
    if n < 24:
        return _BYTE[n]
    return _head(0x00, n)


def byte_string(b: bytes) -> bytes:
    """``encode(b)`` for a ``bytes`` value (the caller checks the type: any ``bytes`` has a fast encoding)."""
    n = len(b)
    if n < 24:
        return _BYTE[0x40 | n] + b
    return _head(0x40, n) + b


def text(s: object) -> bytes | None:
    """``encode(s)`` for a ``str`` (exactly) that is valid UTF-8 (no lone surrogates); else ``None``."""
    if type(s) is not str:
        return None
    try:
        b = s.encode("utf-8")
    except UnicodeEncodeError:
        return None
    n = len(b)
    if n < 24:
        return _BYTE[0x60 | n] + b
    return _head(0x60, n) + b


def array_head(n: int) -> bytes:
    """The head of a canonical array of ``0 <= n <= U64_MAX`` items (its items' encodings follow it)."""
    return _head(0x80, n)


def read_uint(data: bytes, pos: int) -> tuple[int, int] | None:
    """``(value, end)`` of the canonical unsigned integer item starting at ``data[pos]``, or ``None``.

    ``None`` when ``pos`` is past the end, the item is not major type 0, its argument is not in shortest form,
    or the input ends inside it. ``end`` is the position just after the item.
    """
    n = len(data)
    if pos >= n:
        return None
    ib = data[pos]
    if ib < 24:
        return ib, pos + 1
    if ib == 24:
        if pos + 2 > n:
            return None
        v = data[pos + 1]
        return (v, pos + 2) if v >= 24 else None
    if ib == 25:
        if pos + 3 > n:
            return None
        v = _unpack_H(data, pos + 1)[0]
        return (v, pos + 3) if v >= 0x100 else None
    if ib == 26:
        if pos + 5 > n:
            return None
        v = _unpack_I(data, pos + 1)[0]
        return (v, pos + 5) if v >= 0x10000 else None
    if ib == 27:
        if pos + 9 > n:
            return None
        v = _unpack_Q(data, pos + 1)[0]
        return (v, pos + 9) if v >= 0x100000000 else None
    return None
