"""The runner's ChainClient fails over to another validator's HTTP API when its own is unreachable (CIP-11
§10.3: results must still land when the dispatching validator is down), and keeps using the one that answers."""

from __future__ import annotations

import socket

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from cowboy_runner.chain_client import ChainClient, NodeUnreachable


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


async def _server(height: int, submitted: list[bytes]) -> TestServer:
    async def h(_: web.Request) -> web.Response:
        return web.json_response({"height": height})

    async def status(_: web.Request) -> web.Response:
        return web.json_response({"who": height})

    async def submit(request: web.Request) -> web.Response:
        submitted.append(await request.read())
        return web.json_response({"tx_hash": "0x" + "00" * 32, "status": "pending"})

    app = web.Application()
    app.router.add_get("/height", h)
    app.router.add_get("/status", status)
    app.router.add_post("/submit", submit)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


async def test_reads_and_submissions_fail_over_and_stick() -> None:
    got: list[bytes] = []
    backup = await _server(7, got)
    try:
        chain = ChainClient(f"http://127.0.0.1:{_closed_port()}", timeout=2.0)
        with pytest.raises(NodeUnreachable):
            await chain.height()  # no fallback known yet
        assert chain.add_fallbacks([str(backup.make_url("/")).rstrip("/"), "not a url"]) == 1
        assert chain.add_fallbacks([str(backup.make_url("/")).rstrip("/")]) == 0  # already known
        assert await chain.height() == 7
        assert chain.current_url.endswith(f":{backup.port}")
        await chain.submit(b"\x00\x00\x00\x01\xa0")
        assert got == [b"\x00\x00\x00\x01\xa0"]
        with pytest.raises(NodeUnreachable):
            await chain.status()  # always the primary: its answer names that validator
    finally:
        await backup.close()


async def test_the_head_status_fails_over_while_status_stays_on_the_primary() -> None:
    backup = await _server(9, [])
    try:
        chain = ChainClient(f"http://127.0.0.1:{_closed_port()}", timeout=2.0)
        chain.add_fallbacks([str(backup.make_url("/")).rstrip("/")])
        assert await chain.head_status() == {"who": 9}  # the daemon's head loop: the head keeps advancing
        with pytest.raises(NodeUnreachable):
            await chain.status()
    finally:
        await backup.close()
