"""Validator peer layer, aioquic adapter: one framed stream per connection, the TLS exporter, close with a Goodbye.

``[p2p] transport = "quic"`` (the default); :mod:`~cowboy_node.p2p.peer_tcp` is the TCP alternative.

With :mod:`~cowboy_node.p2p.peer_congestion` (the links' congestion control), the only peer-layer module that
imports aioquic. It authenticates nothing and interprets no frame: it gives the
layer above (:mod:`cowboy_node.p2p.peers`) whole frames (``peer_frames.FrameReader``), the connection's TLS
exporter once the handshake completes, a way to write framed bytes with coalesced transmission, the bytes not yet
acknowledged by the peer (backpressure), and exactly one ``on_close(reason)``.

Certificates are self-signed and never verified (``ssl.CERT_NONE``): identity is the Ed25519 Hello/HelloAck bound
to :data:`peer_frames.EXPORTER_LABEL`, exported here through ``cowboy_protocol.quic.exporter``.

Close reasons: ``local:<reason>`` (we closed, after sending ``Goodbye{reason}``), ``peer_goodbye:<reason>``,
``protocol_error:<code>`` (a frame the reader refused, a second stream, a reset), ``peer_fin`` (the peer ended
the stream without a Goodbye the handler acted on), ``idle_timeout``,
``peer_closed:<code>:<phrase>``, ``stateless_reset`` never (aioquic's client does not detect them; the idle timeout
and the dialer's reconnect cover a restarted peer).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable

from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.asyncio.server import QuicServer, serve
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import NetworkAddress, QuicConnection
from aioquic.quic.events import (
    ConnectionTerminated,
    HandshakeCompleted,
    QuicEvent,
    StopSendingReceived,
    StreamDataReceived,
    StreamReset,
)
from aioquic.quic.packet import QuicErrorCode

from cowboy_node.p2p import peer_congestion
from cowboy_node.p2p.peer_frames import (
    BINDING_BYTES,
    EXPORTER_LABEL,
    FrameReader,
    Goodbye,
    encode_frame,
)
from cowboy_node.p2p.peer_link import LinkHandler
from cowboy_protocol.quic.certs import load_certificate
from cowboy_protocol.quic.exporter import enable_channel_binding, exporter

__all__ = ["ALPN", "STREAM_ID", "PeerHandler", "PeerProtocol", "dial", "listen"]

ALPN = "cowboy-p2p-1"
"""TLS ALPN id of validator peer connections (distinct from the CIP-11 runner ALPN)."""
STREAM_ID = 0
"""The dialer's first bidirectional stream: every frame of the connection, both directions."""
FLOW_WINDOW = 16 * 1024 * 1024
"""QUIC connection and stream flow-control windows (bytes in flight per connection)."""


PeerHandler = LinkHandler
"""What a :class:`PeerProtocol` reports to (:class:`~cowboy_node.p2p.peer_link.LinkHandler`)."""


class PeerProtocol(QuicConnectionProtocol):
    """One peer connection (either side); frames on :data:`STREAM_ID`."""

    def __init__(self, quic: QuicConnection, *, max_body: int, handler: PeerHandler | None = None,
                 **kwargs: object) -> None:
        enable_channel_binding(quic)  # before the handshake starts
        super().__init__(quic, **kwargs)  # type: ignore[arg-type]
        self.handler = handler
        """Set by the creator before the first datagram (the server's factory sets it right away)."""
        self.binding = b""
        """``TLS-Exporter(EXPORTER_LABEL, "", 32)`` of this connection, once open."""
        self.peer_addr: tuple[str, int] = ("", 0)
        self.close_reason: str | None = None
        self.opened = asyncio.get_running_loop().create_future()
        """Resolved (True) at TLS completion, or (False) if the connection ends first."""
        self.terminated = asyncio.Event()
        self._reader = FrameReader(max_body)
        self._transmit_pending = False
        self._in_events = False

    # --- writing ------------------------------------------------------------------------------------------

    @property
    def closing(self) -> bool:
        """True once a close began (local or remote): writes are ignored."""
        return self.close_reason is not None

    def write(self, data: bytes) -> None:
        """Write framed bytes on the stream; transmitted at the end of this loop iteration (coalesced)."""
        if self.closing:
            return
        self._quic.send_stream_data(STREAM_ID, data)
        if not self._in_events and not self._transmit_pending:
            self._transmit_pending = True
            self._loop.call_soon(self._deferred_transmit)

    def transmit(self) -> None:
        """aioquic's transmit, unless the connection was aborted (its socket may be closed)."""
        if not self.terminated.is_set():
            super().transmit()

    def _deferred_transmit(self) -> None:
        self._transmit_pending = False
        self.transmit()

    def unacked_bytes(self) -> int:
        """Bytes written on the stream that the peer has not acknowledged yet (aioquic keeps them buffered)."""
        stream = self._quic._streams.get(STREAM_ID)  # aioquic has no public accessor
        return 0 if stream is None else len(stream.sender._buffer)

    def send_ping(self) -> None:
        """A QUIC PING (keeps an idle connection alive)."""
        if not self.closing:
            self._quic.send_ping(0)
            self.transmit()

    def close_with(self, reason: str, *, goodbye: bool = True, report: str | None = None) -> None:
        """Send ``Goodbye{reason}`` (if ``goodbye``) then the QUIC CONNECTION_CLOSE with ``reason`` as phrase;
        the handler's ``on_close`` gets ``report`` (default ``local:<reason>``)."""
        if self.closing or self.terminated.is_set():
            return
        self._report_closed(report or f"local:{reason}")
        if goodbye:
            try:
                self._quic.send_stream_data(STREAM_ID, encode_frame(Goodbye(reason)), end_stream=True)
                self.transmit()  # the Goodbye leaves before the CONNECTION_CLOSE (same path, in order on loopback)
            except Exception:  # the stream may be unusable (e.g. the peer reset it): close anyway
                pass
        self._quic.close(error_code=QuicErrorCode.NO_ERROR, reason_phrase=reason[:100])
        self.transmit()

    def abort(self) -> None:
        """Close now without Goodbye and stop every timer (the socket is about to close)."""
        self.close_with("shutdown", goodbye=False)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._mark_terminated()

    # --- reading ------------------------------------------------------------------------------------------

    def datagram_received(self, data: bytes | str, addr: NetworkAddress) -> None:
        """aioquic's receive path, then tell the handler the peer may have acknowledged data."""
        if self.terminated.is_set():
            return
        if not self.peer_addr[0]:
            self.peer_addr = (str(addr[0]), int(addr[1]))
        super().datagram_received(data, addr)
        if self.handler is not None and not self.closing:
            self.handler.on_writable(self)

    def _process_events(self) -> None:
        self._in_events = True
        try:
            super()._process_events()
        finally:
            self._in_events = False

    def quic_event_received(self, event: QuicEvent) -> None:
        """Dispatch aioquic events."""
        if isinstance(event, HandshakeCompleted):
            self.binding = exporter(self._quic, EXPORTER_LABEL, b"", BINDING_BYTES)
            if not self.opened.done():
                self.opened.set_result(True)
            if self.handler is not None and not self.closing:
                self.handler.on_open(self)
        elif isinstance(event, StreamDataReceived):
            self._stream_data(event.stream_id, event.data, event.end_stream)
        elif isinstance(event, StreamReset | StopSendingReceived):
            self._protocol_error("stream_reset")
        elif isinstance(event, ConnectionTerminated):
            if event.reason_phrase == "Idle timeout" and event.error_code == QuicErrorCode.INTERNAL_ERROR:
                self._report_closed("idle_timeout")
            else:
                self._report_closed(f"peer_closed:{event.error_code}:{event.reason_phrase}")
            self._mark_terminated()

    def _stream_data(self, stream_id: int, data: bytes, end_stream: bool) -> None:
        if self.closing:
            return
        if stream_id != STREAM_ID:
            self._protocol_error("unexpected_stream")
            return
        for body in self._reader.feed(data):
            if self.closing or self.handler is None:
                return
            self.handler.on_body(self, body)
        if self._reader.error is not None:
            self._protocol_error(self._reader.error.code)
            return
        if end_stream and not self.closing:  # the peer finished its side (after a Goodbye, or abruptly): done
            self.close_with("stream_fin", goodbye=False, report="peer_fin")

    def _protocol_error(self, code: str) -> None:
        if self.closing:
            return
        self.close_with(code, report=f"protocol_error:{code}")

    def _report_closed(self, reason: str) -> None:
        if self.close_reason is not None:
            return
        self.close_reason = reason
        if not self.opened.done():
            self.opened.set_result(False)
        if self.handler is not None:
            self._loop.call_soon(self.handler.on_close, self, reason)  # never re-entrant inside aioquic

    def _mark_terminated(self) -> None:
        if not self.terminated.is_set():
            self.terminated.set()
            self._on_terminated()

    def _on_terminated(self) -> None:
        """Hook: the QUIC connection has ended."""

    def connection_lost(self, exc: Exception | None) -> None:
        """The datagram socket closed."""
        self._report_closed("socket_closed")
        self._mark_terminated()


class _ClientPeerProtocol(PeerProtocol):
    def _on_terminated(self) -> None:
        if self._transport is not None:
            self._transport.close()


def _configuration(*, is_client: bool, idle_timeout_s: float, congestion: str) -> QuicConfiguration:
    config = QuicConfiguration(is_client=is_client, alpn_protocols=[ALPN], idle_timeout=idle_timeout_s,
                               max_data=FLOW_WINDOW, max_stream_data=FLOW_WINDOW,
                               congestion_control_algorithm=congestion)
    if is_client:
        config.verify_mode = ssl.CERT_NONE  # identity is the Hello signature over the exporter, not the cert
    return config


async def listen(host: str, port: int, *, cert_pem: bytes, key_pem: bytes, idle_timeout_s: float, max_body: int,
                 make_handler: Callable[[PeerProtocol], PeerHandler | None],
                 congestion: str = peer_congestion.NAME) -> QuicServer:
    """Bind the UDP listener; ``make_handler`` is called for each new connection (None refuses it at once)."""
    config = _configuration(is_client=False, idle_timeout_s=idle_timeout_s, congestion=congestion)
    config.certificate, config.private_key = load_certificate(cert_pem, key_pem)

    def create_protocol(quic: QuicConnection, **kwargs: object) -> PeerProtocol:
        proto = PeerProtocol(quic, max_body=max_body, handler=None, **kwargs)
        handler = make_handler(proto)
        if handler is None:
            proto.close_with("too_many_connections", goodbye=False)
        proto.handler = handler
        return proto

    return await serve(host, port, configuration=config, create_protocol=create_protocol)


async def dial(host: str, port: int, *, idle_timeout_s: float, max_body: int, timeout_s: float,
               handler: PeerHandler | None = None, congestion: str = peer_congestion.NAME) -> PeerProtocol:
    """Open a QUIC connection and complete TLS; raises ConnectionError (refused, closed) or TimeoutError."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    family, addr = infos[0][0], infos[0][4]
    config = _configuration(is_client=True, idle_timeout_s=idle_timeout_s, congestion=congestion)
    config.server_name = host
    quic = QuicConnection(configuration=config)
    local = ("::", 0) if family == socket.AF_INET6 else ("0.0.0.0", 0)
    transport, proto = await loop.create_datagram_endpoint(
        lambda: _ClientPeerProtocol(quic, max_body=max_body, handler=handler), local_addr=local)
    proto.peer_addr = (str(addr[0]), int(addr[1]))
    try:
        proto.connect(proto.peer_addr)
        ok = await asyncio.wait_for(asyncio.shield(proto.opened), timeout_s)
        if not ok:
            raise ConnectionError(proto.close_reason or "closed")
    except BaseException:
        proto.abort()
        transport.close()
        raise
    return proto
