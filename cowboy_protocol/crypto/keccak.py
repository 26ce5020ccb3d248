"""Keccak-256: the original Keccak padding (0x01) used by Ethereum, not NIST SHA3-256 (0x06).

Backend: pycryptodome.  Its public ``Crypto.Hash.keccak.new`` object costs ~3.5 µs per
call, mostly Python-side set-up, so when the one-shot C entry point behind it
(``keccak_oneshot`` through cffi) is available it is called directly (~1.2 µs for 64
bytes).  That entry point is private, so it is used only after a self-test against the
public API at import time; otherwise :func:`keccak256` is the public-API version.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from Crypto.Hash import keccak as _keccak

__all__ = ["keccak256"]

_DOC = "Keccak-256 digest (32 bytes) of ``data``, as Ethereum computes it."


def _keccak256_public(data: bytes) -> bytes:
    return _keccak.new(digest_bits=256, data=data).digest()


def _make_fast() -> Callable[[bytes], bytes] | None:
    """The direct one-shot path, or None if this pycryptodome build does not offer it."""
    try:
        from Crypto.Util import _raw_api

        if getattr(_raw_api, "backend", None) != "cffi":
            return None
        ffi: Any = _raw_api.ffi
        oneshot: Any = _keccak._raw_keccak_lib.keccak_oneshot
    except (ImportError, AttributeError):
        return None
    new, buffer = ffi.new, ffi.buffer

    def keccak256(data: bytes) -> bytes:
        if type(data) is not bytes:
            data = bytes(data)
        out = new("uint8_t[32]")  # per call: cffi drops the GIL, so a shared buffer would race
        # capacity 64 bytes (= 2 x digest size), 24 rounds, Keccak padding byte 0x01
        if oneshot(data, len(data), out, 32, 64, 24, 0x01):
            raise ValueError("keccak_oneshot failed")
        return buffer(out)[:]  # type: ignore[no-any-return]

    try:
        for probe in (b"", b"abc", b"x" * 135, b"x" * 136, b"x" * 137, bytes(range(256)) * 3):
            if keccak256(probe) != _keccak256_public(probe):
                return None
    except Exception:  # any failure of the private path: fall back to the public API
        return None
    return keccak256


_keccak256_public.__doc__ = _DOC
_fast = _make_fast()
keccak256: Callable[[bytes], bytes] = _fast if _fast is not None else _keccak256_public
"""Keccak-256 digest (32 bytes) of ``data``, as Ethereum computes it."""
if _fast is not None:
    _fast.__doc__ = _DOC
