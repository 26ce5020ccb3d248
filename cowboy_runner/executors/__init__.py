"""Runner job executors (docs/runner-executors.md): HTTP, LLM, MCP and custom jobs, independent of the transport.

Usage::

    registry = ExecutorRegistry(config)
    executor = registry.executor_for(spec.job_type)          # ExecutorError("unsupported_job_type") …
    result = await executor.execute(spec.job_type, spec.bounds, deadline_s=deadline_for(spec.job_type, spec.bounds))
"""

from __future__ import annotations

from cowboy_protocol.types.jobspec import (
    AgentJob,
    CustomJob,
    HttpJob,
    JobType,
    LlmJob,
    McpJob,
    PublishChainRootJob,
    ResourceBounds,
)
from cowboy_runner.executors.base import (
    DEADLINE_MARGIN_S,
    ExecutionResult,
    Executor,
    ExecutorError,
    canonical_json,
    with_deadline,
)
from cowboy_runner.executors.config import (
    CustomConfig,
    CustomExecutorConfig,
    ExecutorsConfig,
    HttpConfig,
    LlmConfig,
    McpConfig,
    McpServerConfig,
)
from cowboy_runner.executors.custom import CustomExecutor
from cowboy_runner.executors.http import HttpExecutor
from cowboy_runner.executors.llm import LlmExecutor, LlmObserver
from cowboy_runner.executors.mcp import McpExecutor

__all__ = [
    "DEADLINE_MARGIN_S",
    "CustomConfig",
    "CustomExecutor",
    "CustomExecutorConfig",
    "ExecutionResult",
    "Executor",
    "ExecutorError",
    "ExecutorRegistry",
    "ExecutorsConfig",
    "HttpConfig",
    "HttpExecutor",
    "LlmConfig",
    "LlmExecutor",
    "McpConfig",
    "McpExecutor",
    "McpServerConfig",
    "canonical_json",
    "deadline_for",
    "executor_for",
    "with_deadline",
]


def deadline_for(job: JobType, bounds: ResourceBounds | None) -> float:
    """Seconds an execution may take: ``bounds.max_wall_time_seconds`` (the default bounds when None),
    lowered by the job's own ``timeout_seconds`` for MCP and agent jobs."""
    limit = float((bounds or ResourceBounds()).max_wall_time_seconds)
    own = job.timeout_seconds if isinstance(job, McpJob | AgentJob) else None
    return limit if own is None else min(limit, float(own))


class ExecutorRegistry:
    """The executors of one runner, built once from its configuration."""

    def __init__(self, config: ExecutorsConfig, *, llm_observer: LlmObserver | None = None) -> None:
        self.config = config
        """Settings."""
        cap = config.max_output_bytes
        self._http = None if config.http is None else HttpExecutor(config.http, max_output_bytes=cap)
        self._llm = None if config.llm is None else LlmExecutor(config.llm, max_output_bytes=cap,
                                                                 observer=llm_observer)
        self._mcp = None if config.mcp is None else McpExecutor(config.mcp, max_output_bytes=cap)
        self._custom = None if config.custom is None else CustomExecutor(config.custom, max_output_bytes=cap)

    async def aclose(self) -> None:
        """Stop what executors keep between jobs (the MCP stdio server processes)."""
        if self._mcp is not None:
            await self._mcp.aclose()

    def kinds(self) -> tuple[str, ...]:
        """Names (``capabilities.job_types``) of the job kinds this registry serves."""
        found = (("http", self._http), ("llm", self._llm), ("mcp", self._mcp), ("custom", self._custom))
        return tuple(name for name, executor in found if executor is not None)

    def executor_for(self, job: JobType) -> Executor:
        """The executor of ``job``'s kind.

        ``unsupported_job_type``: publish_chain_root and agent jobs (no executor in this runner), or a kind
        whose configuration section is absent.
        """
        found: Executor | None
        if isinstance(job, HttpJob):
            found = self._http
        elif isinstance(job, LlmJob):
            found = self._llm
        elif isinstance(job, McpJob):
            found = self._mcp
        elif isinstance(job, CustomJob):
            found = self._custom
        elif isinstance(job, PublishChainRootJob | AgentJob):
            raise ExecutorError("unsupported_job_type", f"this runner has no executor for {type(job).__name__}")
        else:
            raise ExecutorError("unsupported_job_type", f"unknown job type {type(job).__name__}")
        if found is None:
            raise ExecutorError("unsupported_job_type", f"{type(job).__name__} is not configured on this runner")
        return found

    async def execute(self, job: JobType, bounds: ResourceBounds | None, *,
                      deadline_s: float | None = None) -> ExecutionResult:
        """Run ``job`` with the executor of its kind; the deadline is :func:`deadline_for` unless ``deadline_s``
        (what is left of it after the job waited for a slot) is given."""
        limit = deadline_for(job, bounds) if deadline_s is None else deadline_s
        return await self.executor_for(job).execute(job, bounds, deadline_s=limit)


def executor_for(job: JobType, config: ExecutorsConfig) -> Executor:
    """The executor for ``job`` under ``config`` (a fresh :class:`ExecutorRegistry`; keep one to reuse)."""
    return ExecutorRegistry(config).executor_for(job)
