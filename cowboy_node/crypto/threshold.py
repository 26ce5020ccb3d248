"""Threshold BLS (Shamir over the scalar field, Lagrange interpolation in the exponent).

With n = t = 1 the single share is the secret and recovery is the identity.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from py_arkworks_bls12381 import G1Point, Scalar

from cowboy_node.crypto import bls


@dataclass(frozen=True, slots=True)
class Share:
    """One participant's share of the group secret."""

    index: int
    """1-based evaluation point."""
    secret: int
    """f(index)."""


@dataclass(frozen=True, slots=True)
class Dealing:
    """Result of dealing a secret to n participants with threshold t."""

    group_public_key: bytes
    """f(0)·G2 (96 bytes)."""
    shares: tuple[Share, ...]
    """Shares 1..n."""
    share_public_keys: tuple[bytes, ...]
    """f(i)·G2 for each share."""
    threshold: int
    """Partials needed to recover a group signature."""


def deal(secret: int, n: int, t: int, coefficient_seed: bytes) -> Dealing:
    """Deterministic polynomial of degree t−1 with f(0) = secret, evaluated at 1..n."""
    if not 1 <= t <= n:
        raise ValueError("need 1 ≤ t ≤ n")
    coeffs = [secret % bls.R] + [
        int.from_bytes(hashlib.sha512(coefficient_seed + i.to_bytes(4, "big")).digest(), "big") % bls.R
        for i in range(1, t)
    ]
    shares = []
    for x in range(1, n + 1):
        y = 0
        for c in reversed(coeffs):
            y = (y * x + c) % bls.R
        shares.append(Share(x, y))
    return Dealing(bls.public_key(coeffs[0]), tuple(shares), tuple(bls.public_key(s.secret) for s in shares), t)


def partial_sign(share: Share, message: bytes, dst: bytes = bls.DST_G1_SIG) -> bytes:
    """This share's signature over ``message``."""
    return bls.sign(share.secret, message, dst)


def verify_partial(share_public_key: bytes, message: bytes, partial: bytes, dst: bytes = bls.DST_G1_SIG) -> bool:
    """Check a partial signature against the share's public key."""
    return bls.verify(share_public_key, message, partial, dst)


def recover(partials: Sequence[tuple[int, bytes]], t: int) -> bytes:
    """Group signature from ≥ t partials (the t smallest distinct indices are used)."""
    by_index = dict(sorted(partials))
    if len(by_index) < t:
        raise ValueError(f"need {t} distinct partials, got {len(by_index)}")
    chosen = sorted(by_index)[:t]
    acc = G1Point.identity()
    for i in chosen:
        num, den = 1, 1
        for j in chosen:
            if j != i:
                num = num * j % bls.R
                den = den * (j - i) % bls.R
        coeff = num * pow(den, -1, bls.R) % bls.R
        acc = acc + G1Point.from_compressed_bytes(by_index[i]) * Scalar(coeff)
    return bytes(acc.to_compressed_bytes())
