"""Execution-facing state view: buffered writes over the committed store, with nested checkpoints.

Reads fall through to the store (``data_prefix ‖ key``); writes stay pending
until :meth:`prepare_commit` turns them into store ops plus the tree update,
which the caller writes in its own atomic batch before calling
:meth:`mark_committed`. A journal of previous pending values makes
:meth:`revert` undo every write since a checkpoint (failed transactions,
reverted actor calls).
"""

from __future__ import annotations

from collections.abc import Iterator

from cowboy_node.state.store import StateStore, WriteOp
from cowboy_node.state.tree import StateTree, TreeUpdate

_MISSING = object()


class WorldState:
    """Buffered view over the committed state for one block."""

    def __init__(self, store: StateStore, tree: StateTree, *, data_prefix: bytes) -> None:
        self._store = store
        self._tree = tree
        self._prefix = data_prefix
        self._pending: dict[bytes, bytes | None] = {}
        self._journal: list[tuple[bytes, object]] = []
        self._update: TreeUpdate | None = None

    def get(self, key: bytes) -> bytes | None:
        """Current value of ``key`` (pending writes first)."""
        if key in self._pending:
            return self._pending[key]
        return self._store.get(self._prefix + key)

    def set(self, key: bytes, value: bytes) -> None:
        """Write ``value`` at ``key``."""
        self._journal.append((key, self._pending.get(key, _MISSING)))
        self._pending[key] = bytes(value)

    def delete(self, key: bytes) -> None:
        """Remove ``key``."""
        self._journal.append((key, self._pending.get(key, _MISSING)))
        self._pending[key] = None

    def checkpoint(self) -> int:
        """A point :meth:`revert` can return to."""
        return len(self._journal)

    def revert(self, checkpoint: int) -> None:
        """Undo every write made since ``checkpoint``."""
        if checkpoint > len(self._journal):
            raise ValueError("checkpoint is newer than the journal")
        while len(self._journal) > checkpoint:
            key, previous = self._journal.pop()
            if previous is _MISSING:
                del self._pending[key]
            else:
                self._pending[key] = previous  # type: ignore[assignment]

    def release(self, checkpoint: int) -> None:
        """Keep the writes since ``checkpoint`` (an enclosing checkpoint can still revert them)."""
        if checkpoint > len(self._journal):
            raise ValueError("checkpoint is newer than the journal")

    def changes(self) -> dict[bytes, bytes | None]:
        """Net pending changes (None = delete)."""
        return dict(self._pending)

    def iterate(self, prefix: bytes, *, start: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """Merged view in ascending key order; keys are returned without the data prefix."""
        lo = prefix if start is None or start < prefix else start
        pending = sorted((k, v) for k, v in self._pending.items() if k.startswith(prefix) and k >= lo)
        n = len(self._prefix)
        stored = ((k[n:], v) for k, v in self._store.iterate(self._prefix + prefix, start=self._prefix + lo))
        i = 0
        for key, value in stored:
            while i < len(pending) and pending[i][0] < key:
                pk, pv = pending[i]
                i += 1
                if pv is not None:
                    yield pk, pv
            if i < len(pending) and pending[i][0] == key:
                pv = pending[i][1]
                i += 1
                if pv is not None:
                    yield key, pv
                continue
            yield key, value
        for pk, pv in pending[i:]:
            if pv is not None:
                yield pk, pv

    def prepare_commit(self) -> tuple[bytes, list[WriteOp]]:
        """(new state root, data writes + tree writes); writes nothing."""
        changes = dict(sorted(self._pending.items()))
        update = self._tree.prepare(changes)
        self._update = update
        ops: list[WriteOp] = [(self._prefix + k, v) for k, v in changes.items()]
        ops.extend(update.ops)
        return update.root, ops

    def mark_committed(self) -> None:
        """Call after the ops of :meth:`prepare_commit` were written."""
        if self._update is None:
            raise RuntimeError("prepare_commit was not called")
        self._tree.commit(self._update)
        self._update = None
        self._pending.clear()
        self._journal.clear()
