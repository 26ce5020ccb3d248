"""The QUIC adapter (aioquic): CIP-11 frames over one stream, plus the caps aioquic lacks (§6.1, §6.2, §6.6).

This is the only transport module that imports aioquic/asyncio (DESIGN.md §3 rule 3). It
authenticates nothing: it hands the session layer a narrow connection object
(:class:`FrameConnection` on the server, :class:`ClientConnection` on the client) that moves
whole frames, exposes the TLS ``channel_binding`` and closes with a Goodbye.

**Framing over QUIC (project choice).** After the TLS handshake the client opens ONE
bidirectional stream, stream 0, and every frame of the connection travels on it in both
directions, encoded with :func:`encode_frame` (``u32_be length ‖ type ‖ CBOR``, §12.1) and
decoded per direction by its own :class:`FrameDecoder` — so a length of 0 or above
``max_frame_bytes`` is refused as soon as its 4-byte prefix arrives, before any payload is
buffered. QUIC opens a stream with its first byte, so the server cannot write to stream 0
before the client's first frame (its Hello): what the server sends earlier is queued and
flushed then. CIP-11 §6.1 also allows validator-initiated job streams (one per assignment);
this revision carries assignments on stream 0 too, and treats any other stream as an error.

Protocol errors (each answered with ``Goodbye{ProtocolError, detail=code}`` when stream 0 is
open, then the connection closes; counted in :class:`ServerStats`):

* a frame the decoder rejects — ``detail`` is the :class:`TransportError` code and the Goodbye
  reason is the error's (``frame_too_large``, ``malformed_body``, …);
* a stream other than 0 (``unexpected_stream``), a reset of stream 0 (``stream_reset``);
* FIN on stream 0 that does not follow a Goodbye (``stream_fin``).

**Closing.** The side that closes sends its Goodbye with FIN on stream 0 (the one orderly use
of FIN), then sends the QUIC CONNECTION_CLOSE once the Goodbye is acknowledged or after
``goodbye_linger_s``; the close's reason phrase repeats ``REASON:detail`` in case the Goodbye
was lost. Frames that arrive after either side's Goodbye are ignored. A handler's ``on_close``
runs exactly once, at the first of: local close, protocol error, peer close, idle timeout,
server shutdown. Its ``reason`` is one of ``local``, ``local:<REASON>``, ``protocol_error:<code>``,
``peer_goodbye:<REASON>``, ``peer_closed:<quic error code>:<phrase>``, ``idle_timeout``,
``auth_timeout``, ``handler_error``, ``shutdown``.

**Admission** (:class:`ServerLimits`), decided on the client's first Initial before aioquic
creates any state: ``max_connections`` and ``max_half_open`` refuse with a stateless QUIC
CONNECTION_REFUSED (reason ``TOO_MANY_CONNECTIONS:<cap>``); above ``retry_threshold`` half-open
connections a tokenless Initial gets a stateless Retry; each admitted connection takes a token
from its source IP's bucket and, if there was none, is answered ``Goodbye{RateLimited}`` at its
first byte and never reaches a handler. Unparseable or unexpected datagrams are dropped.

**Stateless reset** (RFC 9000 §10.3). The server derives the stateless reset token of every connection id it
issues (the ``stateless_reset_token`` transport parameter and each NEW_CONNECTION_ID) as
``HMAC-SHA256(reset_secret, "cowboy-quic-stateless-reset-v1" ‖ cid)[:16]`` (§10.3.2) instead of aioquic's
random tokens, and its connection ids are self-authenticating: 16 bytes, 12 random then a 4-byte HMAC tag under
the same secret. A short-header packet for a connection id the server does not know but whose tag verifies —
a runner still talking to the previous run of a restarted validator — is answered with a stateless reset
carrying that token, smaller than the packet that caused it (no amplification, no reset loops, §10.3.3) and
within ``ServerLimits.stateless_reset_rate``; any other short-header datagram is dropped unanswered, as before.
With the secret kept in a file (``quic_certs.ensure_reset_key``) the tag verifies and the token is the one the
old run issued. aioquic's client does not detect resets, so :class:`_ClientProtocol` checks
every incoming datagram: a datagram of at least 21 bytes with a short header whose last 16 bytes equal the
token of the connection id in use ends the connection at once, sending nothing more (§10.3.1); ``recv()`` then
raises :class:`ConnectionClosed` with reason ``stateless_reset``.

Certificates are self-signed and not verified by runners (see ``quic_certs``): identity is the
CIP-11 HelloAck, bound to the channel binding exposed here.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import secrets
import socket
import ssl
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Protocol, cast

from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.asyncio.server import QuicServer
from aioquic.buffer import Buffer  # type: ignore[attr-defined]  # re-exported from aioquic._buffer
from aioquic.quic.configuration import SMALLEST_MAX_DATAGRAM_SIZE, QuicConfiguration
from aioquic.quic.connection import (
    TRANSPORT_CLOSE_FRAME_CAPACITY,
    NetworkAddress,
    QuicConnection,
    QuicConnectionId,
)
from aioquic.quic.crypto import CryptoPair
from aioquic.quic.packet import (
    STATELESS_RESET_TOKEN_SIZE,
    QuicErrorCode,
    QuicFrameType,
    QuicHeader,
    QuicPacketType,
    encode_quic_retry,
    encode_quic_version_negotiation,
    pull_quic_header,
)
from aioquic.quic.packet_builder import QuicPacketBuilder
from aioquic.quic.retry import QuicRetryTokenHandler

from cowboy_protocol.quic.certs import load_certificate
from cowboy_protocol.quic.limits import PeerRateLimiter, ServerLimits, ServerStats, peer_key
from cowboy_protocol.quic.stream import ALPN, STREAM_ID, ConnectionClosed, FramedProtocol, GoodbyeSigner
from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.frames import MAX_FRAME_BYTES, Frame, Goodbye

__all__ = [
    "ALPN",
    "STREAM_ID",
    "ClientConnection",
    "ConnectionClosed",
    "ConnectionHandler",
    "FrameConnection",
    "GoodbyeSigner",
    "QuicFrameServer",
    "connect",
    "is_issued_cid",
    "is_stateless_reset",
    "issue_cid",
    "start_server",
    "stateless_reset_packet",
    "stateless_reset_token",
]

log = logging.getLogger(__name__)

MAX_QUEUED_FRAMES = 4096
"""Client: received frames not yet taken by ``recv()`` beyond which the connection is closed."""
RESET_TOKEN_DOMAIN = b"cowboy-quic-stateless-reset-v1"
"""Domain of the stateless reset token derivation."""
MIN_STATELESS_RESET_BYTES = 21
"""RFC 9000 §10.3: the smallest datagram that can be a stateless reset (5 bytes then the 16-byte token)."""
MAX_STATELESS_RESET_BYTES = 64
"""Size of the resets this server sends, when the packet that caused one is larger."""
SERVER_CID_LENGTH = 16
"""Length of the connection ids the server issues: 12 random bytes then a 4-byte tag (:func:`issue_cid`)."""
CID_TAG_BYTES = 4
CID_TAG_DOMAIN = b"cowboy-quic-cid-v1"
SERVER_UDP_RCVBUF = 4 * 1024 * 1024
"""Receive buffer asked for a server's UDP socket (in-process and each worker's). With the kernel default
(≈ 208 KiB) datagrams were dropped whenever the event loop fell behind 1,000 runners' heartbeats
(``bench/runner_capacity_chain.py``; docs/performance.md "The in-process receive buffer"), and lost pings come
back as retransmission bursts. The kernel caps it at ``net.core.rmem_max``; a refusal leaves the default."""


def _cid_tag(secret: bytes, nonce: bytes) -> bytes:
    return hmac.new(secret, CID_TAG_DOMAIN + nonce, hashlib.sha256).digest()[:CID_TAG_BYTES]


def issue_cid(secret: bytes) -> bytes:
    """A fresh server connection id that a server holding ``secret`` recognises as its own after a restart."""
    nonce = secrets.token_bytes(SERVER_CID_LENGTH - CID_TAG_BYTES)
    return nonce + _cid_tag(secret, nonce)


def is_issued_cid(secret: bytes, cid: bytes) -> bool:
    """Whether ``cid`` was issued by a server holding ``secret`` (forged with probability 2^-32)."""
    return (len(cid) == SERVER_CID_LENGTH
            and hmac.compare_digest(cid[-CID_TAG_BYTES:], _cid_tag(secret, cid[:-CID_TAG_BYTES])))


def stateless_reset_token(secret: bytes, cid: bytes) -> bytes:
    """The 16-byte stateless reset token of connection id ``cid`` under the server's ``secret`` (§10.3.2)."""
    return hmac.new(secret, RESET_TOKEN_DOMAIN + cid, hashlib.sha256).digest()[:STATELESS_RESET_TOKEN_SIZE]


def stateless_reset_packet(token: bytes, trigger_length: int) -> bytes | None:
    """A stateless reset for a packet of ``trigger_length`` bytes: header form 0, fixed bit 1, unpredictable
    bits, then ``token``; one byte shorter than the trigger up to :data:`MAX_STATELESS_RESET_BYTES`. None when the
    trigger is too short for a smaller reset of at least :data:`MIN_STATELESS_RESET_BYTES` (§10.3, §10.3.3)."""
    size = min(trigger_length - 1, MAX_STATELESS_RESET_BYTES)
    if size < MIN_STATELESS_RESET_BYTES:
        return None
    body = bytearray(secrets.token_bytes(size - STATELESS_RESET_TOKEN_SIZE))
    body[0] = 0x40 | (body[0] & 0x3F)
    return bytes(body) + token


def is_stateless_reset(data: bytes, token: bytes | None) -> bool:
    """Whether ``data`` is a stateless reset carrying ``token`` (a short-header datagram ending in it, §10.3.1)."""
    return (token is not None and len(token) == STATELESS_RESET_TOKEN_SIZE
            and len(data) >= MIN_STATELESS_RESET_BYTES and not data[0] & 0x80
            and hmac.compare_digest(data[-STATELESS_RESET_TOKEN_SIZE:], token))


class _ServerQuicConnection(QuicConnection):
    """aioquic's server connection with connection ids from :func:`issue_cid` and reset tokens derived from the
    server secret (aioquic draws both at random)."""

    def __init__(self, *, reset_secret: bytes, **kwargs: object) -> None:
        self._reset_secret = reset_secret
        super().__init__(**kwargs)  # type: ignore[arg-type]
        # Replaced before any packet is built and before the handshake sends the stateless_reset_token parameter.
        first = self._host_cids[0]
        first.cid = issue_cid(reset_secret)
        first.stateless_reset_token = stateless_reset_token(reset_secret, first.cid)
        self.host_cid = self._local_initial_source_connection_id = first.cid

    def _replenish_connection_ids(self) -> None:
        # aioquic 1.x's loop, with our ids and tokens (NEW_CONNECTION_ID frames are written from these entries).
        while len(self._host_cids) < min(8, self._remote_active_connection_id_limit):
            cid = issue_cid(self._reset_secret)
            self._host_cids.append(QuicConnectionId(cid=cid, sequence_number=self._host_cid_seq,
                                                    stateless_reset_token=stateless_reset_token(self._reset_secret,
                                                                                                cid)))
            self._host_cid_seq += 1


class ConnectionHandler(Protocol):
    """What the server calls for one connection; created by ``handler_factory`` when TLS completes."""

    def on_open(self, conn: FrameConnection) -> None:
        """TLS done, ``conn.channel_binding`` available; sending is allowed from here."""

    def on_frame(self, frame: Frame) -> None:
        """One decoded frame from the peer, in order."""

    def on_close(self, reason: str) -> None:
        """The connection is closed or closing; called exactly once, no frame follows."""


# --- server ------------------------------------------------------------------------------------------------------


class FrameConnection:
    """The server-side connection handed to a :class:`ConnectionHandler`."""

    __slots__ = ("_proto",)

    def __init__(self, proto: _ServerProtocol) -> None:
        self._proto = proto

    @property
    def peer(self) -> tuple[str, int]:
        """Source (host, port) of the client's first Initial."""
        return self._proto.peer

    @property
    def channel_binding(self) -> bytes:
        """32-byte TLS-exporter channel binding (CIP-11 §6.2); empty before ``on_open``."""
        return self._proto.channel_binding

    @property
    def connection_number(self) -> int:
        """Server-local number of this connection, from 1 in admission order (logs, metrics; not on the wire)."""
        return self._proto.number

    @property
    def authenticated(self) -> bool:
        """Whether :meth:`mark_authenticated` was called."""
        return self._proto.authenticated

    @property
    def closed(self) -> bool:
        """True once closing or closed (``send`` then does nothing)."""
        return self._proto.close_reason is not None

    def send(self, frame: Frame) -> None:
        """Encode and transmit ``frame`` on stream 0; ignored once the connection is closing."""
        self._proto.send_frame(frame)

    def close(self, goodbye: Goodbye | None = None) -> None:
        """Send ``goodbye`` (if given; signed by the registered signer if unsigned) then close the connection."""
        self._proto.begin_close(goodbye, "local" if goodbye is None else f"local:{goodbye.reason.name}")

    def mark_authenticated(self, goodbye_signer: GoodbyeSigner | None = None) -> None:
        """The session proved the peer's identity: the connection stops counting as half-open.

        ``goodbye_signer``, if given, signs the Goodbyes this adapter sends on its own from now
        on (protocol errors, shutdown), since after mutual auth a Goodbye should be signed (§12.5).
        """
        self._proto.mark_authenticated(goodbye_signer)


class _ServerProtocol(FramedProtocol):
    def __init__(self, quic: QuicConnection, *, server: QuicFrameServer, number: int, peer: tuple[str, int],
                 rate_limited: bool) -> None:
        super().__init__(quic, max_frame_bytes=server.limits.max_frame_bytes,
                         goodbye_linger_s=server.limits.goodbye_linger_s, stream_open=False)
        self.server = server
        self.number = number
        self.peer = peer
        self.rate_limited = rate_limited
        self.authenticated = False
        self.handler: ConnectionHandler | None = None
        self.conn = FrameConnection(self)
        self._auth_timer: asyncio.TimerHandle | None = self._loop.call_later(
            server.limits.auth_timeout_s, self._auth_expired)

    def mark_authenticated(self, goodbye_signer: GoodbyeSigner | None) -> None:
        if goodbye_signer is not None:
            self.goodbye_signer = goodbye_signer
        if self.authenticated or self._terminated:
            return
        self.authenticated = True
        self._cancel_auth_timer()
        self.server._on_authenticated()

    def _cancel_auth_timer(self) -> None:
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None

    def _auth_expired(self) -> None:
        self._auth_timer = None
        if not self.authenticated and not self._closing:
            ServerStats.bump(self.server.stats.refused, "auth_timeout")
            self.begin_close(Goodbye(GoodbyeReason.IDLE_TIMEOUT, "auth_timeout", None, None), "auth_timeout")

    def _handshake_done(self) -> None:
        if self.rate_limited:
            return  # answered at its first byte; it never reaches a handler
        self.server.stats.opened_total += 1
        try:
            self.handler = self.server.handler_factory(self.conn)
            self.handler.on_open(self.conn)
        except Exception:
            self._handler_failed()

    def _stream_opened(self) -> bool:
        if not self.rate_limited:
            return True
        ServerStats.bump(self.server.stats.refused, "rate_limited")
        self.begin_close(Goodbye(GoodbyeReason.RATE_LIMITED, "hello_rate", None, None), "rate_limited")
        return False

    def _deliver(self, frame: Frame) -> None:
        if self.handler is None:
            return
        try:
            self.handler.on_frame(frame)
        except Exception:
            self._handler_failed()

    def _handler_failed(self) -> None:
        log.exception("CIP-11 connection handler failed (connection %d)", self.number)
        self.server.stats.handler_errors += 1
        self.begin_close(None, "handler_error")

    def _closed_callback(self, reason: str) -> None:
        handler, self.handler = self.handler, None  # no call reaches the handler after on_close
        if handler is not None:
            try:
                handler.on_close(reason)
            except Exception:
                log.exception("CIP-11 connection handler on_close failed (connection %d)", self.number)
                self.server.stats.handler_errors += 1

    def _on_terminated(self) -> None:
        self._cancel_auth_timer()

    def _count_decode_error(self, code: str) -> None:
        ServerStats.bump(self.server.stats.decode_errors, code)

    def _count_stream_error(self, code: str) -> None:
        ServerStats.bump(self.server.stats.stream_errors, code)


def _initial_close(header: QuicHeader, error_code: int, reason: str) -> bytes:
    """A stateless server Initial carrying CONNECTION_CLOSE, keyed from the client's Destination CID."""
    assert header.version is not None
    crypto = CryptoPair()
    crypto.setup_initial(cid=header.destination_cid, is_client=False, version=header.version)
    builder = QuicPacketBuilder(host_cid=header.destination_cid, is_client=False,
                                max_datagram_size=SMALLEST_MAX_DATAGRAM_SIZE, peer_cid=header.source_cid,
                                version=header.version)
    builder.start_packet(QuicPacketType.INITIAL, crypto)
    phrase = reason.encode()
    buf = builder.start_frame(QuicFrameType.TRANSPORT_CLOSE, capacity=TRANSPORT_CLOSE_FRAME_CAPACITY + len(phrase))
    buf.push_uint_var(error_code)
    buf.push_uint_var(QuicFrameType.PADDING)
    buf.push_uint_var(len(phrase))
    buf.push_bytes(phrase)
    datagrams, _ = builder.flush()
    return datagrams[0]


class QuicFrameServer(QuicServer):
    """The CIP-11 QUIC server: admission policy in front of aioquic, one handler per connection."""

    def __init__(self, *, configuration: QuicConfiguration, limits: ServerLimits,
                 handler_factory: Callable[[FrameConnection], ConnectionHandler],
                 reset_secret: bytes | None = None) -> None:
        configuration.connection_id_length = SERVER_CID_LENGTH  # self-authenticating ids (stateless reset)
        super().__init__(configuration=configuration)  # retry=False: Retry is decided per Initial below
        self.limits = limits
        """The caps in force."""
        self.stats = ServerStats()
        """Counters for metrics."""
        self.handler_factory = handler_factory
        """Creates the handler of a connection when its TLS handshake completes."""
        self._retry_tokens = QuicRetryTokenHandler()
        self._rate = PeerRateLimiter(limits.hello_rate_per_peer, limits.hello_burst_per_peer,
                                     max_peers=limits.max_tracked_peers)
        self._live: dict[int, _ServerProtocol] = {}
        self._next_number = 1
        self._reset_secret = reset_secret if reset_secret is not None else secrets.token_bytes(32)
        self._reset_budget = PeerRateLimiter(limits.stateless_reset_rate, limits.stateless_reset_burst, max_peers=1)

    @property
    def port(self) -> int:
        """The bound UDP port."""
        assert self._transport is not None
        return int(self._transport.get_extra_info("sockname")[1])

    def connections(self) -> list[FrameConnection]:
        """Live connections in admission order."""
        return [p.conn for p in self._live.values()]

    def datagram_received(self, data: bytes | str, addr: NetworkAddress) -> None:
        """Route or admit one datagram; nothing a peer sends may raise out of here."""
        try:
            self._datagram(cast(bytes, data), addr)
        except Exception:
            log.exception("dropped a datagram from %s", addr)
            self.stats.ignored_datagrams += 1

    def _send(self, data: bytes, addr: NetworkAddress) -> None:
        assert self._transport is not None
        self._transport.sendto(data, addr)

    def _datagram(self, data: bytes, addr: NetworkAddress) -> None:
        try:
            header = pull_quic_header(Buffer(data=data), host_cid_length=self._configuration.connection_id_length)
        except ValueError:
            self.stats.ignored_datagrams += 1
            return
        protocol = self._protocols.get(header.destination_cid)
        if protocol is not None:
            protocol.datagram_received(data, addr)
            return
        if header.packet_type == QuicPacketType.ONE_RTT:  # short header of a connection this server does not know
            if is_issued_cid(self._reset_secret, header.destination_cid):  # ours, from before a restart
                self._stateless_reset(header.destination_cid, len(data), addr)
            else:
                self.stats.ignored_datagrams += 1
            return
        if len(data) < SMALLEST_MAX_DATAGRAM_SIZE:
            self.stats.ignored_datagrams += 1  # bounds every reply below to ≤ the client's padded datagram
            return
        # Version 0 is a Version Negotiation packet: never answer one (reflection loop between servers).
        if header.version and header.version not in self._configuration.supported_versions:
            self._send(encode_quic_version_negotiation(
                source_cid=header.destination_cid, destination_cid=header.source_cid,
                supported_versions=self._configuration.supported_versions), addr)
            return
        if header.packet_type != QuicPacketType.INITIAL:
            self.stats.ignored_datagrams += 1
            return
        self._admit(header, data, addr)

    def _admit(self, header: QuicHeader, data: bytes, addr: NetworkAddress) -> None:
        limits, stats = self.limits, self.stats
        if stats.connections_open >= limits.max_connections:
            self._refuse(header, addr, "max_connections")
            return
        if stats.half_open >= limits.max_half_open:
            self._refuse(header, addr, "max_half_open")
            return
        now = self._loop.time()
        retry_source_cid: bytes | None = None
        if header.token:
            try:  # our server issues no NEW_TOKEN, so any token must be one of our Retry tokens
                original_cid = self._retry_tokens.validate_token(
                    address=addr, destination_cid=header.destination_cid, token=header.token, now=now)
            except Exception:
                ServerStats.bump(stats.refused, "invalid_token")
                self._send(_initial_close(header, QuicErrorCode.INVALID_TOKEN, ""), addr)
                return
            retry_source_cid = header.destination_cid
        elif stats.half_open >= limits.retry_threshold:
            source_cid = self._retry_source_cid()
            assert header.version is not None
            self._send(encode_quic_retry(
                version=header.version, source_cid=source_cid, destination_cid=header.source_cid,
                original_destination_cid=header.destination_cid,
                retry_token=self._retry_tokens.create_token(
                    address=addr, original_destination_connection_id=header.destination_cid,
                    retry_source_connection_id=source_cid, now=now)), addr)
            stats.retries_sent += 1
            return
        else:
            original_cid = header.destination_cid
        rate_ok = self._rate.allow(peer_key(str(addr[0])), now)
        connection = _ServerQuicConnection(reset_secret=self._reset_secret, configuration=self._configuration,
                                           original_destination_connection_id=original_cid,
                                           retry_source_connection_id=retry_source_cid)
        number, self._next_number = self._next_number, self._next_number + 1
        protocol = _ServerProtocol(connection, server=self, number=number, peer=(str(addr[0]), int(addr[1])),
                                   rate_limited=not rate_ok)
        protocol.connection_made(cast(asyncio.BaseTransport, self._transport))
        protocol._connection_id_issued_handler = partial(self._connection_id_issued, protocol=protocol)
        protocol._connection_id_retired_handler = partial(self._connection_id_retired, protocol=protocol)
        protocol._connection_terminated_handler = partial(self._connection_terminated, protocol=protocol)
        self._protocols[header.destination_cid] = protocol
        self._protocols[connection.host_cid] = protocol
        self._live[number] = protocol
        stats.connections_open += 1
        stats.half_open += 1
        stats.accepted_total += 1
        protocol.datagram_received(data, addr)

    def _stateless_reset(self, cid: bytes, trigger_length: int, addr: NetworkAddress) -> None:
        """RFC 9000 §10.3: tell the sender its connection is gone (e.g. held by this server before a restart)."""
        packet = stateless_reset_packet(stateless_reset_token(self._reset_secret, cid), trigger_length)
        if packet is None:
            self.stats.ignored_datagrams += 1
            return
        if not self._reset_budget.allow("*", self._loop.time()):
            ServerStats.bump(self.stats.refused, "stateless_reset_rate")
            return
        self._send(packet, addr)
        self.stats.stateless_resets_sent += 1

    def _retry_source_cid(self) -> bytes:
        return secrets.token_bytes(self._configuration.connection_id_length)

    def _refuse(self, header: QuicHeader, addr: NetworkAddress, why: str) -> None:
        ServerStats.bump(self.stats.refused, why)
        reason = f"{GoodbyeReason.TOO_MANY_CONNECTIONS.name}:{why}"
        self._send(_initial_close(header, QuicErrorCode.CONNECTION_REFUSED, reason), addr)

    def _on_authenticated(self) -> None:
        self.stats.half_open -= 1
        self.stats.authenticated_total += 1

    def _connection_terminated(self, protocol: QuicConnectionProtocol) -> None:
        super()._connection_terminated(protocol)
        self._forget(cast(_ServerProtocol, protocol))

    def _forget(self, protocol: _ServerProtocol) -> None:
        if self._live.pop(protocol.number, None) is None:
            return
        self.stats.connections_open -= 1
        self.stats.closed_total += 1
        if not protocol.authenticated:
            self.stats.half_open -= 1

    def close(self) -> None:
        """Close every connection (handlers get ``on_close("shutdown")``) and stop listening."""
        for protocol in list(self._live.values()):
            protocol.release("shutdown")  # the socket is about to close: no timer may fire after it
            protocol._cancel_auth_timer()
            self._forget(protocol)
        self._protocols.clear()
        if self._transport is not None:
            self._transport.close()


async def start_server(
    host: str,
    port: int,
    *,
    handler_factory: Callable[[FrameConnection], ConnectionHandler],
    limits: ServerLimits | None = None,
    certificate_pem: bytes | None = None,
    private_key_pem: bytes | None = None,
    certificate_path: str | Path | None = None,
    private_key_path: str | Path | None = None,
    reset_secret: bytes | None = None,
) -> QuicFrameServer:
    """Listen on UDP ``host:port`` (0 = any free port, see ``.port``); give the PEM bytes or their paths.

    ``reset_secret`` keys the stateless reset tokens; give the same bytes across restarts (see
    ``quic_certs.ensure_reset_key``) so a restarted server resets its previous run's connections. None: a random
    secret for this run only."""
    if certificate_pem is None or private_key_pem is None:
        if certificate_path is None or private_key_path is None:
            raise ValueError("start_server needs certificate_pem/private_key_pem or certificate_path/private_key_path")
        certificate_pem, private_key_pem = Path(certificate_path).read_bytes(), Path(private_key_path).read_bytes()
    limits = limits or ServerLimits()
    config = QuicConfiguration(is_client=False, alpn_protocols=[ALPN], idle_timeout=limits.idle_timeout_s)
    config.certificate, config.private_key = load_certificate(certificate_pem, private_key_pem)
    loop = asyncio.get_running_loop()
    transport, server = await loop.create_datagram_endpoint(
        lambda: QuicFrameServer(configuration=config, limits=limits, handler_factory=handler_factory,
                                reset_secret=reset_secret),
        local_addr=(host, port))
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SERVER_UDP_RCVBUF)
    return server


# --- client ------------------------------------------------------------------------------------------------------


class _ClientProtocol(FramedProtocol):
    def __init__(self, quic: QuicConnection, *, max_frame_bytes: int, goodbye_linger_s: float) -> None:
        super().__init__(quic, max_frame_bytes=max_frame_bytes, goodbye_linger_s=goodbye_linger_s, stream_open=True)
        self.frames: asyncio.Queue[Frame | None] = asyncio.Queue()
        self.terminated = asyncio.Event()

    def _deliver(self, frame: Frame) -> None:
        if self.frames.qsize() >= MAX_QUEUED_FRAMES:
            self._stream_error("receive_overflow")  # the application stopped reading
            return
        self.frames.put_nowait(frame)

    def _closed_callback(self, reason: str) -> None:
        self.frames.put_nowait(None)  # wakes recv(), which then raises ConnectionClosed

    def datagram_received(self, data: bytes | str, addr: NetworkAddress) -> None:
        """aioquic's receive path, after the stateless reset check aioquic lacks (RFC 9000 §10.3.1)."""
        if not self._terminated and is_stateless_reset(cast(bytes, data), self._quic._peer_cid.stateless_reset_token):
            self._reset_by_peer()
            return
        super().datagram_received(data, addr)

    def _reset_by_peer(self) -> None:
        """The server no longer has this connection: enter draining at once and send nothing more (§10.3.1)."""
        self._closing = True
        self._report_closed("stateless_reset")
        self._terminated = self._aborted = True
        self.cancel_timers()
        self._on_terminated()

    def cancel_timers(self) -> None:
        """Stop the connection's timers: nothing may fire (and transmit) once its socket is closed."""
        for timer in (self._timer, self._linger):
            if timer is not None:
                timer.cancel()
        self._timer = self._linger = None

    def _on_terminated(self) -> None:
        self.terminated.set()
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Send CONNECTION_CLOSE now (no Goodbye linger, no closing period) and release the socket."""
        self.release("local")
        if self._transport is not None:
            self._transport.close()
        self.terminated.set()


class ClientConnection:
    """A client connection to a CIP-11 server: whole frames in and out of stream 0."""

    def __init__(self, proto: _ClientProtocol, peer: tuple[str, int]) -> None:
        self._proto = proto
        self.peer = peer
        """The server's (host, port)."""

    @property
    def channel_binding(self) -> bytes:
        """32-byte TLS-exporter channel binding, equal to the server's for this connection."""
        return self._proto.channel_binding

    @property
    def closed(self) -> bool:
        """True once closing or closed."""
        return self._proto.close_reason is not None

    def _closed_error(self) -> ConnectionClosed:
        return ConnectionClosed(self._proto.close_reason or "closed", self._proto.peer_goodbye)

    def send(self, frame: Frame) -> None:
        """Encode and send ``frame``; raises :class:`ConnectionClosed` once closing."""
        if not self._proto.send_frame(frame):
            raise self._closed_error()

    def send_raw(self, data: bytes) -> None:
        """Write ``data`` on stream 0 unframed — for tests and fuzzing; raises once closing."""
        if self.closed:
            raise self._closed_error()
        self._proto.send_raw(data)

    async def recv(self) -> Frame:
        """The next frame from the server (a Goodbye included); then :class:`ConnectionClosed`."""
        item = await self._proto.frames.get()
        if item is None:
            self._proto.frames.put_nowait(None)  # every later recv() raises too
            raise self._closed_error()
        return item

    def close(self, goodbye: Goodbye | None = None) -> None:
        """Send ``goodbye`` (if given) then close the connection."""
        self._proto.begin_close(goodbye, "local" if goodbye is None else f"local:{goodbye.reason.name}")

    def abort(self) -> None:
        """Close at once: QUIC CONNECTION_CLOSE without Goodbye or closing period; the socket is released now."""
        self._proto.abort()

    async def wait_closed(self) -> None:
        """Until the QUIC connection has fully ended (closing period included) and the socket is closed."""
        await self._proto.terminated.wait()


async def connect(
    host: str,
    port: int,
    *,
    server_name: str | None = None,
    ca_pem: bytes | None = None,
    verify: bool = False,
    idle_timeout_s: float = 30.0,
    max_frame_bytes: int = MAX_FRAME_BYTES,
    goodbye_linger_s: float = 1.0,
    timeout_s: float = 10.0,
    local_host: str | None = None,
) -> ClientConnection:
    """Open a CIP-11 QUIC connection and complete TLS; raises :class:`ConnectionClosed` if refused or timed out.

    By default the server certificate is not verified (``ssl.CERT_NONE``): CIP-11 identity is the
    HelloAck over ``channel_binding``, not the certificate (§6.2). With ``verify=True`` it is checked
    against ``ca_pem`` (or the system store) and ``server_name``.

    ``local_host`` binds the client's UDP socket to that source address (port chosen by the OS) instead of the
    wildcard address — e.g. one loopback address per simulated runner (all of 127.0.0.0/8 is local on Linux),
    so a per-source-IP limit on the server sees distinct peers.
    """
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    family, addr = infos[0][0], infos[0][4]
    config = QuicConfiguration(is_client=True, alpn_protocols=[ALPN], idle_timeout=idle_timeout_s,
                               server_name=server_name or host,
                               verify_mode=ssl.CERT_REQUIRED if verify else ssl.CERT_NONE)
    if verify and ca_pem is not None:
        config.load_verify_locations(cadata=ca_pem)
    quic = QuicConnection(configuration=config)
    if local_host is not None:
        local: tuple[str, int] = (local_host, 0)
    else:
        local = ("::", 0) if family == socket.AF_INET6 else ("0.0.0.0", 0)
    transport, proto = await loop.create_datagram_endpoint(
        lambda: _ClientProtocol(quic, max_frame_bytes=max_frame_bytes, goodbye_linger_s=goodbye_linger_s),
        local_addr=local)
    peer = (str(addr[0]), int(addr[1]))
    try:
        proto.connect(peer)
        await asyncio.wait_for(proto.wait_connected(), timeout_s)
    except (ConnectionError, TimeoutError) as e:
        reason = proto.close_reason or ("connect_timeout" if isinstance(e, TimeoutError) else "connect_failed")
        proto.cancel_timers()  # else aioquic's retransmit timer fires on the closed socket and logs a traceback
        transport.close()
        raise ConnectionClosed(reason) from None
    return ClientConnection(proto, peer)
