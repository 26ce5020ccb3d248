"""CIP-11 §9.2: the seed of a *nullified* round is usable — end to end through the Simplex engine.

"Seed exposure MUST include every verified consensus certificate type that carries a valid threshold seed for an
absolute round: notarization, finalization, and nullification." Here a real engine (threshold BLS, the dev
validator's key as the 1-of-1 group key) drives a chain with three runners, as the consensus service does:
``ProposalWanted`` → ``Forks.build``, ``SeedRevealed`` → ``ConsensusRecords.put_seed``, ``Finalized`` →
``Forks.commit``. An M = 3 job is submitted in block S; the host withholds its proposal in the job's seed round
r_seed, so that view times out and is nullified (no block has that round); the nullification's seed is then
committed in the next block's ConsumedSeedsV1 and assigns the job, and a follower replaying the chain agrees.
"""

from __future__ import annotations

import pytest

from cowboy_node.consensus.beacon import sign_beacon
from cowboy_node.consensus.forks import Forks
from cowboy_node.consensus.header import verify_and_prepare
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.consensus.simplex.elector import Election
from cowboy_node.consensus.simplex.engine import (
    Config,
    Engine,
    Finalized,
    Nullified,
    Output,
    ProposalWanted,
    SeedRevealed,
)
from cowboy_node.consensus.simplex.scheme import ThresholdScheme
from cowboy_node.crypto import bls, threshold
from cowboy_node.execution.jobs import pending
from cowboy_node.execution.jobs.job_record import JobStatus
from cowboy_node.execution.jobs.seeds import MODE_DELAYED, beacon_hash_v1, selection_seed_v3
from cowboy_node.execution.runners.registry_state import registry_size
from cowboy_node.types.block import Block, Round
from cowboy_node.types.presence import encode_presence
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.transaction import Transaction
from tests.helpers import ALICE_SK, FEE_RECIPIENT
from tests.unit.consensus.forks_harness import keep_prepared, leader_key
from tests.unit.execution.jobs import test_jobs_e2e as e2e

M3 = {"mode": "majority_vote", "runners": 3, "threshold": 2}
DELTA = 100


@pytest.fixture(autouse=True)
def phase2() -> None:
    """CIP-11 selection on (phase 2): M > 1 jobs wait for their seed round (the pending path)."""
    e2e._PHASE = 2


class Host:
    """The consensus service's handling of engine outputs, on a Forks over ``net.chain`` (n = 1)."""

    def __init__(self, net: e2e.Net) -> None:
        self.net = net
        self.forks = Forks(net.chain, ConsensusRecords(net.chain.store))
        head = net.chain.head.header
        secret = bls.secret_key_from_bytes(net.dev.validator_key.bls_secret)
        self.forks.records.put_seed(head.round, sign_beacon(secret, head.round))  # the hand-built chain's tip
        dealing = threshold.deal(secret, 1, 1, b"\x09" * 32)
        assert dealing.group_public_key == net.dev.genesis.group_public_key
        cfg = Config(me=0, delta_ms=DELTA, election=Election.RANDOM, genesis=net.chain.head.hash(),
                     floor_view=head.round.view, floor_seed=sign_beacon(secret, head.round))
        self.engine = Engine(cfg, ThresholdScheme.from_dealing(dealing, 0))
        self.now = 0
        self.withhold: set[int] = set()
        """Views whose proposal the host withholds (a silent leader)."""
        self.last = 0
        """The last view the host proposes in (n = 1 finalizes at once, so each proposal asks for the next)."""
        self.txs: dict[int, list[Transaction]] = {}
        self.nullified: list[int] = []
        self.finalized: list[Block] = []

    def handle(self, outs: list[Output]) -> None:
        queue = list(outs)
        while queue:
            o = queue.pop(0)
            if isinstance(o, SeedRevealed):
                self.forks.records.put_seed(o.round, o.seed)
            elif isinstance(o, Nullified):
                self.nullified.append(o.certificate.round.view)
            elif isinstance(o, Finalized):
                block = self.forks.block(o.proposal.payload)
                assert block is not None
                self.forks.commit(block, seed=o.seed, certificate=o.certificate, inspect=keep_prepared)
                self.finalized.append(block)
            elif isinstance(o, ProposalWanted) and o.round.view not in self.withhold and o.round.view <= self.last:
                def presence(w: object) -> bytes:
                    return encode_presence(self.net.present, registry_size(w))  # type: ignore[arg-type]

                c = self.forks.build(o.parent, o.round, self.txs.pop(o.round.view, []),
                                     timestamp_ms=1_000_000 + 1000 * o.round.view, proposer=leader_key(self.net.dev),
                                     sign=self._sign, fee_recipient=FEE_RECIPIENT,
                                     presence=presence)
                queue.extend(self.engine.propose(o.round, c.prepared.block.hash(), self.now))

    def _sign(self, digest: bytes) -> bytes:
        return ed25519.sign(self.net.dev.validator_key.ed25519_seed, digest)

    def run_until_view(self, view: int) -> None:
        """Drive the engine (proposals answered up to ``view``, timeouts fired) until it has finalized ``view``."""
        self.last = view
        for _ in range(100):  # bounded: a few timeouts per view at most
            if self.engine.finalized_view >= view:
                return
            deadline = self.engine.next_deadline()
            assert deadline is not None
            self.now = max(self.now + 1, deadline)
            self.handle(self.engine.tick(self.now))
        raise AssertionError(f"the engine is stuck in view {self.engine.view}")


def test_job_whose_seed_round_was_nullified_is_assigned_from_the_nullification_seed() -> None:
    net = e2e._net()
    host = Host(net)
    submit = net.tx(ALICE_SK, e2e._request(verification=M3, timeout_blocks=10))
    job_id = derive_job_id(submit.tx_hash(), 0)
    s_view = net.chain.head.header.round.view + 1
    host.txs[s_view] = [submit]
    k = 3  # SELECTION_SEED_DELAY_VIEWS of the dev genesis
    r_seed = s_view + k
    host.withhold.add(r_seed)  # the leader of r_seed is silent: the view times out and is nullified
    host.last = r_seed + 2
    host.handle(host.engine.start(host.now))
    host.run_until_view(r_seed + 2)

    s_block = next(b for b in host.finalized if b.header.round.view == s_view)
    assert net.job(job_id).status == JobStatus.ASSIGNED
    assert host.nullified == [r_seed]  # only the seed round was nullified
    assert all(b.header.round.view != r_seed for b in host.finalized)  # no block has the seed round
    h = next(b for b in host.finalized if b.header.consumed_seeds)
    assert h.header.round.view == r_seed + 1
    (consumed,) = h.header.consumed_seeds
    assert (consumed.seed_epoch, consumed.seed_view) == (0, r_seed)
    secret = bls.secret_key_from_bytes(net.dev.validator_key.bls_secret)
    assert consumed.seed_signature == sign_beacon(secret, Round(0, r_seed))  # the nullification's seed
    assert net.job(job_id).seed == selection_seed_v3(
        MODE_DELAYED, beacon_hash_v1(0, r_seed, consumed.seed_signature), job_id, s_block.header.height)
    assert net.chain.world().get(pending.pending_by_job_key(job_id)) is None  # the pending record is gone
    for b in host.finalized:  # a follower replays the committed chain to the same state
        net.follower.commit(verify_and_prepare(net.follower, b))
    assert net.follower.head.header.state_root == net.chain.head.header.state_root
