"""Runner job logic (cowboy_runner/jobs.py) with fakes for the chain, the session channel and the executors:
§10.1 dedup (Accepted once, Duplicate, Reject for a mismatching duplicate), the on-chain checks, capacity and
draining, JobCancel before/after a result transaction exists (§10.5), write-before-send, commit/reveal timing,
REST rebroadcast, and resume from the journal after a restart."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.http_client import ApiError
from cowboy_protocol.jobs.error_result import ErrorResult
from cowboy_protocol.transport.enums import AckKind, RejectReason
from cowboy_protocol.transport.frames import AckStatus, JobAssignment, encode_frame
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit
from cowboy_protocol.types.jobspec import JobRequest, canonical_job_spec
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.transaction import Transaction
from cowboy_runner import journal as jn
from cowboy_runner.executors import ExecutionResult, ExecutorError
from cowboy_runner.jobs import POLL_PREFIX, Assignment, JobManager
from cowboy_runner.journal import Journal
from cowboy_runner.keyfile import RunnerKey
from cowboy_runner.txbuild import Fees, build_result_submit

KEY = RunnerKey.from_private_key((0x3000).to_bytes(32, "big"))
CHAIN_ID = "cowboy-test-1"
VKEY = bytes(range(32))


def _spec(job_id: bytes, runners: int = 1) -> bytes:
    doc = {"job_type": {"kind": "http", "url": "https://example.com/x", "method": "GET"},
           "verification": {"mode": "none" if runners == 1 else "majority_vote", "runners": runners,
                            "threshold": 1 if runners == 1 else runners},
           "max_price": "1000000", "timeout_blocks": 100}
    req: JobRequest = parse_job_request_json(doc)
    return canonical_job_spec(req.to_spec(job_id, b"\x11" * 20, 1))


def _frame(job_id: bytes, *, runners: int = 1, height: int = 5, ahash: bytes = b"\xaa" * 32) -> JobAssignment:
    spec = _spec(job_id, runners)
    return JobAssignment(job_id=job_id, job_spec=spec, job_spec_hash=keccak256(spec), assignment_height=height,
                         assignment_hash=ahash, deadline_block=height + 100,
                         runner_pubkey=PubKey.runner(KEY.public_key), validator_pubkey=PubKey.validator(VKEY),
                         validator_signed=b"\x01" * 64)


class FakeChain:
    def __init__(self) -> None:
        self.head = 10
        self.jobs: dict[bytes, dict[str, Any]] = {}
        self.receipts: dict[bytes, dict[str, Any]] = {}
        self.submitted: list[bytes] = []
        self.nonce = 0

    def assign(self, frame: JobAssignment, *, commit_end: int = 50, status: str = "assigned",
               committee: list[bytes] | None = None) -> None:
        self.jobs[frame.job_id] = {"status": status, "committee": ["0x" + a.hex() for a in (committee or
                                                                                            [KEY.address])],
                                   "job_spec_hash": "0x" + frame.job_spec_hash.hex(),
                                   "assignment_height": frame.assignment_height, "commit_end": commit_end}

    async def height(self) -> int:
        return self.head

    async def job(self, job_id: bytes) -> dict[str, Any] | None:
        return self.jobs.get(job_id)

    async def next_nonce(self, address: bytes) -> int:
        return self.nonce

    async def receipt(self, tx_hash: bytes) -> dict[str, Any] | None:
        return self.receipts.get(tx_hash)

    async def submit(self, tx_bytes: bytes) -> dict[str, Any]:
        self.submitted.append(tx_bytes)
        return {"status": "pending"}

    def include(self, tx_bytes: bytes, height: int) -> None:
        self.receipts[Transaction.from_bytes(tx_bytes).tx_hash()] = {"status": "success", "height": height}


class FakeChannel:
    def __init__(self, *, fail: bool = False) -> None:
        self.acks: list[tuple[bytes, AckStatus]] = []
        self.commits: list[bytes] = []
        self.results: list[bytes] = []
        self.fail = fail

    def ack(self, job_id: bytes, status: AckStatus) -> None:
        self.acks.append((job_id, status))

    def send_commit(self, job_id: bytes, tx_bytes: bytes) -> None:
        if self.fail:
            raise ConnectionError("session gone")
        self.commits.append(tx_bytes)

    def send_result(self, job_id: bytes, tx_bytes: bytes) -> None:
        if self.fail:
            raise ConnectionError("session gone")
        self.results.append(tx_bytes)


class FakeExecutors:
    """Executes every job with ``behaviour`` (an async callable); counts calls."""

    def __init__(self, behaviour: Callable[[], Awaitable[ExecutionResult]] | None = None) -> None:
        self.calls = 0
        self.behaviour = behaviour

    def executor_for(self, job: object) -> object:
        return self

    async def execute(self, job: object, bounds: object, *, deadline_s: float | None = None) -> ExecutionResult:
        self.calls += 1
        if self.behaviour is not None:
            return await self.behaviour()
        return ExecutionResult(b'{"v":1}', 3)


def _manager(tmp: Path, chain: FakeChain, executors: FakeExecutors | None = None, *, max_concurrent: int = 4,
             journal: Journal | None = None) -> JobManager:
    m = JobManager(key=KEY, chain_id=CHAIN_ID, chain=chain, journal=journal or Journal(tmp / "j.sqlite3"),
                   executors=executors or FakeExecutors(),  # type: ignore[arg-type]
                   max_concurrent=max_concurrent, fees=lambda: Fees.from_basefees(1, 1))
    m.head = chain.head
    return m


async def _settle(m: JobManager) -> None:
    for _ in range(50):
        await asyncio.sleep(0)
    if m.tasks:
        await asyncio.gather(*m.tasks.values(), return_exceptions=True)


def _run(coro: Awaitable[None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 20))  # type: ignore[arg-type]


def test_assignment_accepted_once_then_duplicate_and_mismatching_duplicate_rejected(tmp_path: Path) -> None:
    async def main() -> None:
        chain, ch = FakeChain(), FakeChannel()
        m = _manager(tmp_path, chain)
        f = _frame(b"\x01" * 32)
        chain.assign(f)
        assert (await m.on_push(ch, f)).kind is AckKind.ACCEPTED
        assert (await m.on_push(ch, f)).kind is AckKind.DUPLICATE
        other = _frame(b"\x01" * 32, ahash=b"\xbb" * 32)  # same job id, a different assignment
        st = await m.on_push(ch, other)
        assert st.kind is AckKind.REJECT and st.reject_reason is RejectReason.UNVERIFIABLE_ASSIGNMENT
        await _settle(m)
        assert [s.kind for _, s in ch.acks] == [AckKind.ACCEPTED, AckKind.DUPLICATE, AckKind.REJECT]
        assert m.executors.calls == 1  # type: ignore[attr-defined]
    _run(main())


def test_result_is_journaled_before_the_frame_is_sent_and_single_runner_jobs_skip_the_commit(tmp_path: Path) -> None:
    async def main() -> None:
        chain, ch = FakeChain(), FakeChannel()
        m = _manager(tmp_path, chain)
        f = _frame(b"\x02" * 32)
        chain.assign(f)
        await m.on_push(ch, f)
        await _settle(m)
        assert ch.commits == [] and len(ch.results) == 1
        ob = m.journal.get(f.job_id)
        assert ob is not None and ob.state == jn.REVEAL_SENT and ob.reveal_tx == ch.results[0]
        tx = Transaction.from_bytes(ch.results[0])
        assert isinstance(tx.instruction, JobResultSubmit)
        assert (tx.instruction.result, tx.instruction.salt, tx.instruction.units) == (b'{"v":1}', b"", 3)
        assert tx.sender == KEY.address and tx.chain_id == CHAIN_ID
        chain.include(ch.results[0], 12)
        await m.tick(12)
        ob = m.journal.get(f.job_id)
        assert ob is not None and ob.state == jn.INCLUDED
    _run(main())


def test_committee_job_commits_then_reveals_only_after_commit_end_and_inclusion(tmp_path: Path) -> None:
    async def main() -> None:
        chain, ch = FakeChain(), FakeChannel()
        m = _manager(tmp_path, chain)
        f = _frame(b"\x03" * 32, runners=3)
        chain.assign(f, commit_end=20)
        await m.on_push(ch, f)
        await _settle(m)
        assert len(ch.commits) == 1 and ch.results == []
        commit = Transaction.from_bytes(ch.commits[0])
        assert isinstance(commit.instruction, JobResultCommit)
        await m.tick(15)  # commit not included yet: no reveal
        assert ch.results == []
        chain.include(ch.commits[0], 16)
        await m.tick(16)
        ob = m.journal.get(f.job_id)
        assert ob is not None and ob.state == jn.COMMIT_INCLUDED and ch.results == []  # 16 <= commit_end
        await m.tick(21)
        assert len(ch.results) == 1
        reveal = Transaction.from_bytes(ch.results[0])
        assert isinstance(reveal.instruction, JobResultSubmit) and len(reveal.instruction.salt) == 32
        assert reveal.nonce == commit.nonce + 1
    _run(main())


def test_capacity_rejects_with_at_capacity_and_signals_backpressure(tmp_path: Path) -> None:
    async def main() -> None:
        gate = asyncio.Event()

        async def slow() -> ExecutionResult:
            await gate.wait()
            return ExecutionResult(b"1", 0)

        chain, ch = FakeChain(), FakeChannel()
        m = _manager(tmp_path, chain, FakeExecutors(slow), max_concurrent=1)
        signals: list[bool] = []
        m.on_capacity = signals.append
        a, b = _frame(b"\x04" * 32), _frame(b"\x05" * 32)
        chain.assign(a)
        chain.assign(b)
        assert (await m.on_push(ch, a)).kind is AckKind.ACCEPTED
        assert signals[-1] is False and not m.accepting()
        st = await m.on_push(ch, b)
        assert st.kind is AckKind.REJECT and st.reject_reason is RejectReason.AT_CAPACITY
        assert m.journal.get(b.job_id) is None  # nothing journaled for a rejected job
        gate.set()
        await _settle(m)
        assert signals[-1] is True and m.accepting()
        m.draining = True
        st = await m.on_push(ch, b)
        assert st.kind is AckKind.REJECT and st.reject_reason is RejectReason.DRAINING
    _run(main())


def test_assignment_not_final_or_no_longer_assigned_is_unverifiable(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("cowboy_runner.jobs.FINALITY_WAIT_S", 0.2)

    async def main() -> None:
        chain, ch = FakeChain(), FakeChannel()
        m = _manager(tmp_path, chain)
        ahead = _frame(b"\x06" * 32, height=chain.head + 5)  # above the runner's own head
        chain.assign(ahead)
        st = await m.on_push(ch, ahead)
        assert st.reject_reason is RejectReason.UNVERIFIABLE_ASSIGNMENT and "above" in (st.text or "")
        settled = _frame(b"\x07" * 32)
        chain.assign(settled, status="completed")
        assert (await m.on_push(ch, settled)).reject_reason is RejectReason.UNVERIFIABLE_ASSIGNMENT
        not_me = _frame(b"\x08" * 32)
        chain.assign(not_me, committee=[b"\x22" * 20])
        assert (await m.on_push(ch, not_me)).reject_reason is RejectReason.UNVERIFIABLE_ASSIGNMENT
        bad_hash = _frame(b"\x09" * 32)
        chain.assign(bad_hash)
        forged = JobAssignment(**{**{k: getattr(bad_hash, k) for k in bad_hash.__dataclass_fields__},
                                  "job_spec_hash": b"\x00" * 32})
        assert (await m.on_push(ch, forged)).reject_reason is RejectReason.UNVERIFIABLE_ASSIGNMENT
        assert all(m.journal.get(j) is None for j in (b"\x06" * 32, b"\x07" * 32, b"\x08" * 32, b"\x09" * 32))
    _run(main())


def test_cancel_before_a_result_tx_stops_execution(tmp_path: Path) -> None:
    async def main() -> None:
        async def hang() -> ExecutionResult:
            await asyncio.sleep(30)
            return ExecutionResult(b"never", 0)

        chain, ch = FakeChain(), FakeChannel()
        m = _manager(tmp_path, chain, FakeExecutors(hang))
        f = _frame(b"\x0a" * 32)
        chain.assign(f)
        await m.on_push(ch, f)
        await asyncio.sleep(0.05)
        assert m.cancel(f.job_id) is True
        await _settle(m)
        ob = m.journal.get(f.job_id)
        assert ob is not None and ob.state == jn.CANCELLED and ch.results == [] and not m.tasks
    _run(main())


def test_cancel_after_the_commit_keeps_the_reveal_obligation(tmp_path: Path) -> None:
    async def main() -> None:
        chain, ch = FakeChain(), FakeChannel()
        m = _manager(tmp_path, chain)
        f = _frame(b"\x0b" * 32, runners=2)
        chain.assign(f, commit_end=20)
        await m.on_push(ch, f)
        await _settle(m)
        assert len(ch.commits) == 1
        assert m.cancel(f.job_id) is False  # §10.5: a committed runner must still reveal
        chain.include(ch.commits[0], 12)
        await m.tick(21)
        assert len(ch.results) == 1
    _run(main())


def test_unsent_result_is_submitted_over_rest_then_rebroadcast_until_included(tmp_path: Path) -> None:
    async def main() -> None:
        chain, ch = FakeChain(), FakeChannel(fail=True)  # the session died before the frame could go out
        m = _manager(tmp_path, chain)
        f = _frame(b"\x0c" * 32)
        chain.assign(f)
        await m.on_push(ch, f)
        await _settle(m)
        ob = m.journal.get(f.job_id)
        assert ob is not None and ob.state == jn.REVEAL_SIGNED and ob.reveal_tx is not None
        await m.tick(11)  # never sent: submitted at once
        assert chain.submitted == [ob.reveal_tx]
        await m.tick(12)  # within the grace of 2 blocks: nothing
        assert len(chain.submitted) == 1
        await m.tick(13)  # grace over, not included: rebroadcast
        assert len(chain.submitted) == 2
        chain.include(ob.reveal_tx, 14)
        await m.tick(15)
        assert len(chain.submitted) == 2 and m.journal.get(f.job_id).state == jn.INCLUDED  # type: ignore[union-attr]
    _run(main())


def test_resume_after_restart_reexecutes_unfinished_and_resends_signed(tmp_path: Path) -> None:
    async def main() -> None:
        chain = FakeChain()
        path = tmp_path / "j.sqlite3"
        j = Journal(path)
        running, signed = _frame(b"\x0d" * 32), _frame(b"\x0e" * 32)
        for f in (running, signed):
            chain.assign(f)
            j.record_accepted(f.job_id, encode_frame(f), needs_commit=False, commit_end=50,
                              deadline_block=f.deadline_block, height=5)
        j.mark_executing(running.job_id)  # "crashed" mid-execution
        m0 = _manager(tmp_path, chain, journal=j)
        j.mark_executing(signed.job_id)
        j.record_output(signed.job_id, b"r", b"", 0)
        await m0.sign_and_send(signed.job_id)  # no channel: signed and journaled, never sent
        retained = j.get(signed.job_id).reveal_tx  # type: ignore[union-attr]
        j.close()

        ex = FakeExecutors()
        m = _manager(tmp_path, chain, ex, journal=Journal(path))  # the restarted process
        assert await m.resume() == 2
        await _settle(m)
        assert ex.calls == 1  # only the unfinished one runs again
        await m.tick(11)
        assert retained in chain.submitted
        assert len(chain.submitted) == 2  # plus the re-executed job's reveal (no session: REST)
    _run(main())


def test_executor_failure_sends_a_signed_error_result(tmp_path: Path) -> None:
    async def main() -> None:
        async def boom() -> ExecutionResult:
            raise ExecutorError("http_status", "503")

        chain, ch = FakeChain(), FakeChannel()
        m = _manager(tmp_path, chain, FakeExecutors(boom))
        f = _frame(b"\x0f" * 32)
        chain.assign(f)
        await m.on_push(ch, f)
        await _settle(m)
        ob = m.journal.get(f.job_id)
        # A failure is reported, not swallowed (docs/jobs.md "Error results"); more in test_runner_error_results.py.
        assert ob is not None and ob.state == jn.REVEAL_SENT and ch.results == [ob.reveal_tx]
        assert ob.result == ErrorResult("http_status", "503").encode()
        assert m.metrics.registry.get_sample_value("cowboy_runner_executor_failures_total",
                                                   {"code": "http_status"}) == 1.0
    _run(main())


def test_polled_assignment_is_journaled_with_the_poll_prefix_and_deduplicated(tmp_path: Path) -> None:
    async def main() -> None:
        chain, ch = FakeChain(), FakeChannel()
        m = _manager(tmp_path, chain)
        f = _frame(b"\x10" * 32)
        chain.assign(f)
        doc = {"job_id": "0x" + f.job_id.hex(), "job_spec": "0x" + f.job_spec.hex(),
               "assignment_height": f.assignment_height, "deadline_block": f.deadline_block}
        assert (await m.on_poll(doc)).kind is AckKind.ACCEPTED
        ob = m.journal.get(f.job_id)
        assert ob is not None and ob.assignment == POLL_PREFIX + f.job_spec
        assert Assignment.from_stored(f.job_id, ob.assignment, ob.deadline_block).job_spec == f.job_spec
        assert (await m.on_push(ch, f)).kind is AckKind.DUPLICATE  # push comes back: same job, same spec
        await _settle(m)
    _run(main())


class NonceChain(FakeChain):
    """A chain whose mempool answers like the node's: ``nonce_too_low`` below the committed account nonce."""

    def __init__(self) -> None:
        super().__init__()
        self.account_nonce = 0

    async def submit(self, tx_bytes: bytes) -> dict[str, Any]:
        tx = Transaction.from_bytes(tx_bytes)
        if tx.nonce < self.account_nonce:
            raise ApiError("nonce_too_low", f"nonce {tx.nonce} already used (next is {self.account_nonce})", 400)
        return await super().submit(tx_bytes)


def test_rebroadcast_nonce_too_low_without_inclusion_is_replaced_by_a_new_nonce_same_instruction(
        tmp_path: Path) -> None:
    """§10.3: nonce-too-low is a non-failure only after observed inclusion; if the original was never admitted
    (lost with a killed validator's mempool while an on-chain heartbeat took its nonce), a replacement with a
    valid nonce is sent."""
    async def main() -> None:
        chain, ch = NonceChain(), FakeChannel()
        m = _manager(tmp_path, chain)
        f = _frame(b"\x21" * 32)
        chain.assign(f)
        await m.on_push(ch, f)
        await _settle(m)
        original = ch.results[0]
        assert Transaction.from_bytes(original).nonce == 0
        chain.nonce = chain.account_nonce = 1  # the validator died; a heartbeat with nonce 0 was included since
        await m.tick(12)  # grace over: the rebroadcast is refused with nonce_too_low and no receipt exists
        ob = m.journal.get(f.job_id)
        assert ob is not None and ob.state == jn.REVEAL_SIGNED and ob.reveal_tx != original
        assert ob.reveal_tx is not None
        new, old = Transaction.from_bytes(ob.reveal_tx), Transaction.from_bytes(original)
        assert new.nonce == 1 and new.instruction == old.instruction and new.sender == old.sender
        await m.tick(13)  # the replacement is submitted at once
        assert chain.submitted[-1] == ob.reveal_tx
        chain.include(ob.reveal_tx, 14)
        await m.tick(14)
        assert m.journal.get(f.job_id).state == jn.INCLUDED  # type: ignore[union-attr]
    _run(main())


def test_rebroadcast_nonce_too_low_after_the_tx_itself_landed_is_a_non_failure(tmp_path: Path) -> None:
    async def main() -> None:
        chain, ch = NonceChain(), FakeChannel()
        m = _manager(tmp_path, chain)
        f = _frame(b"\x22" * 32, runners=3)
        chain.assign(f, commit_end=20)
        await m.on_push(ch, f)
        await _settle(m)
        commit = ch.commits[0]
        chain.account_nonce = 1
        # Included between the inclusion check and the rebroadcast of the same tick: the receipt shows it.
        real_receipt = chain.receipt

        async def late_receipt(tx_hash: bytes) -> dict[str, Any] | None:
            chain.receipt = real_receipt  # type: ignore[method-assign]
            return None
        chain.receipt = late_receipt  # type: ignore[method-assign]
        chain.include(commit, 12)
        await m.tick(12)
        ob = m.journal.get(f.job_id)
        assert ob is not None and ob.commit_tx == commit and ob.state == jn.COMMIT_SENT  # kept, not replaced
        await m.tick(13)
        assert m.journal.get(f.job_id).state == jn.COMMIT_INCLUDED  # type: ignore[union-attr]
    _run(main())


def test_replacement_must_carry_the_same_instruction_and_a_new_nonce(tmp_path: Path) -> None:
    async def main() -> None:
        chain, ch = FakeChain(), FakeChannel()
        m = _manager(tmp_path, chain)
        f = _frame(b"\x23" * 32)
        chain.assign(f)
        await m.on_push(ch, f)
        await _settle(m)
        old = Transaction.from_bytes(ch.results[0])
        fees = Fees.from_basefees(1, 1)
        same_nonce = build_result_submit(KEY, CHAIN_ID, job_id=f.job_id, result=b'{"v":1}', salt=b"", units=3,
                                         nonce=old.nonce, fees=fees)
        other_result = build_result_submit(KEY, CHAIN_ID, job_id=f.job_id, result=b'{"v":2}', salt=b"", units=3,
                                           nonce=old.nonce + 1, fees=fees)
        for bad in (same_nonce, other_result):
            with pytest.raises(jn.JournalError) as e:
                m.journal.record_replacement(f.job_id, bad)
            assert e.value.code == "replacement_mismatch"
        assert m.journal.get(f.job_id).reveal_tx == ch.results[0]  # type: ignore[union-attr]
    _run(main())
