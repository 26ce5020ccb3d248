"""Under-fill (CIP-11 §9.2, §11.2): a job with fewer eligible runners than M is accepted with the runners that
exist; §11.2 timeout re-selection fills the missing seats from the job's original seed; verification keeps the
job's own threshold; a job that never fills fails after its retries with a full refund; zero eligible runners
is still refused.

Every test runs in each CIP-11 rollout phase 0..3 (phases 0 and 1: CIP-2 v2 selection in block S; phases 2 and
3: v3, M > 1 drawn at the pending-selection pass over the block-S snapshot), through the e2e harness: every
block is verified by a follower to the same state root.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from cowboy_node.execution.jobs import dispatch
from cowboy_node.execution.jobs.job_record import JobRecord, JobStatus
from cowboy_node.execution.system_state import JOB_DISPATCHER, get_account
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.jobs.commitment import result_commitment
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit, JobSubmit
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.runner_instructions import RunnerRegister
from cowboy_protocol.types.runner_json import runner_file_from_json
from tests.helpers import ALICE, ALICE_SK, run_under_hash_seeds
from tests.unit.execution.jobs import test_jobs_e2e as e2e

PHASES = (0, 1, 2, 3)
SKS = e2e.RUNNER_SKS
RUNNERS = e2e.RUNNERS
MAJORITY_3_OF_2 = {"mode": "majority_vote", "runners": 3, "threshold": 2}


@pytest.fixture(params=PHASES, autouse=True, ids=[f"phase{p}" for p in PHASES])
def phase(request: pytest.FixtureRequest) -> int:
    """The CIP-11 phase the e2e harness builds its genesis for."""
    e2e._PHASE = request.param
    return int(request.param)


def _submit(net: e2e.Net, **overrides: Any) -> bytes:
    submit = net.tx(ALICE_SK, e2e._request(**overrides))
    p = net.block([submit])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    return derive_job_id(submit.tx_hash(), 0)


def _assigned(net: e2e.Net, job_id: bytes) -> JobRecord:
    """Blocks until the job has a committee (M > 1 in phases 2-3 waits for its seed round)."""
    while net.job(job_id).status == JobStatus.PENDING_SELECTION:
        net.block([])
    rec = net.job(job_id)
    assert rec.status == JobStatus.ASSIGNED
    return rec


def _commit_and_reveal(net: e2e.Net, job_id: bytes, result: bytes) -> None:
    """Every committee member commits ``result``, then reveals it once the reveal window is open."""
    rec = net.job(job_id)
    sks = [SKS[RUNNERS.index(r)] for r in rec.committee]
    p = net.block([net.tx(sk, JobResultCommit(job_id, result_commitment(job_id, r, result, b"salt")))
                   for sk, r in zip(sks, rec.committee, strict=True)])
    assert all(r.error_code is None for r in p.result.receipts), [r.error_code for r in p.result.receipts]
    while net.chain.height < rec.commit_end:
        net.block([])
    p = net.block([net.tx(sk, JobResultSubmit(job_id, result, b"salt", 0)) for sk in sks])
    assert all(r.error_code is None for r in p.result.receipts), [r.error_code for r in p.result.receipts]


def _register(net: e2e.Net, sks: list[bytes]) -> None:
    caps, card = runner_file_from_json(json.loads((e2e.EXAMPLES / "runner-capabilities.json").read_text()),
                                       require_rate_card=True)
    assert card is not None
    net.block([net.tx(ALICE_SK, Transfer(private_key_to_address(sk), 10**21)) for sk in sks])
    net.block([net.tx(sk, RunnerRegister(e2e.STAKE, caps, card)) for sk in sks])


def test_fewer_eligible_runners_than_m_is_accepted_with_the_runners_that_exist() -> None:
    """§9.2: "If |eligible| < M, the loop breaks early" — the job is not refused (was: not_enough_runners)."""
    net = e2e._net(SKS[:2])
    job_id = _submit(net, verification=MAJORITY_3_OF_2, timeout_blocks=10)
    rec = _assigned(net, job_id)
    assert sorted(rec.committee) == sorted(RUNNERS[:2])
    assert dispatch.shortfall(rec) == 1  # M = 3, two seats drawn
    # The job's own threshold (2) is what verification requires, whatever the committee size.
    _commit_and_reveal(net, job_id, b"A")
    done = net.job(job_id)
    assert (done.status, done.outcome, done.reason) == (JobStatus.COMPLETED, b"A", "verified")
    assert dispatch.shortfall(done) == 0


def test_under_filled_committee_below_threshold_is_reselected_and_fills_from_the_original_seed() -> None:
    """One eligible runner for M = 3, threshold 2: its lone result cannot verify (the threshold is never scaled
    down to the committee drawn); §11.2 re-selection draws the next committee of M from the original seed, and
    once more runners are eligible that committee is full and the job verifies."""
    net = e2e._net(SKS[:1])
    job_id = _submit(net, verification=MAJORITY_3_OF_2, timeout_blocks=10)
    first = _assigned(net, job_id)
    assert first.committee == (RUNNERS[0],) and dispatch.shortfall(first) == 2
    _commit_and_reveal(net, job_id, b"A")
    again = net.job(job_id)
    assert again.status == JobStatus.ASSIGNED and again.attempt == 1, again  # below_threshold: not settled
    assert again.committee == (RUNNERS[0],) and again.seed == first.seed and again.excluded == ()
    _register(net, SKS[1:3])  # two more runners become eligible
    net.present = frozenset(range(3))
    _commit_and_reveal(net, job_id, b"A")
    full = net.job(job_id)
    assert full.status == JobStatus.ASSIGNED and full.attempt == 2
    assert sorted(full.committee) == sorted(RUNNERS) and dispatch.shortfall(full) == 0
    assert full.seed == first.seed  # re-selection seeds derive from the job's original selection seed
    _commit_and_reveal(net, job_id, b"A")
    done = net.job(job_id)
    assert (done.status, done.outcome, done.reason) == (JobStatus.COMPLETED, b"A", "verified")


def test_a_lone_seat_of_an_m_3_job_must_commit_before_revealing() -> None:
    """§10.3: commit-then-reveal applies to every job with verification.runners > 1, whatever number of seats
    the under-filled draw produced (was: a one-seat committee could reveal at once, with no commitment)."""
    net = e2e._net(SKS[:1])
    job_id = _submit(net, verification=MAJORITY_3_OF_2, timeout_blocks=10)
    rec = _assigned(net, job_id)
    assert rec.committee == (RUNNERS[0],)
    early = net.block([net.tx(SKS[0], JobResultSubmit(job_id, b"A", b"salt", 0))])
    assert early.result.receipts[0].error_code == "reveal_without_commit"
    assert net.job(job_id).reveals == ()


def test_a_job_that_never_fills_fails_after_its_retries_with_a_full_refund() -> None:
    net = e2e._net(SKS[:1])
    job_id = _submit(net, verification=MAJORITY_3_OF_2, timeout_blocks=10)
    rec = _assigned(net, job_id)
    assert rec.committee == (RUNNERS[0],)
    while net.job(job_id).status == JobStatus.ASSIGNED:  # the lone runner stays silent: timeouts only
        net.block([])
    done = net.job(job_id)
    assert (done.status, done.reason) == (JobStatus.FAILED, "retries_exhausted")
    assert done.attempt == 3 and done.excluded == (RUNNERS[0],)
    assert get_account(net.chain.world(), JOB_DISPATCHER).balance == 0  # escrow refunded in full


@pytest.mark.parametrize("runners", [1, 3])
def test_zero_eligible_runners_is_still_refused(runners: int) -> None:
    net = e2e._net(SKS[:2])
    before = get_account(net.chain.world(), ALICE).balance
    verification = ({"mode": "none", "runners": 1, "threshold": 1} if runners == 1 else MAJORITY_3_OF_2)
    doc = {"job_type": {"kind": "http", "url": "https://elsewhere.net/x", "method": "GET"},
           "max_price": "1000000", "verification": verification}
    p = net.block([net.tx(ALICE_SK, JobSubmit(parse_job_request_json(doc)))])
    r = p.result.receipts[0]
    assert r.error_code == "no_eligible_runner"
    assert get_account(net.chain.world(), ALICE).balance == before - int(r.fee_paid)
    assert get_account(net.chain.world(), JOB_DISPATCHER).balance == 0


UNDERFILL_SCRIPT = """
from tests.unit.execution.jobs import test_jobs_underfill as t
from tests.unit.execution.jobs import test_jobs_e2e as e2e
e2e._PHASE = {phase}
net = e2e._net(t.SKS[:1])
job_id = t._submit(net, verification=t.MAJORITY_3_OF_2, timeout_blocks=10)
t._assigned(net, job_id)
t._commit_and_reveal(net, job_id, b"A")
t._register(net, t.SKS[1:3])
net.present = frozenset(range(3))
t._commit_and_reveal(net, job_id, b"A")
print(net.chain.head.header.state_root.hex(), net.job(job_id).committee[0].hex())
"""


def test_under_fill_and_refill_roots_do_not_depend_on_hash_seed(phase: int) -> None:
    """DESIGN.md §3: two processes with different PYTHONHASHSEED reach the same roots and committee."""
    outs = run_under_hash_seeds(UNDERFILL_SCRIPT.format(phase=phase))
    assert outs[0] == outs[1] and len(outs[0].split()) == 2
