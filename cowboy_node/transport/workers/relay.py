"""The validator-process end of one worker's channel: relayed connections as ordinary ``FrameConnection`` s.

Each connection the worker reports (ipc OPEN) gets a :class:`FrameConnection` backed by a
:class:`RelayedConnection` instead of the QUIC adapter's protocol object, and the handler ``service.py`` makes
for it is the same ``_RunnerConnection`` it makes in-process — so admission, frame handling, presence, push and
result forwarding stay in one place. Sending encodes the frame here and ships the bytes (ipc SEND); the worker
writes them to stream 0 unchanged.

Close semantics follow the adapter's: ``on_close`` runs exactly once, at the first of a local close (at once,
like the adapter), the worker's CLOSED report, or the loss of the worker (reason ``worker_lost``: the session
ends as a lost connection and its runner reconnects, §11.3).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, cast

from cowboy_node.transport.workers import ipc
from cowboy_node.transport.workers.channel import ChannelProtocol
from cowboy_protocol.quic.adapter import ConnectionHandler, FrameConnection
from cowboy_protocol.quic.stream import GoodbyeSigner
from cowboy_protocol.transport.frames import Frame, Goodbye, encode_frame
from cowboy_protocol.transport.framing import decode_frame
from cowboy_protocol.transport.protocol_errors import TransportError

log = logging.getLogger("cowboy.transport.workers")

WORKER_LOST = "worker_lost"
"""``on_close`` reason of the connections of a worker whose channel closed (it died or was stopped)."""


class RelayedConnection:
    """What :class:`FrameConnection` reads from its protocol object, for one connection held by a worker."""

    __slots__ = ("authenticated", "channel", "channel_binding", "close_reason", "handler", "number", "peer")

    def __init__(self, channel: RelayChannel, number: int, channel_binding: bytes, peer: tuple[str, int]) -> None:
        self.channel = channel
        self.number = number
        """The worker's connection number (unique within one worker run)."""
        self.channel_binding = channel_binding
        """The TLS-exporter binding the worker computed."""
        self.peer = peer
        """The runner's (host, port)."""
        self.authenticated = False
        """Whether the session marked it authenticated."""
        self.close_reason: str | None = None
        """First close reason, once closed."""
        self.handler: ConnectionHandler | None = None
        """The session handler (None once closed)."""

    def send_frame(self, frame: Frame) -> bool:
        """Encode here, send through the worker; False once closing."""
        if self.close_reason is not None:
            return False
        self.channel.send(ipc.Kind.SEND, self.number, encode_frame(frame))
        return True

    def begin_close(self, goodbye: Goodbye | None, reason: str) -> None:
        """Tell the worker to send ``goodbye`` and close; report the close to the handler now (once)."""
        if self.close_reason is not None:
            return
        self.channel.send(ipc.Kind.CLOSE, self.number, b"" if goodbye is None else encode_frame(goodbye))
        self.channel.closed_locally(self, reason)

    def mark_authenticated(self, goodbye_signer: GoodbyeSigner | None) -> None:
        """The worker stops counting it half-open. A ``goodbye_signer`` cannot cross the process boundary: the
        worker's own Goodbyes (protocol errors, shutdown) stay unsigned, which §12.5 allows before auth and
        the service never asks for (it passes none)."""
        if not self.authenticated:
            self.authenticated = True
            self.channel.send(ipc.Kind.AUTHENTICATED, self.number)


class RelayChannel(ChannelProtocol):
    """One worker run's channel: routes its messages to session handlers, ships their sends."""

    def __init__(self, *, index: int, handler_factory: Callable[[FrameConnection], ConnectionHandler],
                 on_stats: Callable[[int, dict[str, Any]], None], on_lost: Callable[[RelayChannel], None]) -> None:
        super().__init__()
        self.index = index
        """Worker slot."""
        self.handler_factory = handler_factory
        self.on_stats = on_stats
        self.on_lost = on_lost
        self.conns: dict[int, RelayedConnection] = {}
        """Live relayed connections by the worker's number."""
        self.lost = False

    # --- asyncio.Protocol (decoding and coalesced sends: ChannelProtocol) ---
    def torn(self) -> None:
        log.exception("torn channel from QUIC worker %d; dropping it", self.index)
        self.abort()

    def on_message(self, m: ipc.Message) -> None:
        self._message(m)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        for rc in list(self.conns.values()):
            self._report_closed(rc, WORKER_LOST)
        self.on_lost(self)

    # --- sending ---
    def send(self, kind: ipc.Kind, conn: int, payload: bytes = b"") -> None:
        """Queue one message; all queued in one loop iteration leave in one write."""
        if self.lost:
            return
        super().send(kind, conn, payload)

    def abort(self) -> None:
        """Drop the channel (the worker exits when it sees it closed)."""
        if self.transport is not None:
            self.transport.abort()

    # --- receiving ---
    def _message(self, m: ipc.Message) -> None:
        if m.kind is ipc.Kind.OPEN:
            self._open(m.conn, m.payload)
        elif m.kind is ipc.Kind.FRAME:
            rc = self.conns.get(m.conn)
            if rc is None or rc.handler is None:
                return
            try:
                frame = decode_frame(m.payload)
            except TransportError:  # the worker decoded it already: only a bug gets here
                log.exception("undecodable relayed frame from worker %d", self.index)
                rc.begin_close(None, "handler_error")
                return
            self._call(rc, lambda h: h.on_frame(frame))
        elif m.kind is ipc.Kind.CLOSED:
            rc = self.conns.get(m.conn)
            if rc is not None:
                self._report_closed(rc, m.payload.decode(errors="replace"))
        elif m.kind is ipc.Kind.STATS:
            self.on_stats(self.index, json.loads(m.payload))

    def _open(self, number: int, payload: bytes) -> None:
        binding, peer = payload[:32], payload[32:].decode(errors="replace")
        host, _, port = peer.rpartition(":")
        rc = RelayedConnection(self, number, binding, (host, int(port or 0)))
        self.conns[number] = rc
        conn = FrameConnection(cast(Any, rc))  # the adapter's connection object, backed by the relay
        try:
            rc.handler = self.handler_factory(conn)
            rc.handler.on_open(conn)
        except Exception:
            log.exception("CIP-11 connection handler failed (worker %d, connection %d)", self.index, number)
            rc.begin_close(None, "handler_error")

    def _call(self, rc: RelayedConnection, fn: Callable[[ConnectionHandler], None]) -> None:
        handler = rc.handler
        if handler is None:
            return
        try:
            fn(handler)
        except Exception:
            log.exception("CIP-11 connection handler failed (worker %d, connection %d)", self.index, rc.number)
            rc.begin_close(None, "handler_error")

    def closed_locally(self, rc: RelayedConnection, reason: str) -> None:
        """A local close: the handler hears it now, as from the in-process adapter."""
        self._report_closed(rc, reason)

    def _report_closed(self, rc: RelayedConnection, reason: str) -> None:
        if rc.close_reason is None:
            rc.close_reason = reason
        self.conns.pop(rc.number, None)
        handler, rc.handler = rc.handler, None  # on_close exactly once, nothing after it
        if handler is not None:
            try:
                handler.on_close(reason)
            except Exception:
                log.exception("CIP-11 connection handler on_close failed (worker %d)", self.index)
