"""Jobs end to end in one chain, with scripted runners (transactions signed by test keys, no transport).

Register three runners, submit an M == 1 job and an M == 3 majority-vote job, commit, reveal, settle, deliver
the result to an actor's callback; and a runner that stays silent times out, is excluded and the job is
re-selected. Blocks are produced and verified through the real Chain (build → commit), so every assignment,
pending selection, ConsumedSeeds entry and settlement also replays on a follower to the same roots.

Every test runs in each CIP-11 rollout phase 0..3: phases 0 and 1 select with CIP-2 v2 (a JobSubmit there used
to raise inside block execution and halt the producer), phases 2 and 3 with CIP-11 v3.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cowboy_node.chain.chain import Chain, PreparedBlock
from cowboy_node.consensus.beacon import sign_beacon
from cowboy_node.consensus.header import verify_and_prepare
from cowboy_node.crypto import bls
from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.execution.actors.actor_state import get_state
from cowboy_node.execution.jobs.job_record import JobRecord, JobStatus, job_key
from cowboy_node.execution.runners.registry_state import get_runner, registry_size
from cowboy_node.execution.system_state import JOB_DISPATCHER, get_account
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.block import Round
from cowboy_node.types.presence import decode_presence, encode_presence
from cowboy_protocol.codec import decode
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.jobs.commitment import result_commitment
from cowboy_protocol.types.instructions import CallActor, DeployActor, Instruction, Transfer
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit, JobSubmit
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.params import Cip11Flags
from cowboy_protocol.types.runner_instructions import RunnerRegister
from cowboy_protocol.types.runner_json import runner_file_from_json
from cowboy_protocol.types.transaction import Transaction
from tests.helpers import ALICE, ALICE_SK, FEE_RECIPIENT, hand_seeds_due, make_dev_genesis, make_tx

EXAMPLES = Path(__file__).resolve().parents[4] / "configs" / "examples"
RUNNER_SKS = [(0x1000 + i).to_bytes(32, "big") for i in range(3)]
RUNNERS = [private_key_to_address(sk) for sk in RUNNER_SKS]
STAKE = 10**18
CALLBACK_ACTOR = '''import pvm_host


def on_result(payload):
    pvm_host.set_state(b"last", payload)
    return b""
'''
LIMITS = {"cycles_limit": 5_000_000, "cells_limit": 200_000}


class Net:
    """A producer chain and a follower that verifies every block."""

    def __init__(self, dev: DevGenesis) -> None:
        self.dev = dev
        self.chain = Chain(MemoryStore(), dev.genesis)
        self.follower = Chain(MemoryStore(), dev.genesis)
        self.nonces: dict[bytes, int] = {}
        self.present: frozenset[int] = frozenset()

    def tx(self, sk: bytes, ins: Instruction) -> Transaction:
        sender = private_key_to_address(sk)
        n = self.nonces.get(sender, 0)
        self.nonces[sender] = n + 1
        return make_tx(sk, n, ins, **LIMITS)

    def block(self, txs: list[Transaction]) -> PreparedBlock:
        chain, key = self.chain, self.dev.validator_key
        rnd = Round(0, chain.height + 1)
        presence = encode_presence(self.present, registry_size(chain.world()))
        env = chain.env_for(timestamp_ms=chain.head.header.timestamp_ms + 1000, fee_recipient=FEE_RECIPIENT,
                            beacon=sign_beacon(bls.secret_key_from_bytes(key.bls_secret), chain.head.header.round),
                            presence_input=presence, round_=rnd,
                            consumed_seeds=hand_seeds_due(chain, bls.secret_key_from_bytes(key.bls_secret)))
        p = chain.build(txs, env=env, round_=rnd, proposer=ed25519.public_key_from_seed(key.ed25519_seed),
                        sign=lambda d: ed25519.sign(key.ed25519_seed, d), signatures_checked=False)
        assert not p.result.rejected, [(t.instruction, e.code) for t, e in p.result.rejected]
        chain.commit(p)
        self.follower.commit(verify_and_prepare(self.follower, p.block))
        assert self.follower.head.header.state_root == chain.head.header.state_root
        return p

    def job(self, job_id: bytes) -> JobRecord:
        raw = self.chain.world().get(job_key(job_id))
        assert raw is not None
        return JobRecord.decode(raw)


PHASES = (0, 1, 2, 3)
"""CIP-11 rollout phases (``cowboy-node init --cip11-phase``): every job test runs in each."""


@pytest.fixture(params=PHASES, autouse=True, ids=[f"phase{p}" for p in PHASES])
def phase(request: pytest.FixtureRequest) -> Iterator[int]:
    """The phase :func:`_net` builds its genesis for (module-wide, so every test runs in all four)."""
    global _PHASE
    _PHASE = request.param
    yield request.param
    _PHASE = 2


_PHASE = 2


def _net(sks: list[bytes] = RUNNER_SKS) -> Net:
    """Runners ``sks`` registered in this order (so their registry indices follow it), a callback actor."""
    balances = {ALICE: 10**24, **{private_key_to_address(sk): 10**21 for sk in sks}}
    net = Net(make_dev_genesis(Cip11Flags.for_phase(_PHASE), balances=balances))
    caps, card = runner_file_from_json(json.loads((EXAMPLES / "runner-capabilities.json").read_text()),
                                       require_rate_card=True)
    assert card is not None
    net.block([net.tx(sk, RunnerRegister(STAKE, caps, card)) for sk in sks])
    net.block([net.tx(ALICE_SK, DeployActor(CALLBACK_ACTOR, b"", "", b""))])
    actor = derive_actor_address(ALICE, b"", CALLBACK_ACTOR)
    net.block([net.tx(ALICE_SK, Transfer(actor, 10**20))])
    net.present = frozenset(range(len(sks)))
    return net


def _parent_seed_bytes(net: Net, s: int) -> bytes:
    """canonical_seed_bytes of block S's parent beacon R_{S-1} (§9.2), assembled byte by byte from the layout:
    the seed of the parent's round, which block S carries as its header beacon."""
    parent, block = net.chain.blocks.block(s - 1), net.chain.blocks.block(s)
    assert parent is not None and block is not None
    r = parent.header.round
    return keccak256(b"cowboy-beacon-v1:" + r.epoch.to_bytes(8, "big") + r.view.to_bytes(8, "big")
                     + b"\x01\x00\x30" + block.header.beacon)


def _v2_seed(net: Net, s: int, job_id: bytes) -> bytes:
    """CIP-2 v2 selection seed of a job submitted in block S."""
    return keccak256(b"cowboy-runner-select-v2:" + _parent_seed_bytes(net, s) + job_id + s.to_bytes(8, "little"))


def _v3_immediate_seed(net: Net, s: int, job_id: bytes) -> bytes:
    """CIP-11 v3 mode 0x00 selection seed of an M == 1 job submitted in block S."""
    return keccak256(b"cowboy-runner-select-v3:\x00" + _parent_seed_bytes(net, s) + job_id + s.to_bytes(8, "little"))


def _request(actor: bytes | None = None, **overrides: object) -> JobSubmit:
    doc = json.loads((EXAMPLES / "job-http.json").read_text())
    doc.update(overrides)
    if actor is not None:
        doc["callback"] = {"actor": "0x" + actor.hex(), "handler": "on_result", "correlation_id": "c-1"}
    return JobSubmit(parse_job_request_json(doc))


def test_single_runner_job_settles_pays_and_calls_back() -> None:
    net = _net()
    actor = derive_actor_address(ALICE, b"", CALLBACK_ACTOR)
    alice_before = get_account(net.chain.world(), ALICE).balance
    submit = net.tx(ALICE_SK, _request(actor))
    p = net.block([submit])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    job_id = derive_job_id(submit.tx_hash(), 0)
    rec = net.job(job_id)
    assert rec.status == JobStatus.ASSIGNED and len(rec.committee) == 1
    s = p.block.header.height
    assert rec.seed == (_v2_seed(net, s, job_id) if _PHASE < 2 else _v3_immediate_seed(net, s, job_id))
    assert p.result.jobs_assigned == [job_id]  # what the node pushes
    assert p.block.header.presence_input is not None
    assert decode_presence(p.block.header.presence_input, len(RUNNERS)) == frozenset(range(len(RUNNERS)))
    assert rec.deadline_block == p.block.header.height + 100  # submitted_at + timeout_blocks (§10.1)
    runner = rec.committee[0]
    sk = RUNNER_SKS[RUNNERS.index(runner)]
    runner_before = get_account(net.chain.world(), runner).balance
    reveal = net.tx(sk, JobResultSubmit(job_id, b'{"v": 1}', b"", 0))
    p = net.block([reveal])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    done = net.job(job_id)
    assert (done.status, done.outcome, done.reason) == (JobStatus.COMPLETED, b'{"v": 1}', "verified")
    assert p.result.jobs_finished == [job_id] and p.result.jobs_assigned == []
    world = net.chain.world()
    # Payment = min(base 1000 + 0 units, max_price) + tip 0 = 1000: 890 to the runner; the rest refunded.
    fee = int(p.result.receipts[0].fee_paid)
    assert get_account(world, runner).balance == runner_before + 890 - fee
    assert get_account(world, JOB_DISPATCHER).balance == 0
    assert get_account(world, ALICE).balance < alice_before  # fees and the 1000 paid
    assert get_runner(world, runner).active_jobs == 0  # type: ignore[union-attr]
    last = get_state(world, actor, b"last")
    assert last is not None
    cb = decode(last)
    assert isinstance(cb, dict)
    assert (cb[0], cb[1], cb[2], cb[3], cb[4]) == (job_id, True, b'{"v": 1}', "verified", "c-1")


def test_three_runner_majority_vote_waits_for_its_seed_then_commits_reveals_and_settles() -> None:
    net = _net()
    req = _request(verification={"mode": "majority_vote", "runners": 3, "threshold": 2}, timeout_blocks=10)
    submit = net.tx(ALICE_SK, req)
    p = net.block([submit])
    s = p.block.header.height
    job_id = derive_job_id(submit.tx_hash(), 0)
    if _PHASE >= 2:
        assert net.job(job_id).status == JobStatus.PENDING_SELECTION
        # K = 3 views: the seed of Round(0, S + 3) exists once block S + 3 is committed; block S + 4 consumes it.
        for _ in range(3):
            assert not net.block([]).block.header.consumed_seeds
            assert net.job(job_id).status == JobStatus.PENDING_SELECTION
        p = net.block([])
        [seed] = p.block.header.consumed_seeds
        assert (seed.seed_epoch, seed.seed_view) == (0, s + 3)
    else:  # CIP-11 selection off (§13): CIP-2 v2 draws the whole committee in block S from the parent beacon
        assert net.job(job_id).seed == _v2_seed(net, s, job_id)
    rec = net.job(job_id)
    assert rec.status == JobStatus.ASSIGNED and sorted(rec.committee) == sorted(RUNNERS)
    h = p.block.header.height
    assert rec.assignment_height == h and rec.deadline_block == h + 10 and rec.commit_end == h + 6
    results = {RUNNERS[0]: b"A", RUNNERS[1]: b"A", RUNNERS[2]: b"B"}
    net.block([net.tx(sk, JobResultCommit(job_id, result_commitment(job_id, r, results[r], b"salt")))
               for sk, r in zip(RUNNER_SKS, RUNNERS, strict=True)])
    while net.chain.height < rec.commit_end:
        net.block([])
    p = net.block([net.tx(sk, JobResultSubmit(job_id, results[r], b"salt", 0))
                   for sk, r in zip(RUNNER_SKS, RUNNERS, strict=True)])
    assert all(r.error_code is None for r in p.result.receipts), [r.error_code for r in p.result.receipts]
    done = net.job(job_id)
    assert (done.status, done.outcome) == (JobStatus.COMPLETED, b"A")
    world = net.chain.world()
    minority = get_runner(world, RUNNERS[2])
    majority = get_runner(world, RUNNERS[0])
    assert minority is not None and majority is not None
    assert minority.reputation_x1e9 < majority.reputation_x1e9


def test_reveal_before_the_window_or_not_matching_its_commitment_is_refused() -> None:
    net = _net()
    submit = net.tx(ALICE_SK, _request(verification={"mode": "majority_vote", "runners": 3, "threshold": 2},
                                       timeout_blocks=10))
    net.block([submit])
    job_id = derive_job_id(submit.tx_hash(), 0)
    while net.job(job_id).status == JobStatus.PENDING_SELECTION:
        net.block([])
    commit = result_commitment(job_id, RUNNERS[0], b"A", b"salt")
    net.block([net.tx(RUNNER_SKS[0], JobResultCommit(job_id, commit))])
    early = net.block([net.tx(RUNNER_SKS[0], JobResultSubmit(job_id, b"A", b"salt", 0))])
    assert early.result.receipts[0].error_code == "reveal_window_not_open"
    while net.chain.height < net.job(job_id).commit_end:
        net.block([])
    wrong = net.block([net.tx(RUNNER_SKS[0], JobResultSubmit(job_id, b"B", b"salt", 0))])
    assert wrong.result.receipts[0].error_code == "reveal_mismatch"
    outsider = net.block([net.tx(ALICE_SK, JobResultSubmit(job_id, b"A", b"salt", 0))])
    assert outsider.result.receipts[0].error_code == "not_on_committee"


def test_silent_runner_times_out_is_excluded_and_the_job_is_reselected() -> None:
    net = _net()
    submit = net.tx(ALICE_SK, _request(timeout_blocks=10))
    net.block([submit])
    job_id = derive_job_id(submit.tx_hash(), 0)
    first = net.job(job_id)
    [silent] = first.committee
    while net.chain.height <= first.deadline_block:
        net.block([])
    rec = net.job(job_id)
    assert rec.status == JobStatus.ASSIGNED and rec.attempt == 1
    assert rec.excluded == (silent,) and silent not in rec.committee
    assert rec.assignment_height == first.deadline_block + 1
    assert rec.deadline_block == rec.assignment_height + 10
    runner = get_runner(net.chain.world(), silent)
    assert runner is not None and runner.reputation_x1e9 < 50 * 10**9 and runner.active_jobs == 0


def test_job_nobody_can_serve_is_refused_and_escrow_untouched() -> None:
    net = _net()
    before = get_account(net.chain.world(), ALICE).balance
    doc = {"job_type": {"kind": "http", "url": "https://elsewhere.net/x", "method": "GET"}, "max_price": "1000000"}
    p = net.block([net.tx(ALICE_SK, JobSubmit(parse_job_request_json(doc)))])
    r = p.result.receipts[0]
    assert r.error_code == "no_eligible_runner"
    assert get_account(net.chain.world(), ALICE).balance == before - int(r.fee_paid)
    assert get_account(net.chain.world(), JOB_DISPATCHER).balance == 0
    cheap = net.block([net.tx(ALICE_SK, _request(max_price="999"))])
    assert cheap.result.receipts[0].error_code == "no_eligible_runner"
    semantic = net.block([net.tx(ALICE_SK, _request(verification={"mode": "semantic_similarity", "runners": 2,
                                                                  "threshold": 2}))])
    assert semantic.result.receipts[0].error_code == "semantic_similarity_unsupported"


SUBMITTING_ACTOR = '''import pvm_host


def start(payload):
    job_id = pvm_host.submit_job(payload)
    pvm_host.set_state(b"job", job_id)
    return job_id


def on_result(payload):
    pvm_host.set_state(b"last", payload)
    return b""
'''


def test_actor_submits_a_job_with_pvm_host_and_its_callback_receives_the_result() -> None:
    """``pvm_host.submit_job`` from an actor (issue §2): the actor pays the escrow from its own balance, owns the
    job, and its ``on_result`` handler receives the verified result in End of Block."""
    net = _net()
    net.block([net.tx(ALICE_SK, DeployActor(SUBMITTING_ACTOR, b"", "", b""))])
    actor = derive_actor_address(ALICE, b"", SUBMITTING_ACTOR)
    net.block([net.tx(ALICE_SK, Transfer(actor, 10**20))])
    doc = json.loads((EXAMPLES / "job-http.json").read_text())
    doc["callback"] = {"actor": "0x" + actor.hex(), "handler": "on_result", "correlation_id": "from-actor"}
    doc["max_price"] = str(10**15)  # large enough that a missing refund could not hide in the callback's fee
    call = net.tx(ALICE_SK, CallActor(actor, "start", json.dumps(doc).encode()))
    actor_before = get_account(net.chain.world(), actor).balance
    p = net.block([call])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    job_id = derive_job_id(call.tx_hash(), 0)  # derived from the calling transaction, index 0
    assert get_state(net.chain.world(), actor, b"job") == job_id
    rec = net.job(job_id)
    assert rec.status == JobStatus.ASSIGNED and rec.payer == actor
    assert get_account(net.chain.world(), JOB_DISPATCHER).balance == rec.escrow > 0
    assert get_account(net.chain.world(), actor).balance == actor_before - rec.escrow
    runner = rec.committee[0]
    p = net.block([net.tx(RUNNER_SKS[RUNNERS.index(runner)], JobResultSubmit(job_id, b'{"ok": true}', b"", 0))])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    assert net.job(job_id).status == JobStatus.COMPLETED
    last = get_state(net.chain.world(), actor, b"last")
    assert last is not None
    cb = decode(last)
    assert isinstance(cb, dict)
    assert (cb[0], cb[1], cb[2], cb[4]) == (job_id, True, b'{"ok": true}', "from-actor")
    # The unused escrow (10^15 − 1,000) went back to the actor; what it spent besides the 1,000 paid is the fee of
    # its own callback run (the callback actor pays, docs/jobs.md), far below 10^14.
    after = get_account(net.chain.world(), actor).balance
    assert actor_before - 10**14 < after < actor_before - 1000
    assert get_account(net.chain.world(), JOB_DISPATCHER).balance == 0


def test_actor_submit_job_with_a_bad_spec_fails_the_call_and_takes_no_escrow() -> None:
    net = _net()
    net.block([net.tx(ALICE_SK, DeployActor(SUBMITTING_ACTOR, b"", "", b""))])
    actor = derive_actor_address(ALICE, b"", SUBMITTING_ACTOR)
    net.block([net.tx(ALICE_SK, Transfer(actor, 10**20))])
    before = get_account(net.chain.world(), actor).balance
    p = net.block([net.tx(ALICE_SK, CallActor(actor, "start", b'{"job_type": {"kind": "http"}}'))])
    assert p.result.receipts[0].error_code == "invalid_job_spec"
    assert get_account(net.chain.world(), actor).balance == before
    assert get_account(net.chain.world(), JOB_DISPATCHER).balance == 0
    assert get_state(net.chain.world(), actor, b"job") is None


SIX_SKS = [(0x2000 + i).to_bytes(32, "big") for i in range(6)]


def _committees_after_registering(order: list[int]) -> tuple[list[tuple[bytes, ...]], tuple[bytes, ...]]:
    """Register SIX_SKS in ``order``; submit four M == 1 jobs and one M == 3 job; return the committees."""
    net = _net([SIX_SKS[i] for i in order])
    singles = [net.tx(ALICE_SK, _request()) for _ in range(4)]
    triple = net.tx(ALICE_SK, _request(verification={"mode": "majority_vote", "runners": 3, "threshold": 2}))
    net.block([*singles, triple])
    for _ in range(4):  # K = 3 views, then the block that consumes the seed
        net.block([])
    m1 = [net.job(derive_job_id(t.tx_hash(), 0)).committee for t in singles]
    return m1, net.job(derive_job_id(triple.tx_hash(), 0)).committee


def test_committees_do_not_depend_on_registration_or_storage_order() -> None:
    """§9: candidates are taken in address order whatever order the registry stores or iterates them in. The
    same runners registered in two different orders (different registry indices, different storage and
    iteration order of the index array) yield the same committees, in the same committee order, for the same
    jobs. Equal stakes make every position's weight equal, so drawing over index order instead of address
    order would pick different runners."""
    a = _committees_after_registering([0, 1, 2, 3, 4, 5])
    b = _committees_after_registering([5, 3, 1, 0, 4, 2])
    assert len(a[1]) == 3 and all(len(c) == 1 for c in a[0])
    assert a == b
