"""Runner job executors (docs/runner-executors.md): HTTP, LLM, MCP and custom jobs, independent of the transport.

Usage::

    registry = ExecutorRegistry(config)
    executor = registry.executor_for(spec.job_type)          # ExecutorError("unsupported_job_type") …
    result = await executor.execute(spec.job_type, spec.bounds, deadline_s=deadline_for(spec.job_type, spec.bounds))
"""

from __future__ import annotations

from cowboy_protocol.types.jobspec import AgentJob, JobType, McpJob, ResourceBounds
from cowboy_protocol.types.runner import JOB_KIND_NAMES
from cowboy_runner.executors.adapter import AdapterConfig, ExternalAdapterExecutor
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
from cowboy_runner.executors.plugins import PluginConfig, PluginError, build_plugin

__all__ = [
    "DEADLINE_MARGIN_S",
    "AdapterConfig",
    "CustomConfig",
    "CustomExecutor",
    "CustomExecutorConfig",
    "ExecutionResult",
    "Executor",
    "ExecutorError",
    "ExecutorRegistry",
    "ExecutorsConfig",
    "ExternalAdapterExecutor",
    "HttpConfig",
    "HttpExecutor",
    "LlmConfig",
    "LlmExecutor",
    "McpConfig",
    "McpExecutor",
    "McpServerConfig",
    "PluginConfig",
    "PluginError",
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
    """The executors of one runner, built once from its configuration: one per job kind, from the built-in
    sections, the external adapters and the plugins (a kind served twice is a ``ValueError``)."""

    def __init__(self, config: ExecutorsConfig, *, llm_observer: LlmObserver | None = None) -> None:
        self.config = config
        """Settings."""
        cap = config.max_output_bytes
        self._http = None if config.http is None else HttpExecutor(config.http, max_output_bytes=cap)
        self._llm = None if config.llm is None else LlmExecutor(config.llm, max_output_bytes=cap,
                                                                 observer=llm_observer)
        self._mcp = None if config.mcp is None else McpExecutor(config.mcp, max_output_bytes=cap)
        self._custom = None if config.custom is None else CustomExecutor(config.custom, max_output_bytes=cap)
        by_kind: dict[str, tuple[str, Executor]] = {}

        def add(kind: str, source: str, executor: Executor) -> None:
            if kind in by_kind:
                raise ValueError(f"job kind {kind!r} is served by both {by_kind[kind][0]} and {source}")
            by_kind[kind] = (source, executor)

        for kind, builtin in (("http", self._http), ("llm", self._llm), ("mcp", self._mcp),
                              ("custom", self._custom)):
            if builtin is not None:
                add(kind, f"executors.{kind}", builtin)
        for name, adapter in sorted(config.adapters.items()):
            executor = ExternalAdapterExecutor(name, adapter, max_output_bytes=cap)
            for kind in adapter.kinds:
                add(kind, f"executors.adapters.{name}", executor)
        for name, plugin in sorted(config.plugins.items()):
            built = build_plugin(name, plugin, max_output_bytes=cap)
            for kind in plugin.kinds:
                add(kind, f"executors.plugins.{name}", built)
        self._by_kind = {kind: executor for kind, (_source, executor) in by_kind.items()}

    async def aclose(self) -> None:
        """Stop what executors keep between jobs (the MCP stdio server processes)."""
        if self._mcp is not None:
            await self._mcp.aclose()

    def kinds(self) -> tuple[str, ...]:
        """Names (``capabilities.job_types``) of the job kinds this registry serves."""
        return tuple(sorted(self._by_kind))

    def executor_for(self, job: JobType) -> Executor:
        """The executor of ``job``'s kind.

        ``unsupported_job_type``: a kind no built-in section, adapter or plugin serves (publish_chain_root and
        agent jobs have no built-in executor).
        """
        kind = JOB_KIND_NAMES.get(getattr(type(job), "KIND", -1))
        if kind is None:
            raise ExecutorError("unsupported_job_type", f"unknown job type {type(job).__name__}")
        found = self._by_kind.get(kind)
        if found is None:
            raise ExecutorError("unsupported_job_type", f"{type(job).__name__} is not served by this runner "
                                                        f"(no executors.{kind}, adapter or plugin)")
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
