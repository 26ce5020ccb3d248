"""BLS12-381 "MinSig": signatures in G1 (48 bytes compressed), public keys in G2 (96 bytes).

Native backend: py-arkworks-bls12381. ``py_ecc`` is the reference in tests.
"""

from __future__ import annotations

import hashlib
import hmac

from py_arkworks_bls12381 import G1Point, G2Point, GT, Scalar

DST_G1_SIG = b"BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_"
R = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
"""Order of the BLS12-381 scalar field."""


class InvalidBlsKey(ValueError):
    """A secret key outside [1, r)."""


def _hkdf_extract(salt: bytes, ikm: bytes) -> bytes:
    return hmac.new(salt, ikm, hashlib.sha256).digest()


def _hkdf_expand(prk: bytes, info: bytes, length: int) -> bytes:
    out, block, i = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([i]), hashlib.sha256).digest()
        out += block
        i += 1
    return out[:length]


def secret_key_from_seed(seed: bytes) -> int:
    """IETF draft-irtf-cfrg-bls-signature KeyGen (HKDF-SHA256, re-salting until non-zero)."""
    if len(seed) < 32:
        raise InvalidBlsKey("seed must be at least 32 bytes")
    salt = b"BLS-SIG-KEYGEN-SALT-"
    sk = 0
    while sk == 0:
        salt = hashlib.sha256(salt).digest()
        prk = _hkdf_extract(salt, seed + b"\x00")
        okm = _hkdf_expand(prk, (48).to_bytes(2, "big"), 48)
        sk = int.from_bytes(okm, "big") % R
    return sk


def secret_key_to_bytes(sk: int) -> bytes:
    """32-byte big-endian encoding."""
    return sk.to_bytes(32, "big")


def secret_key_from_bytes(data: bytes) -> int:
    """Inverse of :func:`secret_key_to_bytes`; rejects 0 and values ≥ r."""
    if len(data) != 32:
        raise InvalidBlsKey("secret key must be 32 bytes")
    sk = int.from_bytes(data, "big")
    if not 0 < sk < R:
        raise InvalidBlsKey("secret key out of range")
    return sk


def public_key(sk: int) -> bytes:
    """sk·G2, 96 bytes compressed."""
    return bytes((G2Point() * Scalar(sk)).to_compressed_bytes())


def sign(sk: int, message: bytes, dst: bytes = DST_G1_SIG) -> bytes:
    """sk·H(m) in G1, 48 bytes compressed."""
    return bytes((G1Point.hash_to_curve(message, dst) * Scalar(sk)).to_compressed_bytes())


def verify(public_key: bytes, message: bytes, signature: bytes, dst: bytes = DST_G1_SIG) -> bool:
    """e(sig, G2) == e(H(m), pk); False (never raises) for malformed, non-subgroup or identity points."""
    if len(public_key) != 96 or len(signature) != 48:
        return False
    try:
        pk = G2Point.from_compressed_bytes(public_key)
        sig = G1Point.from_compressed_bytes(signature)
    except Exception:  # arkworks raises plain exceptions for bad encodings
        return False
    if pk == G2Point.identity() or sig == G1Point.identity():
        return False
    if not pk.is_in_subgroup() or not sig.is_in_subgroup():
        return False
    h = G1Point.hash_to_curve(message, dst)
    return bool(GT.pairing_check([sig, -h], [G2Point(), pk]))
