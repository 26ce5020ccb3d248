"""Rules of the Job Dispatcher (``cowboy_node/execution/jobs/dispatch.py``) that the suite did not hold, found by
mutation testing (issue 31 §2, docs/testing.md "jobs-dispatch"): each test fails with the named mutant applied and
passes without it."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

import tests.unit.execution.jobs.test_jobs_e2e as e2e
from cowboy_node.consensus.beacon import sign_beacon
from cowboy_node.crypto import bls
from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.execution.actors.actor_state import get_state
from cowboy_node.execution.block import build_block
from cowboy_node.execution.context import BlockEnv
from cowboy_node.execution.fees import TX_BASE_CYCLES
from cowboy_node.execution.jobs import dispatch, pending, snapshot_root
from cowboy_node.execution.jobs.dispatch import (
    SNAPSHOT_PREFIX,
    TOPIC_ASSIGNED,
    TOPIC_PENDING,
    TOPIC_SUBMITTED,
    due_seed_rounds,
)
from cowboy_node.execution.jobs.job_record import JobStatus
from cowboy_node.execution.runners.registry_state import get_runner, registry_size
from cowboy_node.execution.system_state import get_runner_config
from cowboy_node.execution.transactions import ACCOUNT_WRITE_CELLS
from cowboy_node.execution.validity_errors import InvalidBlock
from cowboy_node.state.world import WorldState
from cowboy_node.types.block import ConsumedSeed, Round
from cowboy_node.types.presence import encode_presence
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.types.fields import decode_u128, encode_u128
from cowboy_protocol.types.governance_instructions import GovernanceSetParam
from cowboy_protocol.types.instructions import CallActor, DeployActor, Transfer
from cowboy_protocol.types.job_instructions import JobSubmit
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from tests.helpers import ALICE, ALICE_SK, FEE_RECIPIENT, hand_seeds_due
from tests.unit.execution.jobs.test_jobs_e2e import EXAMPLES, RUNNER_SKS, _net, _request

MULTI = {"mode": "majority_vote", "runners": 3, "threshold": 2}


def test_pending_selections_of_two_rounds_are_both_due() -> None:
    """The proposer's due list has one entry per seed round, in round order (mutant: the last-entry test
    ``out[-1]`` → ``out[+1]``, which fails once the list has one entry and a second round follows)."""
    net = _net()
    rounds = []
    for _ in range(2):
        p = net.block([net.tx(ALICE_SK, _request(None, verification=MULTI, timeout_blocks=10))])
        s = p.block.header.height
        rounds.append((0, s + 3))  # K = 3 views after the submit block's round (0, S)
    assert due_seed_rounds(net.chain.world(), rounds[-1][1]) == rounds


def test_an_under_filled_assignment_event_carries_its_missing_seats() -> None:
    """§9.2 under-fill: ``job.assigned`` is ``{0: job_id, 1: committee, 2: height, 3: deadline, 4: missing}``, key 4
    only when seats are missing (mutant: key 4 → 3 or 5)."""
    net = _net(RUNNER_SKS[:2])  # two runners for an M = 3 job
    tx = net.tx(ALICE_SK, _request(None, verification=MULTI, timeout_blocks=10))
    net.block([tx])
    job_id = derive_job_id(tx.tx_hash(), 0)
    events = []
    while net.job(job_id).status == JobStatus.PENDING_SELECTION:
        p = net.block([])
        events += [e for e in p.result.block_events if e.topic == TOPIC_ASSIGNED]
    rec = net.job(job_id)
    [ev] = events
    payload = decode(ev.data)
    assert isinstance(payload, dict)
    assert set(payload) == {0, 1, 2, 3, 4}
    assert (payload[0], payload[3], payload[4]) == (job_id, rec.deadline_block, 3 - len(rec.committee))
    assert len(rec.committee) == 2


def test_a_job_submit_charges_its_selection_per_registered_runner() -> None:
    """Metering is consensus: a JobSubmit costs 20,000 cycles plus 50 per registry entry scanned beyond the intrinsic
    ones, for M = 1 and M > 1 alike (mutants: ``SELECT_CYCLES_PER_CANDIDATE`` ±1, its ``*`` → ``//``)."""
    net = _net()
    size = registry_size(net.chain.world())
    assert size == 3
    for verification in (None, MULTI):
        extra = {} if verification is None else {"verification": verification}
        p = net.block([net.tx(ALICE_SK, _request(None, timeout_blocks=10, **extra))])
        assert p.result.receipts[0].cycles_used == TX_BASE_CYCLES + 20_000 + 50 * size


def test_a_pending_selection_event_names_its_seed_round_and_a_live_record_is_not_finished() -> None:
    """``job.pending_selection`` is ``{0: job_id, 1: seed_epoch, 2: seed_view}`` (mutant: its keys ±1); a live job
    record has ``finished_at`` 0 (the model: "0 while live"; mutant: the new record's 0 → 1)."""
    net = _net()
    tx = net.tx(ALICE_SK, _request(None, verification=MULTI, timeout_blocks=10))
    p = net.block([tx])
    job_id = derive_job_id(tx.tx_hash(), 0)
    [ev] = [e for e in p.result.receipts[0].events if e.topic == TOPIC_PENDING]
    assert decode(ev.data) == {0: job_id, 1: 0, 2: p.block.header.height + 3}
    assert net.job(job_id).finished_at == 0
    while net.job(job_id).status == JobStatus.PENDING_SELECTION:
        net.block([])
    assert net.job(job_id).finished_at == 0


def test_a_job_submit_emits_job_submitted_with_its_id_submitter_and_escrow() -> None:
    """``job.submitted`` is ``{0: job_id, 1: submitter, 2: u128(escrow)}`` with escrow = max_price + tip, in the
    JobSubmit's receipt, for M = 1 and M > 1 alike (docs/jobs.md "Dispatcher events at submission"; mutants: each
    key ±1)."""
    net = _net()
    for verification, tip in ((None, "0"), (MULTI, "7")):
        extra = {} if verification is None else {"verification": verification}
        tx = net.tx(ALICE_SK, _request(None, timeout_blocks=10, tip=tip, **extra))
        p = net.block([tx])
        job_id = derive_job_id(tx.tx_hash(), 0)
        [ev] = [e for e in p.result.receipts[0].events if e.topic == TOPIC_SUBMITTED]
        assert decode(ev.data) == {0: job_id, 1: ALICE, 2: encode_u128(1_000_000 + int(tip))}
        assert net.job(job_id).escrow == 1_000_000 + int(tip)


THREE_JOBS_ACTOR = '''import pvm_host


def start(payload):
    ids = [pvm_host.submit_job(payload) for _ in range(3)]
    pvm_host.set_state(b"jobs", b"".join(ids))
    return b""
'''


def test_jobs_submitted_by_one_transaction_are_numbered_from_zero_in_execution_order() -> None:
    """``derive_job_id(tx_hash, index)``: index counts the jobs one transaction submits, 0, 1, 2, … in execution
    order (``cowboy_protocol/types/jobspec.py``; mutants: the per-transaction counter's ``+ 1`` → ``+ 0``, ``+ 2``,
    ``- 1``, ``* 1``, ``// 1``)."""
    net = _net()
    net.block([net.tx(ALICE_SK, DeployActor(THREE_JOBS_ACTOR, b"", "", b""))])
    actor = derive_actor_address(ALICE, b"", THREE_JOBS_ACTOR)
    net.block([net.tx(ALICE_SK, Transfer(actor, 10**20))])
    doc = json.loads((EXAMPLES / "job-http.json").read_text())
    call = net.tx(ALICE_SK, CallActor(actor, "start", json.dumps(doc).encode()))
    p = net.block([call])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    expected = [derive_job_id(call.tx_hash(), i) for i in range(3)]
    assert get_state(net.chain.world(), actor, b"jobs") == b"".join(expected)
    assert all(net.job(j).payer == actor for j in expected)


def test_a_full_committee_assignment_event_has_no_missing_seats_key() -> None:
    """``job.assigned`` of a full committee is ``{0: job_id, 1: committee, 2: height, 3: deadline}``: key 4 is absent,
    not 0 (docs/jobs.md "Dispatcher events at submission"; mutants: ``missing > 0`` → ``>= 0``, ``> -1``)."""
    net = _net()
    for verification in (None, MULTI):
        extra = {} if verification is None else {"verification": verification}
        tx = net.tx(ALICE_SK, _request(None, timeout_blocks=10, **extra))
        p = net.block([tx])
        job_id = derive_job_id(tx.tx_hash(), 0)
        events = [e for e in p.result.block_events if e.topic == TOPIC_ASSIGNED]
        while net.job(job_id).status == JobStatus.PENDING_SELECTION:
            events += [e for e in net.block([]).result.block_events if e.topic == TOPIC_ASSIGNED]
        [ev] = events
        rec = net.job(job_id)
        assert decode(ev.data) == {0: job_id, 1: list(rec.committee), 2: rec.assignment_height,
                                   3: rec.deadline_block}


def test_a_job_submit_pays_the_cells_of_its_spec_its_seats_and_its_pending_writes() -> None:
    """docs/selection.md "Metering": a JobSubmit's cells are the flat ``len(spec) + 256·M`` plus, on the pending
    path (M > 1), ``len(key) + len(value)`` of its three writes (record, due-index entry, snapshot) — on top of what
    every transaction pays (its body and the sender's account write). Mutants: each operator and constant of the
    flat charge (``+`` → ``*``/``//``/``%``, ``*`` → ``+``/``-``/``//``/``%``, 256 → 255/257, ``max(1, m)`` →
    ``max(0, m)``/``max(2, m)``)."""
    net = _net()
    for verification, m in ((None, 1), (MULTI, 3)):
        extra = {} if verification is None else {"verification": verification}
        tx = net.tx(ALICE_SK, _request(None, timeout_blocks=10, **extra))
        p = net.block([tx])
        job_id = derive_job_id(tx.tx_hash(), 0)
        world = net.chain.world()
        pending_writes = 0
        if m > 1:  # read back what the submission wrote, before the assignment deletes it
            record_key = pending.pending_by_job_key(job_id)
            raw = world.get(record_key)
            snapshot = world.get(SNAPSHOT_PREFIX + job_id)
            assert raw is not None and snapshot is not None
            due = pending.PendingSelectionV1.decode(raw).due_key()
            pending_writes = (len(record_key) + len(raw) + len(due) + len(pending.PENDING_DUE_VALUE)
                              + len(SNAPSHOT_PREFIX + job_id) + len(snapshot))
        spec = net.job(job_id).spec
        every_tx = len(tx.body()) + ACCOUNT_WRITE_CELLS
        assert p.result.receipts[0].cells_used == every_tx + len(spec) + 256 * m + pending_writes


def test_a_pending_record_names_its_submit_round_and_has_no_assignment_yet() -> None:
    """A pending M > 1 job: its ``PendingSelectionV1`` carries r_submit, the round of block S (``submit_epoch``,
    ``submit_view``), and its job record has no assignment yet (``assignment_height`` "0 while pending", no
    deadline, no commit phase). Mutants: ``round[0]``/``round[1]`` swapped or → ``round[-1]``; the new record's
    ``assignment_height``/``deadline_block``/``commit_end`` 0 → 1."""
    net = _net()
    net.block([])  # S's view differs from its epoch (0) and from 1
    tx = net.tx(ALICE_SK, _request(None, verification=MULTI, timeout_blocks=10))
    p = net.block([tx])
    job_id = derive_job_id(tx.tx_hash(), 0)
    raw = net.chain.world().get(pending.pending_by_job_key(job_id))
    assert raw is not None
    record = pending.PendingSelectionV1.decode(raw)
    s_round = p.block.header.round
    assert s_round.view > 1
    assert (record.submit_epoch, record.submit_view) == (s_round.epoch, s_round.view)
    rec = net.job(job_id)
    assert rec.status == JobStatus.PENDING_SELECTION
    assert (rec.assignment_height, rec.deadline_block, rec.commit_end) == (0, 0, 0)


def test_a_job_submit_needs_its_escrow_beyond_the_transactions_maximum_fee() -> None:
    """The escrow must fit in the balance left after the transaction's maximum fee: exactly enough is accepted,
    one wei less is refused with ``insufficient_balance`` (mutants: ``<`` → ``<=``/``==``, ``- reserved`` →
    ``+ reserved``)."""
    escrow = 1_000_000  # max_price of the example request, tip 0
    for shortfall, code in ((0, None), (1, "insufficient_balance")):
        net = _net()
        sk = (77 + shortfall).to_bytes(32, "big")
        probe = net.tx(sk, _request(None, timeout_blocks=10))  # only for its maximum fee
        net.nonces.pop(private_key_to_address(sk))
        fund = net.tx(ALICE_SK, Transfer(private_key_to_address(sk), probe.max_fee() + escrow - shortfall))
        assert net.block([fund]).result.receipts[0].error_code is None
        submit = net.tx(sk, _request(None, timeout_blocks=10))
        assert submit.max_fee() == probe.max_fee()
        r = net.block([submit]).result.receipts[0]
        assert r.error_code == code, r


# -- issue 31, the 33 survivors of the whole session -----------------------------------------------------------
def test_a_job_selected_on_the_v2_path_stores_mode_byte_0xff(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/jobs.md "Job record": field 3 is the mode byte, ``0xFF = v2 path`` (``CIP11_PRESENT_FIRST_ENABLED``
    off: phases 0 and 1), for M = 1 and M > 1 alike (mutant: ``MODE_V2 = 0xFF`` → 254)."""
    for phase in (0, 1):
        monkeypatch.setattr(e2e, "_PHASE", phase)
        net = _net()
        for verification in (None, MULTI):
            extra = {} if verification is None else {"verification": verification}
            tx = net.tx(ALICE_SK, _request(None, timeout_blocks=10, **extra))
            net.block([tx])
            rec = net.job(derive_job_id(tx.tx_hash(), 0))
            assert (rec.status, rec.mode_byte) == (JobStatus.ASSIGNED, 0xFF)


def test_a_tee_required_job_without_a_tee_type_needs_a_runner_offering_a_tee() -> None:
    """Filter ``tee`` (docs/selection.md, filters.py): ``tee_required`` alone (no ``required_tee_type``) already
    asks for some TEE; the example runners offer none, so nobody is eligible, for M = 1 and M > 1 (mutant:
    ``tee_required or required_tee_type is not None`` → ``and``, which drops the requirement without a type)."""
    net = _net()
    for verification in ({"mode": "none", "runners": 1, "threshold": 1}, MULTI):
        p = net.block([net.tx(ALICE_SK, _request(None, timeout_blocks=10,
                                                 verification={**verification, "tee_required": True}))])
        r = p.result.receipts[0]
        assert r.error_code == "no_eligible_runner", r
        assert r.error_message is not None and "tee: 3" in r.error_message


def test_a_job_nobody_can_serve_is_refused_with_the_reason_in_its_message() -> None:
    """The ``no_eligible_runner`` receipt says why, for people (Receipt.error_message): the per-filter rejection
    counts when runners are registered, "no runners registered" when none is (mutant: ``detail or 'no runners
    registered'`` → ``and``, which swaps the two)."""
    net = _net()
    doc = {"job_type": {"kind": "http", "url": "https://elsewhere.net/x", "method": "GET"}, "max_price": "1000000"}
    r = net.block([net.tx(ALICE_SK, JobSubmit(parse_job_request_json(doc)))]).result.receipts[0]
    assert r.error_code == "no_eligible_runner"
    assert r.error_message is not None
    assert "capability: 3" in r.error_message and "no runners registered" not in r.error_message
    empty = _net([])
    r = empty.block([empty.tx(ALICE_SK, _request(None, timeout_blocks=10))]).result.receipts[0]
    assert r.error_code == "no_eligible_runner"
    assert r.error_message is not None and "no runners registered" in r.error_message


def test_a_pending_job_has_no_shortfall() -> None:
    """``shortfall`` counts the unfilled seats of an *assigned* committee (§9.2 under-fill, which §11.2 re-selection
    fills): a job still waiting for its seed has no committee drawn, so no seat is missing yet (mutant: ``status !=
    ASSIGNED`` → ``>``, which gives a pending M = 3 job a shortfall of 3)."""
    net = _net()
    tx = net.tx(ALICE_SK, _request(None, verification=MULTI, timeout_blocks=10))
    net.block([tx])
    rec = net.job(derive_job_id(tx.tx_hash(), 0))
    assert rec.status == JobStatus.PENDING_SELECTION and rec.committee == ()
    assert dispatch.shortfall(rec) == 0


def test_commit_end_is_the_assignment_height_plus_the_commit_phase_in_whole_blocks() -> None:
    """docs/jobs.md "Windows": ``commit_end = A + max(1, timeout_blocks · commit_phase_permille / 1000)``, the
    division rounding down. At the default 600 ‰ a timeout of 1,665 blocks has a commit phase of exactly 999
    blocks (mutant: ``// 1000`` → ``// 999``, which makes it 1,000)."""
    net = _net()
    assert get_runner_config(net.chain.world()).commit_phase_permille == 600
    tx = net.tx(ALICE_SK, _request(None, timeout_blocks=1665))
    net.block([tx])
    rec = net.job(derive_job_id(tx.tx_hash(), 0))
    assert rec.status == JobStatus.ASSIGNED
    assert rec.commit_end - rec.assignment_height == 1665 * 600 // 1000 == 999


def test_a_commit_phase_governed_below_one_block_still_lasts_one_block() -> None:
    """The ``max(1, …)`` of ``commit_end`` (docs/jobs.md "Windows"): governance may lower
    ``runner.commit_phase_permille`` (bounds 1..999) after a job was accepted; its next assignment (the §11.2
    re-selection after a silent committee) then has ``10 · 50 / 1000 = 0`` blocks of commit phase, which the
    floor raises to one (mutants: ``max(1, …)`` → ``max(0, …)``, ``max(2, …)``)."""
    net = _net()
    job_id = _submit_assigned(net, timeout_blocks=10)
    first = net.job(job_id)
    assert first.commit_end - first.assignment_height == 6  # 10 · 600 / 1000
    p = net.block([net.tx(ALICE_SK, GovernanceSetParam("runner.commit_phase_permille", 50, net.chain.height + 2))])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    while net.chain.height <= first.deadline_block:
        net.block([])
    assert get_runner_config(net.chain.world()).commit_phase_permille == 50
    rec = net.job(job_id)
    assert (rec.status, rec.attempt, rec.assignment_height) == (JobStatus.ASSIGNED, 1, first.deadline_block + 1)
    assert rec.commit_end == rec.assignment_height + 1


def _submit_assigned(net: e2e.Net, **overrides: object) -> bytes:
    tx = net.tx(ALICE_SK, _request(None, **overrides))
    assert net.block([tx]).result.receipts[0].error_code is None
    job_id = derive_job_id(tx.tx_hash(), 0)
    assert net.job(job_id).status == JobStatus.ASSIGNED
    return job_id


def test_two_jobs_of_one_seed_round_make_one_due_entry() -> None:
    """``due_seed_rounds`` lists *distinct* seed rounds (its docstring; the header refuses a ConsumedSeedsV1 with
    duplicates): one job in block S and two in block S + 1 give two rounds, not three (mutants: the last-entry
    test ``out[-1] != round`` → ``<=``, ``out[-0]``, ``out[not 1]``, each of which lists round S + 1 twice)."""
    net = _net()
    s = net.block([net.tx(ALICE_SK, _request(None, verification=MULTI, timeout_blocks=10))]).block.header.height
    net.block([net.tx(ALICE_SK, _request(None, verification=MULTI, timeout_blocks=10)) for _ in range(2)])
    world = net.chain.world()
    assert len(list(world.iterate(pending.PENDING_DUE_PREFIX))) == 3
    assert due_seed_rounds(world, s + 4) == [(0, s + 3), (0, s + 4)]  # K = 3 views after each submit round


def test_a_job_submitted_below_the_finalized_height_is_due() -> None:
    """§9.2 "block S is finalized": S is final once the finalized height is S *or above* (``source_final``), so
    the seed round of a job submitted at S is due with a finalized height of S + 1 (mutant: ``submitted_at <=
    finalized_height`` → ``==``)."""
    net = _net()
    s = net.block([net.tx(ALICE_SK, _request(None, verification=MULTI, timeout_blocks=10))]).block.header.height
    for _ in range(3):
        net.block([])
    world = net.chain.world()
    assert due_seed_rounds(world, s + 3, finalized_height=s - 1) == []
    assert due_seed_rounds(world, s + 3, finalized_height=s) == [(0, s + 3)]
    assert due_seed_rounds(world, s + 3, finalized_height=s + 2) == [(0, s + 3)]
    assert dispatch.source_final(s, s + 2) and dispatch.source_final(s, None) and not dispatch.source_final(s, s - 1)


def test_a_due_entry_without_its_pending_record_leaves_its_round_out() -> None:
    """``due_seed_rounds`` leaves a round out while one of its records is missing (its docstring: committing that
    seed would make the block invalid, ``pending_record_missing``) (mutant: ``_assignable``'s ``return False``
    for a missing record → ``True``)."""
    net = _net()
    tx = net.tx(ALICE_SK, _request(None, verification=MULTI, timeout_blocks=10))
    s = net.block([tx]).block.header.height
    world = net.chain.world()
    assert due_seed_rounds(world, s + 3) == [(0, s + 3)]
    world.delete(pending.pending_by_job_key(derive_job_id(tx.tx_hash(), 0)))
    assert due_seed_rounds(world, s + 3) == []


def _seed_block(sks: list[bytes] = RUNNER_SKS) -> tuple[e2e.Net, bytes, BlockEnv]:
    """A net whose next block consumes the seed of one pending M = 3 job; returns (net, job_id, that block's env)."""
    net = _net(sks)
    tx = net.tx(ALICE_SK, _request(None, verification=MULTI, timeout_blocks=10))
    net.block([tx])
    secret = bls.secret_key_from_bytes(net.dev.validator_key.bls_secret)
    while not hand_seeds_due(net.chain, secret):
        net.block([])
    return net, derive_job_id(tx.tx_hash(), 0), _next_env(net, hand_seeds_due(net.chain, secret))


def _next_env(net: e2e.Net, consumed: tuple[ConsumedSeed, ...]) -> BlockEnv:
    chain = net.chain
    secret = bls.secret_key_from_bytes(net.dev.validator_key.bls_secret)
    return chain.env_for(timestamp_ms=chain.head.header.timestamp_ms + 1000, fee_recipient=FEE_RECIPIENT,
                         beacon=sign_beacon(secret, chain.head.header.round),
                         presence_input=encode_presence(net.present, registry_size(chain.world())),
                         round_=Round(0, chain.height + 1), consumed_seeds=consumed)


def _rows(world: WorldState, job_id: bytes) -> list[Any]:
    raw = world.get(SNAPSHOT_PREFIX + job_id)
    assert raw is not None
    rows = decode(raw)
    assert isinstance(rows, list) and len(rows) == 3
    return rows


def _invalid_code(world: WorldState, env: BlockEnv) -> str:
    with pytest.raises(InvalidBlock) as info:
        build_block(world, env, [])
    return info.value.code


def test_a_snapshot_row_with_a_fifth_field_is_not_a_snapshot_row() -> None:
    """The stored block-S snapshot is ``[[address, effective_stake, reputation, base_weight], …]``
    (``encode_snapshot``): a row of five fields is malformed and the block consuming its seed is invalid with
    ``pending_snapshot_invalid``, even though its first four fields still hash to the committed root (mutant:
    ``len(r) != 4`` → ``< 4``)."""
    net, job_id, env = _seed_block()
    world = net.chain.world()
    rows = _rows(world, job_id)
    world.set(SNAPSHOT_PREFIX + job_id, encode([[*r, 0] for r in rows]))
    assert _invalid_code(world, env) == "pending_snapshot_invalid"
    with pytest.raises(InvalidBlock):
        dispatch.verified_snapshot(world, _pending_record(world, job_id))


def _pending_record(world: WorldState, job_id: bytes) -> pending.PendingSelectionV1:
    raw = world.get(pending.pending_by_job_key(job_id))
    assert raw is not None
    return pending.PendingSelectionV1.decode(raw)


def test_a_snapshot_whose_root_differs_either_way_is_a_mismatch() -> None:
    """§9.2 "compare it byte-for-byte … if they differ, the block is invalid": a changed snapshot whose root is
    above *or below* the committed root is ``snapshot_root_mismatch`` (mutant: ``root != committed`` → ``>``,
    which lets every root below through). The base weight of row 0 is changed by 1, 2, …, until both sides are
    met (the roots are hashes, so each change is above or below at random)."""
    net, job_id, env = _seed_block()
    world = net.chain.world()
    committed = _pending_record(world, job_id).candidates_snapshot_root
    rows = _rows(world, job_id)
    sides = set()
    for delta in range(1, 40):
        changed = [list(r) for r in rows]
        changed[0][3] = encode_u128(decode_u128(rows[0][3], "w") + delta)
        root = snapshot_root.root_of_rows([(r[0], decode_u128(r[1], "s"), r[2], decode_u128(r[3], "w"))
                                           for r in changed])
        sides.add(root < committed)
        world.set(SNAPSHOT_PREFIX + job_id, encode(changed))
        assert _invalid_code(world, env) == "snapshot_root_mismatch"
        if sides == {True, False}:
            break
    assert sides == {True, False}


def test_a_consumed_seed_that_no_pending_selection_uses_makes_the_block_invalid() -> None:
    """Block validity (``process_pending``): every ConsumedSeedsV1 entry must be consumed by at least one pending
    record, else ``unconsumed_seed`` — here a correctly signed seed of a past round on a chain with nothing pending
    (mutant: ``len(collected) == before`` → ``<``, which never holds)."""
    net = _net()
    net.block([])
    world = net.chain.world()
    assert not list(world.iterate(pending.PENDING_DUE_PREFIX))
    secret = bls.secret_key_from_bytes(net.dev.validator_key.bls_secret)
    seed = ConsumedSeed(0, 1, sign_beacon(secret, Round(0, 1)))
    assert _invalid_code(world, _next_env(net, (seed,))) == "unconsumed_seed"


def test_a_snapshot_naming_a_runner_the_registry_does_not_know_makes_the_block_invalid() -> None:
    """A verified block-S snapshot must name registered runners (``process_pending``: "snapshot names an unknown
    runner", ``pending_snapshot_invalid``). State is altered by hand here — a row's address replaced and the
    committed root recomputed to match — since no transaction deletes a registration (mutant: ``len(present) !=
    len(rows)`` → ``>``, which never holds: the draw then fails on its unpaired weights instead)."""
    net, job_id, env = _seed_block()
    world = net.chain.world()
    rows = _rows(world, job_id)
    rows[1][0] = b"\x77" * 20
    assert get_runner(world, rows[1][0]) is None
    world.set(SNAPSHOT_PREFIX + job_id, encode(rows))
    record = _pending_record(world, job_id)
    root = snapshot_root.root_of_rows([(r[0], decode_u128(r[1], "s"), r[2], decode_u128(r[3], "w")) for r in rows])
    world.set(pending.pending_by_job_key(job_id), replace(record, candidates_snapshot_root=root).encode())
    assert len(dispatch.verified_snapshot(world, _pending_record(world, job_id))) == 3
    assert _invalid_code(world, env) == "pending_snapshot_invalid"
