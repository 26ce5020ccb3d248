"""Threshold BLS for the consensus beacon (MinSig, see :mod:`cowboy_node.crypto.bls`).

A dealer picks a polynomial ``f`` of degree ``t − 1`` over the scalar field with
``f(0) = secret`` and hands participant ``i`` (1-based) the share ``f(i)``.  A partial
signature is a plain BLS signature under a share; any ``t`` of them combine, by Lagrange
interpolation at 0 in the exponent, into ``secret·H(m)`` — exactly the plain signature
under the group secret, so it verifies with :func:`bls.verify` under the group public key.
With ``n = t = 1`` the single share is the secret itself.

The dealing is publicly checkable (Feldman VSS): the dealer publishes the commitment
``C_j = c_j·G2`` to each coefficient, a participant checks its share with
:func:`verify_share` (``f(i)·G2 == Σ_j i^j·C_j``), and anyone derives every share public key
from the commitment alone (:func:`share_public_key`). :func:`recover_checked` verifies the
partials it is given (one batched pairing check, then one by one to name the bad signers) and
recovers from good ones only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from cowboy_node.crypto import bls

__all__ = [
    "BadPartials",
    "Dealing",
    "Recovery",
    "Share",
    "deal",
    "partial_sign",
    "recover",
    "recover_checked",
    "share_public_key",
    "verify_partial",
    "verify_share",
]

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
    commitment: tuple[bytes, ...] = ()
    """Feldman commitment ``(c_0·G2, …, c_{t−1}·G2)`` (96 bytes each); ``commitment[0]`` is the group key."""


@dataclass(frozen=True, slots=True)
class Recovery:
    """What :func:`recover_checked` found."""

    signature: bytes | None
    """The group signature (48 bytes), or None when fewer than ``t`` good partials remained."""
    bad: frozenset[int]
    """Indices whose partial did not verify (undecodable, wrong key, wrong message)."""


class BadPartials(ValueError):
    """Too few good partials to recover; :attr:`bad` names the signers whose partials failed."""

    def __init__(self, message: str, bad: frozenset[int]) -> None:
        super().__init__(message)
        self.bad = bad


def _eval_commitment(points: Sequence[G2Point], x: int) -> G2Point:
    acc = G2Point.identity()
    for c in reversed(points):  # Horner in the exponent
        acc = acc * Scalar(x) + c
    return acc


def share_public_key(commitment: Sequence[bytes], index: int) -> bytes:
    """``f(index)·G2`` from the Feldman commitment alone (96 bytes); the commitment points are decoded
    strictly (:func:`bls.decode_g2`), so a malformed commitment raises :class:`bls.InvalidPoint`."""
    if not commitment:
        raise ValueError("empty commitment")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 < index < _R:
        raise ValueError(f"share index must be an integer in [1, r), got {index!r}")
    return bytes(_eval_commitment([bls.decode_g2(c) for c in commitment], index).to_compressed_bytes())


def verify_share(commitment: Sequence[bytes], share: Share) -> bool:
    """Feldman check of a dealt share: ``share.secret·G2 == Σ_j index^j·C_j``. Never raises."""
    try:
        if not 0 < share.secret < _R:
            return False
        return bls.public_key(share.secret) == share_public_key(commitment, share.index)
    except (ValueError, bls.InvalidPoint):
        return False


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
    commitment = tuple(bls.public_key(c) if c else bytes(G2Point.identity().to_compressed_bytes())
                       for c in coeffs)
    return Dealing(
        group_public_key=bls.public_key(secret),
        shares=tuple(shares),
        share_public_keys=tuple(bls.public_key(s.secret) for s in shares),
        threshold=t,
        commitment=commitment,
    )


def partial_sign(share: Share, message: bytes, dst: bytes = bls.DST_G1_SIG) -> bytes:
    """This share's partial signature over ``message`` (a plain BLS signature, 48 bytes)."""
    return bls.sign(share.secret, message, dst)


def verify_partial(share_public_key: bytes, message: bytes, partial: bytes, dst: bytes = bls.DST_G1_SIG) -> bool:
    """Check a partial signature against the signer's share public key; never raises."""
    return bls.verify(share_public_key, message, partial, dst)


def recover(partials: Sequence[tuple[int, bytes]], t: int, *, message: bytes | None = None,
            public_keys: Mapping[int, bytes] | None = None, dst: bytes = bls.DST_G1_SIG) -> bytes:
    """Combine partial signatures ``(index, partial)`` into the 48-byte group signature.

    Needs at least ``t`` distinct indices; the ``t`` smallest are used.  Repeating an index
    with the same bytes is harmless, with different bytes a ValueError.  Partials are not
    verified here (do that with :func:`verify_partial` first): a bad one yields a group
    signature that does not verify.  Raises ValueError on too few partials, an index
    outside [1, r), or an undecodable partial.

    With ``message`` and ``public_keys`` the partials are verified first (:func:`recover_checked`):
    bad ones are left out, and :class:`BadPartials` (naming them) is raised only when fewer than
    ``t`` good ones remain.
    """
    if message is not None or public_keys is not None:
        if message is None or public_keys is None:
            raise ValueError("message and public_keys go together")
        result = recover_checked(partials, t, message=message, public_keys=public_keys, dst=dst)
        if result.signature is None:
            raise BadPartials(f"fewer than {t} good partials (bad: {sorted(result.bad)})", result.bad)
        return result.signature
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
            points.append(bls.decode_g1(by_index[i]))
        except bls.InvalidPoint:
            raise ValueError(f"partial for index {i} is not a valid G1 point") from None
    lambdas: list[Scalar] = []
    for i in chosen:
        num = den = 1
        for j in chosen:  # λ_i = Π_{j≠i} j / (j − i)  (Lagrange basis at x = 0)
            if j != i:
                num = num * j % _R
                den = den * (j - i) % _R
        lambdas.append(Scalar(num * pow(den, -1, _R) % _R))
    acc = G1Point.multiexp_unchecked(points, lambdas)  # points were decoded strictly above
    return bytes(acc.to_compressed_bytes())


def recover_checked(partials: Sequence[tuple[int, bytes]], t: int, *, message: bytes,
                    public_keys: Mapping[int, bytes], dst: bytes = bls.DST_G1_SIG) -> Recovery:
    """Verify ``(index, partial)`` pairs over ``message`` and recover the group signature from good ones only.

    ``public_keys`` maps an index to its share public key (:func:`share_public_key`); an index without
    a key counts as bad. The ``t`` smallest indices are first checked together with one batched pairing
    check; if that fails each is checked alone, the bad ones are set aside and the next candidates
    tried, until ``t`` good partials are found or none are left. Conflicting bytes for one index make
    that index bad. Never raises on bad input partials (only on ``t < 1``).
    """
    if t < 1:
        raise ValueError(f"threshold must be ≥ 1, got {t}")
    bad: set[int] = set()
    by_index: dict[int, bytes] = {}
    for index, partial in partials:
        if isinstance(index, bool) or not isinstance(index, int) or index not in public_keys:
            if isinstance(index, int) and not isinstance(index, bool):
                bad.add(index)
            continue
        seen = by_index.setdefault(index, bytes(partial))
        if seen != bytes(partial):
            bad.add(index)
    candidates = sorted(i for i in by_index if i not in bad)
    good: list[int] = []
    while len(good) < t and len(good) + len(candidates) >= t:
        take, candidates = candidates[:t - len(good)], candidates[t - len(good):]
        if bls.batch_verify_same_message([(public_keys[i], by_index[i]) for i in take], message, dst):
            good.extend(take)
            continue
        for i in take:
            if bls.verify(public_keys[i], message, by_index[i], dst):
                good.append(i)
            else:
                bad.add(i)
    if len(good) < t:
        return Recovery(None, frozenset(bad))
    return Recovery(recover([(i, by_index[i]) for i in good], t), frozenset(bad))
