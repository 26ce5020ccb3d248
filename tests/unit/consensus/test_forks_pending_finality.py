"""CIP-11 §9.2 (and §13, §15.9): a pending M > 1 selection is assigned only once block S is final.

"A later deterministic pending-selection pass assigns the committee only when all of the following hold: block S
is finalized and applied to canonical local state; …". Under Simplex a leader builds on a notarized parent that
is not final yet (cowboy_node/consensus/forks.py), so the seed of r_seed can be revealed while S is still only
notarized. These tests hold S notarized-not-final explicitly (a candidate above the committed head) and check
that the proposer does not consume the seed (``seeds_due``), that a block which does is refused by a verifier
with ``pending_source_not_final`` (``process_pending``), and that once S is final the job is assigned.
"""

from __future__ import annotations

import pytest

from cowboy_node.consensus.forks import Forks
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.execution.jobs import dispatch, pending
from cowboy_node.execution.jobs.job_record import JobRecord, JobStatus, job_key
from cowboy_node.execution.runners.registry_state import registry_size
from cowboy_node.execution.validity_errors import InvalidBlock
from cowboy_node.state.world import WorldState
from cowboy_node.types.block import Block, ConsumedSeed, Round
from cowboy_node.types.presence import encode_presence
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.types.jobspec import derive_job_id
from tests.helpers import ALICE_SK, FEE_RECIPIENT
from tests.unit.consensus.forks_harness import keep_prepared, leader_key, seed_for
from tests.unit.execution.jobs import test_jobs_e2e as e2e

M3 = {"mode": "majority_vote", "runners": 3, "threshold": 2}


@pytest.fixture(autouse=True)
def phase2() -> None:
    """CIP-11 selection on (phase 2): M > 1 jobs wait for their seed round (the pending path)."""
    e2e._PHASE = 2


def _build(f: Forks, net: e2e.Net, parent: bytes, view: int, txs: list, ts: int) -> Block:  # type: ignore[type-arg]
    key = net.dev.validator_key

    def presence(w: WorldState) -> bytes:
        return encode_presence(net.present, registry_size(w))

    c = f.build(parent, Round(0, view), txs, timestamp_ms=ts, proposer=leader_key(net.dev),
                sign=lambda d: ed25519.sign(key.ed25519_seed, d), fee_recipient=FEE_RECIPIENT, presence=presence)
    return c.prepared.block


def _status(f: Forks, block: Block, job_id: bytes) -> JobStatus:
    world, _, _ = f.world_on(block.hash())
    raw = world.get(job_key(job_id))
    assert raw is not None
    return JobRecord.decode(raw).status


def _setup() -> tuple[e2e.Net, Forks, Forks, bytes, pending.PendingSelectionV1, Block]:
    """A producer and a follower at the same committed head, and block S (an M = 3 JobSubmit) notarized by
    both — a candidate above the head, not committed, i.e. not final."""
    net = e2e._net()
    prod = Forks(net.chain, ConsensusRecords(net.chain.store))
    fol = Forks(net.follower, ConsensusRecords(net.follower.store))
    submit = net.tx(ALICE_SK, e2e._request(verification=M3, timeout_blocks=10))
    job_id = derive_job_id(submit.tx_hash(), 0)
    view0 = net.chain.head.header.round.view
    t0 = net.chain.head.header.timestamp_ms
    for f in (prod, fol):  # the head's round was certified (hand-built chain: its seed is not recorded yet)
        f.records.put_seed(Round(0, view0), seed_for(net.dev, view0))
    s = _build(prod, net, net.chain.head.hash(), view0 + 1, [submit], t0 + 1000)
    fol.verify(s, leader_key=leader_key(net.dev), max_timestamp_ms=None)
    world, _, _ = prod.world_on(s.hash())
    raw = world.get(pending.pending_by_job_key(job_id))
    assert raw is not None
    record = pending.PendingSelectionV1.decode(raw)
    for f in (prod, fol):  # every round up to past the seed round is notarized: its seed is revealed to both
        for v in range(view0 + 1, record.seed_view + 8):
            f.records.put_seed(Round(0, v), seed_for(net.dev, v))
    return net, prod, fol, job_id, record, s


def test_seed_of_a_notarized_not_final_block_s_is_not_consumed_until_s_is_final() -> None:
    net, prod, fol, job_id, record, s = _setup()
    parent, ts, view = s, s.header.timestamp_ms, record.seed_view
    for _ in range(2):  # two blocks past the seed round, all on the not-final S: the seed is known, S is not final
        view += 1
        ts += 1000
        b = _build(prod, net, parent.hash(), view, [], ts)
        assert b.header.consumed_seeds == ()
        fol.verify(b, leader_key=leader_key(net.dev), max_timestamp_ms=None)  # valid: §9.2-15, a pending record
        assert _status(prod, b, job_id) == JobStatus.PENDING_SELECTION
        parent = b
    # S is finalized and committed: the next block on the candidate chain consumes the seed and assigns.
    for f in (prod, fol):
        f.commit(s, seed=seed_for(net.dev, s.header.round.view), certificate=None, inspect=keep_prepared)
    view += 1
    ts += 1000
    h = _build(prod, net, parent.hash(), view, [], ts)
    assert h.header.consumed_seeds == (ConsumedSeed(0, record.seed_view, seed_for(net.dev, record.seed_view)),)
    assert _status(prod, h, job_id) == JobStatus.ASSIGNED
    fol.verify(h, leader_key=leader_key(net.dev), max_timestamp_ms=None)
    assert _status(fol, h, job_id) == JobStatus.ASSIGNED


def test_a_block_assigning_from_a_non_final_s_is_refused_with_pending_source_not_final(
        monkeypatch: pytest.MonkeyPatch) -> None:
    net, prod, fol, job_id, record, s = _setup()
    # A faulty proposer consumes the seed although S is only notarized: its node ignores finality.
    with monkeypatch.context() as m:
        m.setattr(dispatch, "source_final", lambda submitted_at, finalized_height: True)
        bad = _build(prod, net, s.hash(), record.seed_view + 1, [], s.header.timestamp_ms + 1000)
    assert [c.seed_view for c in bad.header.consumed_seeds] == [record.seed_view]
    with pytest.raises(InvalidBlock) as e:
        fol.verify(bad, leader_key=leader_key(net.dev), max_timestamp_ms=None)
    assert e.value.code == "pending_source_not_final"
    assert bad.hash() not in fol.candidates
    # Once S is final on the follower, the same assignment is valid (the refusal was about finality only).
    fol.commit(s, seed=seed_for(net.dev, s.header.round.view), certificate=None, inspect=keep_prepared)
    fol.verify(bad, leader_key=leader_key(net.dev), max_timestamp_ms=None)
    assert _status(fol, bad, job_id) == JobStatus.ASSIGNED
