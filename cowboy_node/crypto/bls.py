"""BLS12-381 signatures, "MinSig" variant (CIP-11 scheme_id 0x01).

Signatures are in G1 (48 bytes compressed), public keys in G2 (96 bytes compressed);
messages are hashed to G1 with the RFC 9380 suite ``BLS12381G1_XMD:SHA-256_SSWU_RO_``.
Point encodings are the usual ZCash/IETF compressed ones.  Backend: py-arkworks-bls12381
(``py_ecc`` is the reference implementation in the tests).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from functools import lru_cache

from py_arkworks_bls12381 import GT, G1Point, G2Point, Scalar

__all__ = [
    "DST_G1_SIG",
    "InvalidBlsKey",
    "InvalidPoint",
    "R",
    "batch_verify_same_message",
    "decode_g1",
    "decode_g2",
    "hash_to_g1",
    "key_validate",
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


class InvalidPoint(ValueError):
    """Bytes that are not the canonical compressed encoding of a non-identity prime-order-subgroup point."""


def _check_flags(data: bytes, size: int, what: str) -> None:
    if len(data) != size:
        raise InvalidPoint(f"{what} must be {size} bytes, got {len(data)}")
    flags = data[0] >> 5  # compression, infinity, sort (y sign)
    if not flags & 0b100:
        raise InvalidPoint(f"{what} is not in compressed form")
    if flags & 0b010:
        raise InvalidPoint(f"{what} is the identity (point at infinity)")


def decode_g1(data: bytes) -> G1Point:
    """Strict decoding of an untrusted G1 point (a signature or partial, 48 bytes).

    Rejects: a wrong length, the compression flag unset, the infinity flag (identity), an x not
    below the field modulus or not on the curve, a point outside the prime-order subgroup, and any
    byte string that does not re-encode to itself (non-canonical encodings).
    """
    data = bytes(data)
    _check_flags(data, 48, "G1 point")
    try:
        point = G1Point.from_compressed_bytes(data)  # curve + subgroup checks
    except Exception:
        raise InvalidPoint("G1 point does not decode (x not on the curve or out of range)") from None
    if point == _G1_IDENTITY or not point.is_in_subgroup():
        raise InvalidPoint("G1 point is the identity or outside the prime-order subgroup")
    if bytes(point.to_compressed_bytes()) != data:
        raise InvalidPoint("G1 point encoding is not canonical")
    return point


def decode_g2(data: bytes) -> G2Point:
    """Strict decoding of an untrusted G2 point (a public key, 96 bytes); same rules as :func:`decode_g1`."""
    data = bytes(data)
    _check_flags(data, 96, "G2 point")
    try:
        point = G2Point.from_compressed_bytes(data)
    except Exception:
        raise InvalidPoint("G2 point does not decode (x not on the curve or out of range)") from None
    if point == _G2_IDENTITY or not point.is_in_subgroup():
        raise InvalidPoint("G2 point is the identity or outside the prime-order subgroup")
    if bytes(point.to_compressed_bytes()) != data:
        raise InvalidPoint("G2 point encoding is not canonical")
    return point


@lru_cache(maxsize=4096)
def _public_key_point(public_key: bytes) -> G2Point:
    """:func:`decode_g2` of a public key, memoised (the same validator keys are decoded over and over)."""
    return decode_g2(public_key)


@lru_cache(maxsize=256)
def hash_to_g1(message: bytes, dst: bytes = DST_G1_SIG) -> G1Point:
    """``H(message)`` in G1 under ``dst``, memoised: consensus hashes the same few messages of a view (a vote's, a
    round's seed message) for each signature made or checked over them, ~0.2 ms each. Points are immutable (every
    operation returns a new one), so sharing one is safe."""
    return G1Point.hash_to_curve(bytes(message), bytes(dst))


def key_validate(public_key: bytes) -> bool:
    """KeyValidate of draft-irtf-cfrg-bls-signature §2.5: a canonical, non-identity subgroup point."""
    try:
        decode_g2(public_key)
    except InvalidPoint:
        return False
    return True


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
    return bytes((hash_to_g1(bytes(message), bytes(dst)) * _check_sk(sk)).to_compressed_bytes())


def verify(public_key: bytes, message: bytes, signature: bytes, dst: bytes = DST_G1_SIG) -> bool:
    """True iff ``e(signature, G2) == e(H(message), public_key)``.

    False, never an exception, for wrong lengths, bad encodings, points off the curve or
    outside the prime-order subgroup (the decoder checks both), and identity points.
    """
    try:
        pk = _public_key_point(bytes(public_key))  # KeyValidate
        sig = decode_g1(signature)
        h = hash_to_g1(bytes(message), bytes(dst))
        return bool(GT.pairing_check([sig, -h], [_G2, pk]))
    except Exception:  # arkworks raises ValueError (and possibly others) on bad input
        return False


def _batch_coefficients(message: bytes, dst: bytes, items: Sequence[tuple[bytes, bytes]]) -> list[int]:
    """128-bit non-zero coefficients derived from every input (Fiat–Shamir): a forger must fix all the
    pairs before learning the coefficients, so a bad pair passes with probability about 2^-128."""
    h = hashlib.sha256(b"cowboy-bls-batch-v1:" + len(dst).to_bytes(2, "big") + dst
                       + len(message).to_bytes(8, "big") + message)
    for pk, sig in items:
        h.update(pk + sig)
    root = h.digest()
    return [int.from_bytes(hashlib.sha256(root + i.to_bytes(4, "big")).digest()[:16], "big") | 1
            for i in range(len(items))]


def batch_verify_same_message(items: Sequence[tuple[bytes, bytes]], message: bytes, dst: bytes = DST_G1_SIG) -> bool:
    """True iff every ``(public_key, signature)`` pair verifies over ``message`` (one pairing check).

    Checks ``e(Σ cᵢ·sigᵢ, G2) == e(H(m), Σ cᵢ·pkᵢ)`` with coefficients derived from all inputs, so
    two bad signatures cannot cancel out. False, never an exception, on any undecodable point; an
    empty batch is False. On False, verify the pairs one by one to find the bad ones.
    """
    if not items:
        return False
    try:
        pks = [_public_key_point(bytes(pk)) for pk, _ in items]
        sigs = [decode_g1(sig) for _, sig in items]
        if len(items) == 1:
            agg_sig, agg_pk = sigs[0], pks[0]
        else:
            coeffs = [Scalar(c) for c in _batch_coefficients(bytes(message), bytes(dst),
                                                             [(bytes(p), bytes(s)) for p, s in items])]
            # every point was validated above, so the unchecked multi-exponentiations are safe
            agg_sig = G1Point.multiexp_unchecked(sigs, coeffs)
            agg_pk = G2Point.multiexp_unchecked(pks, coeffs)
        h = hash_to_g1(bytes(message), bytes(dst))
        return bool(GT.pairing_check([agg_sig, -h], [_G2, agg_pk]))
    except Exception:
        return False
