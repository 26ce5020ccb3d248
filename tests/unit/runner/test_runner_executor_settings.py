"""runner.toml's executor limits reach the executors (cowboy_runner/executor_settings.py, docs/runner.md
"[executors.*]"): every key is mapped, and each operator limit bounds an execution even when the job's own
bounds allow more (effective limit = min(job bound, operator limit)).

Each limit test runs a real local server or subprocess that would take far longer than the operator limit and
far less than the job's bound; the surrounding ``asyncio.timeout`` is only a bound on the test (if the limit
were ignored the test fails by hitting it, not by a timed assertion)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiohttp import web

from cowboy_protocol.types.jobspec import CustomJob, HttpJob, LlmJob, McpJob, ResourceBounds
from cowboy_runner.config import parse_settings
from cowboy_runner.executor_settings import executors_config
from cowboy_runner.executors import ExecutorError, ExecutorRegistry, ExecutorsConfig
from tests.unit.runner_exec_servers import HttpState, LlmStub, http_app, llm_app, serve

pytestmark = pytest.mark.timeout(300)

PY = sys.executable
MODEL_ID = bytes(range(32))
SLEEPER = b"\x11" * 32
HOG = b"\x22" * 32
ECHO = b"\x33" * 32
SLEEP_SRC = "import time; time.sleep(60)"
HOG_SRC = "b = bytearray(512 * 1024 * 1024); print(len(b))"
ECHO_SRC = "import sys; sys.stdout.write(sys.stdin.read())"
JOB_ALLOWS_MORE = ResourceBounds(max_wall_time_seconds=40, max_memory_mb=4096)
"""Bounds of every limit test: much more time and memory than the operator limits under test."""

BASE = """
[runner]
validator_rpc = "http://127.0.0.1:4000"

[capabilities]
job_types = ["http", "llm", "mcp", "custom"]
http_domains = ["127.0.0.1"]
max_concurrent_jobs = 2

[rate_card.http]
base_price = "1"
price_per_unit = "0"
[rate_card.llm]
base_price = "1"
price_per_unit = "0"
[rate_card.mcp]
base_price = "1"
price_per_unit = "0"
[rate_card.custom]
base_price = "1"
price_per_unit = "0"
"""


def _toml_argv(*argv: str) -> str:
    return "[" + ", ".join(json.dumps(a) for a in argv) + "]"  # JSON strings are valid TOML basic strings


def _config(executors: str) -> ExecutorsConfig:
    """``executors_config`` of a runner.toml made of :data:`BASE` plus ``executors`` (via the real loader)."""
    return executors_config(parse_settings(BASE + executors, Path("/home/r")))


def _registry(executors: str) -> ExecutorRegistry:
    return ExecutorRegistry(_config(executors))


async def _fails(registry: ExecutorRegistry, job: object, code: str, bounds: ResourceBounds = JOB_ALLOWS_MORE
                 ) -> ExecutorError:
    with pytest.raises(ExecutorError) as info:
        async with asyncio.timeout(20):  # far below the job's 40 s: only the operator limit can end it in time
            await registry.execute(job, bounds)  # type: ignore[arg-type]
    assert info.value.code == code, info.value
    return info.value


# -- mapping ---------------------------------------------------------------------------------------------------
def test_executors_config_maps_every_runner_toml_executor_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COWBOY_RUNNER_ALLOW_PRIVATE_ADDRESSES", raising=False)
    monkeypatch.setenv("TEST_LLM_KEY", "sk-from-env")
    cfg = _config(f"""
[executors.http]
max_response_bytes = 12345
connect_timeout_s = 1.5
request_timeout_s = 2.5
allow_private_addresses = true

[executors.llm]
base_url = "http://127.0.0.1:8000/v1"
api_key_env = "TEST_LLM_KEY"
default_temperature = 0.3
timeout_s = 3.5

[executors.llm.models]
"0x{MODEL_ID.hex()}" = "tiny"

[executors.mcp]
timeout_s = 4.5

[executors.mcp.servers]
search = "http://127.0.0.1:9000/mcp"

[executors.custom]
isolation = "none"                   # these tests run the venv's python (under /root, not in a sandbox)
time_limit_s = 5.5
memory_limit_mb = 77
max_output_bytes = 999
"{ECHO.hex()}" = {_toml_argv(PY, "-c", ECHO_SRC)}
""")
    assert cfg.http is not None and cfg.llm is not None and cfg.mcp is not None and cfg.custom is not None
    assert cfg.http.allowed_domains == ("127.0.0.1",)  # = capabilities.http_domains
    assert cfg.http.max_response_bytes == 12345
    assert cfg.http.connect_timeout_s == 1.5
    assert cfg.http.request_timeout_s == 2.5
    assert cfg.http.allow_private_addresses is True
    assert cfg.llm.base_url == "http://127.0.0.1:8000/v1"
    assert cfg.llm.api_key == "sk-from-env"
    assert cfg.llm.default_temperature == 0.3
    assert cfg.llm.timeout_s == 3.5
    assert dict(cfg.llm.models) == {MODEL_ID: "tiny"}
    assert cfg.mcp.default_timeout_seconds == 4.5 and cfg.mcp.max_timeout_seconds == 4.5
    assert {k: v.url for k, v in cfg.mcp.servers.items()} == {"search": "http://127.0.0.1:9000/mcp"}
    assert cfg.custom.time_limit_s == 5.5
    assert cfg.custom.memory_limit_mb == 77
    assert cfg.custom.max_stdout_bytes == 999
    assert {k: v.argv for k, v in cfg.custom.executors.items()} == {ECHO: (PY, "-c", ECHO_SRC)}


def test_executors_config_defaults_are_the_documented_runner_toml_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COWBOY_RUNNER_ALLOW_PRIVATE_ADDRESSES", raising=False)
    cfg = _config(f"""
[executors.llm]
base_url = "http://127.0.0.1:8000/v1"
[executors.mcp.servers]
s = "http://127.0.0.1:9000/mcp"
[executors.custom]
isolation = "none"                   # these tests run the venv's python (under /root, not in a sandbox)
"{ECHO.hex()}" = {_toml_argv(PY)}
""")
    assert cfg.http is not None and cfg.llm is not None and cfg.mcp is not None and cfg.custom is not None
    assert (cfg.http.connect_timeout_s, cfg.http.request_timeout_s) == (10.0, 30.0)
    assert cfg.http.max_response_bytes == 1_048_576 and cfg.http.allow_private_addresses is False
    assert cfg.llm.timeout_s == 120.0 and cfg.llm.api_key is None
    assert (cfg.mcp.default_timeout_seconds, cfg.mcp.max_timeout_seconds) == (30.0, 30.0)
    assert (cfg.custom.time_limit_s, cfg.custom.memory_limit_mb, cfg.custom.max_stdout_bytes) == (60.0, 512, 262_144)


def test_unconfigured_sections_mean_the_kind_is_not_served() -> None:
    cfg = _config("")  # job_types lists all four, but llm has no base_url, mcp no servers, custom no commands
    assert cfg.http is not None and cfg.llm is None and cfg.mcp is None and cfg.custom is None


# -- custom ----------------------------------------------------------------------------------------------------
async def test_custom_time_limit_kills_the_command_at_the_operator_limit_when_the_job_allows_more() -> None:
    registry = _registry(f"""
[executors.custom]
isolation = "none"                   # these tests run the venv's python (under /root, not in a sandbox)
time_limit_s = 1.0
"{SLEEPER.hex()}" = {_toml_argv(PY, "-c", SLEEP_SRC)}
""")
    err = await _fails(registry, CustomJob(executor_hash=SLEEPER), "timeout")
    assert err.detail["limited_by"] == "operator" and err.detail["limit_s"] == 1.0
    assert "executors.custom.time_limit_s" in err.message


async def test_custom_job_bound_still_applies_when_shorter_than_the_operator_limit() -> None:
    registry = _registry(f"""
[executors.custom]
isolation = "none"                   # these tests run the venv's python (under /root, not in a sandbox)
time_limit_s = 50.0
"{SLEEPER.hex()}" = {_toml_argv(PY, "-c", SLEEP_SRC)}
""")
    err = await _fails(registry, CustomJob(executor_hash=SLEEPER), "timeout",
                       bounds=ResourceBounds(max_wall_time_seconds=1))
    assert err.detail["limited_by"] == "job" and err.detail["limit_s"] == 1.0


async def test_custom_memory_limit_applies_even_when_the_job_allows_more() -> None:
    registry = _registry(f"""
[executors.custom]
isolation = "none"                   # these tests run the venv's python (under /root, not in a sandbox)
memory_limit_mb = 128
"{HOG.hex()}" = {_toml_argv(PY, "-c", HOG_SRC)}
""")
    err = await _fails(registry, CustomJob(executor_hash=HOG), "memory_limit")  # the job allows 4096 MiB
    assert err.detail["memory_limit_mb"] == 128
    assert "MemoryError" in str(err.detail["stderr_tail"])


async def test_custom_memory_limit_applies_to_a_job_without_bounds() -> None:
    registry = _registry(f"""
[executors.custom]
isolation = "none"                   # these tests run the venv's python (under /root, not in a sandbox)
memory_limit_mb = 128
"{HOG.hex()}" = {_toml_argv(PY, "-c", HOG_SRC)}
""")
    assert registry.config.custom is not None
    with pytest.raises(ExecutorError) as info:
        async with asyncio.timeout(20):
            await registry.executor_for(CustomJob(executor_hash=HOG)).execute(
                CustomJob(executor_hash=HOG), None, deadline_s=30)
    assert info.value.code == "memory_limit"


async def test_custom_smaller_job_memory_bound_wins_over_the_operator_limit() -> None:
    registry = _registry(f"""
[executors.custom]
isolation = "none"                   # these tests run the venv's python (under /root, not in a sandbox)
memory_limit_mb = 4096
"{HOG.hex()}" = {_toml_argv(PY, "-c", HOG_SRC)}
""")
    err = await _fails(registry, CustomJob(executor_hash=HOG), "memory_limit",
                       bounds=ResourceBounds(max_wall_time_seconds=40, max_memory_mb=128))
    assert err.detail["memory_limit_mb"] == 128


async def test_custom_within_the_operator_limits_succeeds() -> None:
    registry = _registry(f"""
[executors.custom]
isolation = "none"                   # these tests run the venv's python (under /root, not in a sandbox)
time_limit_s = 20.0
memory_limit_mb = 1024
"{ECHO.hex()}" = {_toml_argv(PY, "-c", ECHO_SRC)}
""")
    result = await registry.execute(CustomJob(executor_hash=ECHO, params=b"ok"), JOB_ALLOWS_MORE)
    assert result.output == b"ok"


# -- http ------------------------------------------------------------------------------------------------------
@pytest.fixture
async def http_base() -> AsyncIterator[str]:
    async with serve(http_app(HttpState())) as base:  # /slow answers after 30 s
        yield base


async def test_http_request_timeout_fails_a_slow_server_when_the_job_allows_more(http_base: str) -> None:
    registry = _registry("""
[executors.http]
request_timeout_s = 0.5
allow_private_addresses = true
""")
    err = await _fails(registry, HttpJob(url=f"{http_base}/slow"), "timeout")
    assert err.detail["limited_by"] == "operator" and err.detail["limit_s"] == 0.5
    assert "executors.http.request_timeout_s" in err.message


async def test_http_within_the_request_timeout_succeeds(http_base: str) -> None:
    registry = _registry("""
[executors.http]
request_timeout_s = 20.0
allow_private_addresses = true
""")
    result = await registry.execute(HttpJob(url=f"{http_base}/doc"), JOB_ALLOWS_MORE)
    assert b'"odd.key"' in result.output


@pytest.fixture
def unconnectable_port() -> Iterator[int]:
    """A loopback port whose accept queue is full, so a new TCP connect hangs (its SYN is dropped)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = []
    for _ in range(8):
        c = socket.socket()
        c.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            c.connect(("127.0.0.1", port))
        fillers.append(c)
    try:
        yield port
    finally:
        for c in fillers:
            c.close()
        server.close()


async def test_http_connect_timeout_fails_an_unanswered_connect(unconnectable_port: int) -> None:
    registry = _registry("""
[executors.http]
connect_timeout_s = 0.5
request_timeout_s = 30.0
allow_private_addresses = true
""")
    err = await _fails(registry, HttpJob(url=f"http://127.0.0.1:{unconnectable_port}/x"), "timeout")
    assert err.detail["phase"] == "connect" and err.detail["limit_s"] == 0.5
    assert "executors.http.connect_timeout_s" in err.message


# -- llm -------------------------------------------------------------------------------------------------------
async def test_llm_timeout_fails_a_slow_endpoint_when_the_job_allows_more() -> None:
    stub = LlmStub(delay_s=30.0)
    async with serve(llm_app(stub)) as base:
        registry = _registry(f"""
[executors.llm]
base_url = "{base}/v1"
timeout_s = 0.5
[executors.llm.models]
"{MODEL_ID.hex()}" = "tiny"
""")
        err = await _fails(registry, LlmJob(model_id=MODEL_ID, prompt="p", max_tokens=5), "timeout")
    assert err.detail["limited_by"] == "operator" and err.detail["limit_s"] == 0.5
    assert "executors.llm.timeout_s" in err.message


# -- mcp -------------------------------------------------------------------------------------------------------
async def test_mcp_timeout_caps_a_job_asking_for_longer() -> None:
    async def hang(request: web.Request) -> web.Response:
        await asyncio.sleep(30)
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/mcp", hang)
    async with serve(app) as base:
        registry = _registry(f"""
[executors.mcp]
timeout_s = 0.5
[executors.mcp.servers]
slow = "{base}/mcp"
""")
        job = McpJob(server="slow", tool_name="t", arguments={}, timeout_seconds=30)
        err = await _fails(registry, job, "timeout")
    assert err.detail["limited_by"] == "operator" and err.detail["limit_s"] == 0.5
