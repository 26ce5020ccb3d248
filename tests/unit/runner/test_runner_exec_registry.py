"""Executor registry, deadlines and the shared helpers (cowboy_runner/executors/__init__.py, base.py)."""

from __future__ import annotations

import asyncio

import pytest

from cowboy_protocol.types.jobspec import (
    AgentJob,
    CustomJob,
    HttpJob,
    LlmJob,
    McpJob,
    PublishChainRootJob,
    ResourceBounds,
)
from cowboy_runner.executors import (
    CustomConfig,
    CustomExecutor,
    ExecutorError,
    ExecutorRegistry,
    ExecutorsConfig,
    HttpConfig,
    HttpExecutor,
    LlmConfig,
    LlmExecutor,
    McpConfig,
    McpExecutor,
    deadline_for,
    executor_for,
    with_deadline,
)

pytestmark = pytest.mark.timeout(300)

HTTP = HttpJob(url="https://example.com/x")
LLM = LlmJob(model_id=bytes(32), prompt="p", max_tokens=1)
MCP = McpJob(server="s", tool_name="t", arguments={})
CUSTOM = CustomJob(executor_hash=bytes(32))
CHAIN_ROOT = PublishChainRootJob(src_chain_id=1, dst_chain_id=2, height=3, registry_address=bytes(20))
AGENT = AgentJob(model="m", query="q", max_iterations=1, max_tool_calls_per_iter=1, timeout_seconds=5)
FULL = ExecutorsConfig(http=HttpConfig(), llm=LlmConfig(base_url="http://127.0.0.1:1/v1"), mcp=McpConfig(),
                       custom=CustomConfig())


def test_each_kind_gets_its_executor() -> None:
    reg = ExecutorRegistry(FULL)
    assert isinstance(reg.executor_for(HTTP), HttpExecutor)
    assert isinstance(reg.executor_for(LLM), LlmExecutor)
    assert isinstance(reg.executor_for(MCP), McpExecutor)
    assert isinstance(reg.executor_for(CUSTOM), CustomExecutor)
    assert isinstance(executor_for(CUSTOM, FULL), CustomExecutor)


@pytest.mark.parametrize("job", [CHAIN_ROOT, AGENT])
def test_publish_chain_root_and_agent_are_unsupported(job: object) -> None:
    with pytest.raises(ExecutorError) as info:
        ExecutorRegistry(FULL).executor_for(job)  # type: ignore[arg-type]
    assert info.value.code == "unsupported_job_type"


@pytest.mark.parametrize("job", [HTTP, LLM, MCP, CUSTOM])
def test_unconfigured_kind_is_unsupported(job: object) -> None:
    with pytest.raises(ExecutorError) as info:
        ExecutorRegistry(ExecutorsConfig()).executor_for(job)  # type: ignore[arg-type]
    assert info.value.code == "unsupported_job_type"


async def test_executor_refuses_another_kind() -> None:
    ex = ExecutorRegistry(FULL).executor_for(HTTP)
    with pytest.raises(ExecutorError) as info:
        await ex.execute(CUSTOM, None, deadline_s=1)
    assert info.value.code == "unsupported_job_type"


def test_deadline_from_bounds_and_job_timeouts() -> None:
    assert deadline_for(HTTP, None) == 60.0  # ResourceBounds() default
    assert deadline_for(HTTP, ResourceBounds(max_wall_time_seconds=7)) == 7.0
    assert deadline_for(McpJob(server="s", tool_name="t", arguments={}, timeout_seconds=3),
                        ResourceBounds(max_wall_time_seconds=7)) == 3.0
    assert deadline_for(McpJob(server="s", tool_name="t", arguments={}, timeout_seconds=30),
                        ResourceBounds(max_wall_time_seconds=7)) == 7.0
    assert deadline_for(AGENT, None) == 5.0


async def test_with_deadline_cancels_and_raises_timeout() -> None:
    cancelled = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(ExecutorError) as info:
        await with_deadline(forever(), 0.05)
    assert info.value.code == "timeout" and cancelled.is_set()
    with pytest.raises(ExecutorError) as info:
        await with_deadline(forever(), 0)
    assert info.value.code == "timeout"
    assert await with_deadline(asyncio.sleep(0, "done"), 1) == "done"


def test_custom_config_normalises_hex_keys() -> None:
    from cowboy_runner.executors import CustomExecutorConfig
    cmd = CustomExecutorConfig(argv=("true",))
    cfg = CustomConfig(executors={"0x" + "AB" * 32: cmd})
    assert dict(cfg.executors) == {b"\xab" * 32: cmd}
    with pytest.raises(ValueError):
        CustomConfig(executors={"zz" * 32: cmd})
    with pytest.raises(ValueError):
        CustomExecutorConfig(argv=())
