"""What both MCP transports share: the official SDK's ``mcp.ClientSession`` over a transport's stream pair, the
runner's ``initialize`` (offering ``McpConfig.protocol_version``), one ``tools/call``, and the mapping of every
SDK failure to the executor's typed errors (docs/runner-executors.md §MCP).

The SDK owns the protocol: JSON-RPC ids and reply matching, the ``MCP-Protocol-Version`` stamp, validation of
each result against the negotiated revision's schema, answers to server requests (this client offers no
capabilities), and the ``notifications/cancelled`` it sends for a call abandoned by a deadline or a cancellation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import mcp_types as types
from mcp import ClientSession
from mcp.client._transport import ReadStream, WriteStream
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.message import SessionMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import RootModel, ValidationError

from cowboy_runner.executors.base import ExecutorError

CLIENT_INFO = types.Implementation(name="cowboy-runner", version="1")
"""``clientInfo`` sent in ``initialize``."""

class RawResult(RootModel[dict[str, Any]]):
    """A result kept as the server's JSON object (after the SDK's schema check), so that the job output is the
    server's own content re-encoded canonically, not a re-serialisation of SDK models."""

Failure = Callable[[], ExecutorError | None]
"""Asks the transport whether one of its limits ended the exchange (then that error replaces the SDK's)."""


def upstream(message: str, **detail: object) -> ExecutorError:
    """The executor's ``upstream_error``."""
    return ExecutorError("upstream_error", message, detail=dict(detail))


class _SharedIds(JSONRPCDispatcher):
    """The SDK's JSON-RPC dispatcher drawing request ids from a counter that outlives it: several SDK sessions
    in a row (one per job) that speak for one kept MCP session never reuse an id there, as MCP requires. Reused
    ids are not harmless: the ``notifications/cancelled`` of an abandoned call would cancel a later job's
    request of the same id."""

    def __init__(self, read: ReadStream[SessionMessage | Exception], write: WriteStream[SessionMessage],
                 ids: Iterator[int]) -> None:
        super().__init__(read, write)
        self._ids = ids

    def _allocate_id(self) -> int:
        return next(self._ids)


def new_session(read: ReadStream[SessionMessage | Exception], write: WriteStream[SessionMessage],
                ids: Iterator[int] | None = None) -> ClientSession:
    """An SDK client session with no client capabilities (sampling, roots and elicitation requests from the
    server are answered with an error by the SDK); ``ids``: the request-id counter of the MCP session it speaks
    for (None: its own)."""
    if ids is None:
        return ClientSession(read, write, client_info=CLIENT_INFO)
    return ClientSession(client_info=CLIENT_INFO, dispatcher=_SharedIds(read, write, ids))


async def request(session: ClientSession, req: types.ClientRequest, failure: Failure) -> dict[str, Any]:
    """Send ``req`` and return its result object; every failure is an :class:`ExecutorError`."""
    method = req.method
    try:
        return (await session.send_request(req, RawResult)).root
    except MCPError as e:
        raise failure() or upstream(f"MCP {method}: error {e.code}: {e.message[:300]}", rpc_code=e.code) from None
    except ValidationError as e:
        raise failure() or upstream(f"MCP {method}: the result does not match the protocol schema: "
                                    f"{str(e)[:300]}") from None


async def initialize(session: ClientSession, protocol_version: str, failure: Failure) -> str:
    """``initialize`` offering ``protocol_version`` (the SDK's own ``initialize()`` always offers its newest
    revision), then ``notifications/initialized``; returns the revision the server chose."""
    params = types.InitializeRequestParams(protocol_version=protocol_version, capabilities=types.ClientCapabilities(),
                                           client_info=CLIENT_INFO)
    raw = await request(session, types.InitializeRequest(params=params), failure)
    version = raw.get("protocolVersion")
    if not isinstance(version, str) or version not in HANDSHAKE_PROTOCOL_VERSIONS:
        raise upstream(f"MCP initialize: the server chose protocol version {str(version)[:40]!r}, which this "
                       f"client does not speak")
    adopt(session, version)
    await session.send_notification(types.InitializedNotification())
    return version


def adopt(session: ClientSession, version: str) -> None:
    """Install a negotiated revision without a handshake (a reused HTTP session, or after ``initialize``): the
    SDK then stamps ``MCP-Protocol-Version`` on every message and validates results against that revision."""
    session.adopt(types.InitializeResult.model_construct(
        protocol_version=version, capabilities=types.ServerCapabilities(),
        server_info=types.Implementation(name="", version="")))


async def call_tool(session: ClientSession, tool: str, arguments: dict[str, Any], failure: Failure) -> dict[str, Any]:
    """One ``tools/call``. Sent as a plain request rather than ``ClientSession.call_tool``, which lists the
    server's tools first to check structured output against their schemas: one more round trip per session,
    for a check the job's verification mode does on chain anyway."""
    req = types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=arguments))
    return await request(session, req, failure)


MAX_TOOL_PAGES = 100
"""Most ``tools/list`` pages read (a server whose cursor never ends cannot hold a caller forever)."""


async def list_tools(session: ClientSession, failure: Failure) -> list[dict[str, Any]]:
    """Every tool the server lists (``tools/list``, following ``nextCursor``), as the server's JSON objects."""
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = await request(session, types.ListToolsRequest(params=params), failure)
        tools.extend(t for t in page.get("tools", []) if isinstance(t, dict))
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str):
            return tools
    raise upstream(f"MCP tools/list: more than {MAX_TOOL_PAGES} pages")
