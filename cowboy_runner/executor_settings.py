"""Adapter from ``runner.toml``'s ``[executors.*]`` sections (``cowboy_runner.config``) to the executors' own
configuration (``cowboy_runner.executors``).

Every key takes effect (docs/runner.md "[executors.*]"): the operator limits ``executors.http.connect_timeout_s`` /
``request_timeout_s``, ``executors.llm.timeout_s``, ``executors.mcp.timeout_s`` and ``executors.custom.time_limit_s``
/ ``memory_limit_mb`` bound every execution together with the job's own bounds (the shorter / smaller wins).
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Mapping
from typing import Any

from cowboy_protocol.types.runner import JOB_KINDS
from cowboy_runner.config import ConfigError, RunnerSettings
from cowboy_runner.executors import (
    CustomConfig,
    ExecutorsConfig,
    HttpConfig,
    LlmConfig,
    McpConfig,
    cgroups,
)
from cowboy_runner.executors.config import (
    CustomExecutorConfig,
    HttpLimits,
    LlmLimits,
    McpLimits,
    SandboxSettings,
)
from cowboy_runner.executors.plugins import PluginError, load_factory
from cowboy_runner.executors.reachability import program_problem
from cowboy_runner.executors.sandbox import bwrap_problem, container_problem
from cowboy_runner.executors.slots import KindLimit

ALLOW_PRIVATE_ENV = "COWBOY_RUNNER_ALLOW_PRIVATE_ADDRESSES"
"""``1``: HTTP jobs may reach loopback/private addresses even when ``runner.toml``'s
``executors.http.allow_private_addresses`` is false (an override for tests and containers)."""


def llm_api_key(settings: RunnerSettings) -> str | None:
    """The LLM API key from ``api_key``, the ``api_key_env`` variable or the ``api_key_file`` file (None: none
    configured). A configured source that yields no key is a :class:`ConfigError` naming the key: an unset
    variable, or a key file that is missing, empty, or readable by group or others (like the runner key)."""
    llm = settings.executors.llm
    if llm.api_key is not None:
        return llm.api_key
    if llm.api_key_env is not None:
        value = os.environ.get(llm.api_key_env, "")
        if not value:
            raise ConfigError("executors.llm.api_key_env", f"environment variable {llm.api_key_env} is not set (or "
                                                           "empty); the LLM endpoint would get no key")
        return value
    if llm.api_key_file is None:
        return None
    path = settings.home / llm.api_key_file
    try:
        mode = path.stat().st_mode
        if mode & 0o077:
            raise ConfigError("executors.llm.api_key_file", f"{path}: mode {stat.S_IMODE(mode):04o} lets group or "
                                                            f"others read the key; run chmod 600 {path}")
        value = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError("executors.llm.api_key_file", f"cannot read {path}: {e}") from None
    if not value:
        raise ConfigError("executors.llm.api_key_file", f"{path} is empty")
    return value


def _shared(settings: object, limits: type) -> dict[str, Any]:
    """The values of the keys a settings section shares with its executor (declared once, in ``limits``)."""
    return {f.name: getattr(settings, f.name) for f in dataclasses.fields(limits)}


def executors_config(settings: RunnerSettings) -> ExecutorsConfig:
    """Adapter from ``runner.toml``'s executor sections to the executors' own configuration; raises
    :class:`ConfigError` for an LLM key source that yields no key (:func:`llm_api_key`)."""
    caps, ex = settings.capabilities, settings.executors
    http = None
    if JOB_KINDS["http"] in caps.job_kinds:
        limits = _shared(ex.http, HttpLimits)
        limits["allow_private_addresses"] = ex.http.allow_private_addresses or os.environ.get(ALLOW_PRIVATE_ENV) == "1"
        http = HttpConfig(**limits, allowed_domains=tuple(caps.http_domains))
    llm = None
    if ex.llm.base_url is not None:
        rate = settings.rate_card.rate_for(JOB_KINDS["llm"])
        llm = LlmConfig(**_shared(ex.llm, LlmLimits), base_url=ex.llm.base_url, models=dict(ex.llm.models),
                        api_key=llm_api_key(settings),
                        price=None if rate is None else (rate.base_price, rate.price_per_unit))
    mcp = None
    if ex.mcp.servers:
        mcp = McpConfig(**_shared(ex.mcp, McpLimits), servers=dict(ex.mcp.servers),
                        default_timeout_seconds=ex.mcp.timeout_s, max_timeout_seconds=ex.mcp.timeout_s)
    custom = None
    if ex.custom.programs:
        c = ex.custom
        custom = CustomConfig(**_shared(c, SandboxSettings), executors=dict(c.programs),
                              max_stdout_bytes=c.max_output_bytes, time_limit_s=c.time_limit_s,
                              memory_limit_mb=c.memory_limit_mb)
    for name, plugin in ex.plugins.items():
        try:
            load_factory(plugin.entry_point)
        except PluginError as e:
            raise ConfigError(f"executors.plugins.{name}.entry_point", str(e)) from None
    return ExecutorsConfig(http=http, llm=llm, mcp=mcp, custom=custom, adapters=dict(ex.adapters),
                           plugins=dict(ex.plugins))


def kind_limits(settings: RunnerSettings) -> dict[str, KindLimit]:
    """Per-kind ``max_concurrent`` / ``queue`` of the ``[executors.<kind>]`` sections that set a limit."""
    ex = settings.executors
    sections: dict[str, tuple[int | None, int]] = {
        "http": (ex.http.max_concurrent, ex.http.queue), "llm": (ex.llm.max_concurrent, ex.llm.queue),
        "mcp": (ex.mcp.max_concurrent, ex.mcp.queue), "custom": (ex.custom.max_concurrent, ex.custom.queue)}
    return {kind: KindLimit(limit, queue) for kind, (limit, queue) in sections.items() if limit is not None}


def check_programs(programs: Mapping[bytes, CustomExecutorConfig]) -> None:
    """A :class:`ConfigError` naming ``executors.custom.0x<hash>`` and its program when a bwrap-sandboxed program
    cannot start inside its sandbox (``executors/reachability.py``: under ``/tmp``, not readable and executable by
    the sandbox uid, outside what the sandbox binds); checked at start so that no job fails with ``execvp``."""
    as_other_uid = os.geteuid() == 0  # a root runner drops to an unprivileged uid of its own (sandbox.sandbox_uid)
    for executor_hash, spec in programs.items():
        why = program_problem(spec, as_other_uid=as_other_uid)
        if why is not None:
            raise ConfigError(f"executors.custom.0x{executor_hash.hex()}", f"program {spec.argv[0]}: {why}")


def check_isolation(config: ExecutorsConfig) -> str | None:
    """Start-up check of the custom executor's isolation: a :class:`ConfigError` naming
    ``executors.custom.isolation`` when it is ``bwrap`` and bubblewrap cannot build a sandbox here (the runner never
    falls back to running programs unsandboxed); a warning text to log when it is ``none``, or when no job cgroup
    can be created (memory then bounded by RLIMIT_AS); else None."""
    custom = config.custom
    if custom is None:
        return None
    if custom.isolation in ("podman", "docker"):
        images = tuple(p.image for p in custom.executors.values() if p.image is not None)
        problem = container_problem(custom.engine or custom.isolation, images)
        if problem is not None:
            raise ConfigError("executors.custom.isolation", f"{custom.isolation!r} but {problem}")
        return None
    if custom.isolation == "none":
        return ('executors.custom.isolation = "none": custom programs run unsandboxed as the runner\'s user, with '
                "its environment and able to read its key; use only for development")
    check_programs(custom.executors)
    problem = bwrap_problem(custom.bwrap, custom.sandbox_uid_base)
    if problem is not None:
        raise ConfigError("executors.custom.isolation", f'"bwrap" but {problem}; install bubblewrap, allow '
                                                        'unprivileged user namespaces, or set isolation = "none" '
                                                        "(development only)")
    if custom.cgroup and cgroups.available(custom.cgroup_parent) is None:
        where = custom.cgroup_parent or "/sys/fs/cgroup/{memory,pids} (cgroup v1)"
        return (f"executors.custom.cgroup: no usable cgroup at {where}; the memory limit falls back to RLIMIT_AS "
                "(set cgroup_parent to a delegated cgroup v2 directory, or cgroup = false to silence this)")
    return None
