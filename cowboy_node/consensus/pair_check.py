"""Pairing helpers of certificate assembly (:mod:`cowboy_node.consensus.simplex.scheme`): two BLS signatures under
one key checked with one pairing product, and the interpolation of two sets of partials at once.

Kept out of the sans-I/O ``simplex`` package, which imports no third-party module.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from py_arkworks_bls12381 import GT, G1Point, G2Point, Scalar

from cowboy_node.crypto import bls

__all__ = ["check_two", "interpolate_pair"]

_G2_GEN = G2Point()
_PAIR_DOMAIN = b"cowboy-simplex-pair-check-v1:"


def _lagrange_at_zero(indices: Sequence[int]) -> list[Scalar]:
    """Lagrange basis coefficients at x = 0 for the distinct share ``indices``."""
    r = bls.R
    out = []
    for i in indices:
        num = den = 1
        for j in indices:
            if j != i:
                num = num * j % r
                den = den * (j - i) % r
        out.append(Scalar(num * pow(den, -1, r) % r))
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
    agg_h = G1Point.multiexp_unchecked([G1Point.hash_to_curve(m1, dst), G1Point.hash_to_curve(m2, dst)], [one, c])
    return bool(GT.pairing_check([agg_sig, -agg_h], [_G2_GEN, pk]))


def interpolate_pair(shares: Sequence[tuple[int, bytes, bytes]]) -> tuple[bytes, bytes]:
    """``(share index, partial a, partial b)`` for distinct indices → the two values at x = 0 (compressed). The
    partials are NOT checked (decoded without the subgroup check): the caller verifies the results. Raises
    ValueError on bytes that do not decode."""
    lambdas = _lagrange_at_zero([i for i, _, _ in shares])
    a = G1Point.multiexp_unchecked([G1Point.from_compressed_bytes_unchecked(x) for _, x, _ in shares], lambdas)
    b = G1Point.multiexp_unchecked([G1Point.from_compressed_bytes_unchecked(y) for _, _, y in shares], lambdas)
    return bytes(a.to_compressed_bytes()), bytes(b.to_compressed_bytes())
