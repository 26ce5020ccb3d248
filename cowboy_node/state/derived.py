"""Derived state keys: indexes kept beside the committed state, not committed to by the state root.

A key under one of :data:`DERIVED_PREFIXES` is read, written, journaled, reverted and stored exactly like any
other state key (same :class:`~cowboy_node.state.world.WorldState` overlay, same atomic batch under the state's
data prefix), but the state tree leaves it out: it is in no state root and no proof. Such a key must be a
deterministic function of the committed keys — an index that execution maintains beside the records it points
at — so every node computes the same values, and a node that installs a state snapshot (which carries committed
keys only) rebuilds them from the records (``snapshot/install.py``).

Why: the timer id pointer and the per-actor timer index were two of the four state-tree changes of every timer
fire (docs/timers.md §2, docs/performance.md "Timer indexes out of the state tree"). The list is a constant, not
a registry filled at import time, because it decides state roots: a process that computed a root without having
imported some module must not get another root.
"""

from __future__ import annotations

DERIVED_PREFIXES: tuple[bytes, ...] = (b"timer/a/", b"timer/t/")
"""Prefixes of the derived keys: the per-actor timer index and the timer id pointer (docs/timers.md §2)."""


def is_derived(key: bytes) -> bool:
    """True if ``key`` (a logical state key) is derived: stored, but not committed to by the state root."""
    return key.startswith(DERIVED_PREFIXES)
