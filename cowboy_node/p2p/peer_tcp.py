"""Validator peer layer over TCP: an ephemeral X25519 exchange, then ChaCha20-Poly1305 records carrying the stream.

The alternative to :mod:`~cowboy_node.p2p.peer_quic` for validator-to-validator links (``[p2p] transport =
"tcp"``; runners always speak QUIC, CIP-11). Why it exists: the kernel does TCP's segmentation, ACKs,
retransmission and congestion control, and one AEAD call seals up to :data:`RECORD_MAX` bytes, where aioquic
builds, encrypts and acknowledges every 1,200-byte packet in Python (``docs/performance.md``, issue 33 §1).
What it gives up: QUIC's own congestion control for lossy paths (``peer_congestion.py``) — TCP uses the kernel's.

Wire (``docs/protocol.md`` "Validator peer layer over TCP", golden bytes there):

1. **Preamble**, plaintext, each side at once on connect: ``"CWBYTCP1" ‖ X25519 ephemeral public key (32)``.
2. **Keys**: ``okm = HKDF-SHA256(salt = "cowboy-p2p-tcp-1", ikm = X25519(own, peer), info = dialer key ‖
   listener key, 96 bytes)``; ``okm[0:32]`` seals dialer→listener, ``okm[32:64]`` listener→dialer,
   ``okm[64:96]`` is the channel binding that the Hello/HelloAck sign (the role QUIC's TLS exporter plays). A
   man in the middle ends with different bindings on the two sides, so neither side's Hello verifies.
3. **Records**: ``length u32 BE (ciphertext with its 16-byte tag) ‖ type u8 ‖ ciphertext``; ChaCha20-Poly1305
   under the direction's key, nonce ``0^32 ‖ u64 BE record number`` (from 0, per direction; keys are fresh per
   connection, so a nonce is never reused), associated data the 5 header bytes. Type 0 carries stream bytes (the
   peer frames of ``peer_frames``, cut anywhere, 1..:data:`RECORD_MAX` bytes); type 1 is a ping and type 2 its
   pong (both empty). Anything else — a bad tag, a length outside ``16..RECORD_MAX + 16``, an unknown type, a
   non-empty ping — closes the connection (``protocol_error:bad_record``).

Close reasons are :mod:`peer_quic`'s: ``local:<reason>``, ``peer_goodbye:<reason>`` (set by the layer above),
``protocol_error:<code>`` (``bad_preamble``, ``bad_record``, a frame the reader refused), ``peer_fin`` (EOF
without a Goodbye acted on), ``idle_timeout`` (nothing received for ``idle_timeout_s``; the dialer pings every
third of it and a ping is answered), ``socket_closed`` (the connection was reset or lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import struct
import termios
import time
from collections.abc import Callable
from typing import cast

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from cowboy_node.p2p.peer_frames import FrameReader, Goodbye, encode_frame
from cowboy_node.p2p.peer_link import LinkHandler

__all__ = ["MAGIC", "PREAMBLE_BYTES", "RECORD_MAX", "TcpListener", "TcpPeerProtocol", "derive_keys", "dial",
           "listen", "record_nonce", "seal_record"]

MAGIC = b"CWBYTCP1"
"""First 8 bytes each side sends: the TCP link's protocol and version."""
PREAMBLE_BYTES = len(MAGIC) + 32
KDF_SALT = b"cowboy-p2p-tcp-1"
"""HKDF salt of the link keys (names the key schedule, so another use of X25519 never yields these keys)."""
RECORD_MAX = 256 * 1024
"""Largest plaintext of one record: bounds what a receiver buffers before it can authenticate anything."""
TAG_BYTES = 16
HEADER = struct.Struct(">IB")
"""Record header: ciphertext length (with the tag), record type; sealed as associated data."""
REC_DATA, REC_PING, REC_PONG = 0, 1, 2
WRITABLE_POLL_S = 0.002
"""While bytes are unacknowledged and the layer above asked, it is told ``on_writable`` this often (TCP's ACKs
are the kernel's, so nothing else would wake a send queue waiting for its window)."""
CLOSE_GRACE_S = 5.0
"""A closed connection whose buffered bytes (the Goodbye) the peer does not take within this is aborted."""
_OUTQ = struct.Struct("i")


def derive_keys(shared: bytes, dialer_key: bytes, listener_key: bytes) -> tuple[bytes, bytes, bytes]:
    """(dialer→listener key, listener→dialer key, channel binding) from the X25519 shared secret and both
    ephemeral public keys."""
    okm = HKDF(algorithm=SHA256(), length=96, salt=KDF_SALT, info=dialer_key + listener_key).derive(shared)
    return okm[:32], okm[32:64], okm[64:]


def record_nonce(number: int) -> bytes:
    """The 12-byte nonce of record ``number`` of one direction."""
    return b"\0\0\0\0" + number.to_bytes(8, "big")


def seal_record(aead: ChaCha20Poly1305, number: int, rtype: int, plaintext: bytes) -> bytes:
    """Record ``number`` of one direction, whole (header and ciphertext)."""
    header = HEADER.pack(len(plaintext) + TAG_BYTES, rtype)
    return header + aead.encrypt(record_nonce(number), plaintext, header)


def _raw(key: X25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


class _LinkError(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class TcpPeerProtocol(asyncio.Protocol):
    """One TCP peer connection (either side); implements :class:`~cowboy_node.p2p.peer_link.PeerLink`."""

    def __init__(self, *, is_client: bool, max_body: int, idle_timeout_s: float,
                 handler: LinkHandler | None = None,
                 on_gone: Callable[[TcpPeerProtocol], None] | None = None,
                 ephemeral: X25519PrivateKey | None = None) -> None:
        """``ephemeral`` is this connection's X25519 key (default: a fresh one; tests pass fixed keys)."""
        self._loop = asyncio.get_running_loop()
        self.handler = handler
        """Set by the creator before the connection is made (the listener's factory sets it right away)."""
        self.binding = b""
        """``okm[64:96]`` of this connection's key schedule, once open."""
        self.peer_addr: tuple[str, int] = ("", 0)
        self.close_reason: str | None = None
        self.opened: asyncio.Future[bool] = self._loop.create_future()
        """Resolved (True) once both preambles are in and the keys derived, or (False) if the connection ends
        first."""
        self.terminated = asyncio.Event()
        self.refused = False
        """Set by a listener whose ``make_handler`` declined the connection: it is reset as soon as it is made."""
        self._is_client = is_client
        self._reader = FrameReader(max_body)
        self._idle_timeout_s = idle_timeout_s
        self._on_gone = on_gone
        self._ephemeral: X25519PrivateKey | None = ephemeral or X25519PrivateKey.generate()
        self._transport: asyncio.Transport | None = None
        self._fd = -1
        self._inbuf = bytearray()
        self._seal: ChaCha20Poly1305 | None = None
        self._open: ChaCha20Poly1305 | None = None
        self._tx_n = 0
        self._rx_n = 0
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._flush_scheduled = False
        self._last_rx = time.monotonic()
        self._idle_timer: asyncio.TimerHandle | None = None
        self._poll: asyncio.TimerHandle | None = None
        self._grace: asyncio.TimerHandle | None = None

    # --- connection ---------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Send our preamble; start the idle watch."""
        # cast, not isinstance: uvloop's transports implement asyncio.Transport without subclassing it
        self._transport = transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer_addr = (str(peer[0]), int(peer[1]))
        sock = transport.get_extra_info("socket")
        self._fd = sock.fileno() if sock is not None else -1
        if self.refused:
            self._report_closed("local:too_many_connections")
            transport.abort()
            return
        assert self._ephemeral is not None
        transport.write(MAGIC + _raw(self._ephemeral.public_key()))
        self._arm_idle()

    def connection_lost(self, exc: Exception | None) -> None:
        """The socket closed (after our close, the peer's, or a reset)."""
        self._report_closed("socket_closed")
        self._mark_terminated()

    def eof_received(self) -> bool:
        """The peer ended its side without a Goodbye the handler acted on."""
        if not self.closing:
            self.close_with("stream_fin", goodbye=False, report="peer_fin")
        return False

    def pause_writing(self) -> None:
        """Nothing: the layer above bounds what it writes by :meth:`unacked_bytes`."""

    def resume_writing(self) -> None:
        """Nothing (see :meth:`pause_writing`)."""

    # --- writing ------------------------------------------------------------------------------------------

    @property
    def closing(self) -> bool:
        """True once a close began (local or remote): writes are ignored."""
        return self.close_reason is not None

    def write(self, data: bytes) -> None:
        """Write framed bytes; sealed and sent at the end of this loop iteration (coalesced into few records)."""
        if self.closing:
            return
        self._pending.append(data)
        self._pending_bytes += len(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        if not self.closing:
            self._flush()

    def _flush(self) -> None:
        if self._seal is None or self._transport is None or not self._pending:
            return  # before the keys exist: flushed when they do
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        if len(data) <= RECORD_MAX:
            self._transport.write(self._record(REC_DATA, data))
            return
        view = memoryview(data)
        self._transport.write(b"".join(self._record(REC_DATA, bytes(view[i:i + RECORD_MAX]))
                                       for i in range(0, len(data), RECORD_MAX)))

    def _record(self, rtype: int, plaintext: bytes) -> bytes:
        assert self._seal is not None
        record = seal_record(self._seal, self._tx_n, rtype, plaintext)
        self._tx_n += 1
        return record

    def unacked_bytes(self) -> int:
        """Bytes written and not yet acknowledged by the peer: ours not yet sealed, the transport's buffer and the
        kernel's send queue (``TIOCOUTQ``: unsent plus sent-unacknowledged). While it is not 0 the handler is
        told ``on_writable`` every :data:`WRITABLE_POLL_S`."""
        if self._transport is None:
            return self._pending_bytes
        n = self._pending_bytes + self._transport.get_write_buffer_size()
        if self._fd >= 0:
            with contextlib.suppress(OSError):  # the socket is going away: its queue no longer matters
                n += _OUTQ.unpack(fcntl.ioctl(self._fd, termios.TIOCOUTQ, b"\0\0\0\0"))[0]
        if n and self._poll is None and not self.closing:
            self._poll = self._loop.call_later(WRITABLE_POLL_S, self._poll_writable)
        return n

    def _poll_writable(self) -> None:
        self._poll = None
        if self.handler is not None and not self.closing:
            self.handler.on_writable(self)

    def send_ping(self) -> None:
        """An empty ping record (the peer answers a pong): both ends' idle timers see traffic."""
        if not self.closing and self._seal is not None and self._transport is not None:
            self._flush()
            self._transport.write(self._record(REC_PING, b""))

    def close_with(self, reason: str, *, goodbye: bool = True, report: str | None = None) -> None:
        """Send what was written, then ``Goodbye{reason}`` (if ``goodbye`` and the keys exist), then close; the
        handler's ``on_close`` gets ``report`` (default ``local:<reason>``)."""
        if self.closing or self.terminated.is_set():
            return
        self._report_closed(report or f"local:{reason}")
        transport = self._transport
        if transport is None:
            return
        if goodbye and self._seal is not None:
            self._pending.append(encode_frame(Goodbye(reason)))
        self._flush()
        self._pending.clear()
        transport.close()  # sends what is buffered, then FIN
        self._grace = self._loop.call_later(CLOSE_GRACE_S, self.abort)

    def abort(self) -> None:
        """Close now without Goodbye and stop every timer (the socket is reset)."""
        self.close_with("shutdown", goodbye=False)
        self._cancel_timers()
        if self._transport is not None:
            self._transport.abort()
        self._mark_terminated()

    # --- reading ------------------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        """The preamble, then records: each authenticated and its stream bytes fed to the frame reader."""
        if self.closing:
            return
        self._last_rx = time.monotonic()
        self._inbuf += data
        try:
            if self._open is None:
                if len(self._inbuf) < PREAMBLE_BYTES:
                    return
                self._handshake(bytes(self._inbuf[:PREAMBLE_BYTES]))
                del self._inbuf[:PREAMBLE_BYTES]
                if self.closing:
                    return
            self._records()
        except _LinkError as e:
            self._protocol_error(e.code)

    def _handshake(self, preamble: bytes) -> None:
        if preamble[:len(MAGIC)] != MAGIC or self._ephemeral is None:
            raise _LinkError("bad_preamble")
        own = _raw(self._ephemeral.public_key())
        peer = preamble[len(MAGIC):]
        try:
            shared = self._ephemeral.exchange(X25519PublicKey.from_public_bytes(peer))
        except ValueError:  # a low-order point: the shared secret would be all zeros
            raise _LinkError("bad_preamble") from None
        self._ephemeral = None  # forward secrecy: the private key is not kept
        dialer, listener = (own, peer) if self._is_client else (peer, own)
        to_listener, to_dialer, self.binding = derive_keys(shared, dialer, listener)
        send, recv = (to_listener, to_dialer) if self._is_client else (to_dialer, to_listener)
        self._seal, self._open = ChaCha20Poly1305(send), ChaCha20Poly1305(recv)
        if not self.opened.done():
            self.opened.set_result(True)
        if self.handler is not None and not self.closing:
            self.handler.on_open(self)
        self._flush()

    def _records(self) -> None:
        buf = self._inbuf
        pos, end = 0, len(buf)
        try:
            while end - pos >= HEADER.size and not self.closing:
                length, rtype = HEADER.unpack_from(buf, pos)
                if not TAG_BYTES <= length <= RECORD_MAX + TAG_BYTES:
                    raise _LinkError("bad_record")
                start = pos + HEADER.size
                if end - start < length:
                    break
                header = bytes(buf[pos:start])
                ciphertext = bytes(buf[start:start + length])
                pos = start + length
                assert self._open is not None
                try:
                    plaintext = self._open.decrypt(record_nonce(self._rx_n), ciphertext, header)
                except InvalidTag:
                    raise _LinkError("bad_record") from None
                self._rx_n += 1
                if rtype == REC_DATA and plaintext:
                    self._stream(plaintext)
                elif rtype == REC_PING and not plaintext:
                    if self._transport is not None and not self.closing:
                        self._flush()
                        self._transport.write(self._record(REC_PONG, b""))
                elif rtype != REC_PONG or plaintext:
                    raise _LinkError("bad_record")
        finally:
            del buf[:pos]

    def _stream(self, data: bytes) -> None:
        for body in self._reader.feed(data):
            if self.closing or self.handler is None:
                return
            self.handler.on_body(self, body)
        if self._reader.error is not None:
            raise _LinkError(self._reader.error.code)

    def _protocol_error(self, code: str) -> None:
        if self.closing:
            return
        self.close_with(code, report=f"protocol_error:{code}")

    # --- timers and the end ------------------------------------------------------------------------------

    def _arm_idle(self) -> None:
        self._idle_timer = self._loop.call_later(max(0.05, self._idle_timeout_s / 4), self._check_idle)

    def _check_idle(self) -> None:
        self._idle_timer = None
        if self.closing or self.terminated.is_set():
            return
        if time.monotonic() - self._last_rx >= self._idle_timeout_s:
            self._report_closed("idle_timeout")
            self.abort()
            return
        self._arm_idle()

    def _cancel_timers(self) -> None:
        for timer in (self._idle_timer, self._poll, self._grace):
            if timer is not None:
                timer.cancel()
        self._idle_timer = self._poll = self._grace = None

    def _report_closed(self, reason: str) -> None:
        if self.close_reason is not None:
            return
        self.close_reason = reason
        if not self.opened.done():
            self.opened.set_result(False)
        if self.handler is not None:
            self._loop.call_soon(self.handler.on_close, self, reason)  # never re-entrant inside a callback

    def _mark_terminated(self) -> None:
        if not self.terminated.is_set():
            self.terminated.set()
            self._cancel_timers()
            if self._on_gone is not None:
                self._on_gone(self)


class TcpListener:
    """A bound TCP peer listener and the connections it accepted that have not ended."""

    def __init__(self, server: asyncio.Server, protocols: set[TcpPeerProtocol]) -> None:
        self._server = server
        self._protocols = protocols

    @property
    def port(self) -> int:
        """The bound TCP port."""
        return int(self._server.sockets[0].getsockname()[1])

    def protocols(self) -> list[TcpPeerProtocol]:
        """The accepted connections that have not terminated."""
        return list(self._protocols)

    def close(self) -> None:
        """Stop accepting (accepted connections are the caller's to close)."""
        self._server.close()


async def listen(host: str, port: int, *, idle_timeout_s: float, max_body: int,
                 make_handler: Callable[[TcpPeerProtocol], LinkHandler | None]) -> TcpListener:
    """Bind the TCP listener; ``make_handler`` is called for each new connection (None resets it at once)."""
    loop = asyncio.get_running_loop()
    protocols: set[TcpPeerProtocol] = set()

    def create_protocol() -> TcpPeerProtocol:
        proto = TcpPeerProtocol(is_client=False, max_body=max_body, idle_timeout_s=idle_timeout_s,
                                on_gone=protocols.discard)
        protocols.add(proto)
        handler = make_handler(proto)
        proto.refused = handler is None
        proto.handler = handler
        return proto

    server = await loop.create_server(create_protocol, host, port)
    return TcpListener(server, protocols)


async def dial(host: str, port: int, *, idle_timeout_s: float, max_body: int, timeout_s: float,
               handler: LinkHandler | None = None) -> TcpPeerProtocol:
    """Connect and complete the key exchange; raises ConnectionError (refused, closed), OSError or TimeoutError."""
    loop = asyncio.get_running_loop()
    _, proto = await asyncio.wait_for(loop.create_connection(
        lambda: TcpPeerProtocol(is_client=True, max_body=max_body, idle_timeout_s=idle_timeout_s, handler=handler),
        host, port), timeout_s)
    try:
        ok = await asyncio.wait_for(asyncio.shield(proto.opened), timeout_s)
        if not ok:
            raise ConnectionError(proto.close_reason or "closed")
    except BaseException:
        proto.abort()
        raise
    return proto
