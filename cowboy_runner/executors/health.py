"""Executor health (docs/runner-executors.md "Health"): one cheap probe per job kind, run at start and then every
``executors.health_interval_s``. A kind whose probe fails is unhealthy: the runner refuses its jobs and stops
advertising it (CapabilityDelta, CIP-11 §6.5) until a later probe passes.

==========  =====================================================================================================
Kind        Probe (healthy when …)
==========  =====================================================================================================
http        always (no dependency of its own; each job's target is the job's business)
llm         ``GET {base_url}/models`` answers with a status below 500 other than 401/403 (a 404 from a server
            without that route still proves it is up; a refused key does not)
mcp         at least one configured server completes ``initialize`` (HTTP; the session is closed again) or has
            an executable ``command`` (stdio; the process is started by the first job)
custom      at least one configured program's ``argv[0]`` is an executable file (found on PATH when it has no /);
            with container isolation, the engine is
==========  =====================================================================================================
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import aiohttp

from cowboy_runner.executors.base import ExecutorError
from cowboy_runner.executors.config import CustomConfig, ExecutorsConfig, LlmConfig, McpConfig
from cowboy_runner.executors.mcp import probe_http

PROBE_TIMEOUT_S = 5.0
"""Longest a probe may take; past it the kind is unhealthy (``probe timed out``)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """One kind's last probe."""

    healthy: bool
    """Whether the probe passed."""
    reason: str
    """Why it failed (empty when healthy), e.g. ``GET …/models: cannot connect``."""


async def probe_llm(config: LlmConfig) -> str | None:
    """None when the endpoint is up and takes the key, else the reason."""
    url = config.base_url.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
    try:
        async with aiohttp.ClientSession() as s, s.get(url, headers=headers, allow_redirects=False) as resp:
            status = resp.status
    except aiohttp.ClientError as e:
        return f"GET {url}: {type(e).__name__}"  # the text may carry the URL only; never the key
    if status in (401, 403):
        return f"GET {url}: HTTP {status} (the endpoint refuses the API key)"
    if status >= 500:
        return f"GET {url}: HTTP {status}"
    return None


async def probe_mcp(config: McpConfig) -> str | None:
    """None when at least one server completes ``initialize``, else every server's reason."""
    problems = []
    for name, server in sorted(config.servers.items()):
        if server.command is not None:  # stdio: started by its first job; here only "can it start"
            if _executable(server.command[0]):
                return None
            problems.append(f"{name}: {server.command[0]} is not an executable file")
            continue
        try:
            await probe_http(name, server, config)
            return None
        except ExecutorError as e:
            problems.append(f"{name}: {e.message}"[:200])
    return "; ".join(problems) or "no server configured"


def _executable(cmd: str) -> bool:
    path = cmd if os.sep in cmd else shutil.which(cmd)
    return path is not None and os.path.isfile(path) and os.access(path, os.X_OK)


def probe_custom(config: CustomConfig) -> str | None:
    """None when at least one program can be started, else why none can."""
    if config.isolation in ("podman", "docker"):  # the programs live in images; the engine must be here
        engine = config.engine or config.isolation
        return None if _executable(engine) else f"{engine} is not an executable file"
    problems = []
    for executor_hash, program in sorted(config.executors.items()):
        cmd = program.argv[0]
        if _executable(cmd):
            return None
        problems.append(f"0x{executor_hash.hex()[:12]}…: {cmd} is not an executable file")
    return "; ".join(problems) or "no program configured"


class HealthMonitor:
    """Probes every configured kind; :meth:`check` returns and remembers the verdicts."""

    def __init__(self, config: ExecutorsConfig, *, timeout_s: float = PROBE_TIMEOUT_S,
                 on_change: Callable[[Mapping[str, str]], None] | None = None) -> None:
        self.config = config
        """The executors' configuration (which kinds exist, where their dependencies are)."""
        self.timeout_s = timeout_s
        """Bound on each probe."""
        self.on_change = on_change
        """Called with ``{kind: reason}`` of the unhealthy kinds after a check that changed any verdict."""
        self.verdicts: dict[str, Verdict] = {}
        """Last verdict per configured kind."""

    def unhealthy(self) -> dict[str, str]:
        """``{kind: reason}`` of the kinds whose last probe failed."""
        return {k: v.reason for k, v in sorted(self.verdicts.items()) if not v.healthy}

    async def _bounded(self, kind: str) -> str | None:
        c = self.config
        try:
            async with asyncio.timeout(self.timeout_s):
                if kind == "llm" and c.llm is not None:
                    return await probe_llm(c.llm)
                if kind == "mcp" and c.mcp is not None:
                    return await probe_mcp(c.mcp)
                if kind == "custom" and c.custom is not None:
                    return probe_custom(c.custom)
                return None
        except TimeoutError:
            return f"probe timed out after {self.timeout_s:g} s"

    def kinds(self) -> tuple[str, ...]:
        """Configured kinds, probed in this order."""
        c = self.config
        found = (("http", c.http), ("llm", c.llm), ("mcp", c.mcp), ("custom", c.custom))
        return tuple(name for name, section in found if section is not None)

    async def check(self) -> dict[str, Verdict]:
        """Probe every configured kind concurrently; returns the new verdicts."""
        kinds = self.kinds()
        reasons = await asyncio.gather(*(self._bounded(k) for k in kinds))
        before = self.unhealthy()
        self.verdicts = {k: Verdict(r is None, r or "") for k, r in zip(kinds, reasons, strict=True)}
        if self.on_change is not None and self.unhealthy() != before:
            self.on_change(self.unhealthy())
        return self.verdicts

    async def run(self, interval_s: float) -> None:
        """Check every ``interval_s`` seconds until cancelled (the first check is the caller's, at start)."""
        while True:
            await asyncio.sleep(interval_s)
            await self.check()
