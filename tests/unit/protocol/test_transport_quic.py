"""The QUIC adapter over real loopback UDP: stream-0 framing, channel binding, errors, closing, idle timeout.

Caps, Retry and rate limits are in ``test_transport_quic_limits.py``. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from cowboy_protocol.quic.adapter import (
    SERVER_UDP_RCVBUF,
    ClientConnection,
    ConnectionClosed,
    FrameConnection,
    QuicFrameServer,
    connect,
    start_server,
)
from cowboy_protocol.quic.certs import generate_self_signed
from cowboy_protocol.quic.limits import ServerLimits
from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.frames import MAX_FRAME_BYTES, Frame, Goodbye, JobProgress, JobResult

WAIT = 10.0
"""Upper bound of every wait (generous: the machine is shared); never asserted as a duration."""

CERT, KEY = generate_self_signed("validator.test")

ROOMY = dict(max_half_open=1000, retry_threshold=1000, hello_burst_per_peer=1000)
"""Limits that stay out of the way of tests about something else."""


def progress(i: int, message: str | None = None) -> JobProgress:
    """A small valid frame, distinguishable by ``i``."""
    return JobProgress(i.to_bytes(32, "big"), i % 1001, message)


async def until(pred: Callable[[], bool], what: str = "condition") -> None:
    """Poll ``pred`` until true, failing after WAIT seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while not pred():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def bounded(aw: Awaitable[Any]) -> Any:
    """Await with the WAIT bound."""
    return await asyncio.wait_for(aw, WAIT)


async def recv_until_closed(client: ClientConnection) -> tuple[list[Frame], ConnectionClosed]:
    """Every frame the client receives until the connection closes, and the closing exception."""
    frames: list[Frame] = []
    while True:
        try:
            frames.append(await bounded(client.recv()))
        except ConnectionClosed as e:
            return frames, e


class Handler:
    """Records everything; echoes frames back if its hub says so."""

    def __init__(self, hub: Hub, conn: FrameConnection) -> None:
        self.hub = hub
        self.conn = conn
        self.opened = False
        self.frames: list[Frame] = []
        self.closes: list[str] = []

    def on_open(self, conn: FrameConnection) -> None:
        assert conn is self.conn and len(conn.channel_binding) == 32
        self.opened = True
        if self.hub.authenticate:
            conn.mark_authenticated(self.hub.signer)
        for frame in self.hub.greet:
            conn.send(frame)

    def on_frame(self, frame: Frame) -> None:
        assert not self.closes, "frame after on_close"
        self.frames.append(frame)
        if self.hub.on_frame is not None:
            self.hub.on_frame(self, frame)
        elif self.hub.echo:
            self.conn.send(frame)

    def on_close(self, reason: str) -> None:
        self.closes.append(reason)


class Hub:
    """Handler factory that keeps every handler it created."""

    def __init__(self, *, echo: bool = True, authenticate: bool = True, greet: tuple[Frame, ...] = (),
                 on_frame: Callable[[Handler, Frame], None] | None = None,
                 signer: Callable[[Goodbye], Goodbye] | None = None) -> None:
        self.echo = echo
        self.authenticate = authenticate
        self.greet = greet
        self.on_frame = on_frame
        self.signer = signer
        self.handlers: list[Handler] = []

    def __call__(self, conn: FrameConnection) -> Handler:
        h = Handler(self, conn)
        self.handlers.append(h)
        return h


async def serve(hub: Hub, **limits: Any) -> QuicFrameServer:
    """A server on 127.0.0.1, any free port."""
    return await start_server("127.0.0.1", 0, handler_factory=hub, certificate_pem=CERT, private_key_pem=KEY,
                              limits=ServerLimits(**{**ROOMY, **limits}))


OPEN_CLIENTS: list[ClientConnection] = []
"""Clients of the running test, released after it (no socket outlives its test)."""


@pytest.fixture(autouse=True)
async def release_clients() -> AsyncIterator[None]:
    """Abort every client a test opened, inside the test's event loop."""
    yield
    while OPEN_CLIENTS:
        OPEN_CLIENTS.pop().abort()


async def dial(server: QuicFrameServer, **kw: Any) -> ClientConnection:
    """A client connected to ``server``."""
    client = await bounded(connect("127.0.0.1", server.port, server_name="validator.test", **kw))
    OPEN_CLIENTS.append(client)
    return client


async def test_frames_round_trip_both_ways_on_stream_zero() -> None:
    hub = Hub(greet=(progress(7, "hello from the server"),))
    server = await serve(hub)
    try:
        client = await dial(server)
        # The server's greeting waits for the client's first byte (QUIC opens stream 0 with it).
        big = JobResult(bytes(32), b"\x00\x01\x00\x00" + bytes(range(256)) * 256)  # 64 KiB: many packets
        sent = [progress(1), progress(2, "two"), big, progress(3)]
        for frame in sent:
            client.send(frame)
        got = [await bounded(client.recv()) for _ in range(len(sent) + 1)]
        assert got == [progress(7, "hello from the server"), *sent]
        assert hub.handlers[0].frames == sent
        # Only stream 0 was ever used, in both directions.
        assert set(client._proto._quic._streams) <= {0}
        client.close()
        await bounded(client.wait_closed())
    finally:
        server.close()


async def test_channel_binding_is_equal_on_both_ends_and_differs_between_connections() -> None:
    hub = Hub()
    server = await serve(hub)
    try:
        c1, c2 = await dial(server), await dial(server)
        await until(lambda: len(hub.handlers) == 2 and all(h.opened for h in hub.handlers), "two opens")
        by_port = {h.conn.peer[1]: h.conn for h in hub.handlers}
        for c in (c1, c2):
            port = c._proto._transport.get_extra_info("sockname")[1]
            assert len(c.channel_binding) == 32
            assert by_port[port].channel_binding == c.channel_binding
        assert c1.channel_binding != c2.channel_binding
        assert {h.conn.connection_number for h in hub.handlers} == {1, 2}
    finally:
        server.close()


@pytest.mark.parametrize(("prefix", "code"), [
    ((MAX_FRAME_BYTES + 1).to_bytes(4, "big"), "frame_too_large"),
    (b"\xff\xff\xff\xff", "frame_too_large"),
    (b"\x00\x00\x00\x00", "frame_length_zero"),
])
async def test_bad_length_prefix_gets_goodbye_protocol_error_before_any_payload(prefix: bytes, code: str) -> None:
    """§12.1/§13: reject on the 4-byte prefix alone — no payload byte is ever sent here, yet the server answers."""
    hub = Hub()
    server = await serve(hub)
    try:
        client = await dial(server)
        client.send(progress(1))
        assert await bounded(client.recv()) == progress(1)
        client.send_raw(prefix)  # the declared payload never follows
        frames, closed = await recv_until_closed(client)
        assert frames == [Goodbye(GoodbyeReason.PROTOCOL_ERROR, code, None, None)]
        assert closed.goodbye == frames[0] and closed.reason == "peer_goodbye:PROTOCOL_ERROR"
        assert server.stats.decode_errors == {code: 1}
        await until(lambda: hub.handlers[0].closes == [f"protocol_error:{code}"], "on_close")
        assert hub.handlers[0].frames == [progress(1)]
    finally:
        server.close()


async def test_undecodable_frame_gets_goodbye_with_the_decoder_code() -> None:
    hub = Hub()
    server = await serve(hub)
    try:
        client = await dial(server)
        client.send_raw(b"\x00\x00\x00\x01\x7e")  # length 1, unknown type 0x7e
        frames, _ = await recv_until_closed(client)
        assert frames == [Goodbye(GoodbyeReason.PROTOCOL_ERROR, "unknown_frame_type", None, None)]
        assert server.stats.decode_errors == {"unknown_frame_type": 1}
        assert hub.handlers[0].frames == []
    finally:
        server.close()


async def test_second_stream_opened_by_the_client_is_a_protocol_error() -> None:
    hub = Hub()
    server = await serve(hub)
    try:
        client = await dial(server)
        client.send(progress(1))
        assert await bounded(client.recv()) == progress(1)
        quic = client._proto._quic
        quic.send_stream_data(quic.get_next_available_stream_id(), b"\x00\x00\x00\x01\x7e")  # stream 4
        client._proto.transmit()
        frames, _ = await recv_until_closed(client)
        assert frames == [Goodbye(GoodbyeReason.PROTOCOL_ERROR, "unexpected_stream", None, None)]
        assert server.stats.stream_errors == {"unexpected_stream": 1}
    finally:
        server.close()


async def test_second_stream_opened_by_the_server_is_a_protocol_error_on_the_client() -> None:
    def open_stream(h: Handler, frame: Frame) -> None:
        proto = h.conn._proto
        proto._quic.send_stream_data(proto._quic.get_next_available_stream_id(), b"\x00")  # stream 1
        proto.transmit()

    hub = Hub(on_frame=open_stream)
    server = await serve(hub)
    try:
        client = await dial(server)
        client.send(progress(1))
        frames, closed = await recv_until_closed(client)
        assert frames == [] and closed.reason == "protocol_error:unexpected_stream"
        # The client said why: the server's handler sees the Goodbye.
        await until(lambda: hub.handlers[0].closes != [], "server on_close")
        assert hub.handlers[0].frames[-1] == Goodbye(GoodbyeReason.PROTOCOL_ERROR, "unexpected_stream", None, None)
        assert hub.handlers[0].closes == ["peer_goodbye:PROTOCOL_ERROR"]
    finally:
        server.close()


async def test_fin_on_stream_zero_without_goodbye_is_a_protocol_error() -> None:
    hub = Hub()
    server = await serve(hub)
    try:
        client = await dial(server)
        client._proto._quic.send_stream_data(0, b"", end_stream=False)
        client.send(progress(1))
        client._proto._quic.send_stream_data(0, b"", end_stream=True)
        client._proto.transmit()
        frames, _ = await recv_until_closed(client)
        assert frames == [progress(1), Goodbye(GoodbyeReason.PROTOCOL_ERROR, "stream_fin", None, None)]
        assert server.stats.stream_errors == {"stream_fin": 1}
        assert hub.handlers[0].frames == [progress(1)]
    finally:
        server.close()


async def test_fin_inside_a_frame_is_a_truncated_frame() -> None:
    hub = Hub()
    server = await serve(hub)
    try:
        client = await dial(server)
        client._proto._quic.send_stream_data(0, b"\x00\x00\x00\x10\x22", end_stream=True)  # 16 announced, 1 sent
        client._proto.transmit()
        frames, _ = await recv_until_closed(client)
        assert frames == [Goodbye(GoodbyeReason.PROTOCOL_ERROR, "frame_truncated", None, None)]
    finally:
        server.close()


async def test_client_goodbye_reaches_the_handler_then_on_close_once() -> None:
    hub = Hub()
    server = await serve(hub)
    try:
        client = await dial(server)
        client.send(progress(1))
        assert await bounded(client.recv()) == progress(1)
        bye = Goodbye(GoodbyeReason.SHUTDOWN, "bye", 5, None)
        client.close(bye)
        with pytest.raises(ConnectionClosed) as e:
            client.send(progress(2))
        assert e.value.reason == "local:SHUTDOWN"
        await bounded(client.wait_closed())
        h = hub.handlers[0]
        await until(lambda: h.closes != [], "server on_close")
        assert h.frames == [progress(1), bye]
        assert h.closes == ["peer_goodbye:SHUTDOWN"]
        await until(lambda: server.stats.connections_open == 0, "server forgets the connection")
    finally:
        server.close()


async def test_handler_close_with_goodbye_reaches_the_client() -> None:
    def close_on_second(h: Handler, frame: Frame) -> None:
        if len(h.frames) == 2:
            h.conn.close(Goodbye(GoodbyeReason.NOT_REGISTERED, None, None, None))
            h.conn.send(progress(99))  # ignored: the connection is closing
        else:
            h.conn.send(frame)

    hub = Hub(on_frame=close_on_second)
    server = await serve(hub)
    try:
        client = await dial(server)
        client.send(progress(1))
        client.send(progress(2))
        frames, closed = await recv_until_closed(client)
        assert frames == [progress(1), Goodbye(GoodbyeReason.NOT_REGISTERED, None, None, None)]
        assert closed.reason == "peer_goodbye:NOT_REGISTERED"
        assert hub.handlers[0].closes == ["local:NOT_REGISTERED"]
        with pytest.raises(ConnectionClosed):  # every later recv() raises too
            await bounded(client.recv())
    finally:
        server.close()


async def test_adapter_goodbye_is_signed_by_the_registered_signer_after_authentication() -> None:
    def sign(g: Goodbye) -> Goodbye:
        return Goodbye(g.reason, g.detail, g.retry_after_blocks, b"\x5a" * 64)

    hub = Hub(signer=sign)
    server = await serve(hub)
    try:
        client = await dial(server)
        client.send_raw(b"\x00\x00\x00\x00")
        frames, _ = await recv_until_closed(client)
        assert frames == [Goodbye(GoodbyeReason.PROTOCOL_ERROR, "frame_length_zero", None, b"\x5a" * 64)]
    finally:
        server.close()


async def test_idle_timeout_closes_a_silent_connection() -> None:
    hub = Hub()
    server = await serve(hub, idle_timeout_s=0.5)
    try:
        client = await dial(server, idle_timeout_s=0.5)
        client.send(progress(1))
        assert await bounded(client.recv()) == progress(1)
        _, closed = await recv_until_closed(client)  # nobody sends anything more
        assert closed.reason == "idle_timeout"
        await until(lambda: hub.handlers[0].closes != [], "server on_close")
        assert hub.handlers[0].closes == ["idle_timeout"]
        await until(lambda: server.stats.connections_open == 0, "server forgets the connection")
    finally:
        server.close()


async def test_unauthenticated_connection_is_closed_at_the_auth_deadline() -> None:
    hub = Hub(authenticate=False)
    server = await serve(hub, auth_timeout_s=0.3)
    try:
        client = await dial(server)
        client.send(progress(1))
        frames, _ = await recv_until_closed(client)
        assert frames == [progress(1), Goodbye(GoodbyeReason.IDLE_TIMEOUT, "auth_timeout", None, None)]
        assert hub.handlers[0].closes == ["auth_timeout"]
        assert server.stats.refused == {"auth_timeout": 1}
        await until(lambda: server.stats.half_open == 0, "half-open slot released")
    finally:
        server.close()


async def test_on_close_is_called_exactly_once_whatever_closes_first() -> None:
    def close_twice(h: Handler, frame: Frame) -> None:
        h.conn.close(Goodbye(GoodbyeReason.SHUTDOWN, None, None, None))
        h.conn.close()  # second close: no second on_close

    hub = Hub(on_frame=close_twice)
    server = await serve(hub)
    try:
        first = await dial(server)
        first.send(progress(1))
        first.send(progress(2))  # arrives while the server is closing: not delivered
        first.close(Goodbye(GoodbyeReason.SHUTDOWN, None, None, None))  # and the peer closes too
        await bounded(first.wait_closed())
        second = await dial(server)  # still open when the server shuts down
        second.send(progress(3))
        await until(lambda: len(hub.handlers) == 2 and hub.handlers[1].frames != [], "second handler's frame")
        await until(lambda: server.stats.connections_open == 0, "all connections gone")
        assert hub.handlers[0].closes == ["local:SHUTDOWN"]
        assert hub.handlers[0].frames == [progress(1)]
    finally:
        server.close()  # on_close of an already closed connection is not repeated
    assert [h.closes for h in hub.handlers] == [["local:SHUTDOWN"], ["local:SHUTDOWN"]]


async def test_server_shutdown_closes_every_connection_once() -> None:
    hub = Hub(echo=True)
    server = await serve(hub)
    clients = [await dial(server) for _ in range(3)]
    for c in clients:
        c.send(progress(1))
        assert await bounded(c.recv()) == progress(1)
    server.close()
    assert [h.closes for h in hub.handlers] == [["shutdown"]] * 3
    assert server.stats.connections_open == 0 and server.stats.half_open == 0
    for c in clients:
        _, closed = await recv_until_closed(c)
        assert closed.reason.startswith("peer_closed:")


async def test_handler_exception_closes_only_that_connection() -> None:
    def explode(h: Handler, frame: Frame) -> None:
        if isinstance(frame, JobProgress) and frame.message == "boom":
            raise RuntimeError("handler bug")
        h.conn.send(frame)

    hub = Hub(on_frame=explode)
    server = await serve(hub)
    try:
        bad, good = await dial(server), await dial(server)
        bad.send(progress(1, "boom"))
        _, closed = await recv_until_closed(bad)
        assert closed.reason.startswith("peer_closed:")
        good.send(progress(2))
        assert await bounded(good.recv()) == progress(2)
        assert server.stats.handler_errors == 1
        assert hub.handlers[0].closes == ["handler_error"]
    finally:
        server.close()


async def test_garbage_datagrams_do_not_stop_the_server() -> None:
    hub = Hub()
    server = await serve(hub)
    try:
        client = await dial(server)
        client.send(progress(1))
        assert await bounded(client.recv()) == progress(1)
        rng = random.Random(1105)
        live_cids = sorted(server._protocols)
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            for i in range(300):
                size = rng.choice([0, 1, 5, 20, 60, 1199, 1200, 1350])
                data = bytearray(rng.randbytes(size))
                if data and i % 3 == 0:
                    data[0] = 0xC0 | (data[0] & 0x0F)  # long header: Initial-looking
                elif len(data) > 9 and i % 3 == 1:
                    data[0] = 0x40 | (data[0] & 0x3F)  # short header addressed to a live connection
                    cid = rng.choice(live_cids)
                    data[1:1 + len(cid)] = cid
                sock.sendto(bytes(data), ("127.0.0.1", server.port))
                if i % 50 == 0:
                    await asyncio.sleep(0)
        finally:
            sock.close()
        await asyncio.sleep(0.1)
        # The live connection still works and a new one can open.
        client.send(progress(2))
        assert await bounded(client.recv()) == progress(2)
        fresh = await dial(server)
        fresh.send(progress(3))
        assert await bounded(fresh.recv()) == progress(3)
        assert server.stats.ignored_datagrams > 0
        assert all(h.closes == [] for h in hub.handlers)
    finally:
        server.close()


async def test_a_connect_timeout_leaves_no_timer_firing_on_the_closed_socket() -> None:
    """Nothing listens: connect() times out and closes its socket; aioquic's retransmit timer must not fire on
    it afterwards (it did: AttributeError 'NoneType' object has no attribute 'sendto', logged by asyncio)."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # a bound port nobody answers on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        with pytest.raises(ConnectionClosed) as info:
            await connect("127.0.0.1", port, timeout_s=0.3)
        assert "connect_timeout" in str(info.value)
        await asyncio.sleep(1.5)  # past aioquic's first probe timeouts
    assert errors == []


@pytest.mark.parametrize("piggyback", [True, False])
async def test_a_reply_carries_the_ack_of_the_frame_it_answers(piggyback: bool,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """An echoed frame and the ACK of the client's packet leave the server in one datagram (``quic_acks``).

    Without the piggyback aioquic sends the reply at once and the ACK alone 1 ms later: two datagrams per
    exchange (the control case, so this test shows it measures what it claims).
    """
    from cowboy_protocol.quic.stream import FramedProtocol

    monkeypatch.setattr(FramedProtocol, "piggyback_acks", piggyback)
    server = await serve(Hub())
    try:
        client = await dial(server)
        client.send(progress(0))  # opens stream 0; handshake leftovers (HANDSHAKE_DONE, CIDs) settle below
        await bounded(client.recv())
        await asyncio.sleep(0.1)
        received = 0
        inner = client._proto.datagram_received

        def counting(data: bytes, addr: Any) -> None:
            nonlocal received
            received += 1
            inner(data, addr)

        client._proto.datagram_received = counting  # type: ignore[method-assign]
        exchanges = 5
        for i in range(1, exchanges + 1):
            client.send(progress(i))
            assert await bounded(client.recv()) == progress(i)
            await asyncio.sleep(0.05)  # long past aioquic's 1 ms ACK delay: a lone ACK would have arrived
        if piggyback:
            assert received == exchanges
        else:
            assert received >= exchanges + 1  # at least one lone ACK (usually one per exchange)
        client.close()
        await bounded(client.wait_closed())
    finally:
        server.close()


def _rmem_max() -> int | None:
    try:
        with open("/proc/sys/net/core/rmem_max") as f:
            return int(f.read())
    except OSError:
        return None


async def test_the_server_socket_asks_for_a_receive_buffer_above_the_kernel_default() -> None:
    """A burst of runners' heartbeats must wait in the socket, not be dropped (``SERVER_UDP_RCVBUF``): the server
    gets a larger receive buffer than a fresh UDP socket, up to what the kernel allows."""
    rmem_max = _rmem_max()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as plain:
        default = plain.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    if rmem_max is None or rmem_max * 2 <= default:
        pytest.skip(f"not applicable: net.core.rmem_max ({rmem_max}) leaves no room above the default receive "
                    f"buffer ({default})")
    server = await serve(Hub())
    try:
        sock = server._transport.get_extra_info("socket")  # the bound UDP socket
        got = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        # Linux doubles the asked value for its bookkeeping and caps the ask at rmem_max.
        assert got == 2 * min(SERVER_UDP_RCVBUF, rmem_max) and got > default
    finally:
        server.close()
