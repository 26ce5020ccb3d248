"""Executor plugins and external adapters (issue 21 item 8): an installed package adds an executor through the
``cowboy_runner.executors`` entry point group, and a job of a kind the runner has no executor for is POSTed to an
operator's service (Chainlink-style external adapter); runner.toml wires both to job kinds."""

from __future__ import annotations

import json
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from cowboy_protocol.types.jobspec import AgentJob, PublishChainRootJob, ResourceBounds
from cowboy_runner.config import ConfigError, parse_settings
from cowboy_runner.executor_settings import executors_config
from cowboy_runner.executors import (
    AdapterConfig,
    ExecutorError,
    ExecutorRegistry,
    ExecutorsConfig,
    ExternalAdapterExecutor,
    HttpConfig,
)
from tests.unit.runner_exec_servers import serve

pytestmark = pytest.mark.timeout(300)

AGENT = AgentJob(model="m1", query="what is up", max_iterations=2, max_tool_calls_per_iter=1, timeout_seconds=30)
BASE = """
[runner]
validator_rpc = "http://127.0.0.1:4000"
[capabilities]
job_types = ["http", "agent"]
max_concurrent_jobs = 2
[rate_card.http]
base_price = "1"
price_per_unit = "0"
[rate_card.agent]
base_price = "1"
price_per_unit = "0"
"""


@pytest.fixture
async def adapter_service() -> AsyncIterator[tuple[str, list[dict[str, Any]], list[Any]]]:
    """An operator's service: records each request (body, Authorization) and gives the next scripted answer."""
    seen: list[dict[str, Any]] = []
    answers: list[Any] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append({"body": await request.json(), "auth": request.headers.get("Authorization")})
        status, body = answers.pop(0) if answers else (200, {"result": {"answer": 42}, "units": 3})
        return web.Response(status=status, text=body if isinstance(body, str) else json.dumps(body),
                            content_type="application/json")

    app = web.Application()
    app.router.add_post("/adapter", handle)
    async with serve(app) as base:
        yield f"{base}/adapter", seen, answers


async def test_adapter_posts_the_job_and_returns_the_result_as_canonical_json(
        adapter_service: tuple[str, list[dict[str, Any]], list[Any]]) -> None:
    url, seen, _ = adapter_service
    ex = ExternalAdapterExecutor("agents", AdapterConfig(url, ("agent",), headers={"Authorization": "Bearer ea"}),
                                 max_output_bytes=1024)
    result = await ex.execute(AGENT, ResourceBounds(max_wall_time_seconds=20), deadline_s=20)
    assert result.output == b'{"answer":42}' and result.usage_units == 3
    body = seen[0]["body"]
    assert body["id"] == "agent" and body["data"]["deadline_s"] == 20
    assert body["data"]["job_type"]["kind"] == "agent" and body["data"]["job_type"]["query"] == "what is up"
    assert body["data"]["bounds"]["max_wall_time_seconds"] == 20 and seen[0]["auth"] == "Bearer ea"


@pytest.mark.parametrize(("answer", "code"), [
    ((200, {"error": {"code": "busy", "message": "try later"}}), "adapter_error"),
    ((200, {"error": "no such model"}), "adapter_error"),
    ((500, {"result": 1}), "upstream_error"),
    ((200, "{not json"), "upstream_error"),
    ((200, {"data": 1}), "upstream_error"),
    ((200, {"result": 1, "units": -1}), "upstream_error"),
])
async def test_adapter_failures_are_typed(adapter_service: tuple[str, list[dict[str, Any]], list[Any]],
                                          answer: Any, code: str) -> None:
    url, _, answers = adapter_service
    answers.append(answer)
    ex = ExternalAdapterExecutor("agents", AdapterConfig(url, ("agent",)), max_output_bytes=1024)
    with pytest.raises(ExecutorError) as info:
        await ex.execute(AGENT, None, deadline_s=10)
    assert info.value.code == code


async def test_runner_toml_adapter_serves_a_kind_without_a_builtin_executor(
        adapter_service: tuple[str, list[dict[str, Any]], list[Any]], tmp_path: Path) -> None:
    url, _, _ = adapter_service
    toml = BASE + f'[executors.adapters.agents]\nurl = "{url}"\nkinds = ["agent"]\ntimeout_s = 5\n'
    registry = ExecutorRegistry(executors_config(parse_settings(toml, tmp_path)))
    assert registry.kinds() == ("agent", "http")
    assert (await registry.execute(AGENT, None)).output == b'{"answer":42}'
    with pytest.raises(ExecutorError) as info:
        registry.executor_for(PublishChainRootJob(src_chain_id=1, dst_chain_id=2, height=3,
                                                 registry_address=bytes(20)))  # still no executor
    assert info.value.code == "unsupported_job_type"


def test_a_kind_served_twice_is_refused() -> None:
    with pytest.raises(ValueError, match=r"'http' is served by both executors\.http and executors\.adapters\.a"):
        ExecutorRegistry(ExecutorsConfig(http=HttpConfig(), adapters={"a": AdapterConfig("http://h/x", ("http",))}))


PLUGIN_SRC = '''
    from cowboy_runner.executors import ExecutionResult, ExecutorError

    class EchoAgent:
        def __init__(self, options, max_output_bytes):
            self.prefix = options["prefix"]

        async def execute(self, job, bounds, *, deadline_s):
            if job.query == "fail":
                raise ExecutorError("plugin_refused", "asked to fail")
            return ExecutionResult((self.prefix + job.query).encode(), 1)

    def make_executor(options, *, max_output_bytes):
        return EchoAgent(options, max_output_bytes)
'''


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package installed the way pip leaves one: the module and its .dist-info with entry_points.txt."""
    site = tmp_path / "site"
    (site / "cowboy_echo_plugin").mkdir(parents=True)
    (site / "cowboy_echo_plugin" / "__init__.py").write_text(textwrap.dedent(PLUGIN_SRC))
    info = site / "cowboy_echo_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cowboy-echo-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[cowboy_runner.executors]\necho-agent = cowboy_echo_plugin:make_executor\n")
    monkeypatch.syspath_prepend(str(site))
    return site


async def test_plugin_from_an_entry_point_serves_its_kind(installed_plugin: Path, tmp_path: Path) -> None:
    toml = BASE + ('[executors.plugins.echo]\nentry_point = "echo-agent"\nkinds = ["agent"]\n'
                   'options = { prefix = "echo: " }\n')
    registry = ExecutorRegistry(executors_config(parse_settings(toml, tmp_path)))
    assert (await registry.execute(AGENT, None)).output == b"echo: what is up"
    with pytest.raises(ExecutorError) as info:
        await registry.execute(AgentJob(model="m", query="fail", max_iterations=1, max_tool_calls_per_iter=1,
                                        timeout_seconds=5), None)
    assert info.value.code == "plugin_refused"
    assert registry.kinds() == ("agent", "http")  # the plugin's kind next to the built-in one


def test_missing_entry_point_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    toml = BASE + '[executors.plugins.echo]\nentry_point = "not-installed"\nkinds = ["agent"]\n'
    with pytest.raises(ConfigError) as info:
        executors_config(parse_settings(toml, tmp_path))
    assert str(info.value).startswith("runner.toml: executors.plugins.echo.entry_point: no installed package")


@pytest.mark.parametrize(("table", "key"), [
    ('[executors.plugins.p]\nkinds = ["agent"]\n', "executors.plugins.p.entry_point"),
    ('[executors.plugins.p]\nentry_point = "x"\nkinds = ["gpu"]\n', "executors.plugins.p.kinds"),
    ('[executors.adapters.a]\nkinds = ["agent"]\n', "executors.adapters.a.url"),
    ('[executors.adapters.a]\nurl = "http://h/x"\nkinds = []\n', "executors.adapters.a.kinds"),
])
def test_plugin_and_adapter_tables_are_checked(table: str, key: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        parse_settings(BASE + table, tmp_path)
    assert str(info.value).startswith(f"runner.toml: {key}: ")
