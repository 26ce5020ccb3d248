"""Ed25519 (RFC 8032, via pynacl / libsodium): validator identities and block signatures.

Keys are handled as the 32-byte RFC 8032 seed ("secret key" in the RFC's test vectors);
libsodium's verification rejects non-canonical ``S`` and small-order public keys.
"""

from __future__ import annotations

import os

from nacl.signing import SigningKey, VerifyKey

__all__ = ["PreparedSigner", "generate_seed", "public_key_from_seed", "sign", "verify"]


def generate_seed() -> bytes:
    """A fresh random 32-byte seed."""
    return os.urandom(32)


def _signing_key(seed: bytes) -> SigningKey:
    if len(seed) != 32:
        raise ValueError(f"ed25519 seed must be 32 bytes, got {len(seed)}")
    return SigningKey(bytes(seed))


def public_key_from_seed(seed: bytes) -> bytes:
    """32-byte public key of ``seed``."""
    return bytes(_signing_key(seed).verify_key)


def sign(seed: bytes, message: bytes) -> bytes:
    """64-byte detached signature of ``message``."""
    return bytes(_signing_key(seed).sign(bytes(message)).signature)


class PreparedSigner:
    """A seed expanded once (SHA-512 and a scalar multiplication, about as costly as a signature) for a key that
    signs often (the validator's CIP-11 pongs); signatures are byte-identical to :func:`sign` (Ed25519 is
    deterministic)."""

    __slots__ = ("_key", "public_key")

    def __init__(self, seed: bytes) -> None:
        self._key = _signing_key(seed)
        self.public_key: bytes = bytes(self._key.verify_key)
        """32-byte public key of the seed."""

    def sign(self, message: bytes) -> bytes:
        """64-byte detached signature of ``message``."""
        return bytes(self._key.sign(bytes(message)).signature)


def verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """True iff ``signature`` is valid for ``message`` under ``public_key``; never raises."""
    try:
        if len(public_key) != 32 or len(signature) != 64:
            return False
        VerifyKey(bytes(public_key)).verify(bytes(message), bytes(signature))
    except Exception:  # BadSignatureError, or malformed inputs of any kind: never raise
        return False
    return True
