"""Pairing helpers of certificate assembly (:mod:`cowboy_node.consensus.simplex.scheme`): two BLS signatures under
one key checked with one pairing product, and the interpolation of two sets of partials at once.

Kept out of the sans-I/O ``simplex`` package, which imports no third-party module.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from py_arkworks_bls12381 import GT, G1Point, G2Point, Scalar

from cowboy_node.crypto import bls

__all__ = ["check_one", "check_two", "interpolate_one", "interpolate_pair"]

_G2_GEN = G2Point()
_PAIR_DOMAIN = b"cowboy-simplex-pair-check-v1:"


def _lagrange_at_zero(indices: Sequence[int]) -> list[Scalar]:
    """Lagrange basis coefficients at x = 0 for the distinct share ``indices``: λ_i = Π_{j≠i} j / (j − i).

    Numerators and denominators are accumulated as plain integers (share indices are small: each step multiplies a
    big integer by a small one), reduced once, and the denominators inverted together: at 67 indices about 4x
    faster than reducing modulo r at every step and inverting each (the quadratic loop that made this the largest
    cost of an interpolation at n = 100)."""
    r = bls.R
    nums, dens = [], []
    for i in indices:
        num = den = 1
        for j in indices:
            if j != i:
                num *= j
                den *= j - i
        nums.append(num % r)
        dens.append(den % r)
    # one modular inversion for all denominators (Montgomery's trick) instead of one per index
    prefix = [1]
    for d in dens:
        prefix.append(prefix[-1] * d % r)
    inv = pow(prefix[-1], -1, r)
    out = [Scalar(0)] * len(dens)
    for k in range(len(dens) - 1, -1, -1):
        out[k] = Scalar(nums[k] * inv % r * prefix[k] % r)
        inv = inv * dens[k] % r
    return out


def check_two(pk: G2Point, m1: bytes, s1: G1Point, m2: bytes, s2: G1Point) -> bool:
    """Both ``e(s1, G2) = e(H(m1), pk)`` and ``e(s2, G2) = e(H(m2), pk)``, as one pairing check of the random linear
    combination ``e(s1 + c·s2, G2) = e(H(m1) + c·H(m2), pk)``; ``c`` (128 bits, non-zero) is hashed from the
    key, both messages and both signatures, so a pair that fails passes with probability about 2^-128."""
    h = hashlib.sha256(_PAIR_DOMAIN)
    for part in (bytes(pk.to_compressed_bytes()), m1, bytes(s1.to_compressed_bytes()), m2,
                 bytes(s2.to_compressed_bytes())):
        h.update(len(part).to_bytes(8, "big") + part)
    c = Scalar(int.from_bytes(h.digest()[:16], "big") | 1)
    one = Scalar(1)
    dst = bls.DST_G1_SIG
    agg_sig = G1Point.multiexp_unchecked([s1, s2], [one, c])
    agg_h = G1Point.multiexp_unchecked([bls.hash_to_g1(m1, dst), bls.hash_to_g1(m2, dst)], [one, c])
    return bool(GT.pairing_check([agg_sig, -agg_h], [_G2_GEN, pk]))


def interpolate_pair(shares: Sequence[tuple[int, bytes, bytes]]) -> tuple[bytes, bytes]:
    """``(share index, partial a, partial b)`` for distinct indices → the two values at x = 0 (compressed). The
    partials are NOT checked (decoded without the subgroup check): the caller verifies the results. Raises
    ValueError on bytes that do not decode."""
    lambdas = _lagrange_at_zero([i for i, _, _ in shares])
    a = G1Point.multiexp_unchecked([G1Point.from_compressed_bytes_unchecked(x) for _, x, _ in shares], lambdas)
    b = G1Point.multiexp_unchecked([G1Point.from_compressed_bytes_unchecked(y) for _, _, y in shares], lambdas)
    return bytes(a.to_compressed_bytes()), bytes(b.to_compressed_bytes())


def interpolate_one(shares: Sequence[tuple[int, bytes]]) -> bytes:
    """``(share index, partial)`` for distinct indices → the value at x = 0 (compressed), as
    :func:`interpolate_pair` for one set of partials: NOT checked, the caller verifies the result."""
    lambdas = _lagrange_at_zero([i for i, _ in shares])
    a = G1Point.multiexp_unchecked([G1Point.from_compressed_bytes_unchecked(x) for _, x in shares], lambdas)
    return bytes(a.to_compressed_bytes())


def check_one(pk: G2Point, message: bytes, signature: G1Point) -> bool:
    """``e(signature, G2) = e(H(message), pk)`` (one pairing check; ``signature`` decoded strictly)."""
    h = bls.hash_to_g1(bytes(message))
    return bool(GT.pairing_check([signature, -h], [_G2_GEN, pk]))
