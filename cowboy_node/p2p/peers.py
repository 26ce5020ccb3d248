"""The validator peer layer: authenticated QUIC (or TCP) connections between the validators of a static set.

Transport only: payloads are opaque bytes on a channel (0 consensus, 1 blocks, 2 transactions, 3 sync, 4 presence
gossip, 5 endpoint gossip, 6 transaction batches). Wire
format and handshake: :mod:`cowboy_node.p2p.peer_frames` and ``docs/protocol.md`` "Validator peer layer";
the links: :mod:`cowboy_node.p2p.peer_quic` (aioquic) or :mod:`cowboy_node.p2p.peer_tcp` (``transport = "tcp"``).

**Topology.** Every validator listens on one UDP port (TCP with ``transport = "tcp"``) and dials every other
validator. The OUTBOUND connection to a peer is used only for sending to it, INBOUND connections only for
receiving — so there is no tie-breaking between the two connections of a pair. A peer that connects again replaces
its older inbound connection (the older one is closed with ``Goodbye{replaced}``).

**Authentication.** TLS certificates are self-signed and not trusted (a TCP link has none: its key exchange is
anonymous). After TLS the dialer sends a Hello, the listener answers a HelloAck; each signs ``network_id``, its
role, its index and the connection's TLS exporter (a TCP link's key-schedule binding) with its validator Ed25519
key. A refused handshake closes with ``Goodbye{reason}``, is counted
(``stats()["handshake_failures.<reason>"]``, ``cowboy_p2p_handshake_failures_total{reason}``) and logged once per
reason per peer per :data:`LOG_INTERVAL_S`.

**Limits.** A frame longer than ``max_message_bytes + 64`` is refused from its length prefix (the connection
closes). Each authenticated peer has receive token buckets (messages/s and bytes/s, burst 2×): excess messages
are dropped and counted, the connection stays up. Each peer's send queue holds at most ``send_queue_messages``
frames (and :data:`SEND_QUEUE_BYTES`) beyond what the link has in flight (:data:`SEND_WINDOW_BYTES` unacknowledged).
Messages queued when a connection drops are counted ``not_connected``.

**Priorities.** The send queue is three FIFO queues, one per class (:func:`channel_class`): consensus, blocks and
sync first, then presence/endpoint gossip (and any other channel), then transactions; each flush empties them in
that order, and transaction frames are written only while the link has less than :data:`TX_WINDOW_BYTES`
unacknowledged, so a vote never waits behind megabytes of transactions. When the queue is full a new message
evicts the OLDEST queued message of a lower class (transactions first, counted ``queue_full`` on the evicted
message's channel); with nothing lower to evict the NEW message is dropped (``queue_full``). So a consensus message
is never dropped because of transactions or gossip. Drops are counted per channel too
(``stats()["dropped.<reason>.ch<channel>"]``, ``cowboy_p2p_messages_dropped_by_channel_total{channel,reason}``).

``send`` to a peer without an authenticated outbound connection returns False
(``not_connected``): consensus retransmits on its own, this layer never buffers for a peer that is down.

**Reconnect.** Each dialer retries after any failure with exponential backoff and full jitter in
``[reconnect_min_s, reconnect_max_s]``; a peer that is down is retried quietly (debug logs); connection and
disconnection are logged at info. An idle outbound connection is kept alive by pings (QUIC's, or the TCP link's
ping records).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from aioquic.asyncio.server import QuicServer

from cowboy_node.observability.logging import get_logger
from cowboy_node.observability.peer_metrics import PeerMetrics
from cowboy_node.p2p import peer_congestion, peer_quic, peer_tcp
from cowboy_node.p2p.peer_frames import (
    FRAME_OVERHEAD,
    ROLE_DIALER,
    ROLE_LISTENER,
    Data,
    Goodbye,
    HandshakeError,
    Hello,
    PeerFrameError,
    TokenBucket,
    decode_body,
    encode_data,
    encode_frame,
    make_hello,
    verify_hello,
)
from cowboy_node.p2p.peer_link import TRANSPORTS, PeerLink
from cowboy_node.p2p.peer_quic import PeerProtocol
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.quic.certs import ensure_certificate

__all__ = ["CLASS_CONTROL", "CLASS_GOSSIP", "CLASS_TXS", "LOG_INTERVAL_S", "SEND_WINDOW_BYTES", "TX_WINDOW_BYTES",
           "PeerInfo", "PeerLimits", "PeerNetwork", "channel_class"]

log = get_logger("cowboy.p2p")

SEND_WINDOW_BYTES = 4 * 1024 * 1024
"""Unacknowledged bytes per outbound connection beyond which frames wait in the peer's send queue."""
SEND_QUEUE_BYTES = 64 * 1024 * 1024
"""Per peer send queue bytes (framed) beyond which a new message is dropped as ``queue_full`` even below
``send_queue_messages`` (4096 queued 8 MiB blocks would be 32 GiB); an empty queue always takes one message."""
TX_WINDOW_BYTES = 1024 * 1024
"""Unacknowledged bytes beyond which transaction frames (:data:`CLASS_TXS`) wait in the queue: a link delivers one
stream in order, so this bounds what a consensus message written next can be stuck behind."""
CLASS_CONTROL = 0
"""Send class of consensus (0), blocks (1) and sync (3): written first, never evicted for a lower class."""
CLASS_GOSSIP = 1
"""Send class of presence (4) and endpoint (5) gossip and any channel not named here."""
CLASS_TXS = 2
"""Send class of transactions (2) and transaction batches (6): written last, evicted first."""
_CLASS_OF = {0: CLASS_CONTROL, 1: CLASS_CONTROL, 3: CLASS_CONTROL, 2: CLASS_TXS, 6: CLASS_TXS}
LOG_INTERVAL_S = 60.0
"""A warning of the same reason about the same peer is logged at most once per this many seconds."""
_STOP_RECANCEL_S = 0.5
"""How long :meth:`PeerNetwork.stop` waits for cancelled dialers before cancelling the ones still running again."""
MAX_UNAUTHENTICATED_INBOUND = 16
"""Inbound connections still in their handshake (each lasts at most ``handshake_timeout_s``) beyond which a new one
is refused at once. Authenticated inbound connections need no cap: one per validator, a newer one replaces it."""


@dataclass(frozen=True, slots=True)
class PeerInfo:
    """Where to dial one other validator."""

    index: int
    """0-based validator index (position in the genesis validators)."""
    public_key: bytes
    """32-byte Ed25519 key of that validator (equal to ``validator_keys[index]``)."""
    host: str
    port: int
    """Port (UDP, or TCP with ``transport = "tcp"``) of that validator's peer listener."""


@dataclass(frozen=True, slots=True)
class PeerLimits:
    """Caps and timers of the peer layer."""

    max_message_bytes: int = 8 * 1024 * 1024
    """Largest payload sent or accepted; a frame body may exceed it by 64 bytes, never more."""
    max_messages_per_s: float = 2000.0
    """Per peer receive token bucket (burst 2×)."""
    max_bytes_per_s: float = 64 * 1024 * 1024
    """Per peer receive byte bucket (burst 2×)."""
    send_queue_messages: int = 4096
    """Per peer send queue (all classes); when full a lower class's oldest message, else the new one, is dropped
    (counted ``queue_full``)."""
    reconnect_min_s: float = 0.2
    reconnect_max_s: float = 5.0
    handshake_timeout_s: float = 5.0
    """TLS plus Hello/HelloAck must complete within this."""
    idle_timeout_s: float = 30.0
    """Link idle timeout (QUIC's, or the TCP link's); the dialer pings every third of it."""
    penalty_min_s: float = 5.0
    """First back-off of a penalized peer (:meth:`PeerNetwork.penalize`); doubled for each offence within twice
    the back-off of the previous one."""
    penalty_max_s: float = 300.0
    """Longest back-off of a penalized peer."""
    congestion_control: str = peer_congestion.NAME
    """QUIC congestion control of the links (``p2p/peer_congestion.py``; aioquic's ``"reno"`` is the
    baseline ``bench/p2p_lossy_link.py`` compares it with)."""
    transport: str = "quic"
    """What carries the links: ``"quic"`` (aioquic, :mod:`~cowboy_node.p2p.peer_quic`) or ``"tcp"`` (TCP with an
    X25519/ChaCha20-Poly1305 record layer, :mod:`~cowboy_node.p2p.peer_tcp`). Every validator of a network must
    use the same one: each listens and dials with it only."""

    def __post_init__(self) -> None:
        if self.transport not in TRANSPORTS:
            raise ValueError(f"transport {self.transport!r} is not one of {', '.join(TRANSPORTS)}")


def channel_class(channel: int) -> int:
    """The send class of ``channel`` (lower is sent first and evicted last)."""
    return _CLASS_OF.get(channel, CLASS_GOSSIP)


_Queued = tuple[int, int, bytes]  # (channel, payload length, framed bytes)


class _Outbound:
    """The dialer side of one peer: its send queues (one per class) and current authenticated connection."""

    __slots__ = ("ever_connected", "info", "proto", "queued", "queued_bytes", "queues", "task")

    def __init__(self, info: PeerInfo) -> None:
        self.info = info
        self.proto: PeerLink | None = None  # set only while authenticated
        self.queues: tuple[deque[_Queued], ...] = (deque(), deque(), deque())  # by class, see channel_class
        self.queued = 0  # messages over all queues
        self.queued_bytes = 0  # sum of len(framed) over all queues
        self.task: asyncio.Task[None] | None = None
        self.ever_connected = False

    def clear(self) -> None:
        """Empty every queue."""
        for q in self.queues:
            q.clear()
        self.queued = self.queued_bytes = 0


class _DialHandler:
    """Handler of one outbound connection attempt."""

    def __init__(self, net: PeerNetwork, out: _Outbound) -> None:
        self.net = net
        self.out = out
        # The listener's answer: its HelloAck, its Goodbye, or (str) why the connection closed before either.
        self.ack: asyncio.Future[Hello | Goodbye | str] = asyncio.get_running_loop().create_future()
        self.closed = asyncio.Event()
        self.close_reason = ""
        self.authenticated = False

    def on_open(self, proto: PeerLink) -> None:
        """Nothing: the dialer task sends the Hello."""

    def on_body(self, proto: PeerLink, body: bytes) -> None:
        try:
            frame: Hello | Data | Goodbye | None = decode_body(body)
        except PeerFrameError:
            frame = None
        if isinstance(frame, Goodbye):
            if not self.ack.done():
                self.ack.set_result(frame)
            proto.close_with("peer_goodbye", goodbye=False, report=f"peer_goodbye:{frame.reason}")
        elif isinstance(frame, Hello) and not self.ack.done():
            self.ack.set_result(frame)
        else:  # garbage, a second HelloAck, Data: the listener never sends those on our outbound connection
            if not self.ack.done():
                self.ack.set_result("protocol_error:bad_frame")
            proto.close_with("bad_frame", report="protocol_error:bad_frame")

    def on_writable(self, proto: PeerLink) -> None:
        if self.authenticated:
            self.net._flush(self.out)

    def on_close(self, proto: PeerLink, reason: str) -> None:
        self.close_reason = reason
        if not self.ack.done():
            self.ack.set_result(reason)
        self.closed.set()


class _Inbound:
    """Handler of one inbound connection: waits for the Hello, then delivers Data."""

    def __init__(self, net: PeerNetwork, proto: PeerLink) -> None:
        self.net = net
        self.proto = proto
        self.index: int | None = None
        loop = asyncio.get_running_loop()
        self.timer: asyncio.TimerHandle | None = loop.call_later(net.limits.handshake_timeout_s, self._timeout)

    def _who(self) -> str:
        return str(self.index) if self.index is not None else self.proto.peer_addr[0] or "?"

    def _timeout(self) -> None:
        self.timer = None
        if self.index is None and not self.proto.closing:
            self.net._handshake_failed(self._who(), HandshakeError("handshake_timeout"))
            self.proto.close_with("handshake_timeout")

    def on_open(self, proto: PeerLink) -> None:
        """Nothing: the dialer speaks first."""

    def on_body(self, proto: PeerLink, body: bytes) -> None:
        net = self.net
        try:
            frame = decode_body(body)
        except PeerFrameError as e:
            if self.index is None:
                net._handshake_failed(self._who(), HandshakeError("bad_frame", e.detail))
                proto.close_with("bad_frame")
            else:
                net._drop("bad_frame", self._who())
            return
        if self.index is not None:
            if isinstance(frame, Data):
                net._deliver(self.index, frame)
            elif isinstance(frame, Goodbye):
                proto.close_with("peer_goodbye", goodbye=False, report=f"peer_goodbye:{frame.reason}")
            else:
                net._drop("bad_frame", self._who())
                proto.close_with("bad_frame")  # a second Hello: the peer is confused, start over
            return
        if isinstance(frame, Goodbye):
            proto.close_with("peer_goodbye", goodbye=False, report=f"peer_goodbye:{frame.reason}")
            return
        try:
            index = verify_hello(frame, role=ROLE_DIALER, network_id=net.network_id, me=net.me,
                                 validator_keys=net.validator_keys, binding=proto.binding, expected_index=None)
        except HandshakeError as e:
            net._handshake_failed(self._who(), e)
            proto.close_with(e.reason)
            return
        self.index = index
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        proto.write(encode_frame(make_hello(net._signer, network_id=net.network_id, role=ROLE_LISTENER,
                                            index=net.me, binding=proto.binding)))
        net._inbound_authenticated(self)

    def on_writable(self, proto: PeerLink) -> None:
        """Nothing is sent on an inbound connection after the HelloAck."""

    def on_close(self, proto: PeerLink, reason: str) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if reason.startswith("protocol_error:"):
            code = reason.split(":", 1)[1]
            self.net._count(f"protocol_errors.{code}")
            if self.index is None:
                self.net._handshake_failed(self._who(), HandshakeError("bad_frame", reason))
            elif code == "frame_too_large":
                self.net._drop("too_large", self._who())
        self.net._inbound_closed(self, reason)


class PeerNetwork:
    """Authenticated links (QUIC or TCP) to the other validators; see the module docstring."""

    def __init__(self, *, me: int, ed25519_seed: bytes, listen_host: str, listen_port: int,
                 peers: Sequence[PeerInfo], validator_keys: Sequence[bytes], network_id: bytes,
                 cert_path: Path, key_path: Path, on_message: Callable[[int, int, bytes], None],
                 limits: PeerLimits = PeerLimits(), metrics: PeerMetrics | None = None,
                 on_peer_change: Callable[[int, bool], None] | None = None) -> None:
        self.me = me
        self.validator_keys = tuple(bytes(k) for k in validator_keys)
        self.network_id = bytes(network_id)
        if len(self.network_id) != 32:
            raise ValueError("network_id must be 32 bytes")
        if not 0 <= me < len(self.validator_keys):
            raise ValueError(f"me={me} is not a validator index (n={len(self.validator_keys)})")
        self._signer = ed25519.PreparedSigner(ed25519_seed)
        if self._signer.public_key != self.validator_keys[me]:
            raise ValueError("ed25519_seed does not match validator_keys[me]")
        for p in peers:
            if p.index == me or not 0 <= p.index < len(self.validator_keys):
                raise ValueError(f"peer index {p.index} is not another validator")
            if bytes(p.public_key) != self.validator_keys[p.index]:
                raise ValueError(f"peer {p.index}: public_key differs from validator_keys[{p.index}]")
        if len({p.index for p in peers}) != len(peers):
            raise ValueError("duplicate peer index")
        self.listen_host, self.listen_port = listen_host, listen_port
        self.limits = limits
        self._cert_path, self._key_path = cert_path, key_path
        self._on_message = on_message
        self._on_peer_change = on_peer_change
        self._metrics = metrics
        self._max_body = limits.max_message_bytes + FRAME_OVERHEAD
        self._out: dict[int, _Outbound] = {p.index: _Outbound(p) for p in peers}
        self._inbound: set[_Inbound] = set()
        self._inbound_by_index: dict[int, _Inbound] = {}
        self._buckets: dict[int, tuple[TokenBucket, TokenBucket]] = {}
        self._stats: dict[str, int] = {}
        self._logged: dict[tuple[str, str], float] = {}
        self._server: QuicServer | peer_tcp.TcpListener | None = None
        self._started = False
        self._stopping = False
        self._flush_scheduled: set[int] = set()
        self._penalties: dict[int, tuple[float, float]] = {}
        """Penalized peers: index → (monotonic time the back-off ends, its length)."""

    # --- lifecycle ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind the listener, UDP or TCP (OSError if it cannot), and start one dialer task per peer."""
        if self._started:
            raise RuntimeError("PeerNetwork.start called twice")
        if self.limits.transport == "tcp":
            self._server = await peer_tcp.listen(self.listen_host, self.listen_port,
                                                 idle_timeout_s=self.limits.idle_timeout_s, max_body=self._max_body,
                                                 make_handler=self._new_inbound)
        else:
            cert_pem, key_pem = ensure_certificate(self._cert_path, self._key_path, f"cowboy-validator-{self.me}")
            self._server = await peer_quic.listen(
                self.listen_host, self.listen_port, cert_pem=cert_pem, key_pem=key_pem,
                idle_timeout_s=self.limits.idle_timeout_s, max_body=self._max_body, make_handler=self._new_inbound,
                congestion=self.limits.congestion_control)
        self._started = True
        for out in self._out.values():
            out.task = asyncio.create_task(self._dialer(out), name=f"p2p-dial-{out.info.index}")
        log.info("p2p listening", host=self.listen_host, port=self.listen_port, me=self.me, peers=len(self._out))

    async def stop(self) -> None:
        """Close every connection (``Goodbye{shutdown}``) and the listener; idempotent."""
        if self._stopping or not self._started:
            self._stopping = True
            return
        self._stopping = True
        tasks = [out.task for out in self._out.values() if out.task is not None]
        # Cancel until done: on CPython 3.11 ``asyncio.wait_for`` can swallow a cancellation that arrives as its
        # inner future completes (gh-86296), and a dialer that lost its cancellation in a handshake would then hold
        # its new link forever while this awaited it (a hung shutdown, seen on a loaded host).
        while pending := [task for task in tasks if not task.done()]:
            for task in pending:
                task.cancel()
            await asyncio.wait(pending, timeout=_STOP_RECANCEL_S)
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for conn in list(self._inbound):
            conn.proto.close_with("shutdown")
            conn.proto.abort()
        self._inbound.clear()
        self._inbound_by_index.clear()
        if self._server is not None:
            # Also the connections no handler holds any more (refused, or draining after a close): no timer of
            # theirs may fire once the socket is closed.
            if isinstance(self._server, peer_tcp.TcpListener):
                for link in self._server.protocols():
                    link.abort()
            else:
                for proto in set(self._server._protocols.values()):
                    if isinstance(proto, PeerProtocol):
                        proto.abort()
            self._server.close()
            self._server = None
        await asyncio.sleep(0)  # let the closed socket's callbacks run before the caller's loop ends

    @property
    def port(self) -> int:
        """The bound port, UDP or TCP (useful with ``listen_port=0``)."""
        if isinstance(self._server, peer_tcp.TcpListener):
            return self._server.port
        if self._server is None or self._server._transport is None:
            return self.listen_port
        return int(self._server._transport.get_extra_info("sockname")[1])

    # --- sending ------------------------------------------------------------------------------------------

    def send(self, to: int, channel: int, payload: bytes) -> bool:
        """Queue ``payload`` for validator ``to`` on ``channel``; False (and counted) if dropped. Non-blocking."""
        if not 0 <= channel <= 255:
            raise ValueError(f"channel {channel} is not in 0..255")
        out = self._out.get(to)
        if out is None or out.proto is None:
            self._drop("not_connected", str(to), channel)
            return False
        if len(payload) > self.limits.max_message_bytes:
            self._drop("too_large", str(to), channel)
            return False
        return self._enqueue(out, channel, len(payload), encode_data(channel, payload))

    def broadcast(self, channel: int, payload: bytes) -> int:
        """Queue ``payload`` for every connected peer (encoded once); the number of peers it was queued to."""
        if not 0 <= channel <= 255:
            raise ValueError(f"channel {channel} is not in 0..255")
        if len(payload) > self.limits.max_message_bytes:
            self._drop("too_large", "*", channel)
            return 0
        framed: bytes | None = None
        n = 0
        for index, out in self._out.items():
            if out.proto is None:
                self._drop("not_connected", str(index), channel)
                continue
            if framed is None:
                framed = encode_data(channel, payload)
            n += self._enqueue(out, channel, len(payload), framed)
        return n

    def connected(self) -> frozenset[int]:
        """Peers with an authenticated outbound connection (the ones ``send`` can reach)."""
        return frozenset(i for i, out in self._out.items() if out.proto is not None)

    def penalize(self, peer: int, reason: str) -> None:
        """Disconnect ``peer`` (``Goodbye{penalized}``) and refuse its connections and messages for a back-off:
        :attr:`PeerLimits.penalty_min_s`, doubled (up to ``penalty_max_s``) when it offends again soon after the
        last one ended. ``reason`` is a short fixed label (metric ``cowboy_p2p_penalties_total{reason}``)."""
        if peer not in self._out:
            return
        now, lim = time.monotonic(), self.limits
        until, backoff = self._penalties.get(peer, (0.0, 0.0))
        if until > now:
            return  # already serving a back-off: what it sent meanwhile was dropped unread
        backoff = min(lim.penalty_max_s, 2 * backoff) if now - until < 2 * backoff else lim.penalty_min_s
        self._penalties[peer] = (now + backoff, backoff)
        self._count(f"penalties.{reason}")
        if self._metrics is not None:
            self._metrics.penalties.labels(reason=reason).inc()
        log.warning("p2p peer penalized", peer=peer, reason=reason, backoff_s=round(backoff, 1))
        conn = self._inbound_by_index.get(peer)
        if conn is not None:
            conn.proto.close_with("penalized")
        out = self._out[peer]
        if out.proto is not None:
            out.proto.close_with("penalized")

    def penalized(self, peer: int) -> float:
        """Seconds left of ``peer``'s back-off (0: not penalized)."""
        until, _ = self._penalties.get(peer, (0.0, 0.0))
        return max(0.0, until - time.monotonic())

    def stats(self) -> dict[str, int]:
        """Counters of this network (``handshake_failures.<reason>``, ``dropped.<reason>``, ``sent``,
        ``received``, ``reconnects``, ``handler_errors``, ``protocol_errors.<code>``), a copy."""
        return dict(self._stats)

    def _enqueue(self, out: _Outbound, channel: int, size: int, framed: bytes) -> bool:
        cls = channel_class(channel)
        while out.queued >= self.limits.send_queue_messages or (
                out.queued and out.queued_bytes + len(framed) > SEND_QUEUE_BYTES):
            # Full: evict the oldest message of the lowest class below this one (transactions first).
            victim = next((q for q in reversed(out.queues[cls + 1:]) if q), None)
            if victim is None:
                self._drop("queue_full", str(out.info.index), channel)
                return False
            old_channel, _, old_framed = victim.popleft()
            out.queued -= 1
            out.queued_bytes -= len(old_framed)
            self._drop("queue_full", str(out.info.index), old_channel)
        out.queues[cls].append((channel, size, framed))
        out.queued += 1
        out.queued_bytes += len(framed)
        index = out.info.index
        if index not in self._flush_scheduled:  # one flush per loop iteration: a burst of sends is coalesced
            self._flush_scheduled.add(index)
            asyncio.get_running_loop().call_soon(self._scheduled_flush, out)
        return True

    def _scheduled_flush(self, out: _Outbound) -> None:
        self._flush_scheduled.discard(out.info.index)
        self._flush(out)

    def _flush(self, out: _Outbound) -> None:
        proto = out.proto
        if proto is None or proto.closing:
            return
        m = self._metrics
        for cls, queue in enumerate(out.queues):
            window = TX_WINDOW_BYTES if cls == CLASS_TXS else SEND_WINDOW_BYTES
            while queue and proto.unacked_bytes() < window:
                channel, size, framed = queue.popleft()
                out.queued -= 1
                out.queued_bytes -= len(framed)
                proto.write(framed)
                self._count("sent")
                if m is not None:
                    label = str(channel)
                    m.messages_sent.labels(channel=label).inc()
                    m.bytes_sent.labels(channel=label).inc(size)
            if queue:  # this class is waiting for the window: lower ones wait behind it
                return

    # --- dialing ------------------------------------------------------------------------------------------

    async def _dialer(self, out: _Outbound) -> None:
        info, limits = out.info, self.limits
        delay = limits.reconnect_min_s
        while not self._stopping:
            wait = self.penalized(info.index)
            if wait > 0:  # no link to a penalized peer until its back-off ends (re-checked: it may be lifted)
                await asyncio.sleep(min(wait, limits.reconnect_max_s))
                continue
            handler = _DialHandler(self, out)
            proto: PeerLink | None = None
            try:
                if limits.transport == "tcp":
                    proto = await peer_tcp.dial(info.host, info.port, idle_timeout_s=limits.idle_timeout_s,
                                                max_body=self._max_body, timeout_s=limits.handshake_timeout_s,
                                                handler=handler)
                else:
                    proto = await peer_quic.dial(info.host, info.port, idle_timeout_s=limits.idle_timeout_s,
                                                 max_body=self._max_body, timeout_s=limits.handshake_timeout_s,
                                                 handler=handler, congestion=limits.congestion_control)
                proto.write(encode_frame(make_hello(self._signer, network_id=self.network_id, role=ROLE_DIALER,
                                                    index=self.me, binding=proto.binding)))
                try:
                    ack = await asyncio.wait_for(asyncio.shield(handler.ack), limits.handshake_timeout_s)
                except TimeoutError:
                    raise HandshakeError("handshake_timeout") from None
                if isinstance(ack, str):
                    if ack.startswith("protocol_error:"):
                        raise HandshakeError("bad_frame", ack)
                    raise ConnectionError(ack)
                if isinstance(ack, Goodbye):
                    self._log_limited(str(info.index), f"refused:{ack.reason}", "p2p peer refused our Hello",
                                      peer=info.index, reason=ack.reason)
                    raise ConnectionError(f"peer_goodbye:{ack.reason}")
                verify_hello(ack, role=ROLE_LISTENER, network_id=self.network_id, me=self.me,
                             validator_keys=self.validator_keys, binding=proto.binding, expected_index=info.index)
                handler.authenticated = True
                self._outbound_up(out, proto)
                delay = limits.reconnect_min_s
                await self._hold(proto, handler)
                log.info("p2p peer disconnected", peer=info.index, reason=handler.close_reason)
            except HandshakeError as e:
                self._handshake_failed(str(info.index), e)
                if proto is not None:
                    proto.close_with(e.reason)
            except (ConnectionError, OSError, TimeoutError) as e:
                log.debug("p2p dial failed", peer=info.index, host=info.host, port=info.port,
                          error=str(e) or type(e).__name__)
            except Exception:  # a bug must not end this peer's dialer for the life of the process
                if self._may_log(str(info.index), "dialer_error"):
                    log.exception("p2p dialer error; retrying", peer=info.index)
            finally:
                if out.proto is not None and out.proto is proto:
                    self._outbound_down(out)
                if proto is not None:
                    if self._stopping:
                        proto.close_with("shutdown")
                    proto.abort()
            if self._stopping:
                return
            await asyncio.sleep(random.uniform(limits.reconnect_min_s, delay))
            delay = min(limits.reconnect_max_s, delay * 2)

    async def _hold(self, proto: PeerLink, handler: _DialHandler) -> None:
        """While the connection lives: keep it alive with PINGs."""
        interval = max(0.5, self.limits.idle_timeout_s / 3)
        while not handler.closed.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(handler.closed.wait(), interval)
            if not handler.closed.is_set():
                proto.send_ping()

    def _outbound_up(self, out: _Outbound, proto: PeerLink) -> None:
        index = out.info.index
        out.proto = proto
        out.clear()  # nothing was queued while down (send refuses), but be explicit
        if out.ever_connected:
            self._count("reconnects")
            if self._metrics is not None:
                self._metrics.reconnects.inc()
        out.ever_connected = True
        self._logged = {k: v for k, v in self._logged.items() if k[0] != str(index)}
        log.info("p2p peer connected", peer=index, host=out.info.host, port=out.info.port)
        self._peers_changed(index, True)

    def _outbound_down(self, out: _Outbound) -> None:
        out.proto = None
        for q in out.queues:
            for channel, _, _ in q:
                self._drop("not_connected", str(out.info.index), channel)
        out.clear()
        self._peers_changed(out.info.index, False)

    def _peers_changed(self, index: int, up: bool) -> None:
        if self._metrics is not None:
            self._metrics.peers_connected.set(len(self.connected()))
        if self._on_peer_change is not None:
            try:
                self._on_peer_change(index, up)
            except Exception:
                log.exception("p2p on_peer_change raised", peer=index, up=up)

    # --- receiving ----------------------------------------------------------------------------------------

    def _new_inbound(self, proto: PeerLink) -> _Inbound | None:
        pending = len(self._inbound) - len(self._inbound_by_index)
        if self._stopping or pending >= MAX_UNAUTHENTICATED_INBOUND + len(self._out):
            self._count("refused_connections")
            return None
        conn = _Inbound(self, proto)
        self._inbound.add(conn)
        return conn

    def _inbound_authenticated(self, conn: _Inbound) -> None:
        assert conn.index is not None
        older = self._inbound_by_index.get(conn.index)
        self._inbound_by_index[conn.index] = conn
        if older is not None and older is not conn:
            older.proto.close_with("replaced")
        if self.penalized(conn.index) > 0:
            conn.proto.close_with("penalized")
            return
        if conn.index not in self._buckets:
            now, lim = time.monotonic(), self.limits
            self._buckets[conn.index] = (TokenBucket(lim.max_messages_per_s, 2 * lim.max_messages_per_s, now),
                                         TokenBucket(lim.max_bytes_per_s, 2 * lim.max_bytes_per_s, now))
        log.debug("p2p inbound authenticated", peer=conn.index)

    def _inbound_closed(self, conn: _Inbound, reason: str) -> None:
        self._inbound.discard(conn)
        if conn.index is not None and self._inbound_by_index.get(conn.index) is conn:
            del self._inbound_by_index[conn.index]
            log.debug("p2p inbound closed", peer=conn.index, reason=reason)

    def _deliver(self, index: int, frame: Data) -> None:
        size = len(frame.payload)
        if size > self.limits.max_message_bytes:
            self._drop("too_large", str(index), frame.channel)
            return
        msgs, nbytes = self._buckets[index]
        now = time.monotonic()
        if self._penalties.get(index, (0.0, 0.0))[0] > now:
            self._drop("penalized", str(index), frame.channel)
            return
        if not msgs.take(1.0, now) or not nbytes.take(float(size), now):
            self._drop("rate_limited", str(index), frame.channel)
            return
        self._count("received")
        m = self._metrics
        if m is not None:
            label = str(frame.channel)
            m.messages_received.labels(channel=label).inc()
            m.bytes_received.labels(channel=label).inc(size)
        try:
            self._on_message(index, frame.channel, frame.payload)
        except Exception:
            self._count("handler_errors")
            if m is not None:
                m.handler_errors.inc()
            if self._may_log(str(index), "handler_error"):
                log.exception("p2p on_message raised", peer=index, channel=frame.channel)

    # --- accounting ---------------------------------------------------------------------------------------

    def _count(self, key: str, n: int = 1) -> None:
        self._stats[key] = self._stats.get(key, 0) + n

    def _drop(self, reason: str, who: str, channel: int | None = None) -> None:
        self._count(f"dropped.{reason}")
        if channel is not None:
            self._count(f"dropped.{reason}.ch{channel}")
        if self._metrics is not None:
            self._metrics.messages_dropped.labels(reason=reason).inc()
            if channel is not None:
                self._metrics.messages_dropped_by_channel.labels(channel=str(channel), reason=reason).inc()
        if reason in ("rate_limited", "too_large", "bad_frame"):
            self._log_limited(who, f"dropped:{reason}", "p2p message dropped", peer=who, reason=reason)

    def _handshake_failed(self, who: str, e: HandshakeError) -> None:
        self._count(f"handshake_failures.{e.reason}")
        if self._metrics is not None:
            self._metrics.handshake_failures.labels(reason=e.reason).inc()
        self._log_limited(who, f"handshake:{e.reason}", "p2p handshake refused", peer=who, reason=e.reason,
                          detail=e.detail)

    def _may_log(self, who: str, what: str) -> bool:
        now = time.monotonic()
        last = self._logged.get((who, what))
        if last is not None and now - last < LOG_INTERVAL_S:
            return False
        if len(self._logged) > 4096:  # bounded: unauthenticated peers are keyed by address
            self._logged.clear()
        self._logged[(who, what)] = now
        return True

    def _log_limited(self, who: str, what: str, event: str, **kv: object) -> None:
        if self._may_log(who, what):
            log.warning(event, **kv)
