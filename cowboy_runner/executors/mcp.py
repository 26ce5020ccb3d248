"""MCP job executor (job kind 0x02): one ``tools/call`` on a configured server, over the MCP streamable HTTP
transport (``mcp_http.py``) or the stdio transport (``mcp_stdio.py``), the protocol in both cases spoken by the
official SDK's ``mcp.ClientSession`` (``mcp_session.py``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from cowboy_protocol.types.jobspec import JobType, McpJob, ResourceBounds
from cowboy_runner.executors.base import (
    ExecutionResult,
    ExecutorError,
    canonical_json,
    check_output_size,
)
from cowboy_runner.executors.config import McpConfig, McpServerConfig
from cowboy_runner.executors.http import with_operator_limit
from cowboy_runner.executors.mcp_http import open_connection
from cowboy_runner.executors.mcp_session import upstream
from cowboy_runner.executors.mcp_stdio import StdioMcpServer

RENEW_STATUSES = (400, 404)
"""Statuses of a reused session's call after which a new session is started (404: the server forgot it)."""


async def probe_http(name: str, server: McpServerConfig, config: McpConfig) -> None:
    """``initialize`` on a streamable-HTTP server, then end that session; raises :class:`ExecutorError`."""
    async with open_connection(name, server, max_response_bytes=config.max_response_bytes,
                               end_session=True) as conn:
        await conn.initialize(config.protocol_version)


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
        self.request_ids: dict[str, Iterator[int]] = {}
        """Per HTTP server, the JSON-RPC request ids of every job's SDK session (never reused within a kept
        session)."""

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
        try:
            return await with_operator_limit(work, min(deadline_s, own), self.config.max_timeout_seconds,
                                             "executors.mcp.timeout_s")
        except ExecutorError as e:
            if e.code == "timeout" and job.server in self.stdio:
                # A server that let a call outlive its deadline is presumed stuck (a tool may ignore the SDK's
                # notifications/cancelled): its process group is killed; the next job starts a fresh one.
                await self.stdio[job.server].close()
            raise

    async def list_tools(self, name: str) -> list[dict[str, Any]]:
        """The tools server ``name`` offers (``tools/list``), over the same transport, session and byte cap as a
        job and within ``default_timeout_seconds``; the allow-list does not filter them (operator and tests)."""
        server = self.config.servers.get(name)
        if server is None:
            raise ExecutorError("unknown_mcp_server", f"MCP server {name[:100]!r} is not configured")
        work = self.stdio[name].list_tools() if server.command is not None else self._list_http(name, server)
        return await with_operator_limit(work, self.config.default_timeout_seconds, self.config.max_timeout_seconds,
                                         "executors.mcp.timeout_s")

    async def _list_http(self, name: str, server: McpServerConfig) -> list[dict[str, Any]]:
        async with open_connection(name, server, max_response_bytes=self.config.max_response_bytes,
                                   end_session=True) as conn:
            await conn.initialize(self.config.protocol_version)
            return await conn.list_tools()

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
        assert isinstance(job.arguments, dict)  # checked by execute
        cap = self.config.max_response_bytes
        cached = self.http_sessions.get(job.server) if server.reuse_session else None
        if cached is not None:
            try:
                async with open_connection(job.server, server, max_response_bytes=cap, session_id=cached[0],
                                           protocol_version=cached[1] or self.config.protocol_version,
                                           ids=self._ids(job.server)) as conn:
                    result = await conn.call_tool(job.tool_name, job.arguments)
                return self._shape(job, result, self._http_detail(job, cached[0], cached[1], reused=True))
            except ExecutorError as e:
                if e.detail.get("status") not in RENEW_STATUSES:
                    raise
                self.http_sessions.pop(job.server, None)
        async with open_connection(job.server, server, max_response_bytes=cap,
                                   end_session=not server.reuse_session, ids=self._ids(job.server)) as conn:
            version = await conn.initialize(self.config.protocol_version)
            if server.reuse_session and conn.session_id is not None:
                self.http_sessions[job.server] = (conn.session_id, version)
            result = await conn.call_tool(job.tool_name, job.arguments)
        return self._shape(job, result, self._http_detail(job, conn.session_id, version, reused=False))

    def _ids(self, server: str) -> Iterator[int]:
        return self.request_ids.setdefault(server, itertools.count(1))

    @staticmethod
    def _http_detail(job: McpJob, session: str | None, version: str | None, *, reused: bool) -> dict[str, object]:
        return {"server": job.server, "tool": job.tool_name, "transport": "http", "session": session,
                "session_reused": reused, "protocol_version": version}

    def _shape(self, job: McpJob, result: dict[str, Any], detail: dict[str, object]) -> ExecutionResult:
        content = result.get("content", [])
        if result.get("isError") is True:
            texts = [c.get("text", "") for c in content if isinstance(c, dict)] if isinstance(content, list) else []
            raise upstream(f"tool {job.tool_name!r} failed: {' '.join(map(str, texts))[:500]}", tool_error=True)
        shaped: dict[str, Any] = {"content": content}
        if "structuredContent" in result:
            shaped["structuredContent"] = result["structuredContent"]
        return ExecutionResult(check_output_size(canonical_json(shaped), self.max_output_bytes), 1, detail)
