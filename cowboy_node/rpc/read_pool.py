"""A bounded pool for read-only calls that run actor code (``POST /actor/read``; later a dry-run ``simulate``).

A read-only call is CPU-bound Python: with the GIL, every read thread takes time from the block producer and the
event loop. The pool keeps that share small and bounded, whatever the clients do:

- ``max_concurrent`` dedicated worker threads (default 1: more threads only steal more from the producer);
- a FIFO wait queue of at most ``max_queue`` calls; when it is full a call is refused with 503 ``busy``, and a
  call still waiting after ``max_wait_ms`` leaves the queue with 503 ``busy`` (a client gets an answer it can act
  on in bounded time, rather than a read that starts long after it stopped caring);
- a per-call wall-clock limit (``call_timeout_ms``): a watchdog interrupts the call's meter at the deadline and
  the call ends at its next cycle charge (for an actor read: ``error = "read_timeout"``);
- a global execution budget (``budget_ms_per_s``): a token bucket of execution milliseconds, refilled at that
  rate (capacity one second's worth). Each call's wall-clock execution time is taken from it when the call ends;
  while it is in debt (below zero) new calls get 503 ``busy`` with ``Retry-After`` (whole seconds, from the
  debt) and queued calls wait. So reads use at most about ``budget_ms_per_s`` / 1000 of one core, plus one
  call's overrun;
- a per-client rate limit (``per_client_rps``, burst twice that), keyed by the caller's address: 429
  ``rate_limited`` with ``Retry-After``.

A refused call changes nothing: no client token, no budget, no queue slot is used. Time is read from an injected
``clock`` (seconds, monotonic) so tests drive it; the watchdog and the wake-up after a spent budget are event loop
timers. All bookkeeping happens on the event loop thread; the worker threads only run the calls.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from cowboy_node.execution.meter import InterruptHandle
from cowboy_node.rpc.facade import RpcError

if TYPE_CHECKING:
    from cowboy_node.observability.metrics import NodeMetrics

T = TypeVar("T")

TIMEOUT_CODE = "read_timeout"
"""Error code of a call stopped at its wall-clock limit (the interrupt given to its meter)."""
REJECT_REASONS = ("busy_queue", "busy_budget", "rate_limited", "timeout")
"""Label values of ``cowboy_rpc_read_rejected_total{reason}``."""
MAX_CLIENTS = 4096
"""Per-client buckets kept; beyond it idle (full) buckets are dropped, then the oldest."""

LIMITS: dict[str, tuple[int, int]] = {
    "max_concurrent": (1, 64),
    "max_queue": (1, 10_000),
    "max_wait_ms": (1, 600_000),
    "call_timeout_ms": (1, 60_000),
    "budget_ms_per_s": (1, 64_000),
    "per_client_rps": (1, 100_000),
}
"""Accepted range of each :class:`ReadPoolConfig` field (``chain.config`` checks ``[rpc] read_*`` against it)."""


@dataclass(frozen=True, slots=True)
class ReadPoolConfig:
    """Limits of a :class:`ReadPool` (``config.toml`` ``[rpc] read_*``)."""

    max_concurrent: int = 1
    """Worker threads running calls at once."""
    max_queue: int = 32
    """Calls waiting for a worker; more get 503 ``busy``."""
    max_wait_ms: int = 5000
    """Longest a call waits in the queue; then it is refused with 503 ``busy`` (nothing ran)."""
    call_timeout_ms: int = 1000
    """Wall-clock limit of one call; then its meter is interrupted (``read_timeout``)."""
    budget_ms_per_s: int = 250
    """Execution milliseconds all calls together may use per second (250 = a quarter of one core)."""
    per_client_rps: int = 10
    """Calls per second one client address may start (burst: twice as many); more get 429 ``rate_limited``."""

    def __post_init__(self) -> None:
        for name, (lo, hi) in LIMITS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise ValueError(f"{name} must be an integer in {lo}..{hi}, got {value!r}")


class TokenBucket:
    """``rate`` tokens per second up to ``capacity``; :meth:`take` may leave it negative (a debt to repay)."""

    __slots__ = ("_at", "_level", "capacity", "rate")

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self._level = capacity
        self._at = now

    def level(self, now: float) -> float:
        """Tokens available at ``now`` (refills first; a clock going backwards refills nothing)."""
        if now > self._at:
            self._level = min(self.capacity, self._level + (now - self._at) * self.rate)
            self._at = now
        return self._level

    def take(self, n: float, now: float) -> None:
        """Remove ``n`` tokens (the level may go below zero)."""
        self._level = self.level(now) - n

    def seconds_until(self, level: float, now: float) -> float:
        """Seconds until the bucket holds at least ``level`` tokens (0 if it already does)."""
        return max(0.0, (level - self.level(now)) / self.rate)


def retry_after(seconds: float) -> int:
    """``Retry-After`` value: whole seconds, at least 1."""
    return max(1, math.ceil(seconds))


@dataclass(slots=True, eq=False)
class _Job(Generic[T]):
    fn: Callable[[InterruptHandle], T]
    done: asyncio.Future[T]
    handle: InterruptHandle | None = None
    timer: asyncio.TimerHandle | None = None
    """The queue-wait limit while queued, then the call's watchdog."""
    elapsed: float = 0.0
    timed_out: bool = False


class ReadPool:
    """Runs read-only calls under the limits of a :class:`ReadPoolConfig` (see the module docstring).

    Use from one event loop: ``await pool.submit(client_key, fn)``; ``fn`` runs in a worker thread and gets an
    :class:`InterruptHandle` to bind to the meter of the run (the watchdog interrupts it at the deadline).
    """

    def __init__(self, config: ReadPoolConfig | None = None, *, clock: Callable[[], float] = time.monotonic,
                 metrics: NodeMetrics | None = None, max_clients: int = MAX_CLIENTS) -> None:
        self.config = config if config is not None else ReadPoolConfig()
        self._clock = clock
        self._metrics = metrics
        self._max_clients = max_clients
        cfg = self.config
        self._budget = TokenBucket(cfg.budget_ms_per_s, cfg.budget_ms_per_s, clock())
        self._clients: dict[str, TokenBucket] = {}
        self._queue: deque[_Job[Any]] = deque()
        self._running: set[_Job[Any]] = set()
        self._wake: asyncio.TimerHandle | None = None
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=cfg.max_concurrent,
                                                               thread_name_prefix="rpc-read")
        self._closed = False
        if metrics is not None:
            metrics.rpc_read_queue_depth.set(0)
            for reason in REJECT_REASONS:  # exported at 0 from the start
                metrics.rpc_read_rejected.labels(reason=reason)

    # -- introspection (tests, status) ------------------------------------------------------------------
    @property
    def queue_depth(self) -> int:
        """Calls waiting for a worker."""
        return len(self._queue)

    @property
    def running(self) -> int:
        """Calls running now."""
        return len(self._running)

    def budget_ms(self) -> float:
        """Execution milliseconds left in the budget now (negative: the debt still to be refilled)."""
        return self._budget.level(self._clock())

    def client_tokens(self, client_key: str) -> float:
        """Calls ``client_key`` may start right now (fractional: the bucket's level)."""
        bucket = self._clients.get(client_key)
        return 2.0 * self.config.per_client_rps if bucket is None else bucket.level(self._clock())

    # -- submitting -------------------------------------------------------------------------------------
    async def submit(self, client_key: str, fn: Callable[[InterruptHandle], T]) -> T:
        """Run ``fn(handle)`` in a worker once admitted; its result (or exception) is the answer.

        Raises :class:`RpcError` 429 ``rate_limited`` or 503 ``busy`` (both with ``retry_after``) when refused,
        503 ``shutting_down`` once closed. If the awaiting task is cancelled (the client went away), a queued
        call is dropped and a running one interrupted.
        """
        if self._closed:
            raise RpcError(503, "shutting_down", "node is shutting down")
        self._admit(client_key, self._clock())
        loop = asyncio.get_running_loop()
        job: _Job[T] = _Job(fn, loop.create_future())
        self._queue.append(job)
        job.timer = loop.call_later(self.config.max_wait_ms / 1000, self._waited_too_long, job)
        self._dispatch()
        self._gauge()
        try:
            return await job.done
        except asyncio.CancelledError:
            if job.handle is None:
                self._unqueue(job)
            else:
                job.handle.interrupt("cancelled", "the caller went away")
            raise

    def _admit(self, client_key: str, now: float) -> None:
        """Check every limit first, then take the client's token: a refusal changes nothing."""
        cfg = self.config
        bucket = self._clients.get(client_key)
        if bucket is not None and bucket.level(now) < 1:
            wait = retry_after(bucket.seconds_until(1, now))
            self._reject("rate_limited")
            raise RpcError(429, "rate_limited", f"more than {cfg.per_client_rps} reads per second from this "
                                                f"client; retry in {wait} s", retry_after=wait)
        if self._budget.level(now) < 0:
            wait = retry_after(self._budget.seconds_until(0, now))
            self._reject("busy_budget")
            raise RpcError(503, "busy", f"the node's read budget ({cfg.budget_ms_per_s} ms of execution per "
                                        f"second) is spent; retry in {wait} s", retry_after=wait)
        if len(self._queue) >= cfg.max_queue:
            self._reject("busy_queue")
            raise RpcError(503, "busy", f"{cfg.max_queue} reads are already waiting; retry later", retry_after=1)
        if bucket is None:
            self._prune(now)
            bucket = self._clients[client_key] = TokenBucket(cfg.per_client_rps, 2 * cfg.per_client_rps, now)
        bucket.take(1, now)

    def _prune(self, now: float) -> None:
        """Keep at most ``max_clients - 1`` buckets before a new one is added (idle ones go first)."""
        clients = self._clients
        if len(clients) < self._max_clients:
            return
        for key in [k for k, b in clients.items() if b.level(now) >= b.capacity]:
            del clients[key]  # a full bucket is what a new client gets anyway
        while len(clients) >= self._max_clients:
            del clients[next(iter(clients))]  # oldest first

    # -- running ----------------------------------------------------------------------------------------
    def poll(self) -> None:
        """Start queued calls if a worker is free and the budget allows (after a spent budget the pool wakes
        itself; tests that drive a fake clock call this after advancing it)."""
        self._dispatch()
        self._gauge()

    def _dispatch(self) -> None:
        cfg = self.config
        while self._queue and len(self._running) < cfg.max_concurrent and not self._closed:
            now = self._clock()
            if self._budget.level(now) < 0:
                if self._wake is None:
                    delay = self._budget.seconds_until(0, now) + 1e-3
                    self._wake = asyncio.get_running_loop().call_later(delay, self._on_wake)
                return
            job = self._queue.popleft()
            if job.done.done():  # cancelled while queued
                continue
            self._start(job)

    def _unqueue(self, job: _Job[Any]) -> None:
        with contextlib.suppress(ValueError):
            self._queue.remove(job)
        if job.timer is not None:
            job.timer.cancel()
        self._gauge()

    def _waited_too_long(self, job: _Job[Any]) -> None:
        """A queued call reached ``max_wait_ms`` before a worker (or the budget) was free for it."""
        if job.handle is not None or job.done.done():
            return
        self._unqueue(job)
        self._reject("busy_queue")
        wait = retry_after(self._budget.seconds_until(0, self._clock()))
        job.done.set_exception(RpcError(503, "busy", f"the read waited {self.config.max_wait_ms} ms for a worker "
                                                     f"without starting; retry in {wait} s", retry_after=wait))

    def _on_wake(self) -> None:
        self._wake = None
        self.poll()

    def _start(self, job: _Job[Any]) -> None:
        loop = asyncio.get_running_loop()
        job.handle = InterruptHandle()
        self._running.add(job)
        if job.timer is not None:
            job.timer.cancel()  # the queue-wait limit
        job.timer = loop.call_later(self.config.call_timeout_ms / 1000, self._expire, job)
        fut = loop.run_in_executor(self._executor, self._run, job)
        fut.add_done_callback(functools.partial(self._finished, job))

    def _run(self, job: _Job[T]) -> T:
        """In a worker thread: the call, timed with the pool's clock."""
        t0 = self._clock()
        try:
            assert job.handle is not None
            return job.fn(job.handle)
        finally:
            job.elapsed = max(0.0, self._clock() - t0)

    def _expire(self, job: _Job[Any]) -> None:
        """The watchdog: the call ran past ``call_timeout_ms``."""
        if job in self._running and job.handle is not None:
            job.timed_out = True
            job.handle.interrupt(TIMEOUT_CODE, f"the read ran past its {self.config.call_timeout_ms} ms "
                                               "wall-clock limit")
            self._reject("timeout")

    def _finished(self, job: _Job[Any], fut: asyncio.Future[Any]) -> None:
        self._running.discard(job)
        if job.timer is not None:
            job.timer.cancel()
        self._budget.take(job.elapsed * 1000, self._clock())
        if self._metrics is not None:
            self._metrics.rpc_read_seconds.observe(job.elapsed)
        if not job.done.done():
            if fut.cancelled():
                job.done.cancel()
            elif (exc := fut.exception()) is not None:
                job.done.set_exception(exc)
            else:
                job.done.set_result(fut.result())
        elif not fut.cancelled():
            fut.exception()  # retrieved: nobody waits for it any more
        self._dispatch()
        self._gauge()

    # -- shutting down ----------------------------------------------------------------------------------
    def close(self) -> None:
        """Refuse new calls, fail the queued ones (503 ``shutting_down``), interrupt the running ones and wait
        for their threads (an interrupted read stops at its next cycle charge)."""
        self._closed = True
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        while self._queue:
            job = self._queue.popleft()
            if job.timer is not None:
                job.timer.cancel()
            if not job.done.done():
                job.done.set_exception(RpcError(503, "shutting_down", "node is shutting down"))
        for job in list(self._running):
            if job.handle is not None:
                job.handle.interrupt("shutting_down", "node is shutting down")
        self._gauge()
        self._executor.shutdown(wait=True, cancel_futures=True)

    async def aclose(self) -> None:
        """:meth:`close` without blocking the event loop while the workers stop."""
        self._closed = True
        for job in list(self._running):
            if job.handle is not None:
                job.handle.interrupt("shutting_down", "node is shutting down")
        await asyncio.to_thread(self._executor.shutdown, wait=True)
        self.close()

    # -- metrics ----------------------------------------------------------------------------------------
    def _gauge(self) -> None:
        if self._metrics is not None:
            self._metrics.rpc_read_queue_depth.set(len(self._queue))

    def _reject(self, reason: str) -> None:
        if self._metrics is not None:
            self._metrics.rpc_read_rejected.labels(reason=reason).inc()


__all__ = ["LIMITS", "REJECT_REASONS", "TIMEOUT_CODE", "ReadPool", "ReadPoolConfig", "TokenBucket", "retry_after"]
