"""A QUIC worker process: terminates QUIC+TLS for its share of the runners and relays their frames.

Started by :mod:`.pool` as ``python -m cowboy_node.transport.workers.worker --udp-fd U --ipc-fd C``: ``U`` is
one socket of the validator's ``SO_REUSEPORT`` group (the kernel hashes each runner's 4-tuple onto one socket,
so a connection's datagrams all reach the same worker), ``C`` its end of a Unix socketpair to the validator.
The first message on ``C`` is CONFIG (certificate, key, stateless-reset secret, limits — kept off the command
line). The worker runs the project's QUIC adapter (:class:`QuicFrameServer`, with every cap, Retry, rate limit
and stateless reset of the in-process server) and holds no session state: each connection's TLS completion,
frames and close go to the validator process (ipc OPEN / FRAME / CLOSED), and it sends, closes and marks
authenticated what the validator tells it to (SEND / CLOSE / AUTHENTICATED). It exits when the channel closes
(the validator stopped or died) after closing its connections.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
from typing import Any

from aioquic.quic.configuration import QuicConfiguration

from cowboy_node.transport.workers import ipc
from cowboy_node.transport.workers.channel import ChannelProtocol
from cowboy_protocol.quic.acks import expect_reply
from cowboy_protocol.quic.adapter import FrameConnection, QuicFrameServer
from cowboy_protocol.quic.certs import load_certificate
from cowboy_protocol.quic.limits import ServerLimits
from cowboy_protocol.quic.stream import ALPN, FramedProtocol
from cowboy_protocol.transport.frames import Frame, Goodbye, HeartbeatPing, encode_frame
from cowboy_protocol.transport.framing import decode_frame

log = logging.getLogger("cowboy.transport.worker")

STATS_INTERVAL_S = 1.0
"""How often the adapter counters go to the validator process."""
FLUSH_DELAY_S = 0.001
"""How long relayed frames wait to share one write to the validator process (one wake-up of it per write), when
the previous write is more recent than this (under load; otherwise they leave at the next loop iteration): at
thousands of runners per worker, a few frames per write instead of one; a heartbeat's round trip grows by at
most this (its ACK waits ``quic_acks.REPLY_ACK_DELAY_S`` for the pong anyway). ``COWBOY_WORKER_FLUSH_DELAY_MS``
overrides it (benchmarks; 0: always the next loop iteration)."""


def _flush_delay_s(delay_ms: str | None) -> float:
    """``FLUSH_DELAY_S``, or the override in milliseconds (a value that is not a number is named and ignored)."""
    if delay_ms is None:
        return FLUSH_DELAY_S
    try:
        return max(0.0, float(delay_ms) / 1000)
    except ValueError:
        log.warning("COWBOY_WORKER_FLUSH_DELAY_MS=%r is not a number; using the default %s ms", delay_ms,
                    FLUSH_DELAY_S * 1000)
        return FLUSH_DELAY_S


class _Channel(ChannelProtocol):
    """The worker's end of the local channel; writes are coalesced into one send per loop iteration."""

    def __init__(self, worker: Worker) -> None:
        super().__init__()
        self.worker = worker
        self.flush_delay_s = _flush_delay_s(os.environ.get("COWBOY_WORKER_FLUSH_DELAY_MS"))
        self.closed = asyncio.get_running_loop().create_future()

    def on_message(self, m: ipc.Message) -> None:
        self.worker.on_message(m)

    def torn(self) -> None:
        log.exception("torn channel to the validator process")
        self._close()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class _Relayed:
    """ConnectionHandler of one QUIC connection in the worker: everything goes to the validator process."""

    __slots__ = ("channel", "conn", "number", "worker")

    def __init__(self, worker: Worker, conn: FrameConnection) -> None:
        self.worker = worker
        self.channel = worker.channel
        self.conn = conn
        self.number = conn.connection_number

    def on_open(self, conn: FrameConnection) -> None:
        self.worker.conns[self.number] = conn
        host, port = conn.peer
        self.channel.send(ipc.Kind.OPEN, self.number, conn.channel_binding + f"{host}:{port}".encode())

    def on_frame(self, frame: Frame) -> None:
        if self.worker.piggyback_acks and isinstance(frame, HeartbeatPing):  # a pong follows: ACK with it
            expect_reply(self.conn._proto._quic, asyncio.get_running_loop().time())
        self.channel.send(ipc.Kind.FRAME, self.number, encode_frame(frame))

    def on_close(self, reason: str) -> None:
        self.worker.conns.pop(self.number, None)
        self.channel.send(ipc.Kind.CLOSED, self.number, reason.encode())


class Worker:
    """The worker's state: its QUIC server and the connections it relays."""

    def __init__(self) -> None:
        self.channel: _Channel
        self.server: QuicFrameServer | None = None
        self.conns: dict[int, FrameConnection] = {}
        self.config: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.piggyback_acks = os.environ.get("COWBOY_WORKER_ACK_PIGGYBACK", "1") != "0"
        """Benchmarks switch it off (``=0``) to measure the baseline."""
        FramedProtocol.piggyback_acks = self.piggyback_acks  # the pong's send_raw carries the ping's ACK

    def on_message(self, m: ipc.Message) -> None:
        """Apply one message from the validator process (a message for a gone connection is dropped)."""
        if m.kind is ipc.Kind.CONFIG:
            if not self.config.done():
                self.config.set_result(json.loads(m.payload))
            return
        conn = self.conns.get(m.conn)
        if conn is None:
            return
        if m.kind is ipc.Kind.SEND:
            # Already encoded (and checked) by the validator process: straight onto stream 0.
            conn._proto.send_raw(m.payload)
        elif m.kind is ipc.Kind.CLOSE:
            goodbye = decode_frame(m.payload) if m.payload else None
            conn.close(goodbye if isinstance(goodbye, Goodbye) else None)
        elif m.kind is ipc.Kind.AUTHENTICATED:
            conn.mark_authenticated()

    def stats(self) -> bytes:
        """The adapter counters as JSON."""
        return json.dumps(self.server.stats.snapshot() if self.server is not None else {}).encode()


async def run(udp_fd: int, ipc_fd: int) -> None:
    """Serve until the channel to the validator closes."""
    loop = asyncio.get_running_loop()
    worker = Worker()
    ipc_sock = socket.socket(fileno=ipc_fd)
    _, worker.channel = await loop.create_connection(lambda: _Channel(worker), sock=ipc_sock)
    cfg = await worker.config
    limits = ServerLimits(**cfg["limits"])
    qconf = QuicConfiguration(is_client=False, alpn_protocols=[ALPN], idle_timeout=limits.idle_timeout_s)
    qconf.certificate, qconf.private_key = load_certificate(cfg["certificate_pem"].encode(),
                                                            cfg["private_key_pem"].encode())
    udp = socket.socket(fileno=udp_fd)
    _, server = await loop.create_datagram_endpoint(
        lambda: QuicFrameServer(configuration=qconf, limits=limits, handler_factory=lambda c: _Relayed(worker, c),
                                reset_secret=bytes.fromhex(cfg["reset_secret"])),
        sock=udp)
    worker.server = server
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.channel._close)
    try:
        while not worker.channel.closed.done():
            worker.channel.send(ipc.Kind.STATS, 0, worker.stats())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(worker.channel.closed), STATS_INTERVAL_S)
    finally:
        server.close()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the worker process."""
    parser = argparse.ArgumentParser(description="cowboy QUIC worker (started by the validator)")
    parser.add_argument("--udp-fd", type=int, required=True)
    parser.add_argument("--ipc-fd", type=int, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=os.environ.get("COWBOY_WORKER_LOG", "WARNING"), stream=sys.stderr)
    profile = os.environ.get("COWBOY_WORKER_PROFILE")  # benchmarks: where aioquic's time goes
    if not profile:
        asyncio.run(run(args.udp_fd, args.ipc_fd))
        return
    import cProfile
    prof = cProfile.Profile()
    prof.enable()
    try:
        asyncio.run(run(args.udp_fd, args.ipc_fd))
    finally:
        prof.disable()
        prof.dump_stats(f"{profile}-worker-{os.getpid()}.prof")


if __name__ == "__main__":
    main()
