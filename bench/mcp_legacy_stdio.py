"""The runner's hand-written MCP stdio client before issue 36 (commit b6fd9f6, verbatim): the baseline of
``bench/mcp_client.py``. Not used by the runner.

MCP stdio transport (MCP 2025-06-18 "Transports" → stdio): the server is a local program; JSON-RPC messages are
single lines of UTF-8 JSON on its stdin and stdout (stderr is its log).

One :class:`StdioMcpServer` per configured server lives as long as the runner: the program is started and
``initialize``d by the first job and its session reused by every later job (calls from concurrent jobs are
matched to their replies by JSON-RPC id). When the program exits or breaks the protocol, every pending call fails
with ``upstream_error`` and the next job starts it again. Requests the server sends to the client are answered
"method not found" (the runner offers no client capabilities); notifications are ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from cowboy_protocol.jobs.json_strict import parse_json
from cowboy_protocol.types.validation_errors import ValidationError
from cowboy_runner.executors.base import ExecutorError

CLIENT_INFO = {"name": "cowboy-runner", "version": "1"}
"""``clientInfo`` sent in ``initialize``."""
STDIO_PATH = "/usr/local/bin:/usr/bin:/bin"
"""``PATH`` of a stdio server program (its only variable besides its configured ``env``)."""


def _upstream(message: str, **detail: object) -> ExecutorError:
    return ExecutorError("upstream_error", message, detail=dict(detail))


class StdioMcpServer:
    """A long-lived stdio MCP server process shared by all jobs on that server."""

    def __init__(self, name: str, command: tuple[str, ...], *, env: dict[str, str], protocol_version: str,
                 max_response_bytes: int) -> None:
        self.name = name
        """Server name (the jobs' ``server``)."""
        self.command = command
        """Program and arguments."""
        self.env = {"PATH": STDIO_PATH, **env}
        """The program's whole environment."""
        self.protocol_version = protocol_version
        """Offered protocol revision; replaced by the server's choice after ``initialize``."""
        self.max_response_bytes = max_response_bytes
        """Longest line read from the server (a longer one ends the process: ``response_too_large``)."""
        self.starts = 0
        """Processes started so far (1 while one session serves every job)."""
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._next_id = 0
        self._start_lock = asyncio.Lock()
        self._write_lock = asyncio.Lock()

    @property
    def running(self) -> bool:
        """Whether the process is up and initialized."""
        return self._proc is not None and self._proc.returncode is None and self._reader is not None \
            and not self._reader.done()

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """``tools/call`` on the shared session (started and initialized first when needed)."""
        await self._ensure_started()
        return await self._request("tools/call", {"name": tool, "arguments": arguments})

    async def _ensure_started(self) -> None:
        async with self._start_lock:
            if self.running:
                return
            await self.close()
            try:
                self._proc = await asyncio.create_subprocess_exec(
                    *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.DEVNULL, env=self.env, limit=self.max_response_bytes)
            except OSError as e:
                raise _upstream(f"MCP server {self.name!r}: cannot start {self.command[0]!r}: {e}") from None
            self.starts += 1
            self._reader = asyncio.get_running_loop().create_task(self._read_loop(self._proc))
            try:
                result = await self._request("initialize", {"protocolVersion": self.protocol_version,
                                                            "capabilities": {}, "clientInfo": CLIENT_INFO})
                version = result.get("protocolVersion")
                if isinstance(version, str):
                    self.protocol_version = version
                await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            except BaseException:
                await self.close()
                raise

    async def _send(self, message: dict[str, Any]) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise _upstream(f"MCP server {self.name!r} is not running")
        line = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        async with self._write_lock:
            try:
                proc.stdin.write(line)
                await proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError) as e:
                raise _upstream(f"MCP server {self.name!r} closed its input: {e}") from None

    async def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next_id += 1
        rid = self._next_id
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        try:
            await self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            message = await future
        finally:
            self._pending.pop(rid, None)
        if "error" in message:
            err = message["error"] if isinstance(message["error"], dict) else {}
            raise _upstream(f"MCP {method}: error {err.get('code')}: {str(err.get('message'))[:300]}",
                            rpc_code=err.get("code"))
        result = message.get("result")
        if not isinstance(result, dict):
            raise _upstream(f"MCP {method}: result is not an object")
        return result

    async def _read_loop(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        failure: ExecutorError = _upstream(f"MCP server {self.name!r} exited")
        try:
            while True:
                try:
                    line = await proc.stdout.readline()
                except ValueError:  # asyncio's LimitOverrunError surfaces as ValueError from readline
                    failure = ExecutorError("response_too_large", f"MCP server {self.name!r} sent a line over "
                                                                  f"{self.max_response_bytes} bytes")
                    break
                if not line:
                    break
                if line.strip():
                    await self._dispatch(line)
        except ExecutorError as e:
            failure = e
        finally:
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ExecutorError(failure.code, failure.message, detail=dict(failure.detail)))
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        await _drain(proc)

    async def _dispatch(self, line: bytes) -> None:
        try:
            message = parse_json(line)
        except ValidationError as e:
            raise _upstream(f"MCP server {self.name!r} wrote a line that is not strict JSON: {e.message}") from None
        for m in message if isinstance(message, list) else [message]:
            if not isinstance(m, dict):
                continue
            if "method" in m and "id" in m:  # a request from the server: this client offers no capabilities
                await self._send({"jsonrpc": "2.0", "id": m["id"],
                                  "error": {"code": -32601, "message": "method not found"}})
            elif "id" in m and ("result" in m or "error" in m):
                future = self._pending.get(m["id"]) if isinstance(m["id"], int) else None
                if future is not None and not future.done():
                    future.set_result(m)

    async def close(self) -> None:
        """Stop the process (the next call starts a new one)."""
        proc, reader = self._proc, self._reader
        self._proc, self._reader = None, None
        if reader is not None:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await _drain(proc)
            await proc.wait()


async def _drain(proc: asyncio.subprocess.Process) -> None:
    """Read a killed process's stdout to EOF: asyncio's ``wait()`` returns only once every pipe is closed, and a
    reader paused on a full buffer would never see that."""
    if proc.stdout is None:
        return
    with contextlib.suppress(OSError, ValueError):
        while await proc.stdout.read(1 << 16):
            pass
