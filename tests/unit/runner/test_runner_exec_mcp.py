"""MCP executor against a real MCP server: the ``mcp`` package's ``MCPServer`` over streamable HTTP, run by
uvicorn in a subprocess, answering with application/json or with a text/event-stream (docs/runner-executors.md
§MCP). A small aiohttp server covers what the SDK server does not send (an SSE reply preceded by a
notification, split across chunks with CRLF line ends)."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web

from cowboy_protocol.types.jobspec import McpJob
from cowboy_runner.executors import ExecutorError, McpConfig, McpExecutor, McpServerConfig
from tests.unit.runner_exec_servers import serve, start_mcp_server

pytest.importorskip("mcp")
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module", params=["json", "sse"])
def mcp_url(request: pytest.FixtureRequest) -> Iterator[str]:
    with start_mcp_server(request.param) as url:
        yield url


def _executor(url: str) -> McpExecutor:
    return McpExecutor(McpConfig(servers={"tools": McpServerConfig(url=url)}), max_output_bytes=256 * 1024)


async def test_tool_result_is_canonical_json_of_content(mcp_url: str) -> None:
    result = await _executor(mcp_url).execute(McpJob(server="tools", tool_name="add", arguments={"a": 2, "b": 40}),
                                              None, deadline_s=20)
    out = json.loads(result.output)
    assert out["content"] == [{"type": "text", "text": "42"}]
    assert out["structuredContent"] == {"result": 42}
    assert result.output == json.dumps(out, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert result.usage_units == 1
    assert result.detail["session"]  # the server's Mcp-Session-Id was carried


async def test_unicode_text_result(mcp_url: str) -> None:
    result = await _executor(mcp_url).execute(McpJob(server="tools", tool_name="greet", arguments={"name": "Ana"}),
                                              None, deadline_s=20)
    assert json.loads(result.output)["content"][0]["text"] == "héllo Ana"
    assert "héllo".encode() in result.output  # UTF-8, not \u escapes


async def test_tool_error_is_upstream_error(mcp_url: str) -> None:
    with pytest.raises(ExecutorError) as info:
        await _executor(mcp_url).execute(McpJob(server="tools", tool_name="fail", arguments={"reason": "boom"}),
                                         None, deadline_s=20)
    # isError: true in the tool result (the SDK hides the exception text behind "Error executing tool fail")
    assert info.value.code == "upstream_error" and info.value.detail["tool_error"] is True


async def test_unknown_tool_is_upstream_error(mcp_url: str) -> None:
    with pytest.raises(ExecutorError) as info:
        await _executor(mcp_url).execute(McpJob(server="tools", tool_name="nope", arguments={}), None, deadline_s=20)
    assert info.value.code == "upstream_error"


async def test_unknown_server_is_refused() -> None:
    ex = McpExecutor(McpConfig(servers={"tools": McpServerConfig(url="http://127.0.0.1:9/mcp")}),
                     max_output_bytes=1024)
    with pytest.raises(ExecutorError) as info:
        await ex.execute(McpJob(server="other", tool_name="add", arguments={}), None, deadline_s=5)
    assert info.value.code == "unknown_mcp_server"


async def test_non_object_arguments_refused() -> None:
    ex = McpExecutor(McpConfig(servers={"tools": McpServerConfig(url="http://127.0.0.1:9/mcp")}),
                     max_output_bytes=1024)
    with pytest.raises(ExecutorError) as info:
        await ex.execute(McpJob(server="tools", tool_name="add", arguments=[1, 2]), None, deadline_s=5)
    assert info.value.code == "bad_arguments"


# ----------------------------------------------------------------------------- hand-written SSE server


def _sse_app(seen: list[dict[str, Any]], *, hang: bool = False) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        msg = await request.json()
        seen.append({"msg": msg, "session": request.headers.get("Mcp-Session-Id"),
                     "version": request.headers.get("MCP-Protocol-Version"),
                     "accept": request.headers.get("Accept")})
        if "id" not in msg:
            return web.Response(status=202)
        if msg["method"] == "initialize":
            return web.json_response({"jsonrpc": "2.0", "id": msg["id"], "result": {
                "protocolVersion": "2025-03-26", "capabilities": {"tools": {}},
                "serverInfo": {"name": "hand", "version": "0"}}}, headers={"Mcp-Session-Id": "s-123"})
        if hang:
            await asyncio.sleep(30)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}})
        answer = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {
            "content": [{"type": "text", "text": "ok"}], "isError": False}})
        stream = f": comment\r\nevent: message\r\ndata: {note}\r\n\r\nid: 7\r\ndata: {answer}\r\n\r\n".encode()
        for i in range(0, len(stream), 7):  # small chunks: events and CRLFs split across reads
            await resp.write(stream[i:i + 7])
        return resp

    async def delete(request: web.Request) -> web.Response:
        seen.append({"delete": request.headers.get("Mcp-Session-Id")})
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/mcp", handle)
    app.router.add_delete("/mcp", delete)
    return app


async def test_sse_reply_after_notification_and_session_headers() -> None:
    seen: list[dict[str, Any]] = []
    async with serve(_sse_app(seen)) as base:
        one_shot = McpExecutor(McpConfig(servers={"tools": McpServerConfig(url=f"{base}/mcp", reuse_session=False)}),
                               max_output_bytes=256 * 1024)
        result = await one_shot.execute(McpJob(server="tools", tool_name="t", arguments={"k": 1.5}), None,
                                        deadline_s=10)
    assert result.output == b'{"content":[{"text":"ok","type":"text"}]}'
    methods = [s["msg"].get("method") for s in seen if "msg" in s]
    assert methods == ["initialize", "notifications/initialized", "tools/call"]
    assert seen[0]["session"] is None and seen[0]["version"] is None
    assert all(s["session"] == "s-123" and s["version"] == "2025-03-26" for s in seen[1:3])
    assert all(s["accept"] == "application/json, text/event-stream" for s in seen[:3])
    assert seen[2]["msg"]["params"] == {"name": "t", "arguments": {"k": 1.5}}
    assert seen[3] == {"delete": "s-123"}  # the session is ended


async def test_hung_server_times_out() -> None:
    seen: list[dict[str, Any]] = []
    async with serve(_sse_app(seen, hang=True)) as base:
        with pytest.raises(ExecutorError) as info:
            async with asyncio.timeout(10):
                await _executor(f"{base}/mcp").execute(McpJob(server="tools", tool_name="t", arguments={}),
                                                       None, deadline_s=0.5)
    assert info.value.code == "timeout"


async def test_job_timeout_seconds_lowers_the_deadline() -> None:
    seen: list[dict[str, Any]] = []
    async with serve(_sse_app(seen, hang=True)) as base:
        with pytest.raises(ExecutorError) as info:
            async with asyncio.timeout(10):
                await _executor(f"{base}/mcp").execute(
                    McpJob(server="tools", tool_name="t", arguments={}, timeout_seconds=1), None, deadline_s=60)
    assert info.value.code == "timeout"


# ----------------------------------------------------------------------------------------------- byte cap of the
# HTTP transport (the SDK reads a JSON reply whole: the runner's httpx2 transport counts it)


def _initialize_reply(request_id: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "big", "version": "0"}}}).encode()


async def test_declared_length_over_the_cap_is_refused_before_the_body_arrives() -> None:
    async def handle(request: web.Request) -> web.StreamResponse:
        msg = await request.json()
        resp = web.StreamResponse(headers={"Content-Type": "application/json", "Content-Length": str(10 << 20)})
        await resp.prepare(request)
        await resp.write(_initialize_reply(msg["id"])[:10])
        await asyncio.sleep(30)  # the rest never comes: only the declared length can end this before the deadline
        return resp

    app = web.Application()
    app.router.add_post("/mcp", handle)
    async with serve(app) as base:
        ex = McpExecutor(McpConfig(servers={"big": McpServerConfig(url=f"{base}/mcp")}, max_response_bytes=4096),
                         max_output_bytes=1024)
        with pytest.raises(ExecutorError) as info:
            await ex.execute(McpJob(server="big", tool_name="t", arguments={}), None, deadline_s=20)
    assert info.value.code == "response_too_large"


async def test_compressed_reply_is_refused_and_identity_is_asked_for() -> None:
    seen: list[str | None] = []

    async def handle(request: web.Request) -> web.Response:
        msg = await request.json()
        seen.append(request.headers.get("Accept-Encoding"))
        return web.Response(body=gzip.compress(_initialize_reply(msg["id"])),
                            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})

    app = web.Application()
    app.router.add_post("/mcp", handle)
    async with serve(app) as base:
        ex = McpExecutor(McpConfig(servers={"gz": McpServerConfig(url=f"{base}/mcp")}), max_output_bytes=1024)
        with pytest.raises(ExecutorError) as info:
            await ex.execute(McpJob(server="gz", tool_name="t", arguments={}), None, deadline_s=20)
    assert info.value.code == "upstream_error" and "compressed" in info.value.message
    assert seen == ["identity"]


async def test_request_ids_are_never_reused_within_a_kept_session() -> None:
    # MCP: an id must not be reused within a session; a late notifications/cancelled of an abandoned call would
    # otherwise cancel a later job's request of the same id
    seen: list[dict[str, Any]] = []
    async with serve(_sse_app(seen)) as base:
        ex = _executor(f"{base}/mcp")
        for _ in range(3):
            result = await ex.execute(McpJob(server="tools", tool_name="t", arguments={}), None, deadline_s=10)
        assert result.detail["session_reused"] is True
    ids = [s["msg"]["id"] for s in seen if "msg" in s and "id" in s["msg"]]
    assert [s["msg"]["method"] for s in seen if "msg" in s and "id" in s["msg"]] == ["initialize"] + ["tools/call"] * 3
    assert len(set(ids)) == len(ids) == 4
