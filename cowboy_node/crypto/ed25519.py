"""Ed25519 (pynacl): validator identities and block signatures."""

from __future__ import annotations

import os

from nacl.exceptions import BadSignatureError, CryptoError
from nacl.signing import SigningKey, VerifyKey


def generate_seed() -> bytes:
    """A fresh 32-byte seed."""
    return os.urandom(32)


def public_key_from_seed(seed: bytes) -> bytes:
    """32-byte public key of ``seed``."""
    return bytes(SigningKey(seed).verify_key)


def sign(seed: bytes, message: bytes) -> bytes:
    """64-byte detached signature."""
    return bytes(SigningKey(seed).sign(message).signature)


def verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """True iff ``signature`` is valid; never raises."""
    if len(public_key) != 32 or len(signature) != 64:
        return False
    try:
        VerifyKey(public_key).verify(message, signature)
        return True
    except (BadSignatureError, CryptoError, ValueError, TypeError):
        return False
