"""What the runner does with an assignment (CIP-11 §10): verify, dedup, execute, sign, journal, send, settle.

:class:`JobManager` is the decision logic of the daemon, independent of QUIC and HTTP: assignments arrive with
the channel that pushed them (a :class:`Channel`, the ``Link``) or from the poll fallback; the chain is reached
through the :class:`Chain` protocol (the daemon's ``ChainClient``); tests use fakes for both.

Per assignment, in order:

1. **Dedup** (§10.1): a job_id already in the journal → ``Duplicate`` when the new assignment is the same
   (job_spec_hash, assignment_hash, assignment_height), ``Reject(UnverifiableAssignment)`` when it differs.
2. **Checks the session does not do**: the assignment height is final in the runner's own view (≤ the head it
   polls; the chain is single-slot final), and ``GET /job/{id}`` still shows the job ``assigned`` at that height
   with this runner in the committee and the same ``job_spec_hash``.
3. **Capacity**: draining → ``Reject(Draining)``; ``max_concurrent_jobs`` executions in flight →
   ``Reject(AtCapacity)`` and backpressure.
4. ``journal.record_accepted`` (fsync) → ``Accepted`` → execute (wall time enforced; a failure — executor error,
   timeout, crash — becomes an error result, ``cowboy_protocol.jobs.error_result``, and follows the same path)
   → M == 1: sign
   JobResultSubmit, journal, send a JobResult frame; M > 1: sign JobResultCommit, journal, send the commit frame;
   the reveal is signed by :meth:`JobManager.tick` once the commit is included and the head passed
   ``commit_end``.

:meth:`JobManager.tick` (every new head) records inclusions from receipts, reveals, expires, and rebroadcasts
through ``POST /submit`` per ``journal.due_rebroadcasts``; a rebroadcast answered ``nonce_too_low`` while no
receipt exists for it (another transaction of the runner took the nonce) is replaced by a re-signed transaction
with a fresh nonce and the same instruction (§10.3). :meth:`JobManager.resume` restarts every pending
obligation after a restart. Stored assignment bytes (project choice): a pushed assignment is kept as its encoded
frame; a polled one as ``b"POLL" ‖ job_spec`` (no frame can start with those bytes: the length prefix would exceed
the frame limit).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from cowboy_protocol import api_types as api
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.http_client import ApiError, NodeUnreachable
from cowboy_protocol.jobs.error_result import INTERNAL, RESERVED_OUTPUT, error_result_for, is_error_result
from cowboy_protocol.transport.enums import RejectReason
from cowboy_protocol.transport.frames import AckStatus, JobAssignment, encode_frame
from cowboy_protocol.transport.framing import decode_frame
from cowboy_protocol.types.jobspec import JobSpecV1, decode_job_spec
from cowboy_protocol.types.runner import JOB_KIND_NAMES
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validation_errors import DecodeError
from cowboy_runner import journal as jn
from cowboy_runner.executors import ExecutionResult, ExecutorError, ExecutorRegistry, deadline_for
from cowboy_runner.executors.base import DEADLINE_MARGIN_S
from cowboy_runner.executors.slots import ExecutorSlots, KindLimit
from cowboy_runner.keyfile import RunnerKey
from cowboy_runner.metrics import RunnerMetrics
from cowboy_runner.txbuild import Fees, build_result_commit, build_result_submit, new_salt

log = structlog.get_logger("cowboy.runner.jobs")

POLL_PREFIX = b"POLL"
"""Prefix of a journaled assignment that came from the poll fallback (followed by the job_spec bytes)."""
FINALITY_WAIT_S = 3.0
"""How long an assignment above the runner's head waits for the head to catch up before it is rejected."""


class Channel(Protocol):
    """Where an assignment came from and where its result frames go (``cowboy_runner.link.Link``)."""

    def ack(self, job_id: bytes, status: AckStatus) -> None:
        """Send a JobAck."""

    def send_commit(self, job_id: bytes, tx_bytes: bytes) -> None:
        """Send a JobResultCommit frame on the Accepted stream."""

    def send_result(self, job_id: bytes, tx_bytes: bytes) -> None:
        """Send a JobResult frame on the Accepted stream."""


class Chain(Protocol):
    """The validator API calls the job logic needs (``cowboy_runner.chain_client.ChainClient``)."""

    async def height(self) -> int:
        """Head height."""
        ...

    async def job(self, job_id: bytes) -> api.Job | None:
        """``GET /job/{id}`` or None."""
        ...

    async def next_nonce(self, address: bytes) -> int:
        """The sender's next pending nonce."""
        ...

    async def receipt(self, tx_hash: bytes) -> api.Receipt | None:
        """A committed transaction's receipt or None."""
        ...

    async def submit(self, tx_bytes: bytes) -> api.Submitted:
        """``POST /submit``."""
        ...


@dataclass
class Assignment:
    """An assignment as the job logic sees it, whatever its source."""

    job_id: bytes
    """32-byte job id."""
    job_spec: bytes
    """Canonical JobSpecV1 bytes to execute."""
    job_spec_hash: bytes
    """keccak256(job_spec)."""
    assignment_height: int
    """Block that produced the assignment."""
    deadline_block: int
    """Last block a result can land in."""
    assignment_hash: bytes | None
    """§12.6 assignment hash (None for polled jobs)."""
    stored: bytes
    """The bytes journaled for it (see the module docstring)."""

    @classmethod
    def from_frame(cls, a: JobAssignment) -> Assignment:
        """A pushed (session-verified) JobAssignment."""
        return cls(a.job_id, a.job_spec, a.job_spec_hash, a.assignment_height, a.deadline_block,
                   a.assignment_hash, encode_frame(a))

    @classmethod
    def from_poll(cls, doc: dict[str, Any]) -> Assignment:
        """One entry of ``GET /runner/{address}/jobs``; the spec hash is recomputed from the bytes."""
        spec = bytes.fromhex(str(doc["job_spec"])[2:])
        return cls(bytes.fromhex(str(doc["job_id"])[2:]), spec, keccak256(spec), int(doc["assignment_height"]),
                   int(doc["deadline_block"]), None, POLL_PREFIX + spec)

    @classmethod
    def from_stored(cls, job_id: bytes, stored: bytes, deadline_block: int) -> Assignment:
        """Rebuild from the journal (resume)."""
        if stored.startswith(POLL_PREFIX):
            spec = stored[len(POLL_PREFIX):]
            return cls(job_id, spec, keccak256(spec), 0, deadline_block, None, stored)
        frame = decode_frame(stored)
        if not isinstance(frame, JobAssignment):
            raise DecodeError("journal: stored assignment is not a JobAssignment frame", field="assignment")
        return cls.from_frame(frame)

    def same_as(self, other: Assignment) -> bool:
        """Identical assignment (a duplicate push) rather than a conflicting one."""
        if self.job_spec_hash != other.job_spec_hash:
            return False
        if self.assignment_hash is not None and other.assignment_hash is not None:
            return self.assignment_hash == other.assignment_hash and self.assignment_height == other.assignment_height
        return True


@dataclass
class JobView:
    """What ``status`` shows about one job."""

    job_id: str
    """0x-hex id."""
    state: str
    """Journal state."""
    source: str
    """push or poll."""
    received_at: float
    """Wall-clock time the assignment arrived (monotonic clock for stage timing is kept apart)."""


def kind_name(spec: JobSpecV1) -> str:
    """The job kind's ``capabilities.job_types`` name (``llm``, ``http``…), the key of per-kind limits and of
    capability deltas."""
    return JOB_KIND_NAMES.get(type(spec.job_type).KIND, "unknown")


def deadline_for_spec(job_spec: bytes) -> float:
    """The wall-time limit of encoded job spec bytes (0 when they do not decode: such a job never waits)."""
    try:
        spec = decode_job_spec(job_spec)
    except DecodeError:
        return 0.0
    return deadline_for(spec.job_type, spec.bounds)


class JobManager:
    """Assignment decisions, executions and result obligations of one runner."""

    def __init__(self, *, key: RunnerKey, chain_id: str, chain: Chain, journal: jn.Journal,
                 executors: ExecutorRegistry, max_concurrent: int, fees: Callable[[], Fees],
                 grace_blocks: int = 2, interval_blocks: int = 2, metrics: RunnerMetrics | None = None,
                 on_capacity: Callable[[bool], None] | None = None, max_tx_bytes: int | None = None,
                 kind_limits: Mapping[str, KindLimit] | None = None,
                 on_kinds: Callable[[frozenset[str]], None] | None = None) -> None:
        self.key = key
        self.chain_id = chain_id
        self.chain = chain
        self.journal = journal
        self.executors = executors
        self.max_concurrent = max_concurrent
        self.fees = fees
        self.grace_blocks = grace_blocks
        self.interval_blocks = interval_blocks
        self.metrics = metrics or RunnerMetrics()
        self.on_capacity = on_capacity
        self.max_tx_bytes = max_tx_bytes
        self.head = 0
        """Newest head height seen (the daemon's head loop keeps it current)."""
        self.draining = False
        """True after ``drain``: new assignments are rejected, in-flight ones finish."""
        self.tasks: dict[bytes, asyncio.Task[None]] = {}
        """Executions in flight by job id."""
        self.channels: dict[bytes, Channel] = {}
        """The channel each accepted job's result frames go to."""
        self.jobs: dict[bytes, JobView] = {}
        """Jobs seen in this process (status)."""
        self.slots = ExecutorSlots(kind_limits or {})
        """Per-kind execution slots and queues (``[executors.<kind>] max_concurrent`` / ``queue``)."""
        self.unhealthy: dict[str, str] = {}
        """Job kinds whose executor failed its health probe → why (set by the daemon's health monitor)."""
        self.on_kinds = on_kinds
        """Called with the job kinds the runner cannot take now (full or unhealthy) whenever that set changes,
        so the links send a CapabilityDelta (§6.5)."""
        self._unavailable: frozenset[str] = frozenset()
        self._t0: dict[bytes, float] = {}
        self._nonce_lock = asyncio.Lock()
        self._next_nonce = 0

    # -- capacity -------------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        """Executions running now."""
        return len(self.tasks)

    def accepting(self) -> bool:
        """Whether a new assignment would be taken (backpressure otherwise, §6.4)."""
        return not self.draining and self.in_flight < self.max_concurrent

    def unavailable_kinds(self) -> frozenset[str]:
        """Job kinds that take no new job now: their executor is full (slots and queue) or unhealthy."""
        return self.slots.full_kinds() | frozenset(self.unhealthy)

    def executor_status(self) -> dict[str, dict[str, object]]:
        """Per configured job kind, for ``status``: ``advertised`` (not full, not unhealthy), ``unhealthy`` reason
        (or None) and, for kinds with a limit, ``running``/``waiting``/``max_concurrent``/``queue``."""
        out: dict[str, dict[str, object]] = {}
        slots = self.slots.snapshot()
        unavailable = self.unavailable_kinds()
        for kind in self.executors.kinds():
            row: dict[str, object] = {"advertised": kind not in unavailable, "unhealthy": self.unhealthy.get(kind)}
            row.update(slots.get(kind, {}))
            out[kind] = row
        return out

    def set_unhealthy(self, unhealthy: Mapping[str, str]) -> None:
        """The health monitor's verdict: kind → reason for every kind whose executor is unhealthy now."""
        self.unhealthy = dict(unhealthy)
        self._capacity_changed()

    def _capacity_changed(self) -> None:
        self.metrics.jobs_in_flight.set(self.in_flight)
        for kind, row in self.slots.snapshot().items():
            self.metrics.executor_running.labels(kind=kind).set(row["running"] or 0)
            self.metrics.executor_waiting.labels(kind=kind).set(row["waiting"] or 0)
        if self.on_capacity is not None:
            self.on_capacity(self.accepting())
        unavailable = self.unavailable_kinds()
        if unavailable != self._unavailable:
            self._unavailable = unavailable
            log.info("job kinds unavailable changed", unavailable=sorted(unavailable))
            if self.on_kinds is not None:
                self.on_kinds(unavailable)

    # -- assignments ----------------------------------------------------------------------
    async def on_push(self, channel: Channel, frame: JobAssignment) -> AckStatus:
        """Decide on a pushed assignment, send the JobAck on ``channel``, start the execution if Accepted."""
        status = await self.decide(Assignment.from_frame(frame), channel, source="push")
        try:
            channel.ack(frame.job_id, status)
        except Exception as e:  # the session may have closed; the journal keeps the obligation
            log.warning("ack not sent", job_id=frame.job_id.hex(), error=str(e))
        if status.kind.name == "ACCEPTED":
            self.metrics.stage("ack", time.monotonic() - self._t0.get(frame.job_id, time.monotonic()))
        return status

    async def on_poll(self, doc: dict[str, Any]) -> AckStatus:
        """Decide on one polled assignment (no ack is sent: the poll path has no session)."""
        try:
            a = Assignment.from_poll(doc)
        except (KeyError, ValueError, TypeError) as e:
            log.warning("malformed poll entry", error=str(e))
            return AckStatus.reject(RejectReason.UNVERIFIABLE_ASSIGNMENT, "malformed poll entry")
        return await self.decide(a, None, source="poll")

    async def decide(self, a: Assignment, channel: Channel | None, *, source: str) -> AckStatus:
        """The §10.1 decision for ``a``; on Accepted the obligation is journaled and the execution started."""
        self._t0.setdefault(a.job_id, time.monotonic())
        status = await self._decide(a, source)
        label = status.kind.name.lower() if status.reject_reason is None else \
            f"reject_{status.reject_reason.name.lower()}"
        self.metrics.assignments.labels(source=source, decision=label).inc()
        if status.kind.name == "ACCEPTED":
            if channel is not None:
                self.channels[a.job_id] = channel
            self.jobs[a.job_id] = JobView("0x" + a.job_id.hex(), jn.ACCEPTED, source, time.time())
            self._start(a)
        else:
            log.info("assignment not accepted", job_id=a.job_id.hex(), decision=label, text=status.text)
        return status

    async def _decide(self, a: Assignment, source: str) -> AckStatus:
        unverifiable = RejectReason.UNVERIFIABLE_ASSIGNMENT
        existing = self.journal.get(a.job_id)
        if existing is not None:
            try:
                prior = Assignment.from_stored(a.job_id, existing.assignment, existing.deadline_block)
            except DecodeError:
                return AckStatus.reject(unverifiable, "journaled assignment unreadable")
            if a.same_as(prior):
                return AckStatus.duplicate()
            return AckStatus.reject(unverifiable, "conflicts with the assignment already accepted for this job")
        if keccak256(a.job_spec) != a.job_spec_hash:
            return AckStatus.reject(unverifiable, "job_spec_hash mismatch")
        try:
            spec = decode_job_spec(a.job_spec)
        except DecodeError as e:
            return AckStatus.reject(unverifiable, f"undecodable job spec: {e}")
        if spec.job_id != a.job_id:
            return AckStatus.reject(unverifiable, "job_spec.job_id differs from job_id")
        problem, job = await self._check_on_chain(a)
        if problem is not None:
            return AckStatus.reject(unverifiable, problem)
        assert job is not None
        if self.draining:
            return AckStatus.reject(RejectReason.DRAINING, "runner is draining")
        if self.in_flight >= self.max_concurrent:
            self._capacity_changed()
            return AckStatus.reject(RejectReason.AT_CAPACITY, f"{self.in_flight} jobs in flight")
        try:
            self.executors.executor_for(spec.job_type)
        except ExecutorError as e:
            return AckStatus.reject(RejectReason.UNSUPPORTED_JOB_TYPE, e.message)
        kind = kind_name(spec)
        if kind in self.unhealthy:
            return AckStatus.reject(RejectReason.UNSUPPORTED_JOB_TYPE,
                                    f"{kind} executor unhealthy: {self.unhealthy[kind]}"[:200])
        if not self.slots.can_take(kind):
            self._capacity_changed()
            return AckStatus.reject(RejectReason.AT_CAPACITY, f"{kind} executor full ({self.slots.running[kind]} "
                                                              f"running, {self.slots.waiting[kind]} queued)")
        needs_commit = spec.verification.runners > 1
        fresh = self.journal.record_accepted(a.job_id, a.stored, needs_commit=needs_commit,
                                             commit_end=int(job.get("commit_end", 0)),
                                             deadline_block=a.deadline_block, height=self.head)
        return AckStatus.accepted() if fresh else AckStatus.duplicate()

    async def _check_on_chain(self, a: Assignment) -> tuple[str | None, api.Job | None]:
        """Finality in the runner's own view, then "still assigned to me" from ``GET /job/{id}``."""
        try:
            deadline = time.monotonic() + FINALITY_WAIT_S
            while a.assignment_height > self.head:
                self.head = max(self.head, await self.chain.height())
                if a.assignment_height <= self.head:
                    break
                if time.monotonic() > deadline:
                    return f"assignment height {a.assignment_height} above the runner's head {self.head}", None
                await asyncio.sleep(0.1)
            job = await self.chain.job(a.job_id)
        except (ApiError, NodeUnreachable) as e:
            return f"cannot check the job on chain: {e}", None
        if job is None:
            return "job unknown to the chain", None
        if job.get("status") != "assigned":
            return f"job is {job.get('status')}, not assigned", None
        committee = [str(x).lower() for x in job.get("committee", [])]
        if "0x" + self.key.address.hex() not in committee:
            return "this runner is not in the job's committee", None
        if str(job.get("job_spec_hash", "")).lower() != "0x" + a.job_spec_hash.hex():
            return "job_spec_hash differs from the chain's", None
        if a.assignment_hash is not None and int(job.get("assignment_height", -1)) != a.assignment_height:
            return "assignment_height differs from the chain's (superseded assignment)", None
        return None, job

    # -- execution ------------------------------------------------------------------------
    def _start(self, a: Assignment) -> None:
        try:
            kind = kind_name(decode_job_spec(a.job_spec))
        except DecodeError:
            kind = ""  # _execute fails it with an error result; no slot involved
        self.slots.reserve(kind)
        task = asyncio.get_running_loop().create_task(self._execute(a, kind))
        self.tasks[a.job_id] = task
        job_id = a.job_id
        task.add_done_callback(lambda _t: self._done(job_id))
        self._capacity_changed()

    def _done(self, job_id: bytes) -> None:
        self.tasks.pop(job_id, None)
        ob = self.journal.get(job_id)
        if ob is not None and job_id in self.jobs:
            self.jobs[job_id].state = ob.state
        self._capacity_changed()

    async def _execute(self, a: Assignment, kind: str) -> None:
        job_id = a.job_id
        try:
            async with self.slots.run(kind, deadline_for_spec(a.job_spec)) as waited:
                self._capacity_changed()
                spec: JobSpecV1 = decode_job_spec(a.job_spec)
                self.journal.mark_executing(job_id)
                self.metrics.stage("execution_start", time.monotonic() - self._t0.get(job_id, time.monotonic()))
                # Time spent queued for a slot counts against the job's wall time.
                limit = deadline_for(spec.job_type, spec.bounds) - waited
                # The registry enforces the deadline; the outer guard covers an executor that ignores cancellation.
                result: ExecutionResult = await asyncio.wait_for(
                    self.executors.execute(spec.job_type, spec.bounds, deadline_s=limit),
                    max(0.0, limit) + 2 * DEADLINE_MARGIN_S)
            self.metrics.stage("execution_end", time.monotonic() - self._t0.get(job_id, time.monotonic()))
            output, units = result.output, result.usage_units
            if is_error_result(output):
                # Such an output would be read as an error envelope on chain: report it as the error
                # reserved_output instead, so every envelope this runner reveals is one it meant.
                self.metrics.executor_failures.labels(code=RESERVED_OUTPUT).inc()
                log.warning("executor output starts with the error-result magic", job_id=job_id.hex())
                output, units = error_result_for(RESERVED_OUTPUT, "executor output starts with the error-result "
                                                 "magic"), 0
        except asyncio.CancelledError:
            log.info("execution cancelled", job_id=job_id.hex())
            raise
        except (ExecutorError, TimeoutError) as e:
            code = e.code if isinstance(e, ExecutorError) else "timeout"
            message = e.message if isinstance(e, ExecutorError) else "execution exceeded its wall time"
            self.metrics.executor_failures.labels(code=code).inc()
            log.warning("execution failed; sending an error result", job_id=job_id.hex(), code=code, error=str(e))
            output, units = error_result_for(code, message), 0
        except Exception as e:  # a crashing executor never takes the daemon down
            self.metrics.executor_failures.labels(code=INTERNAL).inc()
            log.error("execution crashed; sending an error result", job_id=job_id.hex(), error=repr(e))
            output, units = error_result_for(INTERNAL, f"executor crashed: {type(e).__name__}"), 0
        ob = self.journal.get(job_id)
        if ob is None or ob.terminal:  # cancelled while the executor finished
            return
        # A failed execution is a result too (docs/jobs.md "Error results"): the error envelope goes through the
        # same journal → sign → commit/reveal → rebroadcast path as any output, so the job settles as failed
        # with the reason instead of timing out.
        self.journal.record_output(job_id, output, new_salt() if ob.needs_commit else b"", units)
        await self.sign_and_send(job_id)

    def _terminal(self, job_id: bytes, state: str, reason: str) -> None:
        try:
            self.journal.mark_terminal(job_id, state, reason)  # type: ignore[arg-type]
        except jn.JournalError as e:
            log.info("obligation not ended", job_id=job_id.hex(), code=e.code)

    async def _nonce(self) -> int:
        n = max(self._next_nonce, await self.chain.next_nonce(self.key.address))
        self._next_nonce = n + 1
        return n

    def _result_tx(self, ob: jn.Obligation, *, commit: bool, nonce: int, fees: Fees) -> Transaction:
        """The signed JobResultCommit (``commit``) or JobResultSubmit over the obligation's recorded output."""
        assert ob.result is not None and ob.salt is not None and ob.units is not None
        if commit:
            return build_result_commit(self.key, self.chain_id, job_id=ob.job_id, result=ob.result, salt=ob.salt,
                                       nonce=nonce, fees=fees, max_tx_bytes=self.max_tx_bytes)
        return build_result_submit(self.key, self.chain_id, job_id=ob.job_id, result=ob.result, salt=ob.salt,
                                   units=ob.units, nonce=nonce, fees=fees, max_tx_bytes=self.max_tx_bytes)

    async def sign_and_send(self, job_id: bytes) -> None:
        """From ``executed`` (or ``commit_included`` past the commit window): sign the next result tx, journal
        it, then send it as a frame on the job's channel (when there is none, :meth:`tick` submits it)."""
        ob = self.journal.get(job_id)
        if ob is None or ob.result is None or ob.salt is None or ob.units is None:
            return
        fees = self.fees()
        try:
            async with self._nonce_lock:
                if ob.state == jn.EXECUTED and ob.needs_commit:
                    tx = self._result_tx(ob, commit=True, nonce=await self._nonce(), fees=fees)
                    raw, kind = self.journal.record_signed_commit(job_id, tx), "commit"
                elif ob.state == jn.EXECUTED or (ob.state == jn.COMMIT_INCLUDED and self.head > ob.commit_end):
                    tx = self._result_tx(ob, commit=False, nonce=await self._nonce(), fees=fees)
                    raw, kind = self.journal.record_signed_reveal(job_id, tx, height=self.head), "reveal"
                else:
                    return
        except (ApiError, NodeUnreachable) as e:
            log.warning("cannot sign the result yet", job_id=job_id.hex(), error=str(e))
            return
        except (ValueError, jn.JournalError) as e:  # TxBuildError is a ValueError: this result can never land
            log.error("result transaction refused", job_id=job_id.hex(), error=str(e))
            self._terminal(job_id, "failed", f"txbuild:{getattr(e, 'code', 'error')}")
            return
        self.metrics.result_txs.labels(kind=kind, event="signed").inc()
        channel = self.channels.get(job_id)
        if channel is None:
            return
        try:
            (channel.send_commit if kind == "commit" else channel.send_result)(job_id, raw)
        except Exception as e:  # session gone: the REST rebroadcast takes over
            log.info("result frame not sent; will submit over REST", job_id=job_id.hex(), error=str(e))
            return
        self.journal.mark_sent(job_id, self.head)
        self.metrics.result_txs.labels(kind=kind, event="frame_sent").inc()

    def cancel(self, job_id: bytes) -> bool:
        """JobCancel (§10.5): stop the execution unless a result transaction exists; True if the job ended."""
        if self.journal.get(job_id) is None:
            return False
        ended = self.journal.cancel(job_id)
        if ended:
            task = self.tasks.get(job_id)
            if task is not None:
                task.cancel()
            log.info("job cancelled", job_id=job_id.hex())
        else:
            log.info("cancel ignored: a result transaction is retained", job_id=job_id.hex())
        return ended

    # -- obligations ----------------------------------------------------------------------
    async def resume(self) -> int:
        """After a restart: re-execute accepted/executing jobs, sign executed ones; returns how many resumed.

        Signed transactions need nothing here: :meth:`tick` rebroadcasts them (never-sent ones at once).
        """
        count = 0
        for ob in self.journal.pending():
            if ob.job_id in self.tasks:
                continue
            count += 1
            self.jobs.setdefault(ob.job_id, JobView("0x" + ob.job_id.hex(), ob.state, "journal", time.time()))
            if ob.state in (jn.ACCEPTED, jn.EXECUTING):
                try:
                    a = Assignment.from_stored(ob.job_id, ob.assignment, ob.deadline_block)
                except DecodeError as e:
                    self._terminal(ob.job_id, "failed", f"journal:{e}")
                    continue
                self._start(a)
            elif ob.state == jn.EXECUTED:
                await self.sign_and_send(ob.job_id)
        return count

    async def tick(self, height: int) -> None:
        """Work for a new head: inclusions, reveals, expiry, rebroadcasts (§10.3)."""
        self.head = max(self.head, height)
        for ob in self.journal.pending():
            tx_bytes = ob.pending_tx
            if tx_bytes is not None:
                await self._check_inclusion(ob, tx_bytes)
        for ob in self.journal.pending():
            if ob.state == jn.COMMIT_INCLUDED and self.head > ob.commit_end:
                await self.sign_and_send(ob.job_id)
        for job_id in self.journal.expire(self.head):
            log.warning("obligation expired", job_id=job_id.hex())
        for job_id, tx_bytes in self.journal.due_rebroadcasts(self.head, self.grace_blocks, self.interval_blocks):
            try:
                await self.chain.submit(tx_bytes)
            except ApiError as e:
                if e.code == "nonce_too_low" and not await self._included_or_replaced(job_id, tx_bytes):
                    continue  # cannot tell yet; due again next head
                if e.code not in ("already_known", "nonce_too_low"):  # those: it is in the mempool or landed
                    log.warning("rebroadcast refused", job_id=job_id.hex(), code=e.code, error=e.message)
                    continue
            except NodeUnreachable as e:
                log.warning("rebroadcast failed: validator unreachable", error=str(e))
                return
            self.journal.mark_sent(job_id, self.head)
            self.metrics.result_txs.labels(kind="any", event="rebroadcast").inc()
            log.info("result transaction rebroadcast", job_id=job_id.hex(), height=self.head)
        for job_id, view in self.jobs.items():
            current = self.journal.get(job_id)
            if current is not None:
                view.state = current.state

    async def _included_or_replaced(self, job_id: bytes, tx_bytes: bytes) -> bool:
        """After ``nonce_too_low``: True if ``tx_bytes`` itself landed (a non-failure, §10.3 "nonce-too-low after
        observed inclusion"); otherwise another transaction of this runner (e.g. an on-chain heartbeat signed while
        the result tx was lost with a crashed validator's mempool) took the nonce, so these bytes can never be
        admitted: a replacement with a fresh nonce and the same instruction is signed and journaled (sent at the
        next head) and False is returned. False as well when the receipt cannot be read now."""
        try:
            receipt = await self.chain.receipt(Transaction.from_bytes(tx_bytes).tx_hash())
        except (ApiError, NodeUnreachable):
            return False
        if receipt is not None:
            return True
        ob = self.journal.get(job_id)
        if ob is None or ob.pending_tx != tx_bytes or ob.result is None or ob.salt is None or ob.units is None:
            return False
        fees = self.fees()
        try:
            async with self._nonce_lock:
                nonce = await self._nonce()
                tx = self._result_tx(ob, commit=ob.state in (jn.COMMIT_SIGNED, jn.COMMIT_SENT), nonce=nonce, fees=fees)
                self.journal.record_replacement(job_id, tx)
        except (ApiError, NodeUnreachable, ValueError, jn.JournalError) as e:
            log.warning("result transaction not replaced", job_id=job_id.hex(), error=str(e))
            return False
        self.metrics.result_txs.labels(kind="any", event="replaced").inc()
        log.warning("result transaction's nonce was used by another transaction; replaced", job_id=job_id.hex(),
                    old_nonce=Transaction.from_bytes(tx_bytes).nonce, new_nonce=nonce)
        return False

    async def _check_inclusion(self, ob: jn.Obligation, tx_bytes: bytes) -> None:
        kind = "commit" if ob.state in (jn.COMMIT_SIGNED, jn.COMMIT_SENT) else "reveal"
        try:
            receipt = await self.chain.receipt(Transaction.from_bytes(tx_bytes).tx_hash())
        except (ApiError, NodeUnreachable):
            return
        if receipt is None:
            return
        if receipt.get("status") != "success":
            log.error("result transaction failed on chain", job_id=ob.job_id.hex(), kind=kind,
                      error_code=receipt.get("error_code"))
            self._terminal(ob.job_id, "failed", f"{kind}_failed:{receipt.get('error_code')}")
            return
        self.journal.mark_included(ob.job_id, kind, int(receipt.get("height", self.head)))  # type: ignore[arg-type]
        self.metrics.result_txs.labels(kind=kind, event="included").inc()
        if kind == "reveal":
            t0 = self._t0.pop(ob.job_id, None)
            if t0 is not None:
                self.metrics.stage("result_included", time.monotonic() - t0)
            log.info("result included", job_id=ob.job_id.hex(), height=receipt.get("height"))
