"""In-memory :class:`~cowboy_node.state.kv_store.StateStore` (tests, replay, tools).

A dict holds the values and a sorted list of keys (maintained with ``bisect``)
gives ordered iteration. ``write_batch`` first materialises and validates the
ops, so an exception while producing them leaves the store unchanged.

``snapshot()`` is copy-on-write: the snapshot shares the current dict and key
list, and the next write batch copies them before changing anything (one copy
per batch that follows snapshots, none per read).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Iterator

from cowboy_node.state.kv_store import StoreError, WriteOp, check_op, key_range

_CHUNK = 256
"""Keys copied from the index per step while iterating (the walk re-seeks between chunks)."""
_BULK = 64
"""Above this many inserted/removed keys a batch rebuilds the index instead of bisecting per key."""


class MemoryStore:
    """Ordered dict-backed store; iteration tolerates writes made while it is in progress."""

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._keys: list[bytes] = []
        self._closed = False
        self._shared = False  # a snapshot holds _data/_keys: copy them before the next write

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("memory store is closed")

    def get(self, key: bytes) -> bytes | None:
        """Value of ``key``, or None."""
        self._check_open()
        return self._data.get(key)

    def __len__(self) -> int:
        return len(self._data)

    def iterate(self, prefix: bytes = b"", *, start: bytes | None = None,
                reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        """Pairs under ``prefix`` in key order from ``start`` (inclusive); see StateStore."""
        self._check_open()
        bounds = key_range(prefix, start, reverse)
        if bounds is None:
            return iter(())
        lower, upper = bounds
        if reverse:
            return self._iter_desc(lower, upper)
        return self._iter_asc(lower, upper)

    def _iter_asc(self, lower: bytes, upper: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        keys = self._keys
        pos = bisect_left(keys, lower)
        while True:
            chunk = keys[pos:pos + _CHUNK]
            if not chunk:
                return
            for k in chunk:
                if upper is not None and k >= upper:
                    return
                v = self._data.get(k)
                if v is not None:
                    yield k, v
            keys = self._keys
            pos = bisect_right(keys, chunk[-1])

    def _iter_desc(self, lower: bytes, upper: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        keys = self._keys
        end = len(keys) if upper is None else bisect_left(keys, upper)
        while True:
            chunk = keys[max(0, end - _CHUNK):end]
            if not chunk:
                return
            for k in reversed(chunk):
                if k < lower:
                    return
                v = self._data.get(k)
                if v is not None:
                    yield k, v
            keys = self._keys
            end = bisect_left(keys, chunk[0])

    def write_batch(self, ops: Iterable[WriteOp], *, sync: bool = True) -> None:
        """Apply ``ops`` atomically (``sync`` is meaningless in memory)."""
        self._check_open()
        final: dict[bytes, bytes | None] = {}
        for op in ops:  # may raise: nothing has been applied yet
            key, value = check_op(op)
            final[key] = value
        if self._shared:
            self._data = dict(self._data)
            self._keys = list(self._keys)
            self._shared = False
        data = self._data
        added = sorted(k for k, v in final.items() if v is not None and k not in data)
        removed = sorted(k for k, v in final.items() if v is None and k in data)
        for k, v in final.items():
            if v is None:
                data.pop(k, None)
            else:
                data[k] = v
        keys = self._keys
        if removed:
            if len(removed) > _BULK:
                gone = set(removed)
                keys = [k for k in keys if k not in gone]
            else:
                for k in removed:
                    del keys[bisect_left(keys, k)]
        if added:
            if len(added) > _BULK:
                keys = sorted(keys + added)  # two sorted runs: a linear merge
            else:
                for k in added:
                    insort(keys, k)
        self._keys = keys

    def snapshot(self) -> MemorySnapshot:
        """A read-only view of the contents as of now (copy-on-write); see StateStore.snapshot."""
        self._check_open()
        self._shared = True
        return MemorySnapshot(self._data, self._keys)

    def close(self) -> None:
        """Drop the contents; further use raises StoreError (snapshots taken before stay readable)."""
        self._closed = True
        self._data = {}
        self._keys = []


class MemorySnapshot(MemoryStore):
    """A point-in-time, read-only view of a :class:`MemoryStore`: ``write_batch`` raises StoreError."""

    def __init__(self, data: dict[bytes, bytes], keys: list[bytes]) -> None:
        super().__init__()
        self._data = data  # shared with the store, which copies them before its next write
        self._keys = keys
        self._shared = True

    def write_batch(self, ops: Iterable[WriteOp], *, sync: bool = True) -> None:
        """Always raises StoreError: a snapshot is read-only."""
        raise StoreError("a memory store snapshot is read-only")

    def snapshot(self) -> MemorySnapshot:
        """Itself (it does not change)."""
        self._check_open()
        return self
