"""Poll fallback (CIP-11 §14): while no QUIC session is up, fetch ``GET /runner/{address}/jobs`` and hand new
assignments to the job logic; stop as soon as a session is back. A 410 ``poll_disabled`` turns polling off for the
life of the process (logged once).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from cowboy_protocol.http_client import ApiError, NodeUnreachable
from cowboy_runner.chain_client import ChainClient, PollDisabled
from cowboy_runner.jobs import JobManager
from cowboy_runner.metrics import RunnerMetrics

log = structlog.get_logger("cowboy.runner.poll")


class Poller:
    """The poll loop of one runner."""

    def __init__(self, chain: ChainClient, jobs: JobManager, address: bytes, interval_s: float, *,
                 sessions_up: Callable[[], bool], metrics: RunnerMetrics) -> None:
        self.chain = chain
        self.jobs = jobs
        self.address = address
        self.interval_s = interval_s
        self.sessions_up = sessions_up
        self.metrics = metrics
        self.active = False
        """True while polling (no session up)."""
        self.disabled = False
        """True after a 410: the chain turned the endpoint off."""

    async def run(self) -> None:
        """Poll every ``interval_s`` while no session is up, until disabled or cancelled."""
        while not self.disabled:
            await asyncio.sleep(self.interval_s)
            up = self.sessions_up()
            if up:
                if self.active:
                    log.info("session is up: poll fallback stopped")
                self.active = False
                continue
            if not self.active:
                log.info("no session up: poll fallback started")
            self.active = True
            await self.poll_once()

    async def poll_once(self) -> int:
        """One full pass over the runner's live assignments; returns how many new ones were handed over."""
        new = 0
        after: bytes | None = None
        while True:
            try:
                page = await self.chain.runner_jobs(self.address, after=after)
            except PollDisabled:
                self.disabled, self.active = True, False
                self.metrics.polls.labels(outcome="disabled").inc()
                log.warning("poll fallback disabled by the chain (CIP11_POLL_DISABLED); relying on QUIC push only")
                return new
            except (ApiError, NodeUnreachable) as e:
                self.metrics.polls.labels(outcome="error").inc()
                log.warning("poll failed", error=str(e))
                return new
            self.metrics.polls.labels(outcome="ok").inc()
            for doc in page.get("jobs", []):
                if doc.get("revealed") or doc.get("committed"):
                    continue
                try:
                    job_id = bytes.fromhex(str(doc["job_id"])[2:])
                except (KeyError, ValueError):
                    continue
                if self.jobs.journal.get(job_id) is not None:
                    continue  # already ours (accepted from a push or an earlier poll)
                status = await self.jobs.on_poll(doc)
                new += status.kind.name == "ACCEPTED"
            nxt = page.get("next_after")
            if not page.get("truncated") or not nxt:
                return new
            after = bytes.fromhex(str(nxt)[2:])
