"""MCP as operators run it (issue 21 item 5): the stdio transport (the official SDK's server as a program the
runner starts and keeps), a per-server tool allow-list, configurable authentication headers, and session reuse
across jobs (stdio: one process; HTTP: one Mcp-Session-Id, renewed when the server forgot it)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from cowboy_protocol.types.jobspec import McpJob
from cowboy_runner.config import ConfigError, parse_settings
from cowboy_runner.executor_settings import executors_config
from cowboy_runner.executors import ExecutorError, McpConfig, McpExecutor, McpServerConfig
from tests.unit.runner_exec_servers import REPO, serve, start_mcp_server

pytest.importorskip("mcp")
pytestmark = pytest.mark.timeout(300)

STDIO = McpServerConfig(command=(sys.executable, "-m", "tests.unit.runner_exec_servers", "mcp", "stdio"),
                        env={"PYTHONPATH": str(REPO)}, tools=("add", "greet", "pid"))


@pytest.fixture
async def stdio_executor() -> AsyncIterator[McpExecutor]:
    ex = McpExecutor(McpConfig(servers={"local": STDIO}), max_output_bytes=256 * 1024)
    try:
        yield ex
    finally:
        await ex.aclose()


def _job(tool: str, server: str = "local", **arguments: Any) -> McpJob:
    return McpJob(server=server, tool_name=tool, arguments=arguments)


def _value(output: bytes) -> Any:
    doc = json.loads(output)
    return doc.get("structuredContent", {}).get("result", doc["content"][0]["text"])


async def test_stdio_server_answers_one_process_serves_every_job_and_a_dead_one_is_restarted(
        stdio_executor: McpExecutor) -> None:
    first = await stdio_executor.execute(_job("add", a=2, b=3), None, deadline_s=30)
    assert _value(first.output) == 5 and first.detail["transport"] == "stdio"
    pids = [_value((await stdio_executor.execute(_job("pid"), None, deadline_s=30)).output) for _ in range(3)]
    assert len(set(pids)) == 1 and stdio_executor.stdio["local"].starts == 1
    many = await asyncio.gather(*(stdio_executor.execute(_job("add", a=i, b=1), None, deadline_s=30)
                                  for i in range(5)))  # concurrent jobs matched to their replies by id
    assert [_value(r.output) for r in many] == [1, 2, 3, 4, 5]
    # the process dies: the next job starts a new one
    pid = pids[0]
    proc = stdio_executor.stdio["local"]._proc
    assert proc is not None and proc.pid == pid
    proc.kill()
    await proc.wait()
    again = _value((await stdio_executor.execute(_job("pid"), None, deadline_s=30)).output)
    assert again != pid and stdio_executor.stdio["local"].starts == 2


async def test_tool_outside_the_allow_list_is_refused_before_the_server_is_started(
        stdio_executor: McpExecutor) -> None:
    with pytest.raises(ExecutorError) as info:
        await stdio_executor.execute(_job("fail", reason="x"), None, deadline_s=30)  # the server offers it
    assert info.value.code == "tool_not_allowed" and stdio_executor.stdio["local"].starts == 0


async def test_stdio_program_that_is_not_an_mcp_server_is_upstream_error(tmp_path: Path) -> None:
    garbage = McpServerConfig(command=(sys.executable, "-c", "import sys; sys.stdin.readline(); print('hello?')"))
    ex = McpExecutor(McpConfig(servers={"bad": garbage}), max_output_bytes=1024)
    try:
        with pytest.raises(ExecutorError) as info:
            await ex.execute(_job("add", server="bad"), None, deadline_s=10)
        assert info.value.code == "upstream_error"
        missing = McpExecutor(McpConfig(servers={"m": McpServerConfig(command=(str(tmp_path / "nope"),))}),
                              max_output_bytes=1024)
        with pytest.raises(ExecutorError, match="cannot start"):
            await missing.execute(_job("add", server="m"), None, deadline_s=10)
    finally:
        await ex.aclose()


async def test_stdio_server_line_over_the_cap_is_response_too_large() -> None:
    flood = McpServerConfig(command=(sys.executable, "-c", "import sys; sys.stdin.readline(); "
                                                           "sys.stdout.write('x' * 100000); sys.stdout.flush()"))
    ex = McpExecutor(McpConfig(servers={"f": flood}, max_response_bytes=4096), max_output_bytes=1024)
    try:
        with pytest.raises(ExecutorError) as info:
            await ex.execute(_job("add", server="f"), None, deadline_s=10)
        assert info.value.code == "response_too_large"
    finally:
        await ex.aclose()


async def test_http_session_is_reused_and_renewed_when_the_server_forgot_it() -> None:
    with start_mcp_server("json") as url:
        ex = McpExecutor(McpConfig(servers={"tools": McpServerConfig(url=url)}), max_output_bytes=256 * 1024)
        first = await ex.execute(_job("add", server="tools", a=1, b=1), None, deadline_s=30)
        second = await ex.execute(_job("add", server="tools", a=2, b=2), None, deadline_s=30)
        assert _value(second.output) == 4 and second.detail["session_reused"] is True
        assert second.detail["session"] == first.detail["session"] and first.detail["session_reused"] is False
        ex.http_sessions["tools"] = ("not-a-session-the-server-knows", "2025-06-18")
        third = await ex.execute(_job("add", server="tools", a=3, b=3), None, deadline_s=30)
        assert _value(third.output) == 6 and third.detail["session_reused"] is False
        assert third.detail["session"] != "not-a-session-the-server-knows"


async def test_configured_auth_headers_are_sent_on_every_request(tmp_path: Path) -> None:
    seen: list[str | None] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        msg = await request.json()
        if "id" not in msg:
            return web.Response(status=202)
        result = {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "s", "version": "0"}} \
            if msg["method"] == "initialize" else {"content": [{"type": "text", "text": "ok"}]}
        return web.json_response({"jsonrpc": "2.0", "id": msg["id"], "result": result},
                                 headers={"Mcp-Session-Id": "s1"})

    app = web.Application()
    app.router.add_post("/mcp", handle)
    async with serve(app) as base:
        toml = f"""
[runner]
validator_rpc = "http://127.0.0.1:4000"
[capabilities]
job_types = ["mcp"]
max_concurrent_jobs = 1
[rate_card.mcp]
base_price = "1"
price_per_unit = "0"
[executors.mcp.servers.search]
url = "{base}/mcp"
headers = {{ Authorization = "Bearer mcp-token" }}
tools = ["search"]
"""
        cfg = executors_config(parse_settings(toml, tmp_path))
        assert cfg.mcp is not None
        ex = McpExecutor(cfg.mcp, max_output_bytes=1024)
        await ex.execute(_job("search", server="search"), None, deadline_s=10)
        await ex.execute(_job("search", server="search"), None, deadline_s=10)
    assert seen == ["Bearer mcp-token"] * 4  # initialize, initialized, call; then the reused session's call


@pytest.mark.parametrize(("table", "key"), [
    ('url = "http://h/mcp"\ncommand = ["x"]\n', "executors.mcp.servers.s.url"),
    ('command = ["x"]\nheaders = { A = "b" }\n', "executors.mcp.servers.s.headers"),
    ('url = "http://h/mcp"\nenv = { A = "b" }\n', "executors.mcp.servers.s.env"),
    ('command = []\n', "executors.mcp.servers.s.command"),
    ('url = "http://h/mcp"\ntools = "search"\n', "executors.mcp.servers.s.tools"),
])
def test_server_table_errors_name_the_key(table: str, key: str, tmp_path: Path) -> None:
    base = ('[runner]\nvalidator_rpc = "http://127.0.0.1:4000"\n[capabilities]\njob_types = ["mcp"]\n'
            'max_concurrent_jobs = 1\n[rate_card.mcp]\nbase_price = "1"\nprice_per_unit = "0"\n')
    with pytest.raises(ConfigError) as info:
        parse_settings(base + "[executors.mcp.servers.s]\n" + table, tmp_path)
    assert str(info.value).startswith(f"runner.toml: {key}: ")
