"""A failed execution becomes a signed error result (docs/jobs.md "Error results", docs/runner.md): every kind
of executor failure — an executor error (HTTP status, timeout, a custom program that crashed, a schema
violation), the outer wall-time guard, an unexpected exception, an output that would pass for an envelope — is
journaled as an error envelope, signed as the runner's JobResultSubmit (M == 1) or JobResultCommit then reveal
(M > 1) and sent like any result; after a crash the same journaled bytes are sent again."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from cowboy_protocol.jobs.commitment import result_commitment
from cowboy_protocol.jobs.error_result import ERROR_RESULT_MAGIC, ErrorResult, decode_error_result
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit
from cowboy_protocol.types.transaction import Transaction
from cowboy_runner import journal as jn
from cowboy_runner.executors import ExecutionResult, ExecutorError
from cowboy_runner.journal import Journal
from tests.unit.runner.test_runner_daemon_jobs import (
    CHAIN_ID,
    KEY,
    FakeChain,
    FakeChannel,
    FakeExecutors,
    _frame,
    _manager,
    _run,
    _settle,
)


def _raises(exc: BaseException) -> Callable[[], Awaitable[ExecutionResult]]:
    async def behaviour() -> ExecutionResult:
        raise exc
    return behaviour


async def _magic_output() -> ExecutionResult:
    return ExecutionResult(ERROR_RESULT_MAGIC + b"looks like an error", 7)


FAILURES = [
    ("http_status", _raises(ExecutorError("http_status", "HTTP 500 from example.com")), "http_status", "HTTP 500"),
    ("executor_timeout", _raises(ExecutorError("timeout", "execution exceeded 60 s")), "timeout", "60 s"),
    ("outer_timeout", _raises(TimeoutError()), "timeout", "wall time"),
    ("custom_crash", _raises(ExecutorError("process_failed", "program exited with status 139")), "process_failed",
     "139"),
    ("schema_violation", _raises(ExecutorError("schema_mismatch", "result does not match the response model")),
     "schema_mismatch", "response model"),
    ("unexpected_exception", _raises(RuntimeError("bug")), "internal", "RuntimeError"),
    ("reserved_output", _magic_output, "reserved_output", "magic"),
]


@pytest.mark.parametrize("behaviour,code,detail_part", [f[1:] for f in FAILURES], ids=[f[0] for f in FAILURES])
def test_each_failure_kind_is_journaled_signed_and_sent_as_an_error_result(
        tmp_path: Path, behaviour: Callable[[], Awaitable[ExecutionResult]], code: str, detail_part: str) -> None:
    async def main() -> None:
        chain, ch = FakeChain(), FakeChannel()
        m = _manager(tmp_path, chain, FakeExecutors(behaviour))
        f = _frame(b"\x21" * 32)
        chain.assign(f)
        await m.on_push(ch, f)
        await _settle(m)
        ob = m.journal.get(f.job_id)
        assert ob is not None and ob.state == jn.REVEAL_SENT, ob
        err = decode_error_result(ob.result or b"")
        assert err is not None and err.code == code and detail_part in err.detail, err
        assert ob.units == 0 and ch.results == [ob.reveal_tx] and ch.commits == []
        tx = Transaction.from_bytes(ch.results[0])
        assert tx.sender == KEY.address and tx.chain_id == CHAIN_ID and tx.recover_sender() == KEY.address
        assert isinstance(tx.instruction, JobResultSubmit)
        assert (tx.instruction.job_id, tx.instruction.result, tx.instruction.units) == (f.job_id, ob.result, 0)
        assert m.metrics.registry.get_sample_value("cowboy_runner_executor_failures_total", {"code": code}) == 1.0
        chain.include(ch.results[0], 12)
        await m.tick(12)
        assert m.journal.get(f.job_id).state == jn.INCLUDED  # type: ignore[union-attr]
    _run(main())


def test_committee_job_commits_to_the_error_result_then_reveals_it(tmp_path: Path) -> None:
    async def main() -> None:
        chain, ch = FakeChain(), FakeChannel()
        m = _manager(tmp_path, chain, FakeExecutors(_raises(ExecutorError("http_status", "HTTP 503"))))
        f = _frame(b"\x22" * 32, runners=3)
        chain.assign(f, commit_end=20)
        await m.on_push(ch, f)
        await _settle(m)
        ob = m.journal.get(f.job_id)
        assert ob is not None and ob.state == jn.COMMIT_SENT and ch.commits == [ob.commit_tx] and ch.results == []
        envelope = ErrorResult("http_status", "HTTP 503").encode()
        assert ob.result == envelope and ob.salt is not None and len(ob.salt) == 32
        commit = Transaction.from_bytes(ch.commits[0]).instruction
        assert isinstance(commit, JobResultCommit)
        assert commit.commitment == result_commitment(f.job_id, KEY.address, envelope, ob.salt)
        chain.include(ch.commits[0], 12)
        await m.tick(12)
        await m.tick(21)  # past commit_end: the reveal
        assert len(ch.results) == 1
        reveal = Transaction.from_bytes(ch.results[0]).instruction
        assert isinstance(reveal, JobResultSubmit) and (reveal.result, reveal.salt) == (envelope, ob.salt)
    _run(main())


def test_crash_after_signing_the_error_result_resends_the_same_journaled_bytes(tmp_path: Path) -> None:
    async def main() -> None:
        chain = FakeChain()
        path = tmp_path / "j.sqlite3"
        ex = FakeExecutors(_raises(ExecutorError("http_status", "HTTP 500")))
        m0 = _manager(tmp_path, chain, ex, journal=Journal(path))
        f = _frame(b"\x23" * 32)
        chain.assign(f)
        await m0.on_push(FakeChannel(fail=True), f)  # the session died before the frame went out
        await _settle(m0)
        ob = m0.journal.get(f.job_id)
        assert ob is not None and ob.state == jn.REVEAL_SIGNED and ob.reveal_tx is not None
        retained = ob.reveal_tx
        m0.journal.close()  # "crash"

        ex2 = FakeExecutors()  # would now succeed: it must not run again
        m = _manager(tmp_path, chain, ex2, journal=Journal(path))
        await m.resume()
        await _settle(m)
        await m.tick(11)
        assert ex2.calls == 0 and chain.submitted == [retained]
        ins = Transaction.from_bytes(retained).instruction
        assert isinstance(ins, JobResultSubmit)
        assert decode_error_result(ins.result) == ErrorResult("http_status", "HTTP 500")
    _run(main())


def test_crash_after_journaling_the_error_output_signs_that_output(tmp_path: Path) -> None:
    async def main() -> None:
        chain = FakeChain()
        path = tmp_path / "j.sqlite3"
        m0 = _manager(tmp_path, chain, FakeExecutors(_raises(ExecutorError("timeout", "x"))), journal=Journal(path))

        async def crash_before_signing(job_id: bytes) -> None:
            return None

        m0.sign_and_send = crash_before_signing  # type: ignore[method-assign]
        f = _frame(b"\x24" * 32)
        chain.assign(f)
        await m0.on_push(FakeChannel(), f)
        await _settle(m0)
        ob = m0.journal.get(f.job_id)
        envelope = ErrorResult("timeout", "x").encode()
        assert ob is not None and ob.state == jn.EXECUTED and ob.result == envelope
        m0.journal.close()
        ex = FakeExecutors()
        m = _manager(tmp_path, chain, ex, journal=Journal(path))
        await m.resume()
        await m.tick(11)
        assert ex.calls == 0 and len(chain.submitted) == 1
        ins = Transaction.from_bytes(chain.submitted[0]).instruction
        assert isinstance(ins, JobResultSubmit) and ins.result == envelope
    _run(main())


def test_cancel_during_a_failing_execution_sends_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        started = asyncio.Event()

        async def slow_fail() -> ExecutionResult:
            started.set()
            await asyncio.sleep(0.2)
            raise ExecutorError("http_status", "HTTP 500")

        chain, ch = FakeChain(), FakeChannel()
        m = _manager(tmp_path, chain, FakeExecutors(slow_fail))
        f = _frame(b"\x25" * 32)
        chain.assign(f)
        await m.on_push(ch, f)
        await started.wait()
        assert m.cancel(f.job_id)
        await _settle(m)
        assert ch.results == [] and m.journal.get(f.job_id).state == jn.CANCELLED  # type: ignore[union-attr]
    _run(main())
