"""Result Verifier: JobResultCommit / JobResultSubmit, settlement, failure and timeout re-selection.

Windows (DESIGN.md §4, CIP-11 §10.3, §11.2), for the current assignment at height A with deadline D:

 - commit phase: ``A ≤ h ≤ commit_end`` (``commit_end = A + max(1, timeout · 0.6)``);
 - reveal phase: ``commit_end < h ≤ D`` for committees of M > 1 (a reveal must match the runner's commitment);
 - M == 1: a reveal without a commitment is accepted at any ``h ≤ D`` (CIP-11 §10.3 "MAY skip the commit");
   with a commitment it must match it.

A job settles as soon as every committee member revealed (M == 1: on its reveal), otherwise when its deadline
has passed (block D + 1, ResolveOffchain) with the reveals it has. A committee member that committed and did not
reveal is slashed (``slash_permille`` of stake, burned) and loses reputation; members that neither committed nor
revealed time out: they lose reputation, become unhealthy (until their next heartbeat) and are excluded from the
job's re-selection. With no usable result the job is re-selected (at most ``max_job_retries`` times), then fails
with a full refund. Error results (``cowboy_protocol.jobs.error_result``) are votes like any result: when an
error group wins the verification mode's vote, the job fails at once with ``runner_error:<code>`` and a full
refund, and its runners are neither paid nor penalised (an honest error is not a timeout).
Terminal jobs are queued for their callback (``ctx.jobs_finished``).
"""

from __future__ import annotations

from dataclasses import replace

from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.jobs import dispatch, mru, payment, seeds, weights
from cowboy_node.execution.jobs.checks import Check
from cowboy_node.execution.jobs.job_record import (
    DEADLINE_PREFIX,
    MAX_RESULT_BYTES,
    JobRecord,
    JobStatus,
    Reveal,
    deadline_key,
    job_key,
    runner_job_key,
)
from cowboy_node.execution.jobs.verification import Reveal as VReveal
from cowboy_node.execution.jobs.verification import Verdict, VerificationParams, verify
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.runners import registry_state as registry
from cowboy_node.execution.system_state import (
    GOVERNANCE,
    JOB_DISPATCHER,
    get_account,
    get_runner_config,
    move_balance,
    put_account,
)
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import Account
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import encode
from cowboy_protocol.jobs.commitment import result_commitment
from cowboy_protocol.types.fields import encode_u128
from cowboy_protocol.types.jobspec import JobSpecV1, decode_job_spec
from cowboy_protocol.types.jobspec_checks import (
    JsonSchemaValidCheck,
    MajorityVoteCheck,
    NumericRangeCheck,
    NumericToleranceCheck,
    StructuredMatchCheck,
    VerificationConfig,
    VerifierCheck,
)

RESULT_CYCLES = 10_000
"""Cycles of a commit or reveal before verification."""
TREASURY = GOVERNANCE
"""Account credited with the treasury share of payments (the Governance system actor)."""
TOPIC_COMMITTED = "job.result_committed"
TOPIC_REVEALED = "job.result_revealed"
TOPIC_COMPLETED = "job.completed"
TOPIC_FAILED = "job.failed"
TOPIC_RESELECTED = "job.reselected"
TOPIC_SLASHED = "runner.slashed"


def load_job(world: WorldState, job_id: bytes) -> JobRecord | None:
    """The job record, or None."""
    raw = world.get(job_key(job_id))
    return None if raw is None else JobRecord.decode(raw)


def _live_job_for(world: WorldState, job_id: bytes, runner: bytes, height: int) -> JobRecord:
    rec = load_job(world, job_id)
    if rec is None:
        raise TxFailed("job_not_found", f"no job 0x{job_id.hex()}")
    if rec.status != JobStatus.ASSIGNED:
        raise TxFailed("job_not_assigned", f"job 0x{job_id.hex()} is not awaiting results ({rec.status.name})")
    if runner not in rec.committee:
        raise TxFailed("not_on_committee", "the sender is not on this job's committee")
    if height > rec.deadline_block:
        raise TxFailed("result_too_late", f"the deadline {rec.deadline_block} has passed")
    return rec


def commit_result(world: WorldState, ctx: BlockContext, meter: Meter, *, runner: bytes, job_id: bytes,
                  commitment: bytes, events: list[Event]) -> None:
    """JobResultCommit: record the runner's commitment during the commit phase."""
    meter.charge_cycles(RESULT_CYCLES)
    rec = _live_job_for(world, job_id, runner, ctx.env.height)
    if ctx.env.height > rec.commit_end:
        raise TxFailed("commit_window_closed", f"the commit phase ended at block {rec.commit_end}")
    if rec.commitment_of(runner) is not None:
        raise TxFailed("already_committed", "the runner already committed a result for this assignment")
    new = rec.with_commit(runner, commitment)
    raw = new.encode()
    meter.charge_cells(len(raw) - len(rec.encode()) + 64)
    world.set(job_key(job_id), raw)
    events.append(Event(JOB_DISPATCHER, TOPIC_COMMITTED, encode({0: job_id, 1: runner})))


def submit_result(world: WorldState, ctx: BlockContext, meter: Meter, *, runner: bytes, job_id: bytes,
                  result: bytes, salt: bytes, units: int, events: list[Event]) -> None:
    """JobResultSubmit: accept a reveal in its window; settle when the whole committee has revealed."""
    meter.charge_cycles(RESULT_CYCLES)
    if len(result) > MAX_RESULT_BYTES:
        raise TxFailed("result_too_large", f"results are limited to {MAX_RESULT_BYTES} bytes")
    h = ctx.env.height
    rec = _live_job_for(world, job_id, runner, h)
    if rec.reveal_of(runner) is not None:
        raise TxFailed("already_revealed", "the runner already revealed a result for this assignment")
    commitment = rec.commitment_of(runner)
    # The job's M, not the seats drawn: an under-filled committee of an M > 1 job still commits first (§10.3).
    multi = decode_job_spec(rec.spec).verification.runners > 1
    if multi and commitment is None:
        raise TxFailed("reveal_without_commit", "committees of more than one runner must commit before revealing")
    if multi and h <= rec.commit_end:
        raise TxFailed("reveal_window_not_open", f"reveals open after block {rec.commit_end}")
    if commitment is not None and result_commitment(job_id, runner, result, salt) != commitment:
        raise TxFailed("reveal_mismatch", "the revealed result and salt do not match the commitment")
    new = rec.with_reveal(runner, Reveal(result, units))
    meter.charge_cells(len(result) + 64)
    world.set(job_key(job_id), new.encode())
    events.append(Event(JOB_DISPATCHER, TOPIC_REVEALED, encode({0: job_id, 1: runner})))
    if len(new.reveals) == len(new.committee):
        conclude(world, ctx, new)


def _check(c: VerifierCheck) -> Check:
    if isinstance(c, MajorityVoteCheck):
        return Check(kind=0, field=c.field)
    if isinstance(c, JsonSchemaValidCheck):
        return Check(kind=1, schema=c.schema)
    if isinstance(c, StructuredMatchCheck):
        return Check(kind=2, fields=tuple(c.fields))
    if isinstance(c, NumericToleranceCheck):
        return Check(kind=3, field=c.field, tolerance=c.tolerance)
    if isinstance(c, NumericRangeCheck):
        return Check(kind=4, field=c.field, minimum=c.min, maximum=c.max)
    raise TxFailed("job_check_unsupported", f"check {type(c).__name__} is not supported by this node")


def verification_params(spec: JobSpecV1) -> VerificationParams:
    """The verifier's inputs from a job spec."""
    return verification_params_of(spec.verification)


def verification_params_of(v: VerificationConfig) -> VerificationParams:
    """The verifier's inputs from a verification config (also checked at submission, see ``executors.validate``)."""
    return VerificationParams(mode=int(v.mode), runners=v.runners, threshold=v.threshold,
                              checks=tuple(_check(c) for c in v.checks))


def conclude(world: WorldState, ctx: BlockContext, rec: JobRecord) -> None:
    """Verify the current assignment's reveals and settle, or penalise and re-select / fail."""
    spec = decode_job_spec(rec.spec)
    cfg = get_runner_config(world)
    committee_reveals = tuple(VReveal(r, v.result, v.units) for r in rec.committee
                              if (v := rec.reveal_of(r)) is not None)
    verdict = verify(verification_params(spec), committee_reveals) if committee_reveals else None
    _release_assignment(world, rec)
    silent = [r for r in rec.committee if rec.reveal_of(r) is None]
    for r in silent:
        if rec.commitment_of(r) is not None:  # committed, never revealed: proven dishonesty (CIP-2 v3)
            amount = registry.slash_stake(world, r, cfg.slash_permille)
            ctx.burned += amount
            registry.adjust_reputation(world, r, -cfg.reputation_slash_penalty_x1e9, cfg)
            ctx.events.append(Event(JOB_DISPATCHER, TOPIC_SLASHED, encode({0: r, 1: rec.job_id,
                                                                          2: encode_u128(amount)})))
        else:
            registry.adjust_reputation(world, r, -cfg.reputation_timeout_penalty_x1e9, cfg)
            registry.mark_unhealthy(world, r)
    if verdict is not None:
        for r in verdict.outliers:
            registry.adjust_reputation(world, r, -cfg.reputation_slash_penalty_x1e9, cfg)
    if verdict is not None and verdict.ok:
        _complete(world, ctx, rec, spec, verdict)
        return
    excluded = tuple(sorted(set(rec.excluded) | set(silent)))
    if verdict is not None and verdict.error is not None:
        # Error results won the vote (docs/jobs.md "Error results"): the job failed for a reason the runners
        # reported, which another committee would most likely meet again. Terminal, full refund, no re-selection;
        # the error runners are neither paid nor penalised (an honest error is not a timeout).
        fail(world, ctx, replace(rec, excluded=excluded), verdict.reason, outcome=verdict.error)
        return
    reason = "no_result" if verdict is None else verdict.reason
    if rec.attempt >= cfg.max_job_retries:
        fail(world, ctx, replace(rec, excluded=excluded), "retries_exhausted" if verdict is None else reason)
        return
    reselect(world, ctx, replace(rec, excluded=excluded, attempt=rec.attempt + 1), spec, reason)


def reselect(world: WorldState, ctx: BlockContext, rec: JobRecord, spec: JobSpecV1, reason: str) -> None:
    """Timeout re-selection (§11.2): a new committee excluding timed-out runners, deadline = H + timeout."""
    seed = seeds.reselection_seed(rec.seed, rec.attempt)
    candidates, _report = dispatch.eligible_for(world, ctx, spec, rec.excluded)
    cfg = get_runner_config(world)
    committee = dispatch.draw_from(world, ctx, spec, candidates, weights.base_weights(candidates, cfg),
                                   spec.verification.runners, seed)
    ctx.events.append(Event(JOB_DISPATCHER, TOPIC_RESELECTED, encode({0: rec.job_id, 1: rec.attempt, 2: reason})))
    dispatch.assign(world, ctx, rec, spec, committee, deadline=ctx.env.height + spec.timeout_blocks)


def _release_assignment(world: WorldState, rec: JobRecord) -> None:
    for r in rec.committee:
        registry.adjust_active_jobs(world, r, -1)
        world.delete(runner_job_key(r, rec.job_id))
    world.delete(deadline_key(rec.deadline_block, rec.job_id))


def _complete(world: WorldState, ctx: BlockContext, rec: JobRecord, spec: JobSpecV1, verdict: Verdict) -> None:
    cfg = get_runner_config(world)
    first = verdict.matching[0]
    runner = registry.get_runner(world, first)
    rate = None if runner is None else runner.rate_card.rate_for(spec.job_type.KIND)
    revealed = rec.reveal_of(first)
    units = 0 if revealed is None else revealed.units
    price = spec.max_price if rate is None else payment.usage_price(rate.base_price, rate.price_per_unit, units)
    s = payment.settle(spec.max_price, spec.tip, price, verdict.matching, cfg)
    for r, amount in s.per_runner:
        move_balance(world, JOB_DISPATCHER, r, amount)
        registry.adjust_reputation(world, r, cfg.reputation_reward_x1e9, cfg)
    move_balance(world, JOB_DISPATCHER, TREASURY, s.treasury)
    move_balance(world, JOB_DISPATCHER, rec.payer, s.refund)
    # Burned: leaves the dispatcher's balance and the supply.
    d = get_account(world, JOB_DISPATCHER)
    put_account(world, JOB_DISPATCHER, Account(d.balance - s.burned, d.nonce))
    ctx.burned += s.burned
    if ctx.flags.CIP11_PRESENT_FIRST_ENABLED:
        world.set(mru.mru_key(spec.submitter, spec.job_type.KIND), mru.encode_mru(first, ctx.env.height))
    done = replace(rec, status=JobStatus.COMPLETED, outcome=verdict.result, reason=verdict.reason,
                   finished_at=ctx.env.height)
    world.set(job_key(rec.job_id), done.encode())
    ctx.jobs_finished.append(rec.job_id)
    ctx.events.append(Event(JOB_DISPATCHER, TOPIC_COMPLETED, encode(
        {0: rec.job_id, 1: list(verdict.matching), 2: encode_u128(s.refund)})))


def fail(world: WorldState, ctx: BlockContext, rec: JobRecord, reason: str, *, outcome: bytes | None = None) -> None:
    """Terminal failure: full refund of the escrow to the payer. ``outcome`` is the winning error result's
    envelope when runners reported the failure (the callback receives it as its ``result``), else None."""
    move_balance(world, JOB_DISPATCHER, rec.payer, rec.escrow)
    done = replace(rec, status=JobStatus.FAILED, outcome=outcome, reason=reason, finished_at=ctx.env.height)
    world.set(job_key(rec.job_id), done.encode())
    ctx.jobs_finished.append(rec.job_id)
    ctx.events.append(Event(JOB_DISPATCHER, TOPIC_FAILED, encode({0: rec.job_id, 1: reason})))


def process_deadlines(world: WorldState, ctx: BlockContext) -> int:
    """Conclude every assignment whose deadline is below the current height; returns how many."""
    due: list[bytes] = []
    for key, _ in world.iterate(DEADLINE_PREFIX):
        deadline = int.from_bytes(key[len(DEADLINE_PREFIX):len(DEADLINE_PREFIX) + 8], "big")
        if deadline >= ctx.env.height:
            break
        due.append(key[len(DEADLINE_PREFIX) + 8:])
    for job_id in due:  # the index orders them by (deadline, job_id)
        rec = load_job(world, job_id)
        if rec is not None and rec.status == JobStatus.ASSIGNED:
            conclude(world, ctx, rec)
    return len(due)
