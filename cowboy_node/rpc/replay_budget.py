"""The catch-up budget all subscriptions share (``[rpc] subscription_replay_per_s``): a token bucket whose
waiters queue instead of polling.

Subscriptions catching up (a replay from ``from``, or a subscriber behind the head) take one token per height. A
bucket that lets each waiter sleep until "the next token" and look again costs every waiter a wake-up per token:
200 subscribers replaying at 2,000 heights a second were 400,000 wake-ups a second, the event loop thread held
the GIL most of the time, and the block builder thread, which needs it for a few milliseconds per block, waited
for it in 5 ms slices: empty blocks took 100-300 ms to build and commit, and one block in five was late
(bench/subscriptions.py). Here a waiter that finds the bucket empty (or others already queued) parks on a future
in a FIFO queue, and one timer releases as many waiters as tokens have accrued, at most every
:data:`MIN_GRANT_S`: a waiter is woken once, when its token is granted, whatever the number of waiters.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable

__all__ = ["MIN_GRANT_S", "ReplayBudget"]

MIN_GRANT_S = 0.005
"""Shortest interval between two releases of queued waiters: tokens accrued in it are granted together, so at
2,000 heights a second one timer callback grants about ten waiters instead of one callback per token."""


class ReplayBudget:
    """A token bucket of ``rate`` tokens a second (burst ``rate``) with FIFO waiters; one event loop only.

    Tokens accrue by ``clock`` (seconds; default the running loop's clock); the release timer runs on the loop.
    """

    def __init__(self, rate: float, clock: Callable[[], float] | None = None) -> None:
        self.rate = float(rate)
        self._clock = clock
        self._tokens = self.rate
        self._refilled: float | None = None
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self.granted = 0
        """Tokens granted so far."""
        self.releases = 0
        """Times the release timer ran (each grants every token accrued since the last)."""

    @property
    def waiting(self) -> int:
        """Waiters queued now (cancelled ones not yet skipped included)."""
        return len(self._waiters)

    async def take(self) -> None:
        """Wait for one token; returns at once after :meth:`close` (the caller checks why it woke)."""
        if self._closed:
            return
        self._refill()
        if not self._waiters and self._tokens >= 1:
            self._tokens -= 1
            self.granted += 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        self._arm()
        await fut  # a cancelled waiter stays queued, done: the release skips it without spending a token

    def close(self) -> None:
        """Wake every waiter now (node shutdown) and grant nothing more."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)

    def _refill(self) -> None:
        now = self._clock() if self._clock is not None else asyncio.get_running_loop().time()
        if self._refilled is not None:
            self._tokens = min(self.rate, self._tokens + (now - self._refilled) * self.rate)
        self._refilled = now

    def _arm(self) -> None:
        if self._timer is None and not self._closed:
            delay = max(MIN_GRANT_S, (1 - self._tokens) / self.rate)
            self._timer = asyncio.get_running_loop().call_later(delay, self._release)

    def _release(self) -> None:
        self._timer = None
        self.releases += 1
        self._refill()
        while self._waiters and self._tokens >= 1:
            fut = self._waiters.popleft()
            if fut.done():  # its subscriber went away while it waited
                continue
            self._tokens -= 1
            self.granted += 1
            fut.set_result(None)
        while self._waiters and self._waiters[0].done():
            self._waiters.popleft()
        if self._waiters:
            self._arm()
