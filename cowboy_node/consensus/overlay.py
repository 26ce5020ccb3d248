"""A read-only view of the committed store through the writes of blocks that are notarized but not yet final.

Simplex lets a leader build on a notarized block before it is finalized, and a validator must verify such a
block to vote for it: both execute on the parent's state, which is the committed store plus the state writes
of every uncommitted ancestor. Those writes are exactly the ancestors' ``state_ops`` (raw values and tree
nodes, later writes winning), so a world over this overlay computes the same roots and ops as it would once
the ancestors are committed.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence

from cowboy_node.chain.blockstore import STATE_PREFIX, TREE_PREFIX
from cowboy_node.state.kv_store import StateStore, StoreError, WriteOp, key_range
from cowboy_node.state.tree import StateTree
from cowboy_node.state.world import WorldState

_MISSING = object()


class OverlayStore:
    """``base`` as if ``layers`` (oldest first) had been written on it; writing is refused."""

    def __init__(self, base: StateStore, layers: Sequence[Sequence[WriteOp]]) -> None:
        self._base = base
        self._writes: dict[bytes, bytes | None] = {}
        for ops in layers:
            for key, value in ops:
                self._writes[key] = value
        self._keys = sorted(self._writes)

    def get(self, key: bytes) -> bytes | None:
        """The newest layer's value of ``key``, else the base's."""
        v = self._writes.get(key, _MISSING)
        if v is _MISSING:
            return self._base.get(key)
        return v  # type: ignore[return-value]

    def iterate(self, prefix: bytes = b"", *, start: bytes | None = None,
                reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        """The base's pairs merged with the layers' (a layer's delete hides the base key)."""
        rng = key_range(prefix, start, reverse)
        if rng is None:
            return
        lo, hi = rng
        i, j = bisect.bisect_left(self._keys, lo), (len(self._keys) if hi is None
                                                    else bisect.bisect_left(self._keys, hi))
        mine = self._keys[i:j]
        if reverse:
            mine.reverse()
        base = self._base.iterate(prefix, start=start, reverse=reverse)
        yield from _merge(base, [(k, self._writes[k]) for k in mine], reverse)

    def write_batch(self, ops: Iterable[WriteOp], *, sync: bool = True) -> None:
        """Refused: an overlay is read-only."""
        raise StoreError("an overlay store is read-only")

    def snapshot(self) -> StateStore:
        """Itself (it never changes while the base does not)."""
        return self

    def close(self) -> None:
        """Nothing to release (the base belongs to its owner)."""


def _merge(base: Iterator[tuple[bytes, bytes]], mine: list[tuple[bytes, bytes | None]],
           reverse: bool) -> Iterator[tuple[bytes, bytes]]:
    def before(a: bytes, b: bytes) -> bool:
        return a > b if reverse else a < b

    k = 0
    for key, value in base:
        while k < len(mine) and before(mine[k][0], key):
            if mine[k][1] is not None:
                yield mine[k][0], mine[k][1]  # type: ignore[misc]
            k += 1
        if k < len(mine) and mine[k][0] == key:
            if mine[k][1] is not None:
                yield key, mine[k][1]  # type: ignore[misc]
            k += 1
            continue
        yield key, value
    for key, value2 in mine[k:]:
        if value2 is not None:
            yield key, value2


def overlay_world(base: StateStore, layers: Sequence[Sequence[WriteOp]]) -> WorldState:
    """A buffered world over ``base`` plus ``layers``, with its own uncached tree (shares nothing with the
    head's tree, whose cache must only ever reflect committed nodes)."""
    store = OverlayStore(base, layers)
    return WorldState(store, StateTree(store, TREE_PREFIX, cache_size=0), data_prefix=STATE_PREFIX)
