"""The runner's hand-written MCP executor before issue 36 (commit b6fd9f6, verbatim but for the import of its
stdio half from ``bench/mcp_legacy_stdio.py``): the baseline of ``bench/mcp_client.py``. Not used by the runner.

MCP job executor (job kind 0x02): one ``tools/call`` on a configured server over the MCP streamable HTTP
transport (JSON-RPC 2.0; replies as ``application/json`` or a ``text/event-stream``; ``Mcp-Session-Id`` kept)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from bench.mcp_legacy_stdio import StdioMcpServer
from cowboy_protocol.jobs.json_strict import parse_json
from cowboy_protocol.types.jobspec import JobType, McpJob, ResourceBounds
from cowboy_protocol.types.validation_errors import ValidationError
from cowboy_runner.executors.base import (
    ExecutionResult,
    ExecutorError,
    canonical_json,
    check_output_size,
)
from cowboy_runner.executors.config import McpConfig, McpServerConfig
from cowboy_runner.executors.http import read_limited, with_operator_limit

CLIENT_INFO = {"name": "cowboy-runner", "version": "1"}
"""``clientInfo`` sent in ``initialize``."""
SESSION_HEADER = "Mcp-Session-Id"
"""Session header of the streamable HTTP transport."""
VERSION_HEADER = "MCP-Protocol-Version"
"""Negotiated protocol version header, sent on every request after ``initialize``."""


def _upstream(message: str, **detail: object) -> ExecutorError:
    return ExecutorError("upstream_error", message, detail=dict(detail))


class McpClient:
    """A minimal streamable-HTTP MCP client for one session (one job)."""

    def __init__(self, http: aiohttp.ClientSession, server: McpServerConfig, *, max_response_bytes: int) -> None:
        self._http = http
        self._server = server
        self._cap = max_response_bytes
        self._next_id = 0
        self.session_id: str | None = None
        """Server-assigned session id, once ``initialize`` returned one."""
        self.protocol_version: str | None = None
        """Protocol revision the server chose in ``initialize``."""

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   **self._server.headers}
        if self.session_id is not None:
            headers[SESSION_HEADER] = self.session_id
        if self.protocol_version is not None:
            headers[VERSION_HEADER] = self.protocol_version
        return headers

    async def initialize(self, protocol_version: str) -> dict[str, Any]:
        """``initialize`` then ``notifications/initialized``; returns the server's initialize result."""
        result = await self.request("initialize", {"protocolVersion": protocol_version, "capabilities": {},
                                                   "clientInfo": CLIENT_INFO})
        version = result.get("protocolVersion")
        self.protocol_version = version if isinstance(version, str) else protocol_version
        await self.notify("notifications/initialized")
        return result

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one JSON-RPC request and return its ``result`` object; errors raise ``upstream_error``."""
        self._next_id += 1
        rid = self._next_id
        payload = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()
        assert self._server.url is not None, "McpClient is the streamable-HTTP transport"
        async with self._http.post(self._server.url, data=payload, headers=self._headers()) as resp:
            sid = resp.headers.get(SESSION_HEADER)
            if sid is not None and self.session_id is None:
                self.session_id = sid
            if not 200 <= resp.status < 300:
                body = await read_limited(resp, self._cap)
                raise _upstream(f"MCP {method}: HTTP {resp.status}: {body[:300]!r}", status=resp.status)
            if resp.content_type == "application/json":
                message = self._find(self._parse(await read_limited(resp, self._cap)), rid)
            elif resp.content_type == "text/event-stream":
                message = await self._read_sse(resp, rid)
            else:
                raise _upstream(f"MCP {method}: unexpected content type {resp.content_type!r}")
        if message is None:
            raise _upstream(f"MCP {method}: no response with id {rid}")
        if "error" in message:
            err = message["error"] if isinstance(message["error"], dict) else {}
            raise _upstream(f"MCP {method}: error {err.get('code')}: {str(err.get('message'))[:300]}",
                            rpc_code=err.get("code"))
        result = message.get("result")
        if not isinstance(result, dict):
            raise _upstream(f"MCP {method}: result is not an object")
        return result

    async def notify(self, method: str) -> None:
        """Send a JSON-RPC notification (the server answers 202 Accepted)."""
        payload = json.dumps({"jsonrpc": "2.0", "method": method}).encode()
        assert self._server.url is not None
        async with self._http.post(self._server.url, data=payload, headers=self._headers()) as resp:
            if not 200 <= resp.status < 300:
                raise _upstream(f"MCP {method}: HTTP {resp.status}", status=resp.status)

    async def close(self) -> None:
        """End the session (HTTP DELETE, best effort: a server may answer 405)."""
        if self.session_id is None or self._server.url is None:
            return
        try:
            async with asyncio.timeout(2), self._http.delete(self._server.url, headers=self._headers()):
                pass
        except (aiohttp.ClientError, TimeoutError):
            pass

    @staticmethod
    def _parse(raw: bytes | str) -> Any:
        try:
            return parse_json(raw)
        except ValidationError as e:
            raise _upstream(f"MCP reply is not strict JSON: {e.message}") from None

    @staticmethod
    def _find(value: Any, rid: int) -> dict[str, Any] | None:
        for m in value if isinstance(value, list) else [value]:
            if isinstance(m, dict) and m.get("id") == rid and ("result" in m or "error" in m):
                return m
        return None

    async def _read_sse(self, resp: aiohttp.ClientResponse, rid: int) -> dict[str, Any] | None:
        """Read events until the response to ``rid`` arrives (notifications and server requests are skipped)."""
        buffer, total = b"", 0
        data_lines: list[bytes] = []
        async for chunk in resp.content.iter_any():
            total += len(chunk)
            if total > self._cap:
                resp.close()
                raise ExecutorError("response_too_large", f"MCP event stream over {self._cap} bytes")
            buffer += chunk
            hold = b"\r" if buffer.endswith(b"\r") else b""  # a CRLF may be split across chunks
            if hold:
                buffer = buffer[:-1]
            *lines, buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
            buffer += hold
            for line in lines:
                if line == b"":  # a blank line dispatches the event
                    if data_lines:
                        found = self._find(self._parse(b"\n".join(data_lines)), rid)
                        if found is not None:
                            return found
                    data_lines = []
                elif line.startswith(b"data:"):
                    value = line[5:]
                    data_lines.append(value[1:] if value.startswith(b" ") else value)
                # other fields (event, id, retry) and comments do not matter for a single call
        if data_lines:  # a stream may end without the final blank line
            return self._find(self._parse(b"\n".join(data_lines)), rid)
        return None


class McpExecutor:
    """Executes :class:`~cowboy_protocol.types.jobspec.McpJob`; see docs/runner-executors.md §MCP."""

    def __init__(self, config: McpConfig, *, max_output_bytes: int) -> None:
        self.config = config
        """Settings."""
        self.max_output_bytes = max_output_bytes
        """Largest result returned."""
        self.stdio: dict[str, StdioMcpServer] = {
            name: StdioMcpServer(name, server.command, env=dict(server.env), protocol_version=config.protocol_version,
                                 max_response_bytes=config.max_response_bytes)
            for name, server in config.servers.items() if server.command is not None}
        """The long-lived stdio server processes, by server name (started by their first job)."""
        self.http_sessions: dict[str, tuple[str, str | None]] = {}
        """Reused streamable-HTTP sessions by server name: (Mcp-Session-Id, negotiated protocol version)."""

    async def execute(self, job: JobType, bounds: ResourceBounds | None, *, deadline_s: float) -> ExecutionResult:
        """Call the tool within ``deadline_s`` seconds, the job's ``timeout_seconds`` (else
        ``default_timeout_seconds``) and the operator's ``max_timeout_seconds``, whichever is shortest."""
        if not isinstance(job, McpJob):
            raise ExecutorError("unsupported_job_type", f"MCP executor cannot run {type(job).__name__}")
        server = self.config.servers.get(job.server)
        if server is None:
            raise ExecutorError("unknown_mcp_server", f"MCP server {job.server[:100]!r} is not configured")
        if server.tools is not None and job.tool_name not in server.tools:
            raise ExecutorError("tool_not_allowed", f"tool {job.tool_name[:100]!r} is not in the allow-list of MCP "
                                                    f"server {job.server!r}", detail={"tool": job.tool_name[:100]})
        if not isinstance(job.arguments, dict):
            raise ExecutorError("bad_arguments", "MCP tool arguments must be a JSON object")
        own = job.timeout_seconds if job.timeout_seconds is not None else self.config.default_timeout_seconds
        work = self._run_stdio(job) if server.command is not None else self._run(job, server)
        return await with_operator_limit(work, min(deadline_s, own), self.config.max_timeout_seconds,
                                         "executors.mcp.timeout_s")

    async def aclose(self) -> None:
        """Stop the stdio server processes (HTTP sessions are left to expire on their servers)."""
        for server in self.stdio.values():
            await server.close()

    async def _run_stdio(self, job: McpJob) -> ExecutionResult:
        stdio = self.stdio[job.server]
        assert isinstance(job.arguments, dict)  # checked by execute
        result = await stdio.call_tool(job.tool_name, job.arguments)
        detail: dict[str, object] = {"server": job.server, "tool": job.tool_name, "transport": "stdio",
                                     "process_starts": stdio.starts, "protocol_version": stdio.protocol_version}
        return self._shape(job, result, detail)

    async def _run(self, job: McpJob, server: McpServerConfig) -> ExecutionResult:
        reused = False
        try:
            async with aiohttp.ClientSession() as http:
                client = McpClient(http, server, max_response_bytes=self.config.max_response_bytes)
                try:
                    cached = self.http_sessions.get(job.server) if server.reuse_session else None
                    result = None
                    if cached is not None:
                        client.session_id, client.protocol_version = cached
                        try:
                            result = await client.request("tools/call", {"name": job.tool_name,
                                                                         "arguments": job.arguments})
                            reused = True
                        except ExecutorError as e:
                            if e.detail.get("status") not in (400, 404):  # 404: the server forgot the session
                                raise
                            self.http_sessions.pop(job.server, None)
                            client.session_id, client.protocol_version = None, None
                    if result is None:
                        await client.initialize(self.config.protocol_version)
                        if server.reuse_session and client.session_id is not None:
                            self.http_sessions[job.server] = (client.session_id, client.protocol_version)
                        result = await client.request("tools/call", {"name": job.tool_name,
                                                                     "arguments": job.arguments})
                finally:
                    task = asyncio.current_task()
                    if not server.reuse_session and (task is None or not task.cancelling()):
                        await client.close()  # no polite goodbye once the deadline has hit
        except aiohttp.ClientError as e:
            raise _upstream(f"MCP server {job.server!r}: {e}") from None
        detail: dict[str, object] = {"server": job.server, "tool": job.tool_name, "session": client.session_id,
                                     "session_reused": reused, "protocol_version": client.protocol_version}
        return self._shape(job, result, detail)

    def _shape(self, job: McpJob, result: dict[str, Any], detail: dict[str, object]) -> ExecutionResult:
        content = result.get("content", [])
        if result.get("isError") is True:
            texts = [c.get("text", "") for c in content if isinstance(c, dict)] if isinstance(content, list) else []
            raise _upstream(f"tool {job.tool_name!r} failed: {' '.join(map(str, texts))[:500]}", tool_error=True)
        shaped: dict[str, Any] = {"content": content}
        if "structuredContent" in result:
            shaped["structuredContent"] = result["structuredContent"]
        return ExecutionResult(check_output_size(canonical_json(shaped), self.max_output_bytes), 1, detail)
