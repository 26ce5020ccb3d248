"""The QUIC worker pool: the validator process's supervisor of ``[quic] workers = N`` worker processes.

**Sockets.** The pool binds N UDP sockets to the one QUIC address with ``SO_REUSEPORT`` and keeps all N open for
its whole life; worker ``i`` inherits socket ``i``. The kernel picks a socket of the group by a hash of the
datagram's 4-tuple over the group's members, so every datagram of a runner's connection reaches the same
worker. Because the pool never closes a socket, the group never changes when a worker dies: the other workers'
runners keep their worker, and the dead worker's runners' datagrams queue on its socket until its successor
(which inherits the same socket) answers them with a stateless reset — every worker shares the validator's
reset secret, and the connection ids they issue carry its tag — so those runners reconnect at once (§11.3).

**Supervision.** A worker's end of its socketpair closes when it dies (any cause, including SIGKILL); its
connections are then reported closed (``worker_lost``) to their sessions, which clears their presence, and the
worker is restarted after a back-off (``RESTART_BACKOFF_S``, doubled while it keeps dying within
``STABLE_AFTER_S`` of its start, up to ``RESTART_BACKOFF_MAX_S``).

**Metrics.** ``stats`` sums the workers' adapter counters (and keeps those of dead runs), so the service
reports them as it does for the in-process server; the pool itself reports ``transport_event("worker",
"started" | "lost" | "restarted")``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from cowboy_node.transport.workers import ipc
from cowboy_node.transport.workers.relay import RelayChannel
from cowboy_protocol.quic.adapter import SERVER_UDP_RCVBUF, ConnectionHandler, FrameConnection
from cowboy_protocol.quic.limits import ServerLimits, ServerStats

log = logging.getLogger("cowboy.transport.workers")

RESTART_BACKOFF_S = 0.05
"""Delay before restarting a worker that died."""
RESTART_BACKOFF_MAX_S = 5.0
"""Back-off ceiling for a worker that keeps dying."""
STABLE_AFTER_S = 10.0
"""A worker that lived this long restarts after the base back-off again."""
STOP_GRACE_S = 2.0
"""How long :meth:`WorkerPool.close` waits for a worker to exit before SIGKILL."""


class PoolMetrics(Protocol):
    """The counter the pool reports to (``TransportMetrics`` has it)."""

    def transport_event(self, kind: str, label: str) -> None:
        """Count one event."""
        ...


def worker_limits(limits: ServerLimits, workers: int) -> ServerLimits:
    """One worker's share of the validator's caps: the connection and half-open caps are split (rounded up),
    so the validator-wide totals stay what the operator configured; the per-peer Hello bucket stays per
    worker (a peer's connections hash onto the workers, so its validator-wide rate is at most ``workers``
    times the bucket — the Retry and half-open caps still bound a flood)."""
    def share(n: int) -> int:
        return max(1, -(-n // workers))
    return dataclasses.replace(limits, max_connections=share(limits.max_connections),
                               max_half_open=share(limits.max_half_open),
                               retry_threshold=min(limits.retry_threshold, share(limits.retry_threshold))
                               if limits.retry_threshold else 0)


@dataclass
class WorkerSlot:
    """One worker position: its UDP socket (kept for the pool's life) and its current process."""

    index: int
    """Slot number (0..N-1)."""
    udp: socket.socket
    """The slot's socket of the ``SO_REUSEPORT`` group."""
    proc: subprocess.Popen[bytes] | None = None
    """The running worker process."""
    channel: RelayChannel | None = None
    """Its channel."""
    started_at: float = 0.0
    """Monotonic start time of the current process."""
    backoff_s: float = RESTART_BACKOFF_S
    """Delay before the next restart."""
    restarts: int = 0
    """Times this slot's worker was restarted."""
    stats: dict[str, Any] = field(default_factory=dict)
    """Latest counters of the current run."""


def bind_group(host: str, port: int, n: int) -> list[socket.socket]:
    """N UDP sockets on one address with ``SO_REUSEPORT`` (port 0: the first picks a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket(family, socket.SOCK_DGRAM)
            socks.append(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            with contextlib.suppress(OSError):  # the buffer also holds datagrams while a worker restarts
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SERVER_UDP_RCVBUF)
            s.bind((host, port))
            port = s.getsockname()[1]
            s.setblocking(False)
    except OSError:
        for s in socks:
            s.close()
        raise
    return socks


class WorkerPool:
    """N QUIC worker processes behind one UDP address; relays their connections to ``handler_factory``."""

    def __init__(self, *, host: str, port: int, workers: int, limits: ServerLimits, certificate_pem: bytes,
                 private_key_pem: bytes, reset_secret: bytes,
                 handler_factory: Callable[[FrameConnection], ConnectionHandler],
                 metrics: PoolMetrics | None = None) -> None:
        if workers < 1:
            raise ValueError("a worker pool needs at least one worker")
        self.host, self._port, self.workers = host, port, workers
        self.limits = worker_limits(limits, workers)
        self.handler_factory = handler_factory
        self.metrics = metrics
        self._config = json.dumps({
            "certificate_pem": certificate_pem.decode(), "private_key_pem": private_key_pem.decode(),
            "reset_secret": reset_secret.hex(), "limits": dataclasses.asdict(self.limits)}).encode()
        self.slots: list[WorkerSlot] = []
        self._dead_stats = ServerStats()  # counters of worker runs that ended (so totals never go back)
        self._closing = False
        self._restart_tasks: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        """The UDP port every worker shares."""
        return self._port

    async def start(self) -> None:
        """Bind the socket group and start every worker. Raises OSError if the address cannot be bound."""
        socks = bind_group(self.host, self._port, self.workers)
        self._port = socks[0].getsockname()[1]
        self.slots = [WorkerSlot(i, s) for i, s in enumerate(socks)]
        for slot in self.slots:
            await self._spawn(slot)

    async def _spawn(self, slot: WorkerSlot) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            slot.proc = subprocess.Popen(
                [sys.executable, "-m", "cowboy_node.transport.workers.worker",
                 "--udp-fd", str(slot.udp.fileno()), "--ipc-fd", str(child.fileno())],
                pass_fds=(slot.udp.fileno(), child.fileno()), stdin=subprocess.DEVNULL)
        finally:
            child.close()  # only the worker holds it: its death closes the channel
        slot.started_at = time.monotonic()
        slot.stats = {}
        loop = asyncio.get_running_loop()
        _, channel = await loop.create_connection(
            lambda: RelayChannel(index=slot.index, handler_factory=self.handler_factory, on_stats=self._on_stats,
                                 on_lost=self._on_lost), sock=parent)
        slot.channel = channel
        channel.send(ipc.Kind.CONFIG, 0, self._config)
        self._event("started" if slot.restarts == 0 else "restarted")
        log.info("QUIC worker %d started (pid %d)", slot.index, slot.proc.pid)

    def _event(self, label: str) -> None:
        if self.metrics is not None:
            self.metrics.transport_event("worker", label)

    def _on_stats(self, index: int, stats: dict[str, Any]) -> None:
        self.slots[index].stats = stats

    def _on_lost(self, channel: RelayChannel) -> None:
        slot = self.slots[channel.index]
        if slot.channel is not channel:
            return
        slot.channel = None
        _add(self._dead_stats, slot.stats)
        slot.stats = {}
        if self._closing:
            return
        self._event("lost")
        log.warning("QUIC worker %d lost; restarting it", slot.index)
        task = asyncio.get_running_loop().create_task(self._restart(slot))
        self._restart_tasks.add(task)
        task.add_done_callback(self._restart_tasks.discard)

    async def _restart(self, slot: WorkerSlot) -> None:
        proc = slot.proc
        if proc is not None and proc.poll() is None:
            proc.kill()  # alive but its channel is gone: it cannot serve
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=STOP_GRACE_S)
        lived = time.monotonic() - slot.started_at
        slot.backoff_s = RESTART_BACKOFF_S if lived >= STABLE_AFTER_S else min(
            RESTART_BACKOFF_MAX_S, slot.backoff_s * 2)
        await asyncio.sleep(slot.backoff_s)
        if self._closing:
            return
        slot.restarts += 1
        try:
            await self._spawn(slot)
        except OSError:
            log.exception("restarting QUIC worker %d failed", slot.index)
            self._on_lost_spawn_failure(slot)

    def _on_lost_spawn_failure(self, slot: WorkerSlot) -> None:
        task = asyncio.get_running_loop().create_task(self._restart(slot))
        self._restart_tasks.add(task)
        task.add_done_callback(self._restart_tasks.discard)

    @property
    def stats(self) -> ServerStats:
        """The adapter counters summed over the workers (live runs and ended ones)."""
        total = dataclasses.replace(self._dead_stats, refused=dict(self._dead_stats.refused),
                                    decode_errors=dict(self._dead_stats.decode_errors),
                                    stream_errors=dict(self._dead_stats.stream_errors))
        for slot in self.slots:
            _add(total, slot.stats)
        # Gauges of dead runs are not live any more.
        total.connections_open = sum(int(s.stats.get("connections_open", 0)) for s in self.slots)
        total.half_open = sum(int(s.stats.get("half_open", 0)) for s in self.slots)
        return total

    def connections_per_worker(self) -> list[int]:
        """Relayed connections each worker holds now (sessions the validator process sees)."""
        return [0 if s.channel is None else len(s.channel.conns) for s in self.slots]

    def pids(self) -> list[int | None]:
        """The current worker process ids (None: restarting)."""
        return [None if s.proc is None or s.channel is None else s.proc.pid for s in self.slots]

    def close(self) -> None:
        """Stop the workers (each closes its connections on SIGTERM) and release the sockets."""
        self._closing = True
        for task in list(self._restart_tasks):
            task.cancel()
        for slot in self.slots:
            if slot.channel is not None:
                slot.channel._flush()  # the Goodbyes the service just queued leave before the stop
            if slot.proc is not None and slot.proc.poll() is None:
                slot.proc.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for slot in self.slots:
            if slot.proc is None:
                continue
            try:
                slot.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                slot.proc.kill()
                slot.proc.wait()
            if slot.channel is not None:
                slot.channel.abort()
            slot.udp.close()


def _add(total: ServerStats, stats: dict[str, Any]) -> None:
    for name, value in stats.items():
        if isinstance(value, dict):
            counter: dict[str, int] = getattr(total, name)
            for k, v in value.items():
                counter[k] = counter.get(k, 0) + int(v)
        elif hasattr(total, name):
            setattr(total, name, getattr(total, name) + int(value))
