"""LevelDB-backed :class:`~cowboy_node.state.kv_store.StateStore` (plyvel).

Write batches use ``transaction=True``: if producing the ops raises, the batch
is discarded and nothing is written. Iterators read from LevelDB's implicit
snapshot taken when the iteration starts; :meth:`LevelDBStore.snapshot` gives an
explicit one (:class:`LevelDBSnapshot`, read-only) for readers that must see one
state across many reads without holding the writer's lock.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

import plyvel

from cowboy_node.state.kv_store import StoreError, WriteOp, key_range


class LevelDBStore:
    """A LevelDB database at ``path`` (a directory, created if missing unless told otherwise)."""

    def __init__(self, path: str | os.PathLike[str], *, create_if_missing: bool = True,
                 cache_bytes: int = 128 << 20, write_buffer_bytes: int = 8 << 20) -> None:
        self.path = os.fspath(path)
        try:
            self._db: Any = plyvel.DB(
                self.path, create_if_missing=create_if_missing, bloom_filter_bits=10,
                lru_cache_size=cache_bytes, write_buffer_size=write_buffer_bytes, max_open_files=1000,
            )
        except (plyvel.Error, OSError) as e:
            raise StoreError(f"cannot open LevelDB store at {self.path}: {e}") from e

    def get(self, key: bytes) -> bytes | None:
        """Value of ``key``, or None."""
        value: bytes | None = self._db.get(key)
        return value

    def iterate(self, prefix: bytes = b"", *, start: bytes | None = None,
                reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        """Pairs under ``prefix`` in key order from ``start`` (inclusive); see StateStore."""
        return _iterate(self._db, prefix, start, reverse)

    def write_batch(self, ops: Iterable[WriteOp], *, sync: bool = True) -> None:
        """Apply ``ops`` atomically; ``sync`` waits for the write-ahead log to reach the disk."""
        with self._db.write_batch(transaction=True, sync=sync) as wb:
            put, delete = wb.put, wb.delete
            for key, value in ops:  # plyvel rejects non-bytes; the transaction then discards the batch
                if value is None:
                    delete(key)
                else:
                    put(key, value)

    def snapshot(self) -> LevelDBSnapshot:
        """A read-only view of the database as of now (LevelDB snapshot); see StateStore.snapshot."""
        try:
            return LevelDBSnapshot(self._db.snapshot(), self.path)
        except RuntimeError as e:  # the database is closed
            raise StoreError(f"cannot snapshot LevelDB store at {self.path}: {e}") from e

    def compact(self) -> None:
        """Compact the whole key range (maintenance and benchmarks; not needed for correctness)."""
        self._db.compact_range()

    def close(self) -> None:
        """Close the database (idempotent)."""
        if not self._db.closed:
            self._db.close()


class LevelDBSnapshot:
    """A point-in-time, read-only view of a :class:`LevelDBStore` (``get``/``iterate`` as the store's).

    Closing the database closes its snapshots too (reads then raise ``RuntimeError``).
    """

    def __init__(self, snap: Any, path: str) -> None:
        self._snap = snap
        self.path = path

    def get(self, key: bytes) -> bytes | None:
        """Value of ``key`` at the snapshot, or None."""
        value: bytes | None = self._snap.get(key)
        return value

    def iterate(self, prefix: bytes = b"", *, start: bytes | None = None,
                reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        """Pairs under ``prefix`` at the snapshot, in key order from ``start`` (inclusive); see StateStore."""
        return _iterate(self._snap, prefix, start, reverse)

    def write_batch(self, ops: Iterable[WriteOp], *, sync: bool = True) -> None:
        """Always raises StoreError: a snapshot is read-only."""
        raise StoreError(f"a snapshot of the LevelDB store at {self.path} is read-only")

    def snapshot(self) -> LevelDBSnapshot:
        """Itself (it does not change)."""
        return self

    def close(self) -> None:
        """Release the snapshot (idempotent)."""
        self._snap.close()


def _iterate(source: Any, prefix: bytes, start: bytes | None, reverse: bool) -> Iterator[tuple[bytes, bytes]]:
    """``iterate`` over a plyvel DB or Snapshot (both have ``iterator`` and ``raw_iterator``)."""
    bounds = key_range(prefix, start, reverse)
    if bounds is None:
        return iter(())
    lower, upper = bounds
    if reverse:
        return _iter_desc(source, lower, upper)
    it: Iterator[tuple[bytes, bytes]] = source.iterator(start=lower, stop=upper)
    return it


def _iter_desc(source: Any, lower: bytes, upper: bytes | None) -> Iterator[tuple[bytes, bytes]]:
    # plyvel's reverse range iterator drops the range's first key when it is the
    # only one before `stop`; walk a raw iterator backwards instead.
    it = source.raw_iterator()
    try:
        if upper is None:
            it.seek_to_last()
        else:
            it.seek(upper)
            if it.valid():
                it.prev()
            else:
                it.seek_to_last()
        while it.valid():
            key: bytes = it.key()
            if key < lower:
                return
            value: bytes = it.value()
            yield key, value
            it.prev()
    finally:
        it.close()
