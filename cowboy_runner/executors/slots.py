"""Per-executor concurrency: each job kind has its own execution slots and a bounded queue, so a flood of one kind
(HTTP) cannot starve another (a one-GPU LLM). docs/runner-executors.md "Concurrency".

A job is *reserved* when the runner accepts it (:meth:`ExecutorSlots.reserve`) and then waits in
:meth:`ExecutorSlots.run` for one of its kind's ``max_concurrent`` slots. A kind takes a new job while
``running + waiting < max_concurrent + queue``; past that the runner answers ``Reject(AtCapacity)`` for that kind
only, and stops advertising it (CapabilityDelta, CIP-11 §6.5) until a slot frees. The runner-wide
``capabilities.max_concurrent_jobs`` still bounds all kinds together.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

from cowboy_runner.executors.base import ExecutorError


@dataclass(frozen=True, slots=True)
class KindLimit:
    """Limits of one job kind's executor (``runner.toml`` ``[executors.<kind>] max_concurrent`` / ``queue``)."""

    max_concurrent: int | None = None
    """Executions of this kind at once; None: only the runner-wide ``max_concurrent_jobs``."""
    queue: int = 0
    """Accepted jobs of this kind that may wait for a slot (their wait counts against their wall time)."""

    def __post_init__(self) -> None:
        if self.max_concurrent is not None and (isinstance(self.max_concurrent, bool) or self.max_concurrent < 1):
            raise ValueError(f"max_concurrent must be an integer >= 1, got {self.max_concurrent!r}")
        if isinstance(self.queue, bool) or self.queue < 0:
            raise ValueError(f"queue must be an integer >= 0, got {self.queue!r}")


class ExecutorSlots:
    """Slots and queues of every limited kind (kinds without a :class:`KindLimit` are never full here)."""

    def __init__(self, limits: Mapping[str, KindLimit]) -> None:
        self.limits = {k: v for k, v in limits.items() if v.max_concurrent is not None}
        """Kind name → its limit (kinds with a ``max_concurrent``)."""
        self._sems = {k: asyncio.Semaphore(v.max_concurrent or 1) for k, v in self.limits.items()}
        self.running: dict[str, int] = dict.fromkeys(self.limits, 0)
        """Executions holding a slot, by kind."""
        self.waiting: dict[str, int] = dict.fromkeys(self.limits, 0)
        """Accepted jobs not yet holding a slot, by kind."""

    def can_take(self, kind: str) -> bool:
        """Whether a new job of ``kind`` would get a slot or a queue place."""
        limit = self.limits.get(kind)
        if limit is None:
            return True
        assert limit.max_concurrent is not None
        return self.running[kind] + self.waiting[kind] < limit.max_concurrent + limit.queue

    def full_kinds(self) -> frozenset[str]:
        """Kinds that take no new job now."""
        return frozenset(k for k in self.limits if not self.can_take(k))

    def reserve(self, kind: str) -> None:
        """Count an accepted job of ``kind`` as waiting (before its task starts, so the next decision sees it)."""
        if kind in self.limits:
            self.waiting[kind] += 1

    @contextlib.asynccontextmanager
    async def run(self, kind: str, wait_s: float) -> AsyncIterator[float]:
        """Hold one of ``kind``'s slots for the body, after waiting at most ``wait_s`` seconds for it; yields the
        seconds waited. A reserved job must enter this exactly once (a cancellation or ``queue_timeout`` while
        waiting gives the reservation back)."""
        sem = self._sems.get(kind)
        if sem is None:
            yield 0.0
            return
        loop = asyncio.get_running_loop()
        start = loop.time()
        acquired = False
        try:
            async with asyncio.timeout(max(0.0, wait_s)):
                await sem.acquire()
            acquired = True
            self.waiting[kind] -= 1
            self.running[kind] += 1
        except TimeoutError:
            raise ExecutorError("queue_timeout", f"no {kind} executor slot within {wait_s:g} s",
                                detail={"kind": kind}) from None
        finally:
            if not acquired:
                self.waiting[kind] -= 1
        try:
            yield loop.time() - start
        finally:
            self.running[kind] -= 1
            sem.release()

    def snapshot(self) -> dict[str, dict[str, int | None]]:
        """``{kind: {running, waiting, max_concurrent, queue}}`` for status."""
        return {k: {"running": self.running[k], "waiting": self.waiting[k], "max_concurrent": v.max_concurrent,
                    "queue": v.queue} for k, v in sorted(self.limits.items())}
