"""Adapter from ``runner.toml``'s ``[executors.*]`` sections (``cowboy_runner.config``) to the executors' own
configuration (``cowboy_runner.executors``).

Every key takes effect (docs/runner.md "[executors.*]"): the operator limits ``executors.http.connect_timeout_s`` /
``request_timeout_s``, ``executors.llm.timeout_s``, ``executors.mcp.timeout_s`` and ``executors.custom.time_limit_s``
/ ``memory_limit_mb`` bound every execution together with the job's own bounds (the shorter / smaller wins).
"""

from __future__ import annotations

import os

from cowboy_protocol.types.runner import JOB_KINDS
from cowboy_runner.config import RunnerSettings
from cowboy_runner.executors import (
    CustomConfig,
    ExecutorsConfig,
    HttpConfig,
    LlmConfig,
    McpConfig,
)

ALLOW_PRIVATE_ENV = "COWBOY_RUNNER_ALLOW_PRIVATE_ADDRESSES"
"""``1``: HTTP jobs may reach loopback/private addresses even when ``runner.toml``'s
``executors.http.allow_private_addresses`` is false (an override for tests and containers)."""


def executors_config(settings: RunnerSettings) -> ExecutorsConfig:
    """Adapter from ``runner.toml``'s executor sections to the executors' own configuration."""
    caps, ex = settings.capabilities, settings.executors
    http = None
    if JOB_KINDS["http"] in caps.job_kinds:
        h = ex.http
        http = HttpConfig(allowed_domains=tuple(caps.http_domains), max_response_bytes=h.max_response_bytes,
                          allow_private_addresses=h.allow_private_addresses or os.environ.get(ALLOW_PRIVATE_ENV) == "1",
                          connect_timeout_s=h.connect_timeout_s, request_timeout_s=h.request_timeout_s,
                          max_redirects=h.max_redirects, user_agent=h.user_agent, allowed_methods=h.allowed_methods,
                          credential_headers=h.credential_headers)
    llm = None
    if ex.llm.base_url is not None:
        api_key = ex.llm.api_key or (os.environ.get(ex.llm.api_key_env) if ex.llm.api_key_env else None)
        llm = LlmConfig(base_url=ex.llm.base_url, models=dict(ex.llm.models), api_key=api_key,
                        default_temperature=ex.llm.default_temperature, timeout_s=ex.llm.timeout_s,
                        response_format=ex.llm.response_format,  # type: ignore[arg-type]  # checked by the loader
                        max_response_bytes=ex.llm.max_response_bytes)
    mcp = None
    if ex.mcp.servers:
        mcp = McpConfig(servers=dict(ex.mcp.servers), default_timeout_seconds=ex.mcp.timeout_s,
                        max_timeout_seconds=ex.mcp.timeout_s, protocol_version=ex.mcp.protocol_version,
                        max_response_bytes=ex.mcp.max_response_bytes)
    custom = None
    if ex.custom.programs:
        c = ex.custom
        custom = CustomConfig(executors=dict(c.programs), max_stdout_bytes=c.max_output_bytes,
                              time_limit_s=c.time_limit_s, memory_limit_mb=c.memory_limit_mb,
                              stderr_tail_bytes=c.stderr_tail_bytes, enforce_memory_limit=c.enforce_memory_limit)
    return ExecutorsConfig(http=http, llm=llm, mcp=mcp, custom=custom)
