"""Batch verification of threshold partials with bisection (as commonware's batcher): many partials over one
message checked with one pairing check, and on failure split in halves until every bad one is named.

Deterministic and sans-I/O: the random-linear-combination coefficients are hashed from every input (message,
signer indices, partial bytes), so the same inputs always cost the same checks and give the same verdict, and a
forger, who must fix its partials before the coefficients exist, passes a batch with probability about 2^-128.
Partials are decoded strictly once (subgroup, not the identity); one that does not decode is bad without any
pairing. With ``b`` bad partials among ``k`` the bisection costs at most ``1 + 2·b·⌈log2 k⌉`` pairing checks,
against ``1 + k`` for a batch followed by one-by-one checks (``threshold.recover_checked``).

Kept out of the sans-I/O ``simplex`` package, which imports no third-party module.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from py_arkworks_bls12381 import GT, G1Point, G2Point, Scalar

from cowboy_node.crypto import bls

__all__ = ["BatchStats", "bad_partials", "bisect_bad"]

T = TypeVar("T")

_G2_GEN = G2Point()
_DOMAIN = b"cowboy-partial-batch-v1:"


class BatchStats:
    """Counts what a batch verification spent (for tests and benchmarks)."""

    def __init__(self) -> None:
        self.checks = 0
        """Pairing checks made (each one aggregated check of a sub-batch)."""
        self.undecodable = 0
        """Partials rejected at decoding, before any pairing."""


def bisect_bad(items: Sequence[T], check: Callable[[Sequence[T]], bool]) -> list[T]:
    """The items of ``items`` that fail ``check`` alone, found by checking the whole batch once and, on failure,
    each half in turn (``check`` of one item is that item's own verification). In input order. ``check`` must
    be monotone: a batch passes iff every item in it passes (true of an aggregated check with random
    coefficients, up to its 2^-128 error)."""
    if not items:
        return []
    if check(items):
        return []
    return _split(list(items), check)


def _split(items: list[T], check: Callable[[Sequence[T]], bool]) -> list[T]:
    """``items`` is known to fail as a whole: name its bad members."""
    if len(items) == 1:
        return items
    mid = len(items) // 2
    left, right = items[:mid], items[mid:]
    if check(left):  # the failure is all on the right: no need to check the right half as a whole
        return _split(right, check)
    bad = _split(left, check)
    return bad + ([] if check(right) else _split(right, check))


def _coefficients(message: bytes, partials: Sequence[tuple[int, bytes]]) -> list[Scalar]:
    """128-bit non-zero coefficients, one per partial, hashed from the message and every (signer, partial)."""
    h = hashlib.sha256(_DOMAIN + len(message).to_bytes(8, "big") + message)
    for i, p in partials:
        h.update(i.to_bytes(4, "big") + len(p).to_bytes(2, "big") + p)
    root = h.digest()
    return [Scalar(int.from_bytes(hashlib.sha256(root + k.to_bytes(4, "big")).digest()[:16], "big") | 1)
            for k in range(len(partials))]


def bad_partials(public_keys: Mapping[int, G2Point], message: bytes, partials: Sequence[tuple[int, bytes]],
                 dst: bytes = bls.DST_G1_SIG, stats: BatchStats | None = None) -> frozenset[int]:
    """Signers among ``partials`` (``(signer, partial)``, distinct signers, each with a key in
    ``public_keys``) whose partial is not their signature over ``message``: undecodable ones at once, the rest
    by one aggregated pairing check ``e(Σ cᵢ·sᵢ, G2) = e(H(m), Σ cᵢ·pkᵢ)`` and bisection on failure. Never
    raises on bad partials."""
    stats = stats if stats is not None else BatchStats()
    bad: set[int] = set()
    decoded: list[tuple[int, G1Point, G2Point, Scalar]] = []
    coeffs = _coefficients(bytes(message), [(i, bytes(p)) for i, p in partials])
    for (i, p), c in zip(partials, coeffs, strict=True):
        try:
            decoded.append((i, bls.decode_g1(p), public_keys[i], c))
        except (bls.InvalidPoint, KeyError):
            stats.undecodable += 1
            bad.add(i)
    h = bls.hash_to_g1(bytes(message), bytes(dst))

    def check(batch: Sequence[tuple[int, G1Point, G2Point, Scalar]]) -> bool:
        stats.checks += 1
        scalars = [c for _, _, _, c in batch]
        agg_sig = G1Point.multiexp_unchecked([s for _, s, _, _ in batch], scalars)  # decoded strictly above
        agg_pk = G2Point.multiexp_unchecked([pk for _, _, pk, _ in batch], scalars)
        return bool(GT.pairing_check([agg_sig, -h], [_G2_GEN, agg_pk]))

    bad.update(i for i, _, _, _ in bisect_bad(decoded, check))
    return frozenset(bad)
