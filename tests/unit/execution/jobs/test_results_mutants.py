"""Rules of the Result Verifier (``cowboy_node/execution/jobs/results.py``) that the suite did not hold, found by
mutation testing (issue 31 §2, docs/testing.md "jobs-results"): each test here fails with the named mutant applied
and passes without it.

Windows (CIP-11 §10.3): a result is accepted up to and including the deadline block, a commitment up to and
including ``commit_end``; an M > 1 job commits before it reveals even when M is 2. Settlement (§11.2, CIP-2 v3):
a runner that committed and never revealed is slashed and loses ``reputation_slash_penalty``; a job is re-selected
at most ``max_job_retries`` times; the verifier reads each check of the spec as its own kind; the events carry
their documented fields.
"""

from __future__ import annotations

import json

import pytest

import tests.unit.execution.jobs.test_jobs_e2e as e2e
from cowboy_node.chain.chain import PreparedBlock
from cowboy_node.execution.fees import TX_BASE_CYCLES
from cowboy_node.execution.jobs import mru
from cowboy_node.execution.jobs.checks import (
    CHECK_JSON_SCHEMA_VALID,
    CHECK_MAJORITY_VOTE,
    CHECK_NUMERIC_RANGE,
    CHECK_NUMERIC_TOLERANCE,
    CHECK_STRUCTURED_MATCH,
)
from cowboy_node.execution.jobs.job_record import MAX_RESULT_BYTES, JobStatus
from cowboy_node.execution.jobs.results import (
    TOPIC_COMMITTED,
    TOPIC_COMPLETED,
    TOPIC_FAILED,
    TOPIC_RESELECTED,
    TOPIC_REVEALED,
    TOPIC_SLASHED,
    submit_result,
    verification_params_of,
)
from cowboy_node.execution.runners.registry_state import get_runner
from cowboy_node.execution.system_state import JOB_DISPATCHER, get_account, get_runner_config
from cowboy_node.execution.transactions import intrinsic_cost
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import decode
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.jobs.commitment import result_commitment
from cowboy_protocol.types.fields import decode_u128
from cowboy_protocol.types.governance_instructions import GovernanceSetParam
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.jobspec_checks import (
    JsonSchemaValidCheck,
    MajorityVoteCheck,
    NumericRangeCheck,
    NumericToleranceCheck,
    StructuredMatchCheck,
    VerificationConfig,
    VerificationMode,
)
from cowboy_protocol.types.params import Cip11Flags
from cowboy_protocol.types.runner_instructions import RunnerRegister
from cowboy_protocol.types.runner_json import runner_file_from_json
from tests.helpers import ALICE_SK, make_dev_genesis
from tests.unit.eob_helpers import big_meter, make_ctx, make_world
from tests.unit.execution.jobs.test_jobs_e2e import RUNNER_SKS, STAKE, Net, _net, _request

SIX_SKS = [(0x3000 + i).to_bytes(32, "big") for i in range(6)]
START_REP = 50 * 10**9  # a new runner's reputation (RunnerConfig default)


def _sk(runner: bytes, sks: list[bytes] = RUNNER_SKS) -> bytes:
    return sks[[private_key_to_address(sk) for sk in sks].index(runner)]


def _submit(net: Net, **overrides: object) -> bytes:
    tx = net.tx(ALICE_SK, _request(None, **overrides))
    p = net.block([tx])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    job_id = derive_job_id(tx.tx_hash(), 0)
    while net.job(job_id).status == JobStatus.PENDING_SELECTION:
        net.block([])
    return job_id


def _events(p: PreparedBlock, topic: str) -> list[Event]:
    every = [e for r in p.result.receipts for e in r.events] + list(p.result.block_events)
    return [e for e in every if e.topic == topic]


def test_a_result_in_the_deadline_block_itself_is_accepted() -> None:
    """§10.3: results are accepted while ``h ≤ deadline_block`` (mutants: ``height > deadline`` → ``>=``,
    ``==``; ``job.completed``'s keys ±1)."""
    net = _net()
    job_id = _submit(net, timeout_blocks=10)
    rec = net.job(job_id)
    while net.chain.height < rec.deadline_block - 1:
        net.block([])
    [runner] = rec.committee
    p = net.block([net.tx(_sk(runner), JobResultSubmit(job_id, b'{"v": 1}', b"", 0))])
    assert p.block.header.height == rec.deadline_block
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    assert net.job(job_id).status == JobStatus.COMPLETED
    # job.completed is {0: job_id, 1: matching runners, 2: refund}: the price is the rate card's base 1,000
    [ev] = _events(p, TOPIC_COMPLETED)
    payload = decode(ev.data)
    assert isinstance(payload, dict) and set(payload) == {0, 1, 2}
    assert (payload[0], payload[1], decode_u128(payload[2], "refund")) == (job_id, [runner], rec.escrow - 1000)


def test_a_commitment_in_the_commit_end_block_is_accepted_and_one_after_it_refused() -> None:
    """§10.3: the commit phase is ``A ≤ h ≤ commit_end`` (mutant: ``height > commit_end`` → ``==``)."""
    net = _net()
    job_id = _submit(net, verification={"mode": "majority_vote", "runners": 3, "threshold": 2}, timeout_blocks=10)
    rec = net.job(job_id)
    while net.chain.height < rec.commit_end - 1:
        net.block([])
    first, second = rec.committee[0], rec.committee[1]
    at_end = net.block([net.tx(_sk(first), JobResultCommit(job_id, result_commitment(job_id, first, b"A", b"s")))])
    assert at_end.block.header.height == rec.commit_end
    assert at_end.result.receipts[0].error_code is None, at_end.result.receipts[0]
    after = net.block([net.tx(_sk(second), JobResultCommit(job_id, result_commitment(job_id, second, b"A", b"s")))])
    assert after.result.receipts[0].error_code == "commit_window_closed"


def test_a_two_runner_job_must_commit_before_it_reveals() -> None:
    """§10.3: only M == 1 may skip the commit; M == 2 is a committee like M == 3 (mutant: ``runners > 1`` →
    ``> 2``)."""
    net = _net()
    job_id = _submit(net, verification={"mode": "majority_vote", "runners": 2, "threshold": 2}, timeout_blocks=10)
    rec = net.job(job_id)
    while net.chain.height < rec.commit_end:
        net.block([])
    runner = rec.committee[0]
    p = net.block([net.tx(_sk(runner), JobResultSubmit(job_id, b"A", b"s", 0))])
    assert p.result.receipts[0].error_code == "reveal_without_commit"


def test_a_reveal_event_names_the_job_and_the_runner() -> None:
    """``job.result_revealed`` is ``{0: job_id, 1: runner}`` (mutants: its keys 0 and 1 → ±1)."""
    net = _net()
    job_id = _submit(net, timeout_blocks=10)
    [runner] = net.job(job_id).committee
    p = net.block([net.tx(_sk(runner), JobResultSubmit(job_id, b'{"v": 1}', b"", 0))])
    [ev] = _events(p, TOPIC_REVEALED)
    assert decode(ev.data) == {0: job_id, 1: runner}


def test_a_runner_that_committed_and_never_revealed_is_slashed_and_loses_the_slash_penalty() -> None:
    """CIP-2 v3: commit without reveal is proven dishonesty: ``slash_permille`` of the stake burned, reputation
    −``reputation_slash_penalty``, one ``runner.slashed`` event ``{0: runner, 1: job_id, 2: amount}``; the job is
    re-selected with ``job.reselected`` ``{0: job_id, 1: attempt, 2: reason}`` (mutants: the penalty's sign
    → ``not``, the events' keys → ±1)."""
    net = _net()
    job_id = _submit(net, verification={"mode": "majority_vote", "runners": 3, "threshold": 2}, timeout_blocks=10)
    rec = net.job(job_id)
    cheat = rec.committee[0]
    net.block([net.tx(_sk(cheat), JobResultCommit(job_id, result_commitment(job_id, cheat, b"A", b"s")))])
    cfg = get_runner_config(net.chain.world())
    while net.chain.height < rec.deadline_block:
        net.block([])
    p = net.block([])  # block D + 1 concludes the assignment
    slashed = get_runner(net.chain.world(), cheat)
    assert slashed is not None
    assert slashed.reputation_x1e9 == START_REP - cfg.reputation_slash_penalty_x1e9
    [ev] = _events(p, TOPIC_SLASHED)
    payload = decode(ev.data)
    assert isinstance(payload, dict) and set(payload) == {0, 1, 2}
    assert (payload[0], payload[1]) == (cheat, job_id)
    assert decode_u128(payload[2], "amount") == STAKE * cfg.slash_permille // 1000
    [again] = _events(p, TOPIC_RESELECTED)
    assert decode(again.data) == {0: job_id, 1: 1, 2: "no_result"}
    others = [get_runner(net.chain.world(), r) for r in rec.committee[1:]]  # silent: the timeout penalty only
    assert all(o is not None and o.reputation_x1e9 == START_REP - cfg.reputation_timeout_penalty_x1e9
               for o in others)


def test_a_job_is_reselected_max_job_retries_times_then_fails() -> None:
    """§11.2: re-selection at most ``max_job_retries`` times (3 by default: four committees in all), then the job
    fails with ``retries_exhausted`` and one ``job.failed`` event (mutants: ``attempt >= max_job_retries`` → ``>``,
    the event's keys ±1)."""
    net = _net(SIX_SKS)
    cfg = get_runner_config(net.chain.world())
    job_id = _submit(net, timeout_blocks=10)
    committees = []
    failed: list[Event] = []
    while net.job(job_id).status == JobStatus.ASSIGNED:
        rec = net.job(job_id)
        committees.append(rec.committee)
        while net.chain.height <= rec.deadline_block:
            failed += _events(net.block([]), TOPIC_FAILED)
    done = net.job(job_id)
    [ev] = failed  # job.failed is {0: job_id, 1: reason}
    assert decode(ev.data) == {0: job_id, 1: "retries_exhausted"}
    assert (done.status, done.reason) == (JobStatus.FAILED, "retries_exhausted")
    assert len(committees) == cfg.max_job_retries + 1 == 4
    assert done.attempt == cfg.max_job_retries


def test_a_job_whose_attempt_is_beyond_a_lowered_max_job_retries_fails_at_its_next_deadline() -> None:
    """§11.2 "at most ``max_job_retries``" re-selections, with the value governed (``runner.max_job_retries``,
    docs/operations.md "Governance"): a job already re-selected twice when governance lowers the maximum to 1
    has used up its retries, so its next deadline fails it with ``retries_exhausted`` instead of re-selecting it
    (mutant: ``attempt >= max_job_retries`` → ``==``, under which 2 never equals 1 and the job is re-selected at
    every deadline, for ever)."""
    net = _net(SIX_SKS)
    assert get_runner_config(net.chain.world()).max_job_retries == 3
    job_id = _submit(net, timeout_blocks=10)
    while net.job(job_id).attempt < 2:  # two silent committees: re-selected twice, still within the default 3
        net.block([])
    rec = net.job(job_id)
    assert (rec.status, rec.attempt) == (JobStatus.ASSIGNED, 2)
    activation = net.chain.height + 2
    assert activation <= rec.deadline_block  # the new maximum is in force when this assignment times out
    p = net.block([net.tx(ALICE_SK, GovernanceSetParam("runner.max_job_retries", 1, activation))])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    failed: list[Event] = []
    reselected: list[Event] = []
    while net.chain.height <= rec.deadline_block:
        p = net.block([])
        failed += _events(p, TOPIC_FAILED)
        reselected += _events(p, TOPIC_RESELECTED)
    assert get_runner_config(net.chain.world()).max_job_retries == 1
    done = net.job(job_id)
    assert (done.status, done.reason, done.attempt) == (JobStatus.FAILED, "retries_exhausted", 2)
    [ev] = failed
    assert decode(ev.data) == {0: job_id, 1: "retries_exhausted"}
    assert reselected == []


def test_each_check_of_a_spec_is_verified_as_its_own_kind() -> None:
    """The §12.6 check kinds: each JobSpec check maps to the verifier check of its kind byte with its own fields
    (mutants: a kind byte ±1, an ``isinstance`` test negated)."""
    checks = (MajorityVoteCheck(field="answer"), JsonSchemaValidCheck(schema='{"type": "object"}'),
              StructuredMatchCheck(fields=("a", "b")), NumericToleranceCheck(field="price", tolerance=0.5),
              NumericRangeCheck(field="temp", min=-10.0, max=40.0))
    params = verification_params_of(VerificationConfig(mode=VerificationMode.STRUCTURED_MATCH, runners=3,
                                                       threshold=2, checks=checks))
    assert [c.kind for c in params.checks] == [CHECK_MAJORITY_VOTE, CHECK_JSON_SCHEMA_VALID, CHECK_STRUCTURED_MATCH,
                                               CHECK_NUMERIC_TOLERANCE, CHECK_NUMERIC_RANGE] == [0, 1, 2, 3, 4]
    majority, schema, structured, tolerance, bounds = params.checks
    assert majority.field == "answer" and schema.schema == '{"type": "object"}' and structured.fields == ("a", "b")
    assert (tolerance.field, tolerance.tolerance) == ("price", 0.5)
    assert (bounds.field, bounds.minimum, bounds.maximum) == ("temp", -10.0, 40.0)
    assert (params.runners, params.threshold) == (3, 2)


def test_a_commit_and_a_reveal_charge_the_result_verifiers_metered_cost() -> None:
    """Metering is consensus (every validator charges the same, a change is a fork): a JobResultCommit or
    JobResultSubmit costs 10,000 cycles beyond the intrinsic ones, and a reveal ``len(result) + 64`` cells beyond the
    intrinsic ones (the stored reveal and its fixed overhead) (mutants: ``RESULT_CYCLES`` ±1, the 64 ±1)."""
    net = _net()
    job_id = _submit(net, timeout_blocks=10)
    [runner] = net.job(job_id).committee
    result = b'{"v": 1}'
    commit = net.tx(_sk(runner), JobResultCommit(job_id, result_commitment(job_id, runner, result, b"salt")))
    committed = net.block([commit]).result.receipts[0]
    reveal = net.tx(_sk(runner), JobResultSubmit(job_id, result, b"salt", 0))
    revealed = net.block([reveal]).result.receipts[0]
    assert committed.error_code is None and revealed.error_code is None
    assert committed.cycles_used == revealed.cycles_used == TX_BASE_CYCLES + 10_000
    assert revealed.cells_used == intrinsic_cost(reveal)[1] + len(result) + 64


def test_a_commit_charges_the_record_growth_and_names_the_job_and_the_runner() -> None:
    """A JobResultCommit costs the job record's growth + 64 cells beyond the intrinsic ones, and its
    ``job.result_committed`` event is ``{0: job_id, 1: runner}`` (mutants: the cell formula's operators and the 64
    ±1, the event's keys ±1)."""
    net = _net()
    job_id = _submit(net, verification={"mode": "majority_vote", "runners": 3, "threshold": 2}, timeout_blocks=10)
    before = net.job(job_id)
    runner = before.committee[0]
    commit = net.tx(_sk(runner), JobResultCommit(job_id, result_commitment(job_id, runner, b"A", b"s")))
    p = net.block([commit])
    receipt = p.result.receipts[0]
    assert receipt.error_code is None
    grown = len(net.job(job_id).encode()) - len(before.encode())
    assert grown > 0  # the commitment and the runner's address
    assert receipt.cells_used == intrinsic_cost(commit)[1] + grown + 64
    [ev] = _events(p, TOPIC_COMMITTED)
    assert decode(ev.data) == {0: job_id, 1: runner}


def test_settling_one_job_burns_its_share_and_keeps_the_other_jobs_escrow() -> None:
    """The burned share leaves the dispatcher's balance, which still holds every other job's escrow (mutant:
    ``balance - burned`` → ``balance % burned``, the same while the dispatcher holds one job only)."""
    net = _net()
    first, second = _submit(net, timeout_blocks=10), _submit(net, timeout_blocks=10)
    [runner] = net.job(first).committee
    net.block([net.tx(_sk(runner), JobResultSubmit(first, b'{"v": 1}', b"", 0))])
    assert net.job(first).status == JobStatus.COMPLETED and net.job(second).status == JobStatus.ASSIGNED
    assert get_account(net.chain.world(), JOB_DISPATCHER).balance == net.job(second).escrow


def test_a_result_for_a_job_not_awaiting_results_is_refused_as_not_assigned() -> None:
    """``job_not_assigned`` for a job still pending its seed and for a completed one (mutants: ``status !=
    ASSIGNED`` → ``<``, which lets a completed job through to ``already_revealed``, and → ``>``, which lets a
    pending one through to ``not_on_committee``)."""
    net = _net()
    tx = net.tx(ALICE_SK, _request(None, verification={"mode": "majority_vote", "runners": 3, "threshold": 2},
                                   timeout_blocks=10))
    net.block([tx])
    pending = derive_job_id(tx.tx_hash(), 0)
    assert net.job(pending).status == JobStatus.PENDING_SELECTION
    early = net.block([net.tx(RUNNER_SKS[0], JobResultCommit(pending, b"\x01" * 32))])
    assert early.result.receipts[0].error_code == "job_not_assigned"
    done = _submit(net, timeout_blocks=10)
    [runner] = net.job(done).committee
    net.block([net.tx(_sk(runner), JobResultSubmit(done, b'{"v": 1}', b"", 0))])
    assert net.job(done).status == JobStatus.COMPLETED
    again = net.block([net.tx(_sk(runner), JobResultSubmit(done, b'{"v": 1}', b"", 0))])
    assert again.result.receipts[0].error_code == "job_not_assigned"


def test_a_reveal_in_the_commit_end_block_is_refused_and_one_that_matches_no_commitment_either_way() -> None:
    """§10.3: reveals of M > 1 open after ``commit_end`` (mutant: ``h <= commit_end`` → ``<``); a reveal must equal
    its commitment, whichever way the two hashes compare (mutants: ``!=`` → ``>``, ``<``)."""
    net = _net()
    job_id = _submit(net, verification={"mode": "majority_vote", "runners": 3, "threshold": 2}, timeout_blocks=10)
    rec = net.job(job_id)
    a, b, c = rec.committee
    net.block([net.tx(_sk(a), JobResultCommit(job_id, result_commitment(job_id, a, b"A", b"s"))),
               net.tx(_sk(b), JobResultCommit(job_id, b"\xff" * 32)),
               net.tx(_sk(c), JobResultCommit(job_id, b"\x00" * 32))])
    while net.chain.height < rec.commit_end - 1:
        net.block([])
    at_end = net.block([net.tx(_sk(a), JobResultSubmit(job_id, b"A", b"s", 0))])
    assert at_end.block.header.height == rec.commit_end
    assert at_end.result.receipts[0].error_code == "reveal_window_not_open"
    p = net.block([net.tx(_sk(b), JobResultSubmit(job_id, b"A", b"s", 0)),
                   net.tx(_sk(c), JobResultSubmit(job_id, b"A", b"s", 0))])
    assert [r.error_code for r in p.result.receipts] == ["reveal_mismatch", "reveal_mismatch"]


def test_without_present_first_a_verified_result_writes_no_mru_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """The MRU record (§9.4) is CIP-11 present-first state: with the flag off (phase 1) a verified result writes
    none (mutant: ``if ctx.flags.CIP11_PRESENT_FIRST_ENABLED`` negated; the flag-on write is
    ``test_selection_spec_rules.py::test_verified_result_writes_the_mru_record_with_the_runner_and_current_height``)."""
    monkeypatch.setattr(e2e, "_PHASE", 1)
    net = _net()
    job_id = _submit(net, timeout_blocks=10)
    [runner] = net.job(job_id).committee
    net.block([net.tx(_sk(runner), JobResultSubmit(job_id, b'{"v": 1}', b"", 0))])
    assert net.job(job_id).status == JobStatus.COMPLETED
    assert not list(net.chain.world().iterate(mru.MRU_PREFIX))


def test_the_price_counts_the_units_the_matching_runner_reported() -> None:
    """docs/jobs.md "Settlement": the price is ``min(base + units·per_unit, max_price) + tip`` from the first
    matching runner's rate card and units (mutants: ``revealed is None`` → ``is not``/``not``, which price 0
    units: the example rate card's per-unit price is 0, so the suite could not tell)."""
    doc = json.loads((e2e.EXAMPLES / "runner-capabilities.json").read_text())
    doc["rate_card"]["http"]["price_per_unit"] = "10"
    caps, card = runner_file_from_json(doc, require_rate_card=True)
    assert card is not None
    sk = RUNNER_SKS[0]
    balances = {e2e.ALICE: 10**24, private_key_to_address(sk): 10**21}
    net = Net(make_dev_genesis(Cip11Flags.for_phase(2), balances=balances))
    net.block([net.tx(sk, RunnerRegister(STAKE, caps, card))])
    net.present = frozenset({0})
    job_id = _submit(net, timeout_blocks=10)
    p = net.block([net.tx(sk, JobResultSubmit(job_id, b'{"v": 1}', b"", 7))])
    [ev] = _events(p, TOPIC_COMPLETED)
    payload = decode(ev.data)
    assert isinstance(payload, dict)
    assert decode_u128(payload[2], "refund") == net.job(job_id).escrow - (1000 + 7 * 10)


def test_a_result_of_exactly_the_maximum_size_passes_the_size_check() -> None:
    """``MAX_RESULT_BYTES`` is the largest result accepted (mutants: ``len(result) > MAX`` → ``>=``, ``==``). A
    transaction cannot carry it today (``max_tx_bytes`` 131,072 < 262,144), so the verifier is called directly: a
    result of the maximum size goes on to the job lookup (``job_not_found``), one byte more is ``result_too_large``."""
    world, ctx = make_world(), make_ctx(10)
    for size, code in ((MAX_RESULT_BYTES, "job_not_found"), (MAX_RESULT_BYTES + 1, "result_too_large")):
        with pytest.raises(TxFailed) as refused:
            submit_result(world, ctx, big_meter(), runner=b"\x01" * 20, job_id=b"\x02" * 32, result=b"x" * size,
                          salt=b"", units=0, events=[])
        assert refused.value.code == code
