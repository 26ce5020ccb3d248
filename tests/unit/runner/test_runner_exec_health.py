"""Executor health (issue 21 item 3): a cheap probe per kind at start and periodically; an unhealthy kind's jobs
are refused, the kind leaves the advertised capabilities (the set handed to the links' CapabilityDelta, §6.5) and
`cowboy-runner status` shows it; it comes back when a probe passes again."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import pytest

from cowboy_protocol.transport.enums import RejectReason
from cowboy_runner.executors import (
    CustomConfig,
    CustomExecutorConfig,
    ExecutorRegistry,
    ExecutorsConfig,
    HttpConfig,
    LlmConfig,
    McpConfig,
    McpServerConfig,
    health,
)
from cowboy_runner.executors.health import HealthMonitor, probe_custom, probe_llm, probe_mcp
from cowboy_runner.jobs import JobManager
from cowboy_runner.journal import Journal
from cowboy_runner.metrics import RunnerMetrics
from cowboy_runner.status import render_text
from cowboy_runner.txbuild import Fees
from tests.unit.runner.test_runner_daemon_jobs import KEY, FakeChain, FakeChannel
from tests.unit.runner.test_runner_exec_slots import _frame
from tests.unit.runner_exec_servers import LlmStub, llm_app, serve

pytestmark = pytest.mark.timeout(300)

MODEL = {b"\x00" * 32: "tiny-model"}


def _dead_url() -> str:
    """An http URL on a loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def test_llm_probe_passes_on_a_live_endpoint_and_sends_the_key() -> None:
    stub = LlmStub()
    async with serve(llm_app(stub)) as base:
        assert await probe_llm(LlmConfig(base_url=f"{base}/v1", api_key="sk-probe")) is None
    assert stub.auth == ["Bearer sk-probe"]


@pytest.mark.parametrize(("status", "healthy"), [(200, True), (404, True), (429, True), (401, False),
                                                 (403, False), (500, False), (503, False)])
async def test_llm_probe_verdict_by_status(status: int, healthy: bool) -> None:
    stub = LlmStub(models_status=status)
    async with serve(llm_app(stub)) as base:
        reason = await probe_llm(LlmConfig(base_url=f"{base}/v1", api_key="sk-secret-probe"))
    assert (reason is None) is healthy
    assert reason is None or ("sk-secret" not in reason and f"HTTP {status}" in reason)


async def test_llm_probe_fails_when_nothing_listens() -> None:
    reason = await probe_llm(LlmConfig(base_url=f"{_dead_url()}/v1"))
    assert reason is not None and "/models" in reason


async def test_mcp_probe_fails_when_no_server_answers() -> None:
    cfg = McpConfig(servers={"a": McpServerConfig(f"{_dead_url()}/mcp"), "b": McpServerConfig(f"{_dead_url()}/mcp")})
    reason = await probe_mcp(cfg)
    assert reason is not None and reason.startswith("a: ") and "; b: " in reason


def test_custom_probe_needs_one_executable_program(tmp_path: Path) -> None:
    not_exec = tmp_path / "script.sh"
    not_exec.write_text("#!/bin/sh\n")
    bad = CustomConfig(executors={b"\x01" * 32: CustomExecutorConfig(("/nonexistent/prog",)),
                                  b"\x02" * 32: CustomExecutorConfig((str(not_exec),))})
    reason = probe_custom(bad)
    assert reason is not None and "/nonexistent/prog" in reason and "script.sh" in reason
    good = CustomConfig(executors={**bad.executors, b"\x03" * 32: CustomExecutorConfig((sys.executable, "-c", ""))})
    assert probe_custom(good) is None
    assert probe_custom(CustomConfig(executors={b"\x04" * 32: CustomExecutorConfig(("sh", "-c", "true"))})) is None


async def test_probe_that_hangs_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    async def hang(_config: LlmConfig) -> str | None:
        await asyncio.sleep(30)
        return None

    monkeypatch.setattr(health, "probe_llm", hang)
    monitor = HealthMonitor(ExecutorsConfig(llm=LlmConfig(base_url="http://127.0.0.1:9/v1")), timeout_s=0.2)
    verdicts = await monitor.check()
    assert not verdicts["llm"].healthy and "timed out" in verdicts["llm"].reason


def test_unhealthy_llm_leaves_the_advertised_kinds_and_status_then_returns(tmp_path: Path) -> None:
    async def main() -> None:
        stub = LlmStub()
        async with serve(llm_app(stub)) as base:
            config = ExecutorsConfig(http=HttpConfig(allowed_domains=("example.com",)),
                                     llm=LlmConfig(base_url=f"{base}/v1", models=MODEL))
            chain, seen = FakeChain(), []
            jobs = JobManager(key=KEY, chain_id="cowboy-test-1", chain=chain, journal=Journal(tmp_path / "j.db"),
                              executors=ExecutorRegistry(config), max_concurrent=4,
                              fees=lambda: Fees.from_basefees(1, 1), on_kinds=seen.append, metrics=RunnerMetrics())
            jobs.head = chain.head
            monitor = HealthMonitor(config, on_change=jobs.set_unhealthy)
            await monitor.check()
            assert jobs.unavailable_kinds() == frozenset() and seen == []
            stub.models_status = 503  # the LLM endpoint goes down
            await monitor.check()
            assert seen == [frozenset({"llm"})]
            status = jobs.executor_status()
            assert status["llm"]["advertised"] is False and "HTTP 503" in str(status["llm"]["unhealthy"])
            assert status["http"]["advertised"] is True
            text = render_text({"pid": 1, "executors": status}, running=True)
            assert "executor:   llm UNHEALTHY GET " in text and "NOT advertised" in text
            assert "executor:   http healthy advertised" in text
            f = _frame(b"\x05" * 32, "llm")
            chain.assign(f)
            st = await jobs.on_push(FakeChannel(), f)
            assert st.reject_reason is RejectReason.UNSUPPORTED_JOB_TYPE and "unhealthy" in (st.text or "")
            stub.models_status = 200  # back
            await monitor.check()
            assert seen == [frozenset({"llm"}), frozenset()] and jobs.executor_status()["llm"]["advertised"]
    asyncio.run(asyncio.wait_for(main(), 20))
