"""Present-first weighted committee draw (CIP-11 §7.3, §9.2 ``partition`` / ``weighted_draw``, §9.3 MRU).

Consensus-critical, pinned exactly:

* ``partition`` is stable: it walks the eligible list in its order (address ascending) and appends each
  runner to ``present`` iff its registry index is marked present, else to ``fallback``. Neither output is
  re-sorted.
* ``weighted_draw(weights, seed, i)``: ``total = Σ weights`` (u128); None if the pool is empty or
  ``total == 0``; ``h = keccak256(seed ‖ i_le8)``; ``ticket = u64_le(h[0:8]) % total``; walk the weights in
  pool order, returning the first ``j`` with ``ticket < weights[j]`` after subtracting every weight passed.
* The committee loop keeps one global counter ``i`` across the present→fallback boundary; the active pool
  is ``present`` while it is non-empty, then ``fallback`` (never their concatenation); the winner is
  removed from the pool *and* its paired weight with ``swap_remove(j)`` (the last element takes slot ``j``);
  the seed is the same for every iteration; the MRU multiplier applies once, at ``i == 0`` only, and only
  if the MRU runner is in the pool active then. A None draw or two empty pools end the loop early
  (under-fill is handled by timeout re-selection, §11.2).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import TypeVar

from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.fields import U64_MAX, U128_MAX
from cowboy_protocol.types.runner import RunnerRecord

T = TypeVar("T")


def partition(eligible: Sequence[RunnerRecord],
              present_indices: frozenset[int]) -> tuple[list[RunnerRecord], list[RunnerRecord]]:
    """Split ``eligible`` into (present, fallback) by registry-index membership, keeping the input order."""
    present: list[RunnerRecord] = []
    fallback: list[RunnerRecord] = []
    for r in eligible:
        (present if r.index in present_indices else fallback).append(r)
    return present, fallback


def draw_hash(seed: bytes, i: int) -> bytes:
    """``keccak256(seed ‖ i_le8)``: the randomness of global draw iteration ``i``."""
    if not 0 <= i <= U64_MAX:
        raise ValueError("draw iteration out of u64 range")
    return keccak256(seed + i.to_bytes(8, "little"))


def _pick(weights: Sequence[int], total: int, seed: bytes, i: int) -> int:
    ticket = int.from_bytes(draw_hash(seed, i)[:8], "little") % total
    # The pinned walk ("subtract each passed weight until ticket < weights[j]") selects exactly the first j
    # whose prefix sum exceeds the ticket; bisect over the running sums gives it without a Python-level loop.
    return bisect_right(list(accumulate(weights)), ticket)


def weighted_draw(weights: Sequence[int], seed: bytes, i: int) -> int | None:
    """Index drawn from a pool with these (non-negative) ``weights`` at global iteration ``i``, or None."""
    total = sum(weights)
    if not weights or total == 0:
        return None
    if total > U128_MAX:
        raise ValueError("total weight exceeds u128")
    return _pick(weights, total, seed, i)


def swap_remove(items: list[T], j: int) -> T:
    """Rust ``Vec::swap_remove``: remove and return ``items[j]``, moving the last element into slot ``j``."""
    last = items.pop()
    if j == len(items):
        return last
    out = items[j]
    items[j] = last
    return out


def draw_committee_weighted(present: Sequence[RunnerRecord], present_weights: Sequence[int],
                            fallback: Sequence[RunnerRecord], fallback_weights: Sequence[int], m: int, seed: bytes,
                            mru_address: bytes | None, *, mru_multiplier: int) -> list[RunnerRecord]:
    """The committee of up to ``m`` runners, given each pool with its paired weights (inputs are not mutated)."""
    if len(present) != len(present_weights) or len(fallback) != len(fallback_weights):
        raise ValueError("every pool needs exactly one weight per runner")
    pools: tuple[tuple[list[RunnerRecord], list[int]], ...] = (
        (list(present), list(present_weights)), (list(fallback), list(fallback_weights)))
    selected: list[RunnerRecord] = []
    i = 0
    while len(selected) < m:
        pool, weights = pools[0] if pools[0][0] else pools[1]
        if not pool:
            break
        mru_slot = -1
        if i == 0 and mru_address is not None:
            addresses = [r.address for r in pool]
            mru_slot = addresses.index(mru_address) if mru_address in addresses else -1
        if mru_slot >= 0:
            base = weights[mru_slot]
            weights[mru_slot] = base * mru_multiplier  # iteration 0 only: restored right after the draw
            j = weighted_draw(weights, seed, i)
            weights[mru_slot] = base
        else:
            j = weighted_draw(weights, seed, i)
        if j is None:
            break
        selected.append(pool[j])
        swap_remove(pool, j)
        swap_remove(weights, j)
        i += 1
    return selected


def draw_committee(present: Sequence[RunnerRecord], fallback: Sequence[RunnerRecord],
                   weight_of: Callable[[RunnerRecord], int], m: int, seed: bytes, mru_address: bytes | None, *,
                   mru_multiplier: int) -> list[RunnerRecord]:
    """The committee of up to ``m`` runners; each runner's weight is ``weight_of(runner)``, paired with it."""
    return draw_committee_weighted(present, [weight_of(r) for r in present], fallback,
                                   [weight_of(r) for r in fallback], m, seed, mru_address,
                                   mru_multiplier=mru_multiplier)
