"""Recoverable secp256k1 signatures (coincurve) and EVM-style addresses."""

from __future__ import annotations

import coincurve

from cowboy_node.crypto.keccak import keccak256

N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
HALF_N = N // 2


class InvalidSignature(ValueError):
    """A signature that is malformed, non-canonical (high-s) or does not recover."""


class InvalidKey(ValueError):
    """A private or public key that is not valid."""


def generate_private_key() -> bytes:
    """A fresh random private key (32 bytes)."""
    return bytes(coincurve.PrivateKey().secret)


def _sk(sk: bytes) -> coincurve.PrivateKey:
    if len(sk) != 32:
        raise InvalidKey("private key must be 32 bytes")
    try:
        return coincurve.PrivateKey(sk)
    except ValueError as e:
        raise InvalidKey(f"invalid private key: {e}") from None


def private_key_to_public_key(sk: bytes, *, compressed: bool = False) -> bytes:
    """Public key of ``sk`` (65-byte uncompressed or 33-byte compressed)."""
    return bytes(_sk(sk).public_key.format(compressed=compressed))


def sign_recoverable(sk: bytes, digest: bytes) -> bytes:
    """Sign a 32-byte digest: r(32) ‖ s(32) ‖ v(1), v ∈ {0, 1}, low-s (RFC 6979 nonces)."""
    if len(digest) != 32:
        raise ValueError("digest must be 32 bytes")
    return bytes(_sk(sk).sign_recoverable(digest, hasher=None))


def recover_public_key(digest: bytes, signature: bytes) -> bytes:
    """Uncompressed public key that produced ``signature`` over ``digest``."""
    if len(digest) != 32:
        raise InvalidSignature("digest must be 32 bytes")
    if len(signature) != 65:
        raise InvalidSignature(f"signature must be 65 bytes, got {len(signature)}")
    r = int.from_bytes(signature[:32], "big")
    s = int.from_bytes(signature[32:64], "big")
    if signature[64] not in (0, 1):
        raise InvalidSignature("recovery id v must be 0 or 1")
    if not 0 < r < N or not 0 < s < N:
        raise InvalidSignature("r or s out of range")
    if s > HALF_N:
        raise InvalidSignature("high-s signature (non-canonical)")
    try:
        pub = coincurve.PublicKey.from_signature_and_message(signature, digest, hasher=None)
    except Exception as e:  # coincurve raises plain Exception subclasses
        raise InvalidSignature(f"recovery failed: {e}") from None
    return bytes(pub.format(compressed=False))


def public_key_to_address(public_key: bytes) -> bytes:
    """Last 20 bytes of keccak256(X ‖ Y)."""
    if len(public_key) == 33:
        try:
            public_key = coincurve.PublicKey(public_key).format(compressed=False)
        except ValueError as e:
            raise InvalidKey(f"invalid public key: {e}") from None
    if len(public_key) != 65 or public_key[0] != 4:
        raise InvalidKey("public key must be 33 or 65 bytes")
    return keccak256(public_key[1:])[12:]


def recover_address(digest: bytes, signature: bytes) -> bytes:
    """Address of the signer of ``digest``."""
    return public_key_to_address(recover_public_key(digest, signature))


def private_key_to_address(sk: bytes) -> bytes:
    """Address controlled by ``sk``."""
    return public_key_to_address(private_key_to_public_key(sk))
