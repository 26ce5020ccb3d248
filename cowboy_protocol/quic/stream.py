"""Stream-0 framing shared by both ends of a CIP-11 QUIC connection (used by ``cowboy_protocol/quic/adapter.py``).

:class:`FramedProtocol` is an aioquic ``QuicConnectionProtocol`` that carries whole CIP-11
frames on stream 0 (project choice, see ``cowboy_protocol/quic/adapter.py``): each direction decoded by its
own :class:`FrameDecoder`, protocol errors answered with ``Goodbye{reason, detail=code}``, a
Goodbye sent with FIN and followed by the QUIC close once acknowledged (or after the linger
time), and the first close reason reported exactly once. The server and client subclasses in
``cowboy_protocol/quic/adapter.py`` fill in the hooks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import ClassVar

from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import (
    ConnectionTerminated,
    HandshakeCompleted,
    QuicEvent,
    StopSendingReceived,
    StreamDataReceived,
    StreamReset,
)
from aioquic.quic.packet import QuicErrorCode

from cowboy_protocol.quic.acks import ack_with_next_packet
from cowboy_protocol.quic.exporter import channel_binding, enable_channel_binding
from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.frames import Frame, Goodbye, encode_frame
from cowboy_protocol.transport.framing import FrameDecoder
from cowboy_protocol.transport.protocol_errors import TransportError

__all__ = ["ALPN", "STREAM_ID", "ConnectionClosed", "FramedProtocol", "GoodbyeSigner"]

log = logging.getLogger(__name__)

ALPN = "cowboy-cip11"
"""TLS ALPN protocol id of CIP-11 connections (project choice)."""
STREAM_ID = 0
"""The one stream that carries frames: the client's first bidirectional stream."""

GoodbyeSigner = Callable[[Goodbye], Goodbye]
"""Returns the given unsigned Goodbye with its ``signed`` field filled (the session knows the keys)."""


class ConnectionClosed(Exception):
    """The connection is closed (or never opened); ``reason`` as in the module docstring."""

    def __init__(self, reason: str, goodbye: Goodbye | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        """Why it closed."""
        self.goodbye = goodbye
        """The peer's Goodbye, if it sent one."""


def _goodbye_phrase(goodbye: Goodbye) -> str:
    return f"{goodbye.reason.name}:{goodbye.detail or ''}"[:200]


class FramedProtocol(QuicConnectionProtocol):
    """Stream-0 framing, Goodbye-then-close and close reporting, shared by both ends."""

    piggyback_acks: ClassVar[bool] = True
    """Stream data carries any pending ACK (``quic_acks``): a reply and the ACK of what it answers leave in one
    datagram. Benchmarks switch it off process-wide to measure the baseline."""

    def __init__(self, quic: QuicConnection, *, max_frame_bytes: int, goodbye_linger_s: float,
                 stream_open: bool) -> None:
        # Set first: transmit() (overridden below) reads them.
        self._linger: asyncio.TimerHandle | None = None
        self._closing = False  # a close was requested: no frame is delivered or sent any more
        self._terminated = False  # aioquic reported the end of the connection
        self._aborted = False  # socket released without waiting for the QUIC closing period
        self._in_events = False  # inside _process_events, which its callers always follow with transmit()
        enable_channel_binding(quic)  # must precede the handshake
        super().__init__(quic)
        self.channel_binding = b""
        """TLS-exporter channel binding, set when the handshake completes."""
        self.close_reason: str | None = None
        """First close reason, once closed."""
        self.peer_goodbye: Goodbye | None = None
        """The peer's Goodbye, if received."""
        self.goodbye_signer: GoodbyeSigner | None = None
        self._decoder = FrameDecoder(max_frame_bytes=max_frame_bytes)
        self._linger_s = goodbye_linger_s
        self._stream_open = stream_open
        self._queued = bytearray()
        self._close_phrase = ""

    # --- sending ---------------------------------------------------------------------------------------------

    def send_frame(self, frame: Frame) -> bool:
        """Encode and send ``frame``; False (and nothing sent) once closing."""
        if self._closing or self._terminated:
            return False
        data = encode_frame(frame)  # LocalProtocolError on our own invalid frame: a bug, let it raise
        self.send_raw(data)
        return True

    def send_raw(self, data: bytes) -> None:
        """Write bytes on stream 0 as they are (queued on the server until the client opened the stream)."""
        if self._closing or self._terminated:
            return
        if self._stream_open:
            if self.piggyback_acks:
                ack_with_next_packet(self._quic, self._loop.time())
            self._quic.send_stream_data(STREAM_ID, data)
            if not self._in_events:  # inside event processing aioquic transmits right after; else coalesce
                self._transmit_soon()
        else:
            self._queued += data

    def begin_close(self, goodbye: Goodbye | None, reason: str) -> None:
        """Report ``reason``, send ``goodbye`` (signed if a signer is set) with FIN, then close QUIC."""
        if self._closing or self._terminated:
            return
        self._closing = True
        self._report_closed(reason)
        if goodbye is not None:
            if goodbye.signed is None and self.goodbye_signer is not None:
                try:
                    goodbye = self.goodbye_signer(goodbye)
                except Exception:  # a failing signer must not keep the connection open
                    log.exception("goodbye signer failed; sending the Goodbye unsigned")
            self._close_phrase = _goodbye_phrase(goodbye)
            if self._stream_open:
                self._quic.send_stream_data(STREAM_ID, encode_frame(goodbye), end_stream=True)
                self._linger = self._loop.call_later(self._linger_s, self._close_quic)
                self.transmit()
                return
        self._close_quic()

    def transmit(self) -> None:
        """aioquic's transmit, then the QUIC close as soon as our Goodbye (and its FIN) is acknowledged."""
        if self._aborted:
            return
        super().transmit()
        if self._linger is not None and self._goodbye_acknowledged():
            self._close_quic()

    def _process_events(self) -> None:
        self._in_events = True
        try:
            super()._process_events()
        finally:
            self._in_events = False

    def _goodbye_acknowledged(self) -> bool:
        stream = self._quic._streams.get(STREAM_ID)  # aioquic has no public "data acknowledged" signal
        return stream is None or bool(stream.sender.is_finished)

    def _close_quic(self) -> None:
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        if not self._terminated:
            self._quic.close(error_code=QuicErrorCode.NO_ERROR, reason_phrase=self._close_phrase)
            self.transmit()

    def release(self, reason: str) -> None:
        """Close now and go quiet: CONNECTION_CLOSE sent, then no timer and no datagram any more (socket closing)."""
        if not self._terminated:
            self.begin_close(None, reason)  # no-op if already closing
            self._close_quic()  # a Goodbye still lingering is cut short
            self._terminated = True
        self._aborted = True
        for timer in (self._timer, self._linger):
            if timer is not None:
                timer.cancel()
        self._timer = self._linger = None

    # --- receiving -------------------------------------------------------------------------------------------

    def quic_event_received(self, event: QuicEvent) -> None:
        """Dispatch aioquic events (called by the base class for every event)."""
        if isinstance(event, HandshakeCompleted):
            self.channel_binding = channel_binding(self._quic)
            if not self._closing:
                self._handshake_done()
        elif isinstance(event, StreamDataReceived):
            self._stream_data(event.stream_id, event.data, event.end_stream)
        elif isinstance(event, StreamReset | StopSendingReceived):
            if not (self._closing or self.peer_goodbye is not None):
                self._stream_error("stream_reset" if event.stream_id == STREAM_ID else "unexpected_stream")
        elif isinstance(event, ConnectionTerminated):
            self._terminated = True
            if self._linger is not None:
                self._linger.cancel()
                self._linger = None
            self._report_closed(self._termination_reason(event))
            self._on_terminated()

    def _termination_reason(self, event: ConnectionTerminated) -> str:
        if self.peer_goodbye is not None:
            return f"peer_goodbye:{self.peer_goodbye.reason.name}"
        if event.reason_phrase == "Idle timeout" and event.error_code == QuicErrorCode.INTERNAL_ERROR:
            return "idle_timeout"
        return f"peer_closed:{event.error_code}:{event.reason_phrase}"

    def _stream_data(self, stream_id: int, data: bytes, end_stream: bool) -> None:
        if self._closing or self._terminated or self.peer_goodbye is not None:
            return
        if stream_id != STREAM_ID:
            self._stream_error("unexpected_stream")
            return
        if not self._stream_open:
            self._stream_open = True
            if not self._stream_opened():
                return
            if self._queued:
                self._quic.send_stream_data(STREAM_ID, bytes(self._queued))
                self._queued.clear()  # transmitted by aioquic right after this event batch
        try:
            frames = self._decoder.feed(data)
        except TransportError as e:
            self._decode_error(e)
            return
        for frame in frames:
            if self._closing:
                return
            if isinstance(frame, Goodbye):
                self.peer_goodbye = frame
            self._deliver(frame)
            if self.peer_goodbye is not None:
                return  # nothing may follow a Goodbye; the peer closes the connection
        if end_stream and not self._closing:
            try:
                self._decoder.close()
            except TransportError as e:
                self._decode_error(e)
                return
            self._stream_error("stream_fin")

    def _decode_error(self, e: TransportError) -> None:
        self._count_decode_error(e.code)
        self.begin_close(Goodbye(e.reason, e.code, None, None), f"protocol_error:{e.code}")

    def _stream_error(self, code: str) -> None:
        self._count_stream_error(code)
        self.begin_close(Goodbye(GoodbyeReason.PROTOCOL_ERROR, code, None, None), f"protocol_error:{code}")

    # --- hooks -----------------------------------------------------------------------------------------------

    def _handshake_done(self) -> None:
        """TLS completed (``channel_binding`` is set)."""

    def _stream_opened(self) -> bool:
        """The peer opened stream 0 (server side); False if the connection was closed instead."""
        return True

    def _deliver(self, frame: Frame) -> None:
        """Hand one decoded frame up."""

    def _report_closed(self, reason: str) -> None:
        """Record the first close reason and tell the layer above (once)."""
        if self.close_reason is None:
            self.close_reason = reason
            self._closed_callback(reason)

    def _closed_callback(self, reason: str) -> None:
        """Called once with the first close reason."""

    def _on_terminated(self) -> None:
        """The QUIC connection is gone."""

    def _count_decode_error(self, code: str) -> None:
        """Metrics hook."""

    def _count_stream_error(self, code: str) -> None:
        """Metrics hook."""
