"""MCP streamable HTTP transport through the official SDK: its ``StreamableHTTPTransport`` (POST per message,
``application/json`` or ``text/event-stream`` replies, ``Mcp-Session-Id``) under an ``mcp.ClientSession``, on an
httpx2 client whose transport enforces the runner's byte cap (docs/runner-executors.md §MCP).

The SDK's ``streamable_http_client()`` is that same transport in a context manager, but it has no way to start
from a known session id, which session reuse across jobs needs, and it opens a standing GET stream for
server-initiated messages that a one-call client never reads; :func:`open_connection` is that context manager
with both choices made.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import ssl
from collections.abc import AsyncIterator, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import StreamableHTTPTransport

# The SDK's transport reads its outgoing messages through these context-carrying streams (``last_context``).
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from cowboy_runner.executors.base import ExecutorError
from cowboy_runner.executors.config import McpServerConfig
from cowboy_runner.executors.mcp_session import adopt, call_tool, initialize, list_tools, new_session, upstream

_T = TypeVar("_T")

DELETE_TIMEOUT_S = 2.0
"""Bound of the best-effort ``DELETE`` that ends a one-job session."""


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context for every connection: building one (loading the CA bundle) costs tens of
    milliseconds of CPU, more than the rest of a call (bench/mcp_client.py)."""
    return ssl.create_default_context()


class ResponseTooLarge(httpx2.StreamError):
    """Raised into the SDK's reader when a response passes the cap (the SDK turns it into a failed call)."""


@dataclass
class ByteCap:
    """What the capped transport saw: the first limit tripped, and the last HTTP status (for session renewal)."""

    limit: int
    """Largest response body read per HTTP response, in bytes."""
    tripped: ExecutorError | None = None
    """``response_too_large`` once a response passed :attr:`limit` (``upstream_error`` for a compressed one)."""
    last_status: int | None = None
    """Status of the last response received."""
    event: asyncio.Event = field(default_factory=asyncio.Event)
    """Set with :attr:`tripped`: a call waiting for its reply stops at once."""

    def trip(self, message: str, code: str = "response_too_large") -> ResponseTooLarge:
        """Record the limit that tripped and return the exception that ends the SDK's read."""
        if self.tripped is None:
            self.tripped = ExecutorError(code, message)
            self.event.set()
        return ResponseTooLarge(message)


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, cap: ByteCap) -> None:
        self._inner = inner
        self._cap = cap

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = 0
        async for chunk in self._inner:
            total += len(chunk)
            if total > self._cap.limit:
                await self._inner.aclose()  # drop the connection instead of reading the rest
                raise self._cap.trip(f"MCP response over {self._cap.limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def new_pool() -> httpx2.AsyncHTTPTransport:
    """The connection pool of one connection (one job)."""
    # TCP_NODELAY: httpcore writes a request's head and body separately; with Nagle on, the body may wait for the
    # server's delayed ACK
    return httpx2.AsyncHTTPTransport(verify=_tls_context(), trust_env=False,
                                     socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])


class CappedTransport(httpx2.AsyncBaseTransport):
    """A connection pool with a byte cap on every response body, for one job. Responses are asked for
    uncompressed (``Accept-Encoding: identity``) and a compressed one is refused, so the bytes counted are the
    bytes the SDK parses (a small compressed body cannot expand past the cap)."""

    def __init__(self, cap: ByteCap, pool: httpx2.AsyncHTTPTransport) -> None:
        self.cap = cap
        """Limit and what was seen."""
        self._inner = pool

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send ``request``; the response body is counted as the SDK reads it."""
        if self.cap.tripped is not None:
            raise ResponseTooLarge(self.cap.tripped.message)  # no reconnect after an overflow
        request.headers["Accept-Encoding"] = "identity"
        response = await self._inner.handle_async_request(request)
        self.cap.last_status = response.status_code
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        declared = response.headers.get("Content-Length", "")
        if encoding not in ("identity", ""):
            await response.aclose()
            raise self.cap.trip(f"MCP response compressed ({encoding[:20]}) although identity was asked for: its "
                                f"size cannot be bounded before decoding", "upstream_error")
        if declared.isdigit() and int(declared) > self.cap.limit:
            await response.aclose()
            raise self.cap.trip(f"MCP response of {declared} bytes is over {self.cap.limit}")
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(response.status_code, headers=response.headers, request=request,
                               stream=_CappedStream(response.stream, self.cap), extensions=response.extensions)

    async def aclose(self) -> None:
        """Nothing: :func:`open_connection` closes the pool after the client."""


@dataclass
class Connection:
    """One MCP session over streamable HTTP: the SDK session, its transport and the byte cap."""

    session: ClientSession
    """The SDK session."""
    transport: StreamableHTTPTransport
    """The SDK's streamable HTTP transport (holds ``session_id``)."""
    cap: ByteCap
    """The response byte cap and the last status."""
    server: str
    """Server name, for messages."""

    @property
    def session_id(self) -> str | None:
        """The server's ``Mcp-Session-Id`` (from ``initialize``, or the reused one)."""
        return self.transport.session_id

    def failed(self) -> ExecutorError | None:
        """The cap's error, else None (then the SDK's error stands)."""
        if self.cap.tripped is not None:
            return ExecutorError(self.cap.tripped.code, self.cap.tripped.message)
        return None

    async def initialize(self, protocol_version: str) -> str:
        """``initialize`` + ``notifications/initialized``; returns the revision the server chose."""
        return await self._bounded(initialize(self.session, protocol_version, self.failed))

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """One ``tools/call``; a failure carries ``detail["status"]`` when the server answered 4xx/5xx."""
        return await self._bounded(call_tool(self.session, tool, arguments, self.failed))

    async def list_tools(self) -> list[dict[str, Any]]:
        """``tools/list``, every page."""
        return await self._bounded(list_tools(self.session, self.failed))

    async def _bounded(self, work: Coroutine[Any, Any, _T]) -> _T:
        """Await ``work`` but stop as soon as the cap trips (the SDK may otherwise try to resume a broken event
        stream before it gives up)."""
        task = asyncio.ensure_future(work)
        tripped = asyncio.ensure_future(self.cap.event.wait())
        try:
            await asyncio.wait((task, tripped), return_when=asyncio.FIRST_COMPLETED)
        finally:
            tripped.cancel()
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        capped = self.failed()
        if capped is not None:
            raise capped
        if task.cancelled():
            raise upstream(f"MCP server {self.server!r}: the call was abandoned")
        error = task.exception()
        if error is None:
            return task.result()
        if isinstance(error, ExecutorError) and error.code == "upstream_error" and self.cap.last_status is not None \
                and self.cap.last_status >= 400:
            error.detail.setdefault("status", self.cap.last_status)
        raise error


@contextlib.asynccontextmanager
async def open_connection(name: str, server: McpServerConfig, *, max_response_bytes: int,
                          session_id: str | None = None, protocol_version: str | None = None,
                          end_session: bool = False,
                          ids: Iterator[int] | None = None) -> AsyncIterator[Connection]:
    """An SDK session on ``server.url``: new (``session_id`` None: call :meth:`Connection.initialize`), or the
    kept ``session_id`` at ``protocol_version``. ``end_session`` sends the ``DELETE`` on a normal exit (never
    after a deadline or cancellation). ``ids``: the kept session's request-id counter. Transport failures
    (refused connection…) are ``upstream_error``. Each connection has its own pool, closed with it (as the
    hand-written client had one aiohttp session a job)."""
    assert server.url is not None, "open_connection is the streamable-HTTP transport"
    cap = ByteCap(max_response_bytes)
    transport = StreamableHTTPTransport(server.url, max_sse_event_size=max_response_bytes)
    transport.session_id = session_id
    connections = new_pool()
    try:
        async with httpx2.AsyncClient(transport=CappedTransport(cap, connections), headers=dict(server.headers),
                                      timeout=httpx2.Timeout(None), trust_env=False) as client:
            read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
            write_stream, write_reader = create_context_streams[SessionMessage](0)
            async with read_writer, read_stream, write_stream, write_reader, anyio.create_task_group() as tg:
                tg.start_soon(transport.post_writer, client, write_reader, read_writer, write_stream,
                              lambda: None, tg)  # no standing GET stream: nothing would read it
                try:
                    async with new_session(read_stream, write_stream, ids) as session:
                        if protocol_version is not None:
                            adopt(session, protocol_version)
                        yield Connection(session, transport, cap, name)
                    if end_session and transport.session_id is not None:
                        with anyio.move_on_after(DELETE_TIMEOUT_S):
                            await transport.terminate_session(client)
                finally:
                    tg.cancel_scope.cancel()
    except Exception as e:
        mapped = ExecutorError(cap.tripped.code, cap.tripped.message) if cap.tripped is not None else _typed(name, e)
        if mapped is None:
            raise
        raise mapped from None
    finally:
        await connections.aclose()


def _typed(name: str, error: BaseException) -> ExecutorError | None:
    """The executor error inside what the SDK's task groups raised (an ExceptionGroup of the transport task's
    failure), or None when there is none."""
    if isinstance(error, ExecutorError):
        return error
    if isinstance(error, httpx2.HTTPError):
        return upstream(f"MCP server {name!r}: {type(error).__name__}: {str(error)[:200]}")
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _typed(name, inner)
            if found is not None:
                return found
    return None
