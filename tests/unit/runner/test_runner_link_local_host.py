"""``connect(local_host=…)`` and ``LinkConfig.local_host``: the client's QUIC socket uses the given source address,
so a server's per-source-IP Hello limit (CIP-11 §6.2) sees each bound address as its own peer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from cowboy_protocol.quic.adapter import ClientConnection, ConnectionClosed, FrameConnection, QuicFrameServer, connect
from cowboy_protocol.quic.adapter import start_server as quic_start_server
from cowboy_protocol.quic.certs import generate_self_signed
from cowboy_protocol.quic.limits import ServerLimits
from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.frames import Frame, Goodbye, JobAssignment
from cowboy_protocol.transport.preimages import RunnerKey as SessionKey
from cowboy_runner.link import Link, LinkConfig

WAIT = 10.0
"""Upper bound of every wait (shared machine); never asserted as a duration."""
CERT, KEY = generate_self_signed("validator.test")


class Recorder:
    """Handler factory: records each connection's source address; optionally closes it at once."""

    def __init__(self, close_on_open: bool = False) -> None:
        self.peers: list[str] = []
        self.close_on_open = close_on_open

    def __call__(self, conn: FrameConnection) -> Recorder:
        self.peers.append(conn.peer[0])
        if self.close_on_open:
            conn.close()
        return self

    def on_open(self, conn: FrameConnection) -> None:
        """Nothing to do."""

    def on_frame(self, frame: Frame) -> None:
        """Frames are ignored."""

    def on_close(self, reason: str) -> None:
        """Nothing to do."""


@pytest.fixture
async def clients() -> AsyncIterator[list[ClientConnection]]:
    """Client connections of a test, aborted after it."""
    opened: list[ClientConnection] = []
    yield opened
    for c in opened:
        c.abort()


async def serve(recorder: Recorder, **limits: Any) -> QuicFrameServer:
    return await quic_start_server("127.0.0.1", 0, handler_factory=recorder, certificate_pem=CERT,
                                   private_key_pem=KEY, limits=ServerLimits(**limits))


async def test_connect_uses_local_host_as_the_source_address(clients: list[ClientConnection]) -> None:
    rec = Recorder()
    server = await serve(rec)
    try:
        clients.append(await connect("127.0.0.1", server.port, local_host="127.0.0.7", timeout_s=WAIT))
        clients.append(await connect("127.0.0.1", server.port, timeout_s=WAIT))
        assert rec.peers == ["127.0.0.7", "127.0.0.1"]
    finally:
        server.close()


async def test_distinct_local_hosts_are_distinct_peers_for_the_hello_rate_limit(
        clients: list[ClientConnection]) -> None:
    # One token per source IP and practically no refill: a second connection from the same address is refused
    # with Goodbye{RateLimited} at its first byte; one from another bound address is not.
    rec = Recorder()
    server = await serve(rec, hello_burst_per_peer=1, hello_rate_per_peer=0.001)
    try:
        first = await connect("127.0.0.1", server.port, local_host="127.0.0.2", timeout_s=WAIT)
        same = await connect("127.0.0.1", server.port, local_host="127.0.0.2", timeout_s=WAIT)
        other = await connect("127.0.0.1", server.port, local_host="127.0.0.3", timeout_s=WAIT)
        clients.extend([first, same, other])
        same.send_raw(b"\x00")  # the refusal comes at the connection's first stream byte
        assert await asyncio.wait_for(same.recv(), WAIT) == Goodbye(GoodbyeReason.RATE_LIMITED, "hello_rate",
                                                                     None, None)
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(same.recv(), WAIT)
        assert server.stats.refused == {"rate_limited": 1}
        assert rec.peers == ["127.0.0.2", "127.0.0.3"]  # the refused one never reached a handler
    finally:
        server.close()


async def _ignore(link: Link, assignment: JobAssignment) -> None:
    """No assignment is expected."""


async def test_link_config_local_host_is_the_source_of_the_link_connection() -> None:
    rec = Recorder(close_on_open=True)
    server = await serve(rec)
    try:
        cfg = LinkConfig(host="127.0.0.1", port=server.port, chain_id="cowboy-test", validator_set=(bytes(32),),
                         max_attempts=1, local_host="127.0.0.9")
        link = Link(SessionKey((1).to_bytes(32, "big")), cfg, height=lambda: 0, on_assignment=_ignore)
        with pytest.raises(ConnectionError):
            await asyncio.wait_for(link.run(), WAIT)
        assert rec.peers == ["127.0.0.9"]
    finally:
        server.close()


def test_link_config_local_host_defaults_to_the_wildcard_address() -> None:
    assert LinkConfig(host="h", port=1, chain_id="c", validator_set=()).local_host is None
