"""EIP-55 checksummed address text."""

from __future__ import annotations

from cowboy_node.crypto.keccak import keccak256


class InvalidAddress(ValueError):
    """Text that is not a valid 20-byte address."""


def to_checksum_address(address: bytes) -> str:
    """``0x`` + EIP-55 mixed-case hex."""
    if len(address) != 20:
        raise InvalidAddress(f"address must be 20 bytes, got {len(address)}")
    h = address.hex()
    digest = keccak256(h.encode()).hex()
    return "0x" + "".join(c.upper() if int(digest[i], 16) >= 8 else c for i, c in enumerate(h))


def parse_address(text: str) -> bytes:
    """Parse ``0x`` + 40 hex digits; mixed case must carry a valid EIP-55 checksum."""
    if not text.startswith("0x") or len(text) != 42:
        raise InvalidAddress(f"expected 0x followed by 40 hex digits, got {text!r}")
    body = text[2:]
    try:
        raw = bytes.fromhex(body)
    except ValueError:
        raise InvalidAddress(f"not hex: {text!r}") from None
    if body != body.lower() and body != body.upper() and to_checksum_address(raw) != text:
        raise InvalidAddress(f"bad checksum: {text!r}")
    return raw
