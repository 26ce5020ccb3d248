"""Recoverable secp256k1 ECDSA signatures (coincurve / libsecp256k1) and EVM-style addresses.

Signatures are 65 bytes ``r(32) ‖ s(32) ‖ v(1)`` with ``v ∈ {0, 1}`` (the recovery id, not
Ethereum's 27/28) over a caller-supplied 32-byte digest: nothing is hashed here.  Only
low-s signatures (``s ≤ n/2``) are accepted, so a signature cannot be mutated into a
second valid one.
"""

from __future__ import annotations

import coincurve

from cowboy_protocol.crypto.keccak import keccak256

__all__ = [
    "HALF_N",
    "InvalidKey",
    "InvalidSignature",
    "N",
    "generate_private_key",
    "private_key_to_address",
    "private_key_to_public_key",
    "public_key_to_address",
    "recover_address",
    "recover_public_key",
    "sign_recoverable",
]

N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
"""Order of the secp256k1 group."""
HALF_N = N // 2
"""Largest accepted ``s`` (low-s rule)."""

_PublicKey = coincurve.PublicKey
_from_signature_and_message = coincurve.PublicKey.from_signature_and_message


class InvalidSignature(ValueError):
    """A signature that is malformed, non-canonical (high-s) or does not recover to a key."""


class InvalidKey(ValueError):
    """A private or public key that is not valid."""


def generate_private_key() -> bytes:
    """A fresh random private key: 32 bytes, a scalar in [1, n) (from ``os.urandom``)."""
    return bytes(coincurve.PrivateKey().secret)


def _private_key(sk: bytes) -> coincurve.PrivateKey:
    if len(sk) != 32:  # coincurve would silently left-pad shorter keys
        raise InvalidKey(f"private key must be 32 bytes, got {len(sk)}")
    try:
        return coincurve.PrivateKey(sk)
    except ValueError:
        raise InvalidKey("private key must be a scalar in [1, n)") from None


def private_key_to_public_key(sk: bytes, *, compressed: bool = False) -> bytes:
    """Public key of ``sk``: 65 bytes ``0x04 ‖ X ‖ Y``, or 33 bytes if ``compressed``."""
    return bytes(_private_key(sk).public_key.format(compressed=compressed))


def sign_recoverable(sk: bytes, digest: bytes) -> bytes:
    """Sign a 32-byte ``digest`` as-is: ``r ‖ s ‖ v``, v ∈ {0, 1}, low-s, RFC 6979 nonce."""
    if len(digest) != 32:
        raise ValueError(f"digest must be 32 bytes, got {len(digest)}")
    return bytes(_private_key(sk).sign_recoverable(digest, hasher=None))


def recover_public_key(digest: bytes, signature: bytes) -> bytes:
    """Uncompressed 65-byte public key that signed ``digest``.

    Raises :class:`InvalidSignature` if the signature is not 65 bytes, ``v ∉ {0, 1}``,
    ``r`` or ``s`` is 0 or ≥ n, ``s > n/2`` (high-s), or no key recovers.
    """
    if len(digest) != 32:
        raise InvalidSignature(f"digest must be 32 bytes, got {len(digest)}")
    if len(signature) != 65:
        raise InvalidSignature(f"signature must be 65 bytes, got {len(signature)}")
    if signature[64] > 1:
        raise InvalidSignature(f"recovery id v must be 0 or 1, got {signature[64]}")
    r = int.from_bytes(signature[:32], "big")
    if not 0 < r < N:
        raise InvalidSignature("r out of range [1, n)")
    s = int.from_bytes(signature[32:64], "big")
    if not 0 < s <= HALF_N:
        raise InvalidSignature("s out of range [1, n/2] (high-s signatures are rejected)")
    try:
        pub = _from_signature_and_message(bytes(signature), bytes(digest), hasher=None)
    except Exception:  # coincurve raises plain ValueError/Exception on failure
        raise InvalidSignature("public key recovery failed") from None
    return bytes(pub.format(compressed=False))


def _address_of_uncompressed(public_key: bytes) -> bytes:
    return keccak256(public_key[1:])[12:]


def public_key_to_address(public_key: bytes) -> bytes:
    """20-byte address: last 20 bytes of keccak256(X ‖ Y); accepts 33- or 65-byte keys."""
    if len(public_key) not in (33, 65):
        raise InvalidKey(f"public key must be 33 or 65 bytes, got {len(public_key)}")
    try:
        point = _PublicKey(bytes(public_key))
    except Exception:
        raise InvalidKey("public key is not a valid secp256k1 point") from None
    return _address_of_uncompressed(point.format(compressed=False))


def recover_address(digest: bytes, signature: bytes) -> bytes:
    """Address of the key that signed ``digest`` (see :func:`recover_public_key`)."""
    return _address_of_uncompressed(recover_public_key(digest, signature))


def private_key_to_address(sk: bytes) -> bytes:
    """Address controlled by ``sk``."""
    return _address_of_uncompressed(private_key_to_public_key(sk))
