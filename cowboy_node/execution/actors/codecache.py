"""Compiled-code cache: source hash → :class:`CompiledActor`, bounded LRU.

``compile_actor`` is a pure function of the source (policy, instrumentation and
``compile`` are deterministic, and the default limits and allowed modules are
fixed), so a hit returns exactly what a fresh compile would: the cache changes
speed, never results. Costs are charged by the callers independently of hits.

The cache is bounded by entries and by total source bytes. Compiling costs about
4 µs per source byte, so the byte bound is what keeps a workload from forcing
recompiles: one run can pay for at most ``cycles_limit / LOAD_CYCLES_PER_SOURCE_BYTE``
bytes of distinct source (5 MB for a whole block), well under the default capacity.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from cowboy_node.execution.actors.actor_record import source_hash
from cowboy_node.execution.actors.sdk_surface import transform
from cowboy_node.execution.pvm import CompiledActor, compile_actor

DEFAULT_CAPACITY = 4096
"""Most compiled actors kept in memory per process."""
DEFAULT_CAPACITY_BYTES = 64 << 20
"""Most source bytes (of the cached actors) kept compiled in memory per process."""


class CodeCache:
    """A bounded least-recently-used map from source hash to compiled actor.

    Thread-safe: the block builder and read-only RPC calls (which run on state snapshots, without the
    node's state lock) use it at the same time.
    """

    __slots__ = ("_bytes", "_capacity", "_capacity_bytes", "_entries", "_lock")

    def __init__(self, capacity: int = DEFAULT_CAPACITY, capacity_bytes: int = DEFAULT_CAPACITY_BYTES) -> None:
        if capacity < 1 or capacity_bytes < 1:
            raise ValueError("capacities must be at least 1")
        self._capacity = capacity
        self._capacity_bytes = capacity_bytes
        self._entries: OrderedDict[bytes, tuple[CompiledActor, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        """Total source bytes of the cached actors."""
        return self._bytes

    def get(self, digest: bytes) -> CompiledActor | None:
        """The cached compile of the source with hash ``digest``, if any."""
        with self._lock:
            hit = self._entries.get(digest)
            if hit is None:
                return None
            self._entries.move_to_end(digest)
            return hit[0]

    def compile(self, source: str) -> CompiledActor:
        """Compile ``source`` (or return the cached result); raises ``ActorRejected`` like ``compile_actor``."""
        digest = source_hash(source)
        hit = self.get(digest)
        if hit is not None:
            return hit
        compiled = compile_actor(source, transform=transform)  # outside the lock: slow, and pure
        size = len(source.encode("utf-8", "surrogatepass"))
        with self._lock:
            raced = self._entries.get(digest)
            if raced is not None:  # another thread compiled it meanwhile (same result)
                self._entries.move_to_end(digest)
                return raced[0]
            self._entries[digest] = (compiled, size)
            self._bytes += size
            # keep the newest entry even if it alone exceeds the byte bound
            while len(self._entries) > 1 and (len(self._entries) > self._capacity
                                              or self._bytes > self._capacity_bytes):
                _, (_, evicted) = self._entries.popitem(last=False)
                self._bytes -= evicted
        return compiled


CODE_CACHE = CodeCache()
"""The process-wide cache used by ``invoke`` and the executors."""
