"""Poll fallback (CIP-11 §14, issue 6 item 7): poll only while no session is up, stop when push is back, follow
pages, skip what is already journaled or already committed/revealed, and stop for good on 410 poll_disabled."""

from __future__ import annotations

import asyncio
from typing import Any

from cowboy_protocol.http_client import NodeUnreachable
from cowboy_protocol.transport.frames import AckStatus
from cowboy_runner.chain_client import PollDisabled
from cowboy_runner.metrics import RunnerMetrics
from cowboy_runner.poll import Poller

ADDRESS = b"\x11" * 20


def _job(i: int, **extra: Any) -> dict[str, Any]:
    return {"job_id": "0x" + bytes([i]).hex() * 32, **extra}


class FakeChain:
    """Serves pages of ``GET /runner/{address}/jobs``; ``disabled`` answers 410, ``down`` is unreachable."""

    def __init__(self, pages: list[dict[str, Any]]) -> None:
        self.pages = pages
        self.calls: list[bytes | None] = []
        self.disabled = False
        self.down = False

    async def runner_jobs(self, address: bytes, after: bytes | None = None) -> dict[str, Any]:
        assert address == ADDRESS
        self.calls.append(after)
        if self.disabled:
            raise PollDisabled()
        if self.down:
            raise NodeUnreachable("http://127.0.0.1:1", "connection refused")
        return self.pages[0] if after is None else self.pages[1]


class FakeJournal:
    def __init__(self, known: set[bytes]) -> None:
        self.known = known

    def get(self, job_id: bytes) -> object | None:
        return object() if job_id in self.known else None


class FakeJobs:
    """Records what the poller hands over; accepts everything."""

    def __init__(self, known: set[bytes] = frozenset()) -> None:  # type: ignore[assignment]
        self.journal = FakeJournal(set(known))
        self.handed: list[str] = []

    async def on_poll(self, doc: dict[str, Any]) -> AckStatus:
        self.handed.append(doc["job_id"])
        return AckStatus.accepted()


def _poller(chain: FakeChain, jobs: FakeJobs, up: list[bool], metrics: RunnerMetrics) -> Poller:
    return Poller(chain, jobs, ADDRESS, 0.01, sessions_up=lambda: up[0], metrics=metrics)  # type: ignore[arg-type]


def _count(metrics: RunnerMetrics, outcome: str) -> float:
    return metrics.registry.get_sample_value("cowboy_runner_polls_total", {"outcome": outcome}) or 0.0


async def test_polls_pages_and_hands_over_only_new_unsettled_assignments() -> None:
    pages = [{"jobs": [_job(1), _job(2, committed=True), _job(3)], "truncated": True, "next_after": "0x" + "03" * 32},
             {"jobs": [_job(4, revealed=True), _job(5)], "truncated": False}]
    chain, jobs = FakeChain(pages), FakeJobs(known={bytes([3]) * 32})
    metrics = RunnerMetrics()
    new = await _poller(chain, jobs, [False], metrics).poll_once()
    assert chain.calls == [None, b"\x03" * 32]  # the second page starts after the first page's cursor
    assert jobs.handed == [_job(1)["job_id"], _job(5)["job_id"]]  # 2 committed, 3 journaled, 4 revealed: skipped
    assert new == 2 and _count(metrics, "ok") == 2


async def test_polls_only_while_no_session_is_up_and_stops_when_push_is_back() -> None:
    chain, jobs = FakeChain([{"jobs": [], "truncated": False}]), FakeJobs()
    up = [True]
    poller = _poller(chain, jobs, up, RunnerMetrics())
    task = asyncio.create_task(poller.run())
    try:
        await asyncio.sleep(0.1)
        assert chain.calls == [] and not poller.active  # a session is up: no polling at all
        up[0] = False
        while len(chain.calls) < 3:
            await asyncio.sleep(0.01)
        assert poller.active
        up[0] = True
        for _ in range(2000):  # until the poller has seen the session (a fixed delay raced it under load)
            if not poller.active:
                break
            await asyncio.sleep(0.01)
        stopped_at = len(chain.calls)
        await asyncio.sleep(0.1)
        assert len(chain.calls) == stopped_at and not poller.active  # push is back: polling stopped
    finally:
        task.cancel()


async def test_unreachable_validator_is_counted_and_polling_continues() -> None:
    chain, jobs = FakeChain([{"jobs": [_job(1)], "truncated": False}]), FakeJobs()
    metrics = RunnerMetrics()
    poller = _poller(chain, jobs, [False], metrics)
    chain.down = True
    assert await poller.poll_once() == 0 and _count(metrics, "error") == 1 and not poller.disabled
    chain.down = False
    assert await poller.poll_once() == 1


async def test_410_poll_disabled_turns_polling_off_for_good() -> None:
    chain, jobs = FakeChain([{"jobs": [], "truncated": False}]), FakeJobs()
    metrics = RunnerMetrics()
    chain.disabled = True
    poller = _poller(chain, jobs, [False], metrics)
    await asyncio.wait_for(poller.run(), 5)  # returns by itself once disabled
    assert poller.disabled and not poller.active and len(chain.calls) == 1 and _count(metrics, "disabled") == 1
