"""Connection limits of the HTTP API against a real aiohttp server on loopback (cowboy_node/rpc/conn_limits.py).

The server runs on its own event-loop thread; the tests drive it with plain blocking sockets, so what they see is
what a client sees: the per-address and global caps (503 ``too_many_connections`` and the connection closed), the
header timeout (408 ``header_timeout``), the idle keep-alive timeout, and slots given back on close. Short limits
keep every test well under a few seconds; every socket is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from aiohttp import web

from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.rpc.conn_limits import ConnLimits, LimitedAppRunner

pytestmark = pytest.mark.timeout(600)

REQUEST = b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n"


class LimitedServer:
    """An aiohttp app behind :class:`LimitedAppRunner` on 127.0.0.1, served from a background loop thread."""

    def __init__(self, limits: ConnLimits) -> None:
        self.metrics = NodeMetrics()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="conn-limits", daemon=True)
        app = web.Application()

        async def health(request: web.Request) -> web.Response:
            return web.json_response({"ok": True})

        async def slow(request: web.Request) -> web.Response:
            await asyncio.sleep(0.6)
            return web.json_response({"ok": True})

        async def echo(request: web.Request) -> web.Response:
            return web.json_response({"ok": True, "len": len(await request.read())})

        app.router.add_get("/health", health)
        app.router.add_get("/slow", slow)
        app.router.add_post("/echo", echo)
        self.runner = LimitedAppRunner(app, limits=limits, metrics=self.metrics, access_log=None)
        self.port = 0

    def start(self) -> None:
        self.thread.start()

        async def up() -> int:
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await site.start()
            return int(self.runner.addresses[0][1])

        self.port = asyncio.run_coroutine_threadsafe(up(), self.loop).result(timeout=10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()

    def open_connections(self) -> int:
        return self.runner.gate.open

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float:
        value = self.metrics.registry.get_sample_value(name, labels or {})
        return 0.0 if value is None else value


@pytest.fixture
def serve() -> Iterator[Callable[[ConnLimits], LimitedServer]]:
    servers: list[LimitedServer] = []

    def start(limits: ConnLimits) -> LimitedServer:
        s = LimitedServer(limits)
        s.start()
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    """Every socket a test opens; all closed at the end whatever happens."""
    opened: list[socket.socket] = []
    yield opened
    for s in opened:
        with contextlib.suppress(OSError):
            s.close()


def connect(opened: list[socket.socket], port: int, source: str = "127.0.0.1") -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    opened.append(s)
    s.settimeout(5)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def read_until_closed(s: socket.socket, timeout: float = 5) -> bytes:
    """Everything the server sends until it closes the connection (a reset counts as closed)."""
    s.settimeout(timeout)
    chunks = []
    with contextlib.suppress(ConnectionResetError):
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def read_responses(s: socket.socket, n: int) -> list[tuple[int, dict[str, object]]]:
    """``n`` HTTP/1.1 responses with Content-Length bodies (the connection stays open; nothing may follow)."""
    data = b""
    out = []
    for _ in range(n):
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            assert chunk, f"closed before a response: {data!r}"
            data += chunk
        head, _, data = data.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        length = next(int(ln.split(":", 1)[1]) for ln in lines if ln.lower().startswith("content-length:"))
        while len(data) < length:
            chunk = s.recv(65536)
            assert chunk, "closed inside a response body"
            data += chunk
        out.append((int(lines[0].split()[1]), json.loads(data[:length])))
        data = data[length:]
    assert data == b"", data
    return out


def read_response(s: socket.socket) -> tuple[int, dict[str, object]]:
    """One HTTP/1.1 response with a Content-Length body (the connection stays open)."""
    return read_responses(s, 1)[0]


def parse_closing_response(data: bytes) -> tuple[int, dict[str, object]]:
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)


def wait_for(cond: Callable[[], bool], timeout: float = 30) -> None:  # an eventual state, bounded for a loaded host
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def get_health(opened: list[socket.socket], port: int, source: str) -> int:
    s = connect(opened, port, source)
    s.sendall(REQUEST)
    status, doc = read_response(s)
    assert doc == {"ok": True}
    s.close()
    return status


def test_per_ip_cap_refuses_extra_sockets_from_one_address_but_serves_another(
        serve: Callable[[ConnLimits], LimitedServer], sockets: list[socket.socket]) -> None:
    srv = serve(ConnLimits(max_connections=50, max_connections_per_ip=4, header_timeout_ms=10_000))
    idle = [connect(sockets, srv.port) for _ in range(4)]
    wait_for(lambda: srv.open_connections() == 4)
    for _ in range(3):
        extra = connect(sockets, srv.port)
        status, doc = parse_closing_response(read_until_closed(extra))
        assert status == 503 and doc["code"] == "too_many_connections"
    assert srv.sample("cowboy_rpc_connections_refused_total", {"reason": "per_ip_cap"}) == 3
    assert srv.sample("cowboy_rpc_connections_refused_total", {"reason": "global_cap"}) == 0
    assert get_health(sockets, srv.port, "127.0.0.2") == 200  # another loopback address is not affected
    assert srv.open_connections() >= 4 and all(s.fileno() != -1 for s in idle)
    # closing one idle socket frees its slot for the same address
    idle[0].close()
    wait_for(lambda: srv.open_connections() == 3)
    assert get_health(sockets, srv.port, "127.0.0.1") == 200
    for s in idle:
        s.close()
    wait_for(lambda: srv.open_connections() == 0)  # no slot is leaked
    assert srv.sample("cowboy_rpc_connections") == 0


def test_global_cap_refuses_any_address_once_full(
        serve: Callable[[ConnLimits], LimitedServer], sockets: list[socket.socket]) -> None:
    srv = serve(ConnLimits(max_connections=6, max_connections_per_ip=64))
    held = [connect(sockets, srv.port, f"127.0.0.{1 + i % 3}") for i in range(6)]
    wait_for(lambda: srv.open_connections() == 6)
    assert srv.sample("cowboy_rpc_connections") == 6
    for source in ("127.0.0.1", "127.0.0.9"):
        status, doc = parse_closing_response(read_until_closed(connect(sockets, srv.port, source)))
        assert status == 503 and doc["code"] == "too_many_connections"
    assert srv.sample("cowboy_rpc_connections_refused_total", {"reason": "global_cap"}) == 2
    held[0].close()
    wait_for(lambda: srv.open_connections() == 5)
    assert get_health(sockets, srv.port, "127.0.0.9") == 200


def test_half_sent_header_is_closed_after_the_header_timeout(
        serve: Callable[[ConnLimits], LimitedServer], sockets: list[socket.socket]) -> None:
    srv = serve(ConnLimits(header_timeout_ms=300, idle_timeout_ms=10_000))
    s = connect(sockets, srv.port)
    t0 = time.monotonic()
    s.sendall(b"GET /health HTTP/1.1\r\nHost: test\r\nX-Slow: ")  # never finished
    data = read_until_closed(s, timeout=30)
    assert time.monotonic() - t0 >= 0.25
    status, doc = parse_closing_response(data)
    assert status == 408 and doc["code"] == "header_timeout"
    # Trickling bytes does not extend the deadline: a byte every 50 ms (well inside the 300 ms timeout) for up to
    # 5 s (half the idle timeout); the server must answer 408 while the bytes are still coming. Were each byte to
    # restart the timer, the connection would stay open for all 100 bytes. (Load only lengthens the gaps, so it can
    # make a broken server look right, never a right one look broken.)
    s2 = connect(sockets, srv.port)
    s2.sendall(b"GET /health HTTP/1.1\r\n")
    trickled = 0
    with contextlib.suppress(OSError):
        while trickled < 100 and not select.select([s2], [], [], 0.05)[0]:
            s2.sendall(b"X")
            trickled += 1
    assert trickled < 100, "trickled header bytes kept the connection open"
    assert b"header_timeout" in read_until_closed(s2, timeout=30)
    # a connection that sends nothing at all is closed after the header timeout too
    s3 = connect(sockets, srv.port)
    t0 = time.monotonic()
    read_until_closed(s3, timeout=30)
    assert time.monotonic() - t0 >= 0.25
    assert srv.sample("cowboy_rpc_header_timeouts_total") == 3
    wait_for(lambda: srv.open_connections() == 0)


def test_idle_keep_alive_connection_is_closed_after_the_idle_timeout(
        serve: Callable[[ConnLimits], LimitedServer], sockets: list[socket.socket]) -> None:
    # The idle timeout is 10x the header timeout so that a gap of 2x the header timeout stays far below it even when
    # a loaded host delays this thread by seconds.
    srv = serve(ConnLimits(header_timeout_ms=300, idle_timeout_ms=3_000))
    s = connect(sockets, srv.port)
    # requests keep the connection alive: idle gaps longer than the header timeout but shorter than the idle one
    for _ in range(3):
        s.sendall(REQUEST)
        assert read_response(s)[0] == 200
        time.sleep(0.6)
    s.sendall(REQUEST)
    assert read_response(s)[0] == 200
    t0 = time.monotonic()
    assert read_until_closed(s, timeout=30) == b""  # idle: closed without a response
    elapsed = time.monotonic() - t0
    # Not before the idle timeout (less a little: the server's clock started when it wrote the response).
    assert elapsed >= 2.7, elapsed
    assert srv.sample("cowboy_rpc_header_timeouts_total") == 0
    wait_for(lambda: srv.open_connections() == 0)


def test_header_timeout_spares_slow_bodies_slow_handlers_and_pipelining(
        serve: Callable[[ConnLimits], LimitedServer], sockets: list[socket.socket]) -> None:
    """Only the request line and headers are timed: a body trickling in, a handler slower than the header timeout
    and pipelined requests all complete."""
    srv = serve(ConnLimits(header_timeout_ms=300, idle_timeout_ms=10_000))
    s = connect(sockets, srv.port)
    s.sendall(b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 8\r\n\r\n")
    for byte in b"12345678":
        time.sleep(0.1)  # 0.8 s of body, well past the header timeout
        s.sendall(bytes([byte]))
    assert read_response(s) == (200, {"ok": True, "len": 8})
    s.sendall(b"GET /slow HTTP/1.1\r\nHost: test\r\n\r\n")
    assert read_response(s) == (200, {"ok": True})
    s.sendall(REQUEST + b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 2\r\n\r\nab" + REQUEST)
    assert read_responses(s, 3) == [(200, {"ok": True}), (200, {"ok": True, "len": 2}),
                                                   (200, {"ok": True})]
    assert srv.sample("cowboy_rpc_header_timeouts_total") == 0
    s.close()
    wait_for(lambda: srv.open_connections() == 0)
