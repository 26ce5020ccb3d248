"""The execution-facing state overlay for one block.

A :class:`WorldState` buffers writes over the committed state: reads fall
through to the store (raw values live at ``data_prefix + key``), writes stay
pending until :meth:`WorldState.prepare_commit` turns them into store ops plus
the state tree update, and :meth:`WorldState.mark_committed` adopts them once
the caller has written those ops. Checkpoints are nested and journaled so a
failed transaction or actor call can be undone exactly.

Keys given to a WorldState are the logical state keys; the state tree commits
to ``logical key -> value`` for every key but the derived ones (``state/derived.py``),
which are stored and journaled the same way but left out of the tree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from cowboy_node.state.derived import DERIVED_PREFIXES
from cowboy_node.state.kv_store import StateStore, WriteOp
from cowboy_node.state.tree import StateTree, TreeUpdate

_WATCHED: list[bytes] = []
_WATCHED_T: tuple[bytes, ...] = ()
PrepareHook = Callable[["WorldState", bytes, bytes], None]
"""Called as ``hook(world, base_root, new_root)`` when :meth:`WorldState.prepare_commit` computes a new root."""
_PREPARE_HOOKS: list[PrepareHook] = []


def watch_prefix(prefix: bytes) -> None:
    """Log every write (and every revert) of a key under ``prefix`` in :attr:`WorldState.watch_log`.

    For derived, node-local caches of state (e.g. the selection index, docs/selection.md) that must learn
    which keys changed without rescanning: the log says *which* keys may differ from the world's base state,
    never their values (a reader re-reads them). Process-wide and idempotent.
    """
    global _WATCHED_T
    if prefix not in _WATCHED:
        _WATCHED.append(bytes(prefix))
        _WATCHED_T = tuple(_WATCHED)


def add_prepare_hook(hook: PrepareHook) -> None:
    """Run ``hook(world, base_root, new_root)`` whenever a world computes a new state root (idempotent).

    Lets a derived cache remember its state under ``new_root`` (a root names one exact state). A hook must not
    write to the world and must not raise; it cannot change the root or the ops.
    """
    if hook not in _PREPARE_HOOKS:
        _PREPARE_HOOKS.append(hook)


class _Missing:
    """Journal marker: the key had no pending entry before the write."""

    __slots__ = ()


_MISSING = _Missing()


class WorldState:
    """Buffered view over the committed state: reads fall through to the store, writes stay
    pending until prepare_commit."""

    def __init__(self, store: StateStore, tree: StateTree, *, data_prefix: bytes) -> None:
        self._store = store
        self._tree = tree
        self._prefix = bytes(data_prefix)
        self._pending: dict[bytes, bytes | None] = {}
        self._journal: list[tuple[bytes, bytes | _Missing | None]] = []
        self._checkpoints: list[tuple[int, int]] = []  # (checkpoint id, journal length), innermost last
        self._next_checkpoint = 0
        self._version = 0  # bumped on every change of the pending set
        self._prepared: tuple[int, TreeUpdate, list[WriteOp]] | None = None
        self.watch_log: list[bytes] = []
        """Keys under a :func:`watch_prefix` prefix written or reverted since the base state (may repeat)."""
        self.epoch = 0
        """Bumped by :meth:`mark_committed` (the base state changed; :attr:`watch_log` restarts)."""
        self.memo: dict[str, object] = {}
        """Node-local derived caches of this world (never part of the state; see :func:`watch_prefix`)."""

    @property
    def tree(self) -> StateTree:
        """The state tree this view commits to."""
        return self._tree

    # -- reads ----------------------------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        """Current value of ``key`` (pending writes first, then the committed state)."""
        pending = self._pending
        if key in pending:
            return pending[key]
        return self._store.get(self._prefix + key)

    def iterate(self, prefix: bytes, *, start: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` pairs whose key starts with ``prefix``, ascending, from ``start`` (inclusive).

        Pending writes override the committed values and pending deletes hide
        them; keys are returned without ``data_prefix``. Pending changes are
        taken as of this call; committed values as the store iterates.
        """
        pend = sorted((k, v) for k, v in self._pending.items()
                      if k.startswith(prefix) and (start is None or k >= start))
        committed = self._store.iterate(self._prefix + prefix,
                                        start=None if start is None else self._prefix + start)
        return self._merge(pend, committed)

    def _merge(self, pend: list[tuple[bytes, bytes | None]],
               committed: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
        cut = len(self._prefix)
        i = 0
        n = len(pend)
        for full_key, value in committed:
            key = full_key[cut:]
            while i < n and pend[i][0] < key:
                pk, pv = pend[i]
                i += 1
                if pv is not None:
                    yield pk, pv
            if i < n and pend[i][0] == key:
                pv = pend[i][1]
                i += 1
                if pv is not None:
                    yield key, pv
                continue
            yield key, value
        while i < n:
            pk, pv = pend[i]
            i += 1
            if pv is not None:
                yield pk, pv

    # -- writes ---------------------------------------------------------------------------------
    def set(self, key: bytes, value: bytes) -> None:
        """Set ``key`` to ``value`` (pending)."""
        if not isinstance(key, bytes) or not isinstance(value, bytes):
            raise TypeError("state keys and values must be bytes")
        self._write(key, value)

    def delete(self, key: bytes) -> None:
        """Delete ``key`` (pending; deleting an absent key is allowed and changes nothing)."""
        if not isinstance(key, bytes):
            raise TypeError("state keys must be bytes")
        self._write(key, None)

    def _write(self, key: bytes, value: bytes | None) -> None:
        pending = self._pending
        if self._checkpoints:
            self._journal.append((key, pending.get(key, _MISSING)))
        pending[key] = value
        self._version += 1
        if _WATCHED_T and key.startswith(_WATCHED_T):
            self.watch_log.append(key)

    # -- checkpoints ----------------------------------------------------------------------------
    def checkpoint(self) -> int:
        """Open a (nested) checkpoint and return its id."""
        cp = self._next_checkpoint
        self._next_checkpoint += 1
        self._checkpoints.append((cp, len(self._journal)))
        return cp

    def _find(self, checkpoint: int) -> int:
        for i in range(len(self._checkpoints) - 1, -1, -1):
            if self._checkpoints[i][0] == checkpoint:
                return i
        raise ValueError(f"checkpoint {checkpoint} is not open")

    def revert(self, checkpoint: int) -> None:
        """Undo every write since ``checkpoint`` and close it (and any checkpoint opened after it)."""
        i = self._find(checkpoint)
        mark = self._checkpoints[i][1]
        pending = self._pending
        journal = self._journal
        log = self.watch_log
        for key, prev in reversed(journal[mark:]):
            if isinstance(prev, _Missing):
                pending.pop(key, None)
            else:
                pending[key] = prev
            if _WATCHED_T and key.startswith(_WATCHED_T):
                log.append(key)
        del journal[mark:]
        del self._checkpoints[i:]
        if not self._checkpoints:
            journal.clear()
        self._version += 1

    def release(self, checkpoint: int) -> None:
        """Close ``checkpoint`` (and any opened after it), keeping its writes."""
        i = self._find(checkpoint)
        del self._checkpoints[i:]
        if not self._checkpoints:
            self._journal.clear()

    # -- committing -----------------------------------------------------------------------------
    def changes(self) -> dict[bytes, bytes | None]:
        """Net pending changes (None = delete), in key order."""
        return dict(sorted(self._pending.items()))

    def prepare_commit(self) -> tuple[bytes, list[WriteOp]]:
        """New state root and every store op (raw values under ``data_prefix``, then tree ops).

        Derived keys (``state/derived.py``) are written like the others but are not given to the tree.

        Writes nothing; the caller writes the ops in its own atomic batch and
        then calls :meth:`mark_committed`.
        """
        prepared = self._prepared
        if prepared is None or prepared[0] != self._version:
            changes = sorted(self._pending.items())
            update = self._tree.prepare({k: v for k, v in changes if not k.startswith(DERIVED_PREFIXES)})
            prefix = self._prefix
            ops: list[WriteOp] = [(prefix + k, v) for k, v in changes]
            ops.extend(update.ops)
            prepared = self._prepared = (self._version, update, ops)
            for hook in _PREPARE_HOOKS:
                hook(self, self._tree.root(), update.root)
        return prepared[1].root, list(prepared[2])

    def state_root_preview(self) -> bytes:
        """The state root the pending changes would produce."""
        return self.prepare_commit()[0]

    def mark_committed(self) -> None:
        """Adopt the last :meth:`prepare_commit` result after the caller wrote its ops."""
        prepared = self._prepared
        if prepared is None or prepared[0] != self._version:
            raise RuntimeError("state changed since prepare_commit(); nothing to mark committed")
        self._tree.commit(prepared[1])
        self._pending.clear()
        self._journal.clear()
        self._checkpoints.clear()
        self._prepared = None
        self._version += 1
        self.watch_log = []
        self.epoch += 1
