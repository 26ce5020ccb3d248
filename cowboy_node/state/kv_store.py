"""The key/value store contract shared by the in-memory and LevelDB backends.

Keys and values are ``bytes``. Iteration is in ascending bytewise key order
(descending with ``reverse=True``). ``iterate(prefix, start=s)`` visits the
keys that begin with ``prefix``; ascending it begins at the first key ``>= s``,
descending it begins at the last key ``<= s`` (so ``start`` is inclusive in
both directions). A write batch is atomic: either every op lands or none does,
including when iterating the ops raises part-way. ``snapshot()`` gives a read-only
point-in-time view (same get/iterate semantics) that later writes do not change.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

WriteOp = tuple[bytes, bytes | None]
"""``(key, value)``; a value of ``None`` deletes the key."""


class StoreError(RuntimeError):
    """The store cannot be opened or used (the message names the path when there is one)."""


class StateStore(Protocol):
    """Ordered, batch-atomic key/value store."""

    def get(self, key: bytes) -> bytes | None:
        """Value of ``key``, or None."""
        ...

    def iterate(self, prefix: bytes = b"", *, start: bytes | None = None,
                reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` pairs whose key starts with ``prefix``, in key order.

        Ascending by default; descending if ``reverse``. ``start`` (inclusive) is
        where the walk begins: the smallest key ``>= start`` ascending, the largest
        key ``<= start`` descending.
        """
        ...

    def write_batch(self, ops: Iterable[WriteOp], *, sync: bool = True) -> None:
        """Apply all ``ops`` atomically (later ops on the same key win)."""
        ...

    def snapshot(self) -> StateStore:
        """A read-only, point-in-time view of the store as of this call.

        ``get`` and ``iterate`` answer from that moment whatever is written later; ``write_batch``
        raises :class:`StoreError`. ``close`` releases it (the store's own ``close`` invalidates it too).
        A snapshot's ``snapshot()`` is itself. Lets a reader run without holding the writer's lock.
        """
        ...

    def close(self) -> None:
        """Release the store; further use is an error."""
        ...


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key that starts with ``prefix`` (None: no bound)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes((stripped[-1] + 1,))


def key_range(prefix: bytes, start: bytes | None, reverse: bool) -> tuple[bytes, bytes | None] | None:
    """Half-open key interval ``[lower, upper)`` visited by ``iterate`` (None: empty).

    ``upper`` None means unbounded.
    """
    lower = prefix
    upper = prefix_end(prefix)
    if start is not None:
        if reverse:
            # Inclusive start going down: the smallest key above `start` is start + 0x00.
            bound = start + b"\x00"
            if upper is None or bound < upper:
                upper = bound
        elif start > lower:
            lower = start
    if upper is not None and lower >= upper:
        return None
    return lower, upper


def check_op(op: object) -> WriteOp:
    """Validate one write op (raises TypeError before anything is written)."""
    if not isinstance(op, tuple) or len(op) != 2:
        raise TypeError(f"write op must be a (key, value) tuple, got {type(op).__name__}")
    key, value = op
    if not isinstance(key, bytes):
        raise TypeError(f"key must be bytes, got {type(key).__name__}")
    if value is not None and not isinstance(value, bytes):
        raise TypeError(f"value must be bytes or None, got {type(value).__name__}")
    return key, value
