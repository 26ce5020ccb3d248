"""A UDP relay for fault injection between real processes (loopback only).

:class:`UdpLink` listens on ``127.0.0.1:listen_port`` and relays every datagram a client sends there to ``target``
from an upstream socket of its own (one per client address, so the target can tell clients apart), and every
datagram the target sends back to that upstream socket to the client. One background thread does all the work
with a selector; :meth:`UdpLink.close` stops it and closes every socket (the thread also wakes up every
``_TICK_S`` so it cannot outlive a lost wake-up).

Controls (thread-safe, effective for the next datagram): :meth:`~UdpLink.cut` drops everything both ways,
:meth:`~UdpLink.heal` restores, :meth:`~UdpLink.set_loss` drops each datagram with probability ``p`` (seeded),
:meth:`~UdpLink.set_delay` holds each datagram ``ms`` milliseconds (± a uniform, seeded ``jitter_ms``; jitter
reorders datagrams, as netem's does) before it is sent on, :meth:`~UdpLink.impair` sets delay, jitter and loss at
once. Counters:
:attr:`~UdpLink.relayed` / :attr:`~UdpLink.dropped` (totals) and per direction in :meth:`~UdpLink.counters`.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import random
import selectors
import socket
import threading
import time
from dataclasses import dataclass

HOST = "127.0.0.1"
_TICK_S = 0.05
"""Longest the relay thread sleeps without looking at its closed flag and the delay queue."""
_MAX_DATAGRAM = 65535
_SOCKET_BUFFER = 4 * 1024 * 1024
MAX_CLIENTS = 256
"""Most client addresses with an upstream socket at once; a datagram from one more is dropped (bounded)."""
MAX_QUEUED = 100_000
"""Most delayed datagrams held at once; more are dropped (bounded memory)."""


@dataclass
class Counters:
    """Datagrams relayed and dropped per direction (``up``: client → target, ``down``: target → client)."""

    relayed_up: int = 0
    relayed_down: int = 0
    dropped_up: int = 0
    dropped_down: int = 0


def _udp_socket(port: int = 0) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
            with contextlib.suppress(OSError):  # a smaller buffer only means more drops under bursts
                s.setsockopt(socket.SOL_SOCKET, opt, _SOCKET_BUFFER)
        s.bind((HOST, port))
        s.setblocking(False)
    except BaseException:
        s.close()
        raise
    return s


class UdpLink:
    """Relay datagrams between clients of ``127.0.0.1:listen_port`` (0: any free port, see :attr:`port`) and
    ``target``; started on construction, stopped by :meth:`close` (also a context manager)."""

    def __init__(self, listen_port: int, target: tuple[str, int], *, name: str = "") -> None:
        self.target = (target[0], int(target[1]))
        self.name = name or f"udp-link->{self.target[1]}"
        self._lock = threading.Lock()
        self._cut = False
        self._loss = 0.0
        self._rng = random.Random(0)
        self._delay_s = 0.0
        self._jitter_s = 0.0
        self._jitter_rng = random.Random(0)
        self._counters = Counters()
        self._closed = threading.Event()
        self._queue: list[tuple[float, int, socket.socket, bytes, tuple[str, int], bool]] = []
        self._seq = itertools.count()
        self._upstream: dict[tuple[str, int], socket.socket] = {}
        self._client_of: dict[socket.socket, tuple[str, int]] = {}
        self._sel = selectors.DefaultSelector()
        self._listen = _udp_socket(listen_port)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.port: int = int(self._listen.getsockname()[1])
        self._sel.register(self._listen, selectors.EVENT_READ)
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
        self._thread.start()

    # -- controls -------------------------------------------------------------------------
    @property
    def addr(self) -> str:
        """``127.0.0.1:PORT`` clients send to."""
        return f"{HOST}:{self.port}"

    def cut(self) -> None:
        """Drop every datagram both ways until :meth:`heal`."""
        with self._lock:
            self._cut = True

    def heal(self) -> None:
        """Undo :meth:`cut` (loss and delay settings stay as set)."""
        with self._lock:
            self._cut = False

    @property
    def is_cut(self) -> bool:
        with self._lock:
            return self._cut

    def set_loss(self, p: float, rng_seed: int = 0) -> None:
        """Drop each datagram (either way) with probability ``p`` (0 ≤ p ≤ 1), drawn from ``Random(rng_seed)``."""
        if not 0.0 <= p <= 1.0:
            raise ValueError("loss probability must be within [0, 1]")
        with self._lock:
            self._loss = float(p)
            self._rng = random.Random(rng_seed)

    def set_delay(self, ms: float, jitter_ms: float = 0.0, rng_seed: int = 0) -> None:
        """Hold every datagram (either way) ``ms`` milliseconds before sending it on (0: none); with ``jitter_ms``
        each datagram's hold is drawn uniformly from ``[ms - jitter_ms, ms + jitter_ms]`` by ``Random(rng_seed)``
        (so datagrams can overtake each other)."""
        if ms < 0 or jitter_ms < 0:
            raise ValueError("delay and jitter must not be negative")
        if jitter_ms > ms:
            raise ValueError("jitter must not exceed the delay (a datagram cannot leave before it arrived)")
        with self._lock:
            self._delay_s = ms / 1000.0
            self._jitter_s = jitter_ms / 1000.0
            self._jitter_rng = random.Random(rng_seed)

    def impair(self, delay_ms: float = 0.0, jitter_ms: float = 0.0, loss: float = 0.0, rng_seed: int = 0) -> None:
        """:meth:`set_delay` and :meth:`set_loss` in one call (``impair()`` with no arguments: a clean link);
        the loss and jitter draws use separate generators, both seeded from ``rng_seed``."""
        self.set_delay(delay_ms, jitter_ms, rng_seed=rng_seed + 1)
        self.set_loss(loss, rng_seed=rng_seed)

    def counters(self) -> Counters:
        """A copy of the per-direction counters."""
        with self._lock:
            return Counters(**vars(self._counters))

    @property
    def relayed(self) -> int:
        """Datagrams sent on, both directions."""
        c = self.counters()
        return c.relayed_up + c.relayed_down

    @property
    def dropped(self) -> int:
        """Datagrams dropped (cut, loss, bounds, send errors), both directions."""
        c = self.counters()
        return c.dropped_up + c.dropped_down

    @property
    def clients(self) -> int:
        """Client addresses with an upstream socket."""
        with self._lock:
            return len(self._upstream)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the relay thread and close every socket (idempotent)."""
        if not self._closed.is_set():
            self._closed.set()
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise RuntimeError(f"{self.name}: relay thread did not stop within {timeout} s")

    def __enter__(self) -> UdpLink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"UdpLink({self.addr} -> {self.target[0]}:{self.target[1]}, cut={self._cut})"

    # -- relay thread ---------------------------------------------------------------------
    def _count(self, up: bool, relayed: bool) -> None:
        c = self._counters
        if up and relayed:
            c.relayed_up += 1
        elif up:
            c.dropped_up += 1
        elif relayed:
            c.relayed_down += 1
        else:
            c.dropped_down += 1

    def _admit(self, up: bool) -> float | None:
        """Under the lock: None to drop the datagram now, else its delay in seconds."""
        if self._cut or (self._loss > 0.0 and self._rng.random() < self._loss):
            self._count(up, relayed=False)
            return None
        if self._jitter_s > 0.0:
            return self._delay_s + self._jitter_rng.uniform(-self._jitter_s, self._jitter_s)
        return self._delay_s

    def _send(self, sock: socket.socket, data: bytes, dest: tuple[str, int], up: bool) -> None:
        with self._lock:
            if self._cut:  # cut while it waited in the delay queue
                self._count(up, relayed=False)
                return
        try:
            sock.sendto(data, dest)
            ok = True
        except OSError:  # buffer full, or the socket was closed under us: the datagram is lost, as on a wire
            ok = False
        with self._lock:
            self._count(up, relayed=ok)

    def _forward(self, sock: socket.socket, data: bytes, dest: tuple[str, int], up: bool) -> None:
        with self._lock:
            delay = self._admit(up)
            if delay is not None and delay > 0 and len(self._queue) >= MAX_QUEUED:
                self._count(up, relayed=False)
                return
        if delay is None:
            return
        if delay > 0:
            heapq.heappush(self._queue, (time.monotonic() + delay, next(self._seq), sock, data, dest, up))
        else:
            self._send(sock, data, dest, up)

    def _upstream_for(self, client: tuple[str, int]) -> socket.socket | None:
        sock = self._upstream.get(client)
        if sock is not None:
            return sock
        with self._lock:
            if len(self._upstream) >= MAX_CLIENTS:
                return None
        try:
            sock = _udp_socket(0)
        except OSError:
            return None
        self._sel.register(sock, selectors.EVENT_READ)
        with self._lock:
            self._upstream[client] = sock
        self._client_of[sock] = client
        return sock

    def _on_readable(self, sock: socket.socket) -> None:
        for _ in range(64):  # drain a burst, but let the delay queue and other sockets run too
            try:
                data, src = sock.recvfrom(_MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. ICMP errors surfacing on some platforms
                return
            if sock is self._listen:
                up = self._upstream_for((src[0], int(src[1])))
                if up is None:
                    with self._lock:
                        self._count(True, relayed=False)
                    continue
                self._forward(up, data, self.target, up=True)
            else:
                if (src[0], int(src[1])) != self.target:
                    continue  # not from the target: not part of this link
                self._forward(self._listen, data, self._client_of[sock], up=False)

    def _flush_due(self) -> float:
        """Send every delayed datagram whose time has come; the wait until the next one (or the tick)."""
        now = time.monotonic()
        while self._queue and self._queue[0][0] <= now:
            _, _, sock, data, dest, up = heapq.heappop(self._queue)
            self._send(sock, data, dest, up)
        if self._queue:
            return max(0.0, min(_TICK_S, self._queue[0][0] - now))
        return _TICK_S

    def _main(self) -> None:
        try:
            while not self._closed.is_set():
                wait = self._flush_due()
                for key, _ in self._sel.select(wait):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    if sock is self._wake_r:
                        with contextlib.suppress(OSError):
                            sock.recv(64)
                        continue
                    self._on_readable(sock)
        finally:
            self._queue.clear()
            self._sel.close()
            for s in (*self._client_of, self._listen, self._wake_r, self._wake_w):
                s.close()
            with self._lock:
                self._upstream.clear()
            self._client_of.clear()
