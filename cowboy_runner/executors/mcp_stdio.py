"""MCP stdio transport: the server is a local program; JSON-RPC messages are single lines of UTF-8 JSON on its
stdin and stdout (stderr is its log). The protocol runs in the official SDK's ``mcp.ClientSession``; this module
is the transport under it, in place of the SDK's ``mcp.client.stdio.stdio_client`` (docs/runner-executors.md
§MCP says why: that client buffers a line of any length, and passes the runner's ``HOME``/``USER``/``SHELL`` to
the program).

One :class:`StdioMcpServer` per configured server lives as long as the runner: the program is started and
``initialize``d by the first job and its session reused by every later job (the SDK matches concurrent calls to
their replies by JSON-RPC id). When the program exits or breaks the protocol, every pending call fails with a
typed error and the next job starts it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession
from mcp.shared.message import SessionMessage
from pydantic import ValidationError as PydanticValidationError

from cowboy_protocol.jobs.json_strict import parse_json
from cowboy_protocol.types.validation_errors import ValidationError
from cowboy_runner.executors.base import ExecutorError
from cowboy_runner.executors.mcp_session import call_tool, initialize, list_tools, new_session, upstream

KILL_REAP_TIMEOUT_S = 2.0
"""Longest :meth:`StdioMcpServer.close` waits for a killed server's pipes to close and its exit to be seen."""
STDIO_PATH = "/usr/local/bin:/usr/bin:/bin"
"""``PATH`` of a stdio server program (its only variable besides its configured ``env``)."""


@dataclass
class _Running:
    """One started server process and the SDK session over its pipes."""

    proc: asyncio.subprocess.Process
    """The program (leader of its own process group)."""
    host: asyncio.Task[None] | None = None
    """The task that owns the SDK session's task group (sessions outlive the job that started them)."""
    session: ClientSession | None = None
    """The SDK session, once the host task entered it."""
    failure: ExecutorError | None = None
    """Why the exchange ended, when this transport ended it (oversize or non-JSON line, closed input)."""

    def failed(self) -> ExecutorError | None:
        """The error a call that lost its reply reports (the SDK itself only says "connection closed")."""
        if self.failure is not None:
            return ExecutorError(self.failure.code, self.failure.message, detail=dict(self.failure.detail))
        return None

    def kill(self) -> None:
        """SIGKILL the whole process group: a launcher (``uvx``, ``npx``) and the server it started."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()


@dataclass
class StdioMcpServer:
    """A long-lived stdio MCP server process shared by all jobs on that server."""

    name: str
    """Server name (the jobs' ``server``)."""
    command: tuple[str, ...]
    """Program and arguments."""
    env: dict[str, str]
    """The program's whole environment (``PATH`` plus the configured ``env``)."""
    protocol_version: str
    """Offered protocol revision; replaced by the server's choice after ``initialize``."""
    max_response_bytes: int
    """Longest line read from the server (a longer one ends the process: ``response_too_large``)."""
    starts: int = 0
    """Processes started so far (1 while one session serves every job)."""
    _running: _Running | None = field(default=None, repr=False)
    _start_lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    def __post_init__(self) -> None:
        self.env = {"PATH": STDIO_PATH, **self.env}

    @property
    def running(self) -> bool:
        """Whether the process is up and its session open."""
        r = self._running
        return r is not None and r.proc.returncode is None and r.failure is None and r.host is not None \
            and not r.host.done() and r.session is not None

    @property
    def pid(self) -> int | None:
        """Process id of the running server program (None before the first job and after it ended)."""
        return self._running.proc.pid if self._running is not None else None

    @property
    def _proc(self) -> asyncio.subprocess.Process | None:
        return self._running.proc if self._running is not None else None

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """``tools/call`` on the shared session (started and initialized first when needed)."""
        running = await self._ensure_started()
        assert running.session is not None
        return await call_tool(running.session, tool, arguments, running.failed)

    async def list_tools(self) -> list[dict[str, Any]]:
        """``tools/list`` on the shared session (started and initialized first when needed)."""
        running = await self._ensure_started()
        assert running.session is not None
        return await list_tools(running.session, running.failed)

    async def _ensure_started(self) -> _Running:
        async with self._start_lock:
            if self.running:
                assert self._running is not None
                return self._running
            await self.close()
            try:
                proc = await asyncio.create_subprocess_exec(
                    *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.DEVNULL, env=self.env, limit=self.max_response_bytes,
                    start_new_session=True)
            except OSError as e:
                raise upstream(f"MCP server {self.name!r}: cannot start {self.command[0]!r}: {e}") from None
            self.starts += 1
            running = self._running = _Running(proc)
            ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
            running.host = asyncio.get_running_loop().create_task(self._host(running, ready))
            try:
                session = await ready
                self.protocol_version = await initialize(session, self.protocol_version, running.failed)
            except BaseException:
                await self.close()
                raise
            return running

    async def _host(self, running: _Running, ready: asyncio.Future[ClientSession]) -> None:
        """Run the two pipe pumps and the SDK session until the process ends or :meth:`close` cancels this."""
        read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
        ended = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._read_stdout, running, read_writer, ended)
                tg.start_soon(self._write_stdin, running, write_reader)
                async with new_session(read_stream, write_stream) as session:
                    running.session = session
                    ready.set_result(session)
                    await ended.wait()
                tg.cancel_scope.cancel()
        finally:
            if not ready.done():
                ready.set_exception(upstream(f"MCP server {self.name!r} exited"))
            running.kill()
            for stream in (read_writer, read_stream, write_stream, write_reader):
                stream.close()

    async def _read_stdout(self, running: _Running, out: anyio.abc.ObjectSendStream[SessionMessage | Exception],
                           ended: anyio.Event) -> None:
        """Each line of stdout to the session; an oversize line, a non-JSON line or EOF ends the session."""
        stdout = running.proc.stdout
        assert stdout is not None
        try:
            async with out:
                while True:
                    try:
                        line = await stdout.readline()
                    except ValueError:  # asyncio's LimitOverrunError surfaces as ValueError from readline
                        running.failure = ExecutorError("response_too_large", f"MCP server {self.name!r} sent a "
                                                        f"line over {self.max_response_bytes} bytes")
                        break
                    if not line:
                        running.failure = upstream(f"MCP server {self.name!r} exited")
                        break
                    if line.strip():
                        message = self._parse(line)
                        if isinstance(message, ExecutorError):
                            running.failure = message
                            break
                        await out.send(SessionMessage(message))
        finally:
            running.kill()  # EOF of the session is the end of the process: the next job starts a new one
            ended.set()
            await _drain(running.proc)

    def _parse(self, line: bytes) -> types.JSONRPCMessage | ExecutorError:
        """Strict JSON (as the verifier parses it), then the SDK's JSON-RPC message model."""
        try:
            return types.jsonrpc_message_adapter.validate_python(parse_json(line), by_name=False)
        except ValidationError as e:
            return upstream(f"MCP server {self.name!r} wrote a line that is not strict JSON: {e.message}")
        except PydanticValidationError as e:
            return upstream(f"MCP server {self.name!r} wrote a line that is not a JSON-RPC message: "
                            f"{str(e)[:200]}")

    async def _write_stdin(self, running: _Running, messages: anyio.abc.ObjectReceiveStream[SessionMessage]) -> None:
        stdin = running.proc.stdin
        assert stdin is not None
        async with messages:
            async for message in messages:
                line = message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
                try:
                    stdin.write(line)
                    await stdin.drain()
                except (BrokenPipeError, ConnectionResetError) as e:
                    running.failure = upstream(f"MCP server {self.name!r} closed its input: {e}")
                    running.kill()  # its stdout then ends, and with it the session
                    return

    async def close(self) -> None:
        """Stop the process and its session (the next call starts a new one); pending calls fail. Bounded: a
        descendant that left the process group and still holds the pipes is abandoned after
        ``KILL_REAP_TIMEOUT_S``, its pipes closed on the runner's side."""
        running, self._running = self._running, None
        if running is None:
            return
        running.kill()
        try:
            async with asyncio.timeout(KILL_REAP_TIMEOUT_S):
                if running.host is not None:
                    running.host.cancel()
                    await asyncio.gather(running.host, return_exceptions=True)
                await _drain(running.proc)
                await running.proc.wait()
        except TimeoutError:
            transport = getattr(running.proc, "_transport", None)  # asyncio has no public way to drop the pipes
            if transport is not None:
                transport.close()


async def _drain(proc: asyncio.subprocess.Process) -> None:
    """Read a killed process's stdout to EOF: asyncio's ``wait()`` returns only once every pipe is closed, and a
    reader paused on a full buffer would never see that."""
    if proc.stdout is None:
        return
    with contextlib.suppress(OSError, ValueError):
        while await proc.stdout.read(1 << 16):
            pass
