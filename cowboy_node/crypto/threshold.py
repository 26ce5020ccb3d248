"""Threshold BLS for the consensus beacon (MinSig, see :mod:`cowboy_node.crypto.bls`).

A dealer picks a polynomial ``f`` of degree ``t − 1`` over the scalar field with
``f(0) = secret`` and hands participant ``i`` (1-based) the share ``f(i)``.  A partial
signature is a plain BLS signature under a share; any ``t`` of them combine, by Lagrange
interpolation at 0 in the exponent, into ``secret·H(m)`` — exactly the plain signature
under the group secret, so it verifies with :func:`bls.verify` under the group public key.
With ``n = t = 1`` the single share is the secret itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from py_arkworks_bls12381 import G1Point, Scalar

from cowboy_node.crypto import bls

__all__ = ["Dealing", "Share", "deal", "partial_sign", "recover", "verify_partial"]

_R = bls.R


@dataclass(frozen=True, slots=True)
class Share:
    """One participant's share of the group secret."""

    index: int
    """1-based evaluation point ``i``."""
    secret: int
    """``f(i)``, a scalar in [1, r)."""


@dataclass(frozen=True, slots=True)
class Dealing:
    """The result of dealing a secret to ``n`` participants with threshold ``t``."""

    group_public_key: bytes
    """``f(0)·G2`` = ``bls.public_key(secret)``, 96 bytes."""
    shares: tuple[Share, ...]
    """Shares for indices 1..n, in order."""
    share_public_keys: tuple[bytes, ...]
    """``f(i)·G2`` for each share, same order (checks partials with :func:`verify_partial`)."""
    threshold: int
    """Number ``t`` of distinct partials needed to recover a group signature."""


def _coefficient(coefficient_seed: bytes, i: int) -> int:
    """Coefficient of ``x^i`` (i ≥ 1): SHA-512(seed ‖ uint32_be(i)) mod r."""
    return int.from_bytes(hashlib.sha512(coefficient_seed + i.to_bytes(4, "big")).digest(), "big") % _R


def deal(secret: int, n: int, t: int, coefficient_seed: bytes) -> Dealing:
    """Share ``secret`` (in [1, r)) among ``n`` participants so that any ``t`` can sign.

    The polynomial is deterministic: ``f(x) = secret + Σ_{i=1}^{t−1} c_i x^i`` with
    ``c_i = SHA-512(coefficient_seed ‖ uint32_be(i)) mod r``.  The seed determines every
    share, so it must be secret and high-entropy (32 random bytes).
    """
    if isinstance(secret, bool) or not isinstance(secret, int) or not 0 < secret < _R:
        raise bls.InvalidBlsKey("group secret must be an integer in [1, r)")
    if not 1 <= t <= n:
        raise ValueError(f"need 1 ≤ t ≤ n, got n={n}, t={t}")
    coeffs = [secret] + [_coefficient(bytes(coefficient_seed), i) for i in range(1, t)]
    shares = []
    for x in range(1, n + 1):
        y = 0
        for c in reversed(coeffs):  # Horner
            y = (y * x + c) % _R
        shares.append(Share(x, y))
    return Dealing(
        group_public_key=bls.public_key(secret),
        shares=tuple(shares),
        share_public_keys=tuple(bls.public_key(s.secret) for s in shares),
        threshold=t,
    )


def partial_sign(share: Share, message: bytes, dst: bytes = bls.DST_G1_SIG) -> bytes:
    """This share's partial signature over ``message`` (a plain BLS signature, 48 bytes)."""
    return bls.sign(share.secret, message, dst)


def verify_partial(share_public_key: bytes, message: bytes, partial: bytes, dst: bytes = bls.DST_G1_SIG) -> bool:
    """Check a partial signature against the signer's share public key; never raises."""
    return bls.verify(share_public_key, message, partial, dst)


def recover(partials: Sequence[tuple[int, bytes]], t: int) -> bytes:
    """Combine partial signatures ``(index, partial)`` into the 48-byte group signature.

    Needs at least ``t`` distinct indices; the ``t`` smallest are used.  Repeating an index
    with the same bytes is harmless, with different bytes a ValueError.  Partials are not
    verified here (do that with :func:`verify_partial` first): a bad one yields a group
    signature that does not verify.  Raises ValueError on too few partials, an index
    outside [1, r), or an undecodable partial.
    """
    if t < 1:
        raise ValueError(f"threshold must be ≥ 1, got {t}")
    by_index: dict[int, bytes] = {}
    for index, partial in partials:
        if isinstance(index, bool) or not isinstance(index, int) or not 0 < index < _R:
            raise ValueError(f"share index must be an integer in [1, r), got {index!r}")
        seen = by_index.setdefault(index, bytes(partial))
        if seen != partial:
            raise ValueError(f"conflicting partials for index {index}")
    if len(by_index) < t:
        raise ValueError(f"need {t} partials with distinct indices, got {len(by_index)}")
    chosen = sorted(by_index)[:t]
    points: list[G1Point] = []
    for i in chosen:
        try:
            points.append(G1Point.from_compressed_bytes(by_index[i]))
        except Exception:
            raise ValueError(f"partial for index {i} is not a valid G1 point") from None
    acc = G1Point.identity()
    for i, point in zip(chosen, points, strict=True):
        num = den = 1
        for j in chosen:  # λ_i = Π_{j≠i} j / (j − i)  (Lagrange basis at x = 0)
            if j != i:
                num = num * j % _R
                den = den * (j - i) % _R
        acc = acc + point * Scalar(num * pow(den, -1, _R) % _R)
    return bytes(acc.to_compressed_bytes())
