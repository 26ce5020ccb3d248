"""BLS12-381 signatures, "MinSig" variant (CIP-11 scheme_id 0x01).

Signatures are in G1 (48 bytes compressed), public keys in G2 (96 bytes compressed);
messages are hashed to G1 with the RFC 9380 suite ``BLS12381G1_XMD:SHA-256_SSWU_RO_``.
Point encodings are the usual ZCash/IETF compressed ones.  Backend: py-arkworks-bls12381
(``py_ecc`` is the reference implementation in the tests).
"""

from __future__ import annotations

import hashlib
import hmac

from py_arkworks_bls12381 import GT, G1Point, G2Point, Scalar

__all__ = [
    "DST_G1_SIG",
    "InvalidBlsKey",
    "R",
    "public_key",
    "secret_key_from_bytes",
    "secret_key_from_seed",
    "secret_key_to_bytes",
    "sign",
    "verify",
]

DST_G1_SIG = b"BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_"
"""Domain separation tag of the basic (NUL) scheme with signatures in G1."""
R = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
"""Order r of G1, G2 and the scalar field."""

_G2 = G2Point()  # the standard generator
_G2_IDENTITY = G2Point.identity()
_G1_IDENTITY = G1Point.identity()
_KEYGEN_SALT = b"BLS-SIG-KEYGEN-SALT-"


class InvalidBlsKey(ValueError):
    """A secret key (or seed) that is not acceptable: key outside [1, r), seed too short."""


def _check_sk(sk: int) -> Scalar:
    if isinstance(sk, bool) or not isinstance(sk, int) or not 0 < sk < R:
        raise InvalidBlsKey("secret key must be an integer in [1, r)")
    return Scalar(sk)


def secret_key_from_seed(seed: bytes) -> int:
    """KeyGen of draft-irtf-cfrg-bls-signature (≥ draft-04, as in EIP-2333), empty key_info.

    ``salt = "BLS-SIG-KEYGEN-SALT-"``; repeat ``salt = SHA256(salt)``,
    ``PRK = HKDF-Extract(salt, seed ‖ 0x00)``, ``OKM = HKDF-Expand(PRK, I2OSP(48, 2), 48)``,
    ``SK = OS2IP(OKM) mod r`` until ``SK ≠ 0``.  ``seed`` must be at least 32 bytes.
    """
    if len(seed) < 32:
        raise InvalidBlsKey(f"seed must be at least 32 bytes, got {len(seed)}")
    ikm = bytes(seed) + b"\x00"
    info = (48).to_bytes(2, "big")  # key_info (empty) ‖ I2OSP(L, 2)
    salt = _KEYGEN_SALT
    sk = 0
    while sk == 0:
        salt = hashlib.sha256(salt).digest()
        prk = hmac.digest(salt, ikm, "sha256")  # HKDF-Extract
        t1 = hmac.digest(prk, info + b"\x01", "sha256")  # HKDF-Expand, L = 48: two blocks
        t2 = hmac.digest(prk, t1 + info + b"\x02", "sha256")
        sk = int.from_bytes((t1 + t2)[:48], "big") % R
    return sk


def secret_key_to_bytes(sk: int) -> bytes:
    """32-byte big-endian encoding of a secret key in [1, r)."""
    _check_sk(sk)
    return sk.to_bytes(32, "big")


def secret_key_from_bytes(data: bytes) -> int:
    """Inverse of :func:`secret_key_to_bytes`; rejects wrong length, 0 and values ≥ r."""
    if len(data) != 32:
        raise InvalidBlsKey(f"secret key must be 32 bytes, got {len(data)}")
    sk = int.from_bytes(data, "big")
    if not 0 < sk < R:
        raise InvalidBlsKey("secret key out of range [1, r)")
    return sk


def public_key(sk: int) -> bytes:
    """``sk·G2``, 96 bytes compressed."""
    return bytes((_G2 * _check_sk(sk)).to_compressed_bytes())


def sign(sk: int, message: bytes, dst: bytes = DST_G1_SIG) -> bytes:
    """``sk·H(message)`` in G1, 48 bytes compressed (H: hash-to-curve under ``dst``)."""
    return bytes((G1Point.hash_to_curve(bytes(message), bytes(dst)) * _check_sk(sk)).to_compressed_bytes())


def verify(public_key: bytes, message: bytes, signature: bytes, dst: bytes = DST_G1_SIG) -> bool:
    """True iff ``e(signature, G2) == e(H(message), public_key)``.

    False, never an exception, for wrong lengths, bad encodings, points off the curve or
    outside the prime-order subgroup (the decoder checks both), and identity points.
    """
    try:
        if len(public_key) != 96 or len(signature) != 48:
            return False
        pk = G2Point.from_compressed_bytes(bytes(public_key))  # checks curve + subgroup
        sig = G1Point.from_compressed_bytes(bytes(signature))  # checks curve + subgroup
        if pk == _G2_IDENTITY or sig == _G1_IDENTITY:
            return False
        h = G1Point.hash_to_curve(bytes(message), bytes(dst))
        return bool(GT.pairing_check([sig, -h], [_G2, pk]))
    except Exception:  # arkworks raises ValueError (and possibly others) on bad input
        return False
