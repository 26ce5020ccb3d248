"""EIP-55 checksummed address text (``0x`` + 40 hex digits, case encodes a checksum)."""

from __future__ import annotations

from cowboy_protocol.crypto.keccak import keccak256

__all__ = ["InvalidAddress", "parse_address", "to_checksum_address"]

_HEX = frozenset("0123456789abcdefABCDEF")


class InvalidAddress(ValueError):
    """Text (or bytes) that is not a valid 20-byte address."""


def to_checksum_address(address: bytes) -> str:
    """``0x`` + EIP-55 mixed-case hex of a 20-byte address."""
    if len(address) != 20:
        raise InvalidAddress(f"address must be 20 bytes, got {len(address)}")
    lower = address.hex()
    digest = keccak256(lower.encode("ascii")).hex()
    return "0x" + "".join(c.upper() if d in "89abcdef" else c for c, d in zip(lower, digest, strict=False))


def parse_address(text: str) -> bytes:
    """Parse ``0x`` + 40 hex digits into 20 bytes.

    All-lowercase and all-uppercase hex are accepted as they are; mixed case must be a
    valid EIP-55 checksum.  Raises :class:`InvalidAddress` naming the problem.
    """
    if not isinstance(text, str):
        raise InvalidAddress(f"address must be a string, got {type(text).__name__}")
    if not text.startswith("0x"):
        raise InvalidAddress(f"address must start with '0x': {text!r}")
    body = text[2:]
    if len(body) != 40:
        raise InvalidAddress(f"address must have 40 hex digits after '0x', got {len(body)}: {text!r}")
    if not _HEX.issuperset(body):
        raise InvalidAddress(f"address has a non-hex character: {text!r}")
    raw = bytes.fromhex(body)
    if body != body.lower() and body != body.upper() and to_checksum_address(raw) != text:
        raise InvalidAddress(f"bad checksum: {text!r}")
    return raw
