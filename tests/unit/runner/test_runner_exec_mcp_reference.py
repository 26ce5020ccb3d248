"""The MCP executor against an unmodified reference server from PyPI (issue 36 §4): ``mcp-server-time``, over stdio
as its own CLI runs it and over streamable HTTP (its ``create_server()`` under the SDK's HTTP app, see
``tests/unit/runner_exec_servers.py``). The executor is called as the daemon calls it (``execute(job, bounds,
deadline_s=…)``): list the tools, call one, check the result, then each limit — byte cap, deadline, cancellation.
A server is held mid-call by stopping its process (SIGSTOP), never by racing a clock."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import signal
import sys
import termios
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cowboy_protocol.types.jobspec import McpJob
from cowboy_runner.executors import (
    ExecutorError,
    ExecutorRegistry,
    ExecutorsConfig,
    McpConfig,
    McpExecutor,
    McpServerConfig,
    deadline_for,
)
from tests.unit.runner_exec_servers import REPO, start_time_server_http

pytestmark = pytest.mark.timeout(300)

TIME_SERVER = Path(sys.executable).with_name("mcp-server-time")
"""The reference server's console script, installed from the lock next to this interpreter."""
STDIO = McpServerConfig(command=(str(TIME_SERVER), "--local-timezone", "UTC"))
TOKYO_NOON = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
BOUND_S = 30.0
"""Generous bound on anything that must happen promptly (a loaded 2-core machine)."""


def _job(tool: str, server: str = "time", **arguments: Any) -> McpJob:
    return McpJob(server=server, tool_name=tool, arguments=arguments)


@contextlib.asynccontextmanager
async def _executor(server: McpServerConfig, **config: Any) -> AsyncIterator[McpExecutor]:
    ex = McpExecutor(McpConfig(servers={"time": server}, **config), max_output_bytes=256 * 1024)
    try:
        yield ex
    finally:
        await ex.aclose()


def _state(pid: int) -> str:
    """The process state letter of ``/proc/PID/stat`` (``T``: stopped)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


@contextlib.contextmanager
def _stopped(pid: int) -> Iterator[None]:
    """The process is stopped (it reads and answers nothing) until the block ends. A stop takes effect
    asynchronously (the process may still be running on another core when kill() returns), so this waits until
    the kernel reports it stopped."""
    os.kill(pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + BOUND_S
        while _state(pid) != "T":
            assert time.monotonic() < deadline, f"process {pid} did not stop"
            time.sleep(0.005)
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _pipe_bytes(ex: McpExecutor) -> int:
    """Bytes written to the stdio server's stdin that it has not read yet."""
    proc = ex.stdio["time"]._proc
    assert proc is not None and proc.stdin is not None
    fd = proc.stdin.transport.get_extra_info("pipe").fileno()
    return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), sys.byteorder)


async def _until(condition: Any, what: str) -> None:
    async with asyncio.timeout(BOUND_S):
        while not condition():
            await asyncio.sleep(0.01)
    assert condition(), what


def _check_tokyo_noon(output: bytes) -> None:
    """12:00 UTC is 21:00 in Tokyo (UTC+9, no DST), on the same day; content carries the same JSON as text."""
    doc = json.loads(output)
    assert output == json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    result = doc["structuredContent"]
    source, target = (datetime.fromisoformat(result[k]["datetime"]) for k in ("source", "target"))
    assert (result["source"]["timezone"], result["target"]["timezone"]) == ("UTC", "Asia/Tokyo")
    assert (source.hour, source.minute, source.utcoffset()) == (12, 0, timedelta(0))
    assert (target.hour, target.minute, target.utcoffset()) == (21, 0, timedelta(hours=9))
    assert source == target and result["time_difference"] == "+9.0h"
    assert [c["type"] for c in doc["content"]] == ["text"] and json.loads(doc["content"][0]["text"]) == result


def _check_tools(tools: list[dict[str, Any]]) -> None:
    by_name = {t["name"]: t for t in tools}
    assert set(by_name) == {"get_current_time", "convert_time"}
    assert set(by_name["convert_time"]["inputSchema"]["required"]) == set(TOKYO_NOON)
    assert by_name["get_current_time"]["inputSchema"]["required"] == ["timezone"]


# ----------------------------------------------------------------------------------------------- stdio


async def test_stdio_reference_server_lists_its_tools_and_converts_a_time_through_the_registry() -> None:
    registry = ExecutorRegistry(ExecutorsConfig(mcp=McpConfig(servers={"time": STDIO})))
    job = _job("convert_time", **TOKYO_NOON)
    executor = registry.executor_for(job)
    assert isinstance(executor, McpExecutor)
    try:
        _check_tools(await executor.list_tools("time"))
        result = await executor.execute(job, None, deadline_s=deadline_for(job, None))
        _check_tokyo_noon(result.output)
        assert result.usage_units == 1
        assert result.detail["transport"] == "stdio" and result.detail["protocol_version"] == "2025-06-18"
        now = await executor.execute(_job("get_current_time", timezone="UTC"), None, deadline_s=BOUND_S)
        stamp = datetime.fromisoformat(json.loads(now.output)["structuredContent"]["datetime"])
        assert stamp.utcoffset() == timedelta(0) and abs(stamp - datetime.now(UTC)) < timedelta(days=1)
        assert executor.stdio["time"].starts == 1  # tools/list and both calls on one process
    finally:
        await executor.aclose()


async def test_stdio_reference_server_errors_are_typed() -> None:
    async with _executor(STDIO) as ex:
        with pytest.raises(ExecutorError) as unknown:
            await ex.execute(_job("no_such_tool"), None, deadline_s=BOUND_S)
        # the reference server answers an unknown tool with JSON-RPC -32602 (not an isError result)
        assert unknown.value.code == "upstream_error" and unknown.value.detail["rpc_code"] == -32602
        with pytest.raises(ExecutorError) as bad:
            await ex.execute(_job("convert_time", **{**TOKYO_NOON, "source_timezone": "Nowhere/City"}), None,
                             deadline_s=BOUND_S)
        assert bad.value.code == "upstream_error" and bad.value.detail["tool_error"] is True
        assert "Nowhere/City" in bad.value.message


async def test_stdio_reply_over_the_byte_cap_is_response_too_large_and_ends_the_process() -> None:
    # initialize's reply (~250 bytes) fits; convert_time's (~700 bytes) does not
    async with _executor(STDIO, max_response_bytes=400) as ex:
        with pytest.raises(ExecutorError) as info:
            await ex.execute(_job("convert_time", **TOKYO_NOON), None, deadline_s=BOUND_S)
        assert info.value.code == "response_too_large"
        assert ex.stdio["time"].starts == 1 and not ex.stdio["time"].running
    async with _executor(STDIO, max_response_bytes=4096) as ex:  # the same call under a cap it fits in
        _check_tokyo_noon((await ex.execute(_job("convert_time", **TOKYO_NOON), None, deadline_s=BOUND_S)).output)


async def test_stdio_deadline_is_timeout_and_the_server_process_is_gone() -> None:
    async with _executor(STDIO) as ex:
        await ex.execute(_job("convert_time", **TOKYO_NOON), None, deadline_s=BOUND_S)
        pid = ex.stdio["time"].pid
        assert pid is not None
        with _stopped(pid), pytest.raises(ExecutorError) as info:
            async with asyncio.timeout(BOUND_S):
                await ex.execute(_job("convert_time", **TOKYO_NOON), None, deadline_s=1.0)
        assert info.value.code == "timeout" and info.value.detail["limited_by"] == "job"
        assert not _alive(pid) and not ex.stdio["time"].running
        again = await ex.execute(_job("convert_time", **TOKYO_NOON), None, deadline_s=BOUND_S)
        _check_tokyo_noon(again.output)
        assert ex.stdio["time"].starts == 2 and ex.stdio["time"].pid != pid


async def test_stdio_cancelled_job_returns_at_once_sends_cancelled_and_keeps_the_process() -> None:
    async with _executor(STDIO) as ex:
        await ex.execute(_job("convert_time", **TOKYO_NOON), None, deadline_s=BOUND_S)
        pid = ex.stdio["time"].pid
        assert pid is not None
        with _stopped(pid):
            task = asyncio.create_task(ex.execute(_job("convert_time", **TOKYO_NOON), None, deadline_s=60))
            await _until(lambda: _pipe_bytes(ex) > 0, "the tools/call reached the stopped server's stdin")
            written = _pipe_bytes(ex)
            task.cancel()
            async with asyncio.timeout(BOUND_S):
                with pytest.raises(asyncio.CancelledError):
                    await task
            # the SDK's notifications/cancelled for that request follows it into the pipe: written by the stdin
            # pump task, which may run after the cancelled call has returned (it did at load 10)
            await _until(lambda: _pipe_bytes(ex) > written, "the notifications/cancelled reached the stopped server")
            assert _alive(pid)
        again = await ex.execute(_job("convert_time", **TOKYO_NOON), None, deadline_s=BOUND_S)
        _check_tokyo_noon(again.output)
        assert ex.stdio["time"].starts == 1 and ex.stdio["time"].pid == pid


# ----------------------------------------------------------------------------------------------- streamable HTTP


@pytest.fixture(scope="module")
def time_http() -> Iterator[tuple[str, Any]]:
    with start_time_server_http() as (url, proc):
        yield url, proc


async def test_http_reference_server_lists_its_tools_converts_a_time_and_reuses_the_session(
        time_http: tuple[str, Any]) -> None:
    url, _ = time_http
    async with _executor(McpServerConfig(url=url)) as ex:
        _check_tools(await ex.list_tools("time"))
        first = await ex.execute(_job("convert_time", **TOKYO_NOON), None, deadline_s=BOUND_S)
        second = await ex.execute(_job("convert_time", **TOKYO_NOON), None, deadline_s=BOUND_S)
    _check_tokyo_noon(first.output)
    assert second.output == first.output
    assert first.detail["transport"] == "http" and first.detail["protocol_version"] == "2025-06-18"
    assert first.detail["session"] and second.detail["session"] == first.detail["session"]
    assert (first.detail["session_reused"], second.detail["session_reused"]) == (False, True)


async def test_http_reference_server_errors_are_typed(time_http: tuple[str, Any]) -> None:
    url, _ = time_http
    async with _executor(McpServerConfig(url=url)) as ex:
        with pytest.raises(ExecutorError) as unknown:
            await ex.execute(_job("no_such_tool"), None, deadline_s=BOUND_S)
        assert unknown.value.code == "upstream_error" and unknown.value.detail["rpc_code"] == -32602
        with pytest.raises(ExecutorError) as bad:
            await ex.execute(_job("convert_time", **{**TOKYO_NOON, "target_timezone": "Nowhere/City"}), None,
                             deadline_s=BOUND_S)
        assert bad.value.code == "upstream_error" and bad.value.detail["tool_error"] is True


async def test_http_reply_over_the_byte_cap_is_response_too_large(time_http: tuple[str, Any]) -> None:
    url, _ = time_http
    async with _executor(McpServerConfig(url=url), max_response_bytes=450) as ex:
        with pytest.raises(ExecutorError) as info:
            async with asyncio.timeout(BOUND_S):
                await ex.execute(_job("convert_time", **TOKYO_NOON), None, deadline_s=BOUND_S)
        assert info.value.code == "response_too_large"
        await ex.execute(_job("get_current_time", timezone="UTC"), None, deadline_s=BOUND_S)  # ~300 bytes: fits


async def test_http_deadline_is_timeout_and_the_session_survives(time_http: tuple[str, Any]) -> None:
    url, proc = time_http
    async with _executor(McpServerConfig(url=url)) as ex:
        first = await ex.execute(_job("convert_time", **TOKYO_NOON), None, deadline_s=BOUND_S)
        with _stopped(proc.pid), pytest.raises(ExecutorError) as info:
            async with asyncio.timeout(BOUND_S):
                await ex.execute(_job("convert_time", **TOKYO_NOON), None, deadline_s=1.0)
        assert info.value.code == "timeout" and info.value.detail["limited_by"] == "job"
        again = await ex.execute(_job("convert_time", **TOKYO_NOON), None, deadline_s=BOUND_S)
    _check_tokyo_noon(again.output)
    assert again.detail["session_reused"] is True and again.detail["session"] == first.detail["session"]


async def test_http_cancelled_job_returns_at_once_and_the_session_survives(time_http: tuple[str, Any]) -> None:
    url, proc = time_http
    async with _executor(McpServerConfig(url=url)) as ex:
        first = await ex.execute(_job("convert_time", **TOKYO_NOON), None, deadline_s=BOUND_S)
        with _stopped(proc.pid):
            task = asyncio.create_task(ex.execute(_job("convert_time", **TOKYO_NOON), None, deadline_s=60))
            await asyncio.sleep(0.2)  # not a race: the stopped server answers nothing however long this is
            task.cancel()
            async with asyncio.timeout(BOUND_S):
                with pytest.raises(asyncio.CancelledError):
                    await task
        again = await ex.execute(_job("convert_time", **TOKYO_NOON), None, deadline_s=BOUND_S)
    _check_tokyo_noon(again.output)
    assert again.detail["session"] == first.detail["session"]


# ----------------------------------------------------------------------------------------------- the runner's stdio
# transport: what the SDK's stdio_client would do differently (docs/runner-executors.md §MCP)


async def test_stdio_launcher_child_is_killed_with_it_at_the_deadline() -> None:
    # a launcher that keeps its child in the foreground, as uvx/npx do: the process group goes, not only the shell
    launcher = McpServerConfig(command=("/bin/sh", "-c", f"'{TIME_SERVER}' --local-timezone UTC; exit $?"))
    async with _executor(launcher) as ex:
        await ex.execute(_job("convert_time", **TOKYO_NOON), None, deadline_s=BOUND_S)
        shell = ex.stdio["time"].pid
        assert shell is not None
        children = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
        assert len(children) == 1
        server = int(children[0])
        with _stopped(server), pytest.raises(ExecutorError) as info:
            async with asyncio.timeout(BOUND_S):
                await ex.execute(_job("convert_time", **TOKYO_NOON), None, deadline_s=1.0)
        assert info.value.code == "timeout"
        await _until(lambda: not _alive(server), "the launcher's child is gone")  # reaped by init: poll
        assert not _alive(shell)


async def test_stdio_server_environment_is_path_and_its_env_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COWBOY_RUNNER_CANARY", "secret")
    server = McpServerConfig(command=(sys.executable, "-m", "tests.unit.runner_exec_servers", "mcp", "stdio"),
                             env={"PYTHONPATH": str(REPO)}, tools=("env_names",))
    async with _executor(server) as ex:
        result = await ex.execute(_job("env_names"), None, deadline_s=BOUND_S)
    names = set(json.loads(result.output)["structuredContent"]["result"])
    # LC_CTYPE: CPython's own locale coercion (PEP 538) in the child, not something the runner passed
    assert names - {"LC_CTYPE"} == {"PATH", "PYTHONPATH"}
    assert "HOME" in os.environ and "COWBOY_RUNNER_CANARY" in os.environ  # what the runner has and keeps to itself
