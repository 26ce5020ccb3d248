"""Per-executor concurrency (issue 21 item 2): each job kind has its own slots and queue, a full kind is refused
(AtCapacity) while other kinds are still taken, the wait counts against the job's wall time, and the set of kinds
the runner cannot take is reported (for the CapabilityDelta of CIP-11 §6.5) and sent by the link."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.transport.enums import AckKind, RejectReason
from cowboy_protocol.transport.frames import JobAssignment
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.session import Authenticated
from cowboy_protocol.types.jobspec import JobRequest, canonical_job_spec
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_runner.config import ConfigError, parse_settings
from cowboy_runner.executor_settings import kind_limits
from cowboy_runner.executors import ExecutionResult, ExecutorError
from cowboy_runner.executors.slots import ExecutorSlots, KindLimit
from cowboy_runner.jobs import JobManager
from cowboy_runner.journal import Journal
from cowboy_runner.link import Link, LinkConfig
from cowboy_runner.txbuild import Fees
from tests.unit.runner.test_runner_daemon_jobs import KEY, VKEY, FakeChain, FakeChannel

pytestmark = pytest.mark.timeout(300)

JOB_TYPES: dict[str, dict[str, Any]] = {
    "http": {"kind": "http", "url": "https://example.com/x", "method": "GET"},
    "llm": {"kind": "llm", "model_id": "0x" + "00" * 32, "prompt": "hi", "max_tokens": 10},
}


def _frame(job_id: bytes, kind: str, wall_s: int = 60) -> JobAssignment:
    doc = {"job_type": JOB_TYPES[kind], "verification": {"mode": "none", "runners": 1, "threshold": 1},
           "max_price": "1000000", "timeout_blocks": 100,
           "bounds": {"max_wall_time_seconds": wall_s}}
    req: JobRequest = parse_job_request_json(doc)
    spec = canonical_job_spec(req.to_spec(job_id, b"\x11" * 20, 1))
    return JobAssignment(job_id=job_id, job_spec=spec, job_spec_hash=keccak256(spec), assignment_height=5,
                         assignment_hash=b"\xaa" * 32, deadline_block=105, runner_pubkey=PubKey.runner(KEY.public_key),
                         validator_pubkey=PubKey.validator(VKEY), validator_signed=b"\x01" * 64)


class GatedExecutors:
    """Every execution waits for ``gate``; records (kind, deadline_s) per call."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started: list[tuple[str, float | None]] = []

    def executor_for(self, job: object) -> object:
        return self

    def kinds(self) -> tuple[str, ...]:
        return ("http", "llm")

    async def execute(self, job: object, bounds: object, *, deadline_s: float | None = None) -> ExecutionResult:
        self.started.append((type(job).__name__, deadline_s))
        await self.gate.wait()
        return ExecutionResult(b"ok", 1)


def _manager(tmp: Path, chain: FakeChain, executors: GatedExecutors, limits: dict[str, KindLimit],
             kinds_seen: list[frozenset[str]]) -> JobManager:
    m = JobManager(key=KEY, chain_id="cowboy-test-1", chain=chain, journal=Journal(tmp / "j.sqlite3"),
                   executors=executors,  # type: ignore[arg-type]
                   max_concurrent=8, fees=lambda: Fees.from_basefees(1, 1), kind_limits=limits,
                   on_kinds=kinds_seen.append)
    m.head = chain.head
    return m


async def _push(m: JobManager, chain: FakeChain, job_id: bytes, kind: str) -> AckKind | RejectReason:
    f = _frame(job_id, kind)
    chain.assign(f)
    status = await m.on_push(FakeChannel(), f)
    return status.reject_reason if status.reject_reason is not None else status.kind


async def _spin() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_a_full_kind_is_refused_while_another_kind_is_taken(tmp_path: Path) -> None:
    async def main() -> None:
        chain, ex, seen = FakeChain(), GatedExecutors(), []
        m = _manager(tmp_path, chain, ex, {"http": KindLimit(max_concurrent=1)}, seen)
        assert await _push(m, chain, b"\x01" * 32, "http") is AckKind.ACCEPTED
        await _spin()
        assert await _push(m, chain, b"\x02" * 32, "http") is RejectReason.AT_CAPACITY
        assert await _push(m, chain, b"\x03" * 32, "llm") is AckKind.ACCEPTED  # the LLM is not starved
        assert m.unavailable_kinds() == {"http"} and seen[-1] == {"http"}
        status = m.executor_status()
        assert status["http"] == {"advertised": False, "unhealthy": None, "running": 1, "waiting": 0,
                                  "max_concurrent": 1, "queue": 0}
        assert status["llm"] == {"advertised": True, "unhealthy": None}
        ex.gate.set()
        await asyncio.gather(*m.tasks.values())
        await _spin()
        assert m.unavailable_kinds() == frozenset() and seen[-1] == frozenset()
        assert await _push(m, chain, b"\x04" * 32, "http") is AckKind.ACCEPTED
        await asyncio.gather(*m.tasks.values())
    asyncio.run(asyncio.wait_for(main(), 20))


def test_queued_job_waits_for_the_slot_and_its_wait_counts_against_its_wall_time(tmp_path: Path) -> None:
    async def main() -> None:
        chain, ex, seen = FakeChain(), GatedExecutors(), []
        m = _manager(tmp_path, chain, ex, {"llm": KindLimit(max_concurrent=1, queue=1)}, seen)
        assert await _push(m, chain, b"\x01" * 32, "llm") is AckKind.ACCEPTED
        assert await _push(m, chain, b"\x02" * 32, "llm") is AckKind.ACCEPTED  # queued
        assert await _push(m, chain, b"\x03" * 32, "llm") is RejectReason.AT_CAPACITY
        await _spin()
        assert len(ex.started) == 1 and m.slots.waiting["llm"] == 1 and m.slots.running["llm"] == 1
        await asyncio.sleep(0.2)
        ex.gate.set()
        await asyncio.gather(*m.tasks.values())
        assert len(ex.started) == 2
        first, second = ex.started[0][1], ex.started[1][1]
        assert first is not None and second is not None and first - second >= 0.2  # the queued one got less
        assert m.slots.running["llm"] == 0 and m.slots.waiting["llm"] == 0
    asyncio.run(asyncio.wait_for(main(), 20))


def test_queue_wait_past_the_wall_time_is_an_error_result(tmp_path: Path) -> None:
    async def main() -> None:
        slots = ExecutorSlots({"llm": KindLimit(1, 1)})
        slots.reserve("llm")
        slots.reserve("llm")
        async with slots.run("llm", 1.0):
            with pytest.raises(ExecutorError) as info:
                async with slots.run("llm", 0.05):
                    raise AssertionError("must not get the slot")
            assert info.value.code == "queue_timeout"
            assert slots.waiting["llm"] == 0 and slots.running["llm"] == 1
        assert slots.running["llm"] == 0 and slots.can_take("llm")
    asyncio.run(main())


def test_slots_count_running_plus_waiting_against_limit_plus_queue() -> None:
    slots = ExecutorSlots({"llm": KindLimit(2, 1), "http": KindLimit(None)})
    assert set(slots.limits) == {"llm"}
    for _ in range(3):
        assert slots.can_take("llm")
        slots.reserve("llm")
    assert not slots.can_take("llm") and slots.full_kinds() == {"llm"}
    assert slots.can_take("http") and slots.can_take("custom")


def test_runner_toml_limits(tmp_path: Path) -> None:
    base = ('[runner]\nvalidator_rpc = "http://127.0.0.1:4000"\n[capabilities]\njob_types = ["http"]\n'
            'max_concurrent_jobs = 4\n[rate_card.http]\nbase_price = "1"\nprice_per_unit = "0"\n')
    s = parse_settings(base + "[executors.llm]\nmax_concurrent = 1\nqueue = 3\n[executors.http]\nmax_concurrent = 8\n",
                       tmp_path)
    assert kind_limits(s) == {"llm": KindLimit(1, 3), "http": KindLimit(8, 0)}
    with pytest.raises(ConfigError, match=r"executors\.mcp\.queue: needs max_concurrent"):
        parse_settings(base + "[executors.mcp]\nqueue = 2\n", tmp_path)
    with pytest.raises(ConfigError, match=r"executors\.custom\.max_concurrent: expected an integer >= 1"):
        parse_settings(base + "[executors.custom]\nmax_concurrent = 0\n", tmp_path)


class _FakeSession:
    closed = False

    def __init__(self) -> None:
        self.deltas: list[tuple[tuple[str, ...], tuple[str, ...]]] = []

    def capability_delta(self, height: int, *, add_capabilities: Any = (), remove_capabilities: Any = ()) -> None:
        self.deltas.append((tuple(sorted(add_capabilities)), tuple(sorted(remove_capabilities))))

    def take_outbound(self) -> list[Any]:
        return []


def test_link_sends_capability_deltas_for_kinds_leaving_and_returning() -> None:
    async def main() -> None:
        link = Link(None, LinkConfig(host="127.0.0.1", port=1, chain_id="c", validator_set=()),  # type: ignore[arg-type]
                    height=lambda: 7, on_assignment=None)  # type: ignore[arg-type]
        link.set_unavailable(frozenset({"llm"}))  # no session yet: remembered only
        session = _FakeSession()
        link.session = session  # type: ignore[assignment]
        link._handle([Authenticated(PubKey.validator(VKEY))])  # a new session starts with the unavailable kinds
        link.set_unavailable(frozenset({"llm", "http"}))
        link.set_unavailable(frozenset({"http"}))
        link.set_unavailable(frozenset({"http"}))  # unchanged: nothing sent
        assert session.deltas == [((), ("llm",)), ((), ("http",)), (("llm",), ())]
    asyncio.run(main())
