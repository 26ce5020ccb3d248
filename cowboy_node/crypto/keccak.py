"""Keccak-256 (the original Keccak padding used by Ethereum, not NIST SHA3-256)."""

from __future__ import annotations

from Crypto.Hash import keccak as _keccak


def keccak256(data: bytes) -> bytes:
    """Keccak-256 digest of ``data``."""
    return _keccak.new(digest_bits=256, data=data).digest()
