"""Local servers for the runner executor tests (tests/unit/test_runner_exec_*.py), all on 127.0.0.1 port 0.

- :func:`http_app`: an aiohttp app with echo, JSON, status, huge, slow, redirect and timestamp endpoints.
- :func:`llm_app`: an OpenAI-compatible ``/v1/chat/completions`` stub that records requests.
- :func:`start_time_server_http`: the reference server ``mcp-server-time`` (PyPI, unmodified) over streamable HTTP:
  its own ``create_server()`` under the SDK's ``streamable_http_app()`` (the package's CLI speaks stdio only).
- :func:`start_mcp_server`: a real MCP server (the ``mcp`` package's ``MCPServer``, streamable HTTP, run by
  uvicorn in a subprocess: ``python -m tests.unit.runner_exec_servers mcp {json|sse}``); ``mcp stdio`` runs the
  same server on the stdio transport (the runner starts it itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

REPO = Path(__file__).resolve().parents[2]


@contextlib.asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[str]:
    """Run ``app`` on 127.0.0.1 (an OS-chosen port) and yield its base URL."""
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


# ----------------------------------------------------------------------------- HTTP


@dataclass
class HttpState:
    """What the HTTP test app observed."""

    huge_sent: int = 0
    """Bytes of /huge actually written before the client went away."""
    huge_done: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the /huge handler ended (finished or aborted)."""
    hits: list[str] = field(default_factory=list)
    """Paths requested, in order."""


HUGE_TOTAL = 64 * 1024 * 1024
"""Bytes /huge would send if read to the end."""


def http_app(state: HttpState) -> web.Application:
    """The HTTP executor's test server."""

    async def echo(request: web.Request) -> web.Response:
        state.hits.append(request.path)
        body = await request.read()
        raw = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in request.raw_headers]
        return web.json_response({"method": request.method, "path": request.path_qs, "headers": raw,
                                  "body": body.decode("latin-1"), "has_body": request.body_exists})

    async def doc(request: web.Request) -> web.Response:
        state.hits.append(request.path)
        return web.Response(body=b'{"data": {"items": [{"price": 1.5, "name": "a"}, {"price": 2, "name": "b"}],'
                                 b' "z": true, "a": null}, "odd.key": "dots"}', content_type="application/json")

    async def status(request: web.Request) -> web.Response:
        return web.Response(status=int(request.match_info["code"]), text="nope")

    async def huge(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()  # chunked: no Content-Length, so the client must count
        await resp.prepare(request)
        chunk = b"x" * 65536
        try:
            while state.huge_sent < HUGE_TOTAL:
                await resp.write(chunk)
                state.huge_sent += len(chunk)
            await resp.write_eof()
        finally:
            state.huge_done.set()
        return resp

    async def declared(request: web.Request) -> web.Response:
        return web.Response(body=b"y" * (2 * 1024 * 1024))

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(30)
        return web.Response(text="late")

    async def redirect(request: web.Request) -> web.Response:
        state.hits.append(request.path)
        raise web.HTTPFound(request.query["to"])

    async def redirect307(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect(request.query["to"])

    async def stamp(request: web.Request) -> web.Response:
        ts: Any = request.query["ts"]
        ts = int(ts) if ts.lstrip("-").isdigit() else ts
        return web.json_response({"meta": {"updated": ts}, "value": 42})

    async def aged(request: web.Request) -> web.Response:
        return web.json_response({"value": 1}, headers={"Age": request.query["age"]})

    async def gzipped(request: web.Request) -> web.Response:
        resp = web.Response(body=b"a" * (4 * 1024 * 1024))
        resp.enable_compression(web.ContentCoding.gzip)
        return resp

    app = web.Application()
    app.router.add_route("*", "/echo", echo)
    app.router.add_get("/doc", doc)
    app.router.add_get("/status/{code}", status)
    app.router.add_get("/huge", huge)
    app.router.add_get("/declared", declared)
    app.router.add_get("/slow", slow)
    app.router.add_route("*", "/redirect", redirect)
    app.router.add_route("*", "/redirect307", redirect307)
    app.router.add_get("/stamp", stamp)
    app.router.add_get("/aged", aged)
    app.router.add_get("/gzip", gzipped)
    return app


# ----------------------------------------------------------------------------- LLM


@dataclass
class LlmStub:
    """Behaviour and observations of the chat-completions stub."""

    reply: str = "hello"
    """``choices[0].message.content`` of the answer."""
    usage: dict[str, int] | None = field(default_factory=lambda: {"prompt_tokens": 7, "completion_tokens": 5,
                                                                    "total_tokens": 12})
    """``usage`` of the answer (None: omitted)."""
    delay_s: float = 0.0
    """Seconds to wait before answering."""
    status: int = 200
    """HTTP status of the answer."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Request bodies received."""
    auth: list[str | None] = field(default_factory=list)
    """Authorization headers received."""
    script: list[tuple[int, dict[str, str], str]] = field(default_factory=list)
    """Answers given first, one per request, before the normal ones: (status, headers, body text)."""
    finish_reason: str = "stop"
    """``choices[0].finish_reason`` of the answer."""
    error_text: str = "bad"
    """``error.message`` of a non-200 answer (servers often echo the request, key included)."""
    models_status: int = 200
    """Status of ``GET /v1/models`` (the health probe)."""
    endless: bool = False
    """Answer completions with a 200 body that never ends (chunks of spaces forever)."""


def llm_app(stub: LlmStub) -> web.Application:
    """An OpenAI-compatible ``POST /v1/chat/completions`` stub."""

    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
        stub.requests.append(body)
        stub.auth.append(request.headers.get("Authorization"))
        if stub.delay_s:
            await asyncio.sleep(stub.delay_s)
        if stub.endless:
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            await resp.prepare(request)
            with contextlib.suppress(ConnectionError):
                while True:
                    await resp.write(b" " * 65536)
                    await asyncio.sleep(0)
            return resp
        if stub.script:
            status, headers, text = stub.script.pop(0)
            return web.Response(status=status, headers=headers, text=text)
        if stub.status != 200:
            return web.json_response({"error": {"message": stub.error_text}}, status=stub.status)
        answer: dict[str, Any] = {"id": "cmpl-1", "object": "chat.completion", "model": body["model"],
                                  "choices": [{"index": 0, "finish_reason": stub.finish_reason,
                                               "message": {"role": "assistant", "content": stub.reply}}]}
        if stub.usage is not None:
            answer["usage"] = stub.usage
        return web.json_response(answer)

    async def models(request: web.Request) -> web.Response:
        stub.auth.append(request.headers.get("Authorization"))
        return web.json_response({"object": "list", "data": [{"id": "tiny-model"}]}, status=stub.models_status)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/v1/models", models)
    return app


# ----------------------------------------------------------------------------- MCP


@contextlib.contextmanager
def start_mcp_server(mode: str) -> Any:
    """Run the real MCP test server in a subprocess; yields its endpoint URL (``…/mcp``).

    ``mode`` ``"json"`` makes the server answer requests with ``application/json``; ``"sse"`` (the SDK's
    default) with a ``text/event-stream``.
    """
    proc = subprocess.Popen([sys.executable, "-m", "tests.unit.runner_exec_servers", "mcp", mode],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the port, printed once the socket listens
        if not line.strip().isdigit():
            raise RuntimeError(f"MCP test server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line)}/mcp"
    finally:
        proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


@contextlib.contextmanager
def start_time_server_http() -> Any:
    """Run ``mcp-server-time`` over streamable HTTP in a subprocess; yields ``(endpoint URL, process)`` (the
    process so that a test can stop and continue it)."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.unit.runner_exec_servers", "time-http"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the port, printed once the socket listens
        if not line.strip().isdigit():
            raise RuntimeError(f"mcp-server-time did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line)}/mcp", proc
    finally:
        proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def _run_time_server_http() -> None:
    """The unmodified reference server's tools and middleware (``create_server``), served by the SDK's streamable
    HTTP app on a loopback socket; ``UTC`` is the local timezone its tool descriptions name."""
    import uvicorn
    from mcp_server_time.server import create_server

    app = create_server("UTC").streamable_http_app()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(sock.getsockname()[1], flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


def _run_mcp_server(mode: str) -> None:
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("cowboy-test")

    @server.tool()
    def pid() -> int:
        """The server process id (session reuse: one process serves every job)."""
        return os.getpid()

    @server.tool()
    def env_names() -> list[str]:
        """The names of the server's environment variables (what the runner passed on)."""
        return sorted(os.environ)

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def greet(name: str) -> str:
        """Greet someone."""
        return f"héllo {name}"

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails."""
        raise ValueError(reason)

    if mode == "stdio":  # the stdio transport: JSON-RPC lines on stdin/stdout
        server.run("stdio")
        return
    app = server.streamable_http_app(json_response=mode == "json")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(sock.getsockname()[1], flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    if sys.argv[1:2] == ["mcp"]:
        _run_mcp_server(sys.argv[2])
    elif sys.argv[1:2] == ["time-http"]:
        _run_time_server_http()
    else:
        print(json.dumps({"usage": "python -m tests.unit.runner_exec_servers mcp {json|sse|stdio} | time-http"}))
        sys.exit(2)
