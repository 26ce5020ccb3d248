"""Rules of the Job Dispatcher (``cowboy_node/execution/jobs/dispatch.py``) that the suite did not hold, found by
mutation testing (issue 31 §2, docs/testing.md "jobs-dispatch"): each test fails with the named mutant applied and
passes without it."""

from __future__ import annotations

import json

from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.execution.actors.actor_state import get_state
from cowboy_node.execution.fees import TX_BASE_CYCLES
from cowboy_node.execution.jobs import pending
from cowboy_node.execution.jobs.dispatch import (
    SNAPSHOT_PREFIX,
    TOPIC_ASSIGNED,
    TOPIC_PENDING,
    TOPIC_SUBMITTED,
    due_seed_rounds,
)
from cowboy_node.execution.jobs.job_record import JobStatus
from cowboy_node.execution.runners.registry_state import registry_size
from cowboy_node.execution.transactions import ACCOUNT_WRITE_CELLS
from cowboy_protocol.codec import decode
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.types.fields import encode_u128
from cowboy_protocol.types.instructions import CallActor, DeployActor, Transfer
from cowboy_protocol.types.jobspec import derive_job_id
from tests.helpers import ALICE, ALICE_SK
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
