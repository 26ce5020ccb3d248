"""Forks: candidates above the committed head, built and verified on candidate parents through an overlay,
committed with their seed and certificate (cowboy_node/consensus/forks.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.consensus import forks as forks_module
from cowboy_node.consensus.forks import seeds_due
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.consensus.simplex.types import Finalization, Proposal
from cowboy_node.execution.validity_errors import InvalidBlock
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.types.block import Block, ConsumedSeed, Round
from tests.helpers import ALICE_SK, BOB, transfer
from tests.unit.consensus.forks_harness import build_on, keep_prepared, leader_key, make_forks, seed_for


def _cert(block: Block, parent_view: int) -> Finalization:
    h = block.header
    return Finalization(Proposal(h.round, parent_view, h.parent_hash, block.hash()), b"\x0a" * 48, b"\x0b" * 48)


def test_chain_of_candidates_verifies_and_commits_identically_on_producer_and_follower(
        dev_genesis: DevGenesis, new_chain: Callable[[], Chain]) -> None:
    prod, fol = make_forks(new_chain), make_forks(new_chain)
    t0 = prod.chain.head.header.timestamp_ms
    a = build_on(prod, dev_genesis, prod.chain.head.hash(), 1, [transfer(ALICE_SK, 0, BOB, 3)], t0 + 1000)
    assert prod.candidates[a.hash()].direct_on == prod.chain.head.hash()
    assert a.header.beacon == dev_genesis.genesis.genesis_beacon
    prod.records.put_seed(Round(0, 1), seed_for(dev_genesis, 1))  # A's round was notarized: its seed revealed
    # B on A, A not committed: executed over A's overlay (A's nonce 0 is used, so nonce 1 is valid)
    b = build_on(prod, dev_genesis, a.hash(), 3, [transfer(ALICE_SK, 1, BOB, 4)], t0 + 2000)
    cb = prod.candidates[b.hash()]
    assert cb.direct_on is None and b.header.parent_hash == a.hash() and b.header.height == 2
    assert b.header.beacon == seed_for(dev_genesis, 1)
    assert [r.status for r in cb.prepared.result.receipts] == [0]
    assert prod.chain.height == 0

    # the follower verifies A on its head and B on the candidate A, the same way
    fa = fol.verify(a, leader_key=leader_key(dev_genesis), max_timestamp_ms=t0 + 2000)
    fb = fol.verify(b, leader_key=leader_key(dev_genesis), max_timestamp_ms=t0 + 2000)
    assert fa.direct_on == fol.chain.head.hash() and fb.direct_on is None
    assert fb.prepared.result.state_root == b.header.state_root
    assert fol.verify(b, leader_key=None, max_timestamp_ms=None) is fb  # known candidate

    for f in (prod, fol):
        cand_a, cand_b = f.candidates[a.hash()], f.candidates[b.hash()]
        used_a, _ = f.commit(a, seed=seed_for(dev_genesis, 1), certificate=None, inspect=keep_prepared)
        assert used_a is cand_a.prepared  # executed on the head's own world: committed as it is
        used_b, inspected = f.commit(b, seed=seed_for(dev_genesis, 3), certificate=_cert(b, 1), inspect=keep_prepared)
        assert inspected is used_b
        assert used_b is cand_b.prepared  # executed over an overlay: its writes are committed, not re-executed
        assert used_b.result.state_root == b.header.state_root
        assert f.chain.head.hash() == b.hash() and f.chain.tree.root() == b.header.state_root
        assert f.candidates == {}
        # the commit batch recorded the seeds of both rounds and B's own certificate
        fresh = ConsensusRecords(f.chain.store)
        assert (fresh.seed(Round(0, 1)) == seed_for(dev_genesis, 1)
                and fresh.seed(Round(0, 3)) == seed_for(dev_genesis, 3))
        assert fresh.finalization(2) == _cert(b, 1) and fresh.finalization(1) is None
    assert prod.chain.head.header.state_root == fol.chain.head.header.state_root


def test_certificate_of_another_block_is_not_stored(dev_genesis: DevGenesis, new_chain: Callable[[], Chain]) -> None:
    f = make_forks(new_chain)
    t0 = f.chain.head.header.timestamp_ms
    a = build_on(f, dev_genesis, f.chain.head.hash(), 1, [], t0 + 1000)
    other = build_on(f, dev_genesis, f.chain.head.hash(), 2, [], t0 + 1500)
    f.commit(a, seed=seed_for(dev_genesis, 1), certificate=_cert(other, 0), inspect=keep_prepared)
    assert f.records.finalization(1) is None


def test_commit_drops_the_kept_proposal_of_the_committed_block(dev_genesis: DevGenesis,
                                                               new_chain: Callable[[], Chain]) -> None:
    f = make_forks(new_chain)
    t0 = f.chain.head.header.timestamp_ms
    a = build_on(f, dev_genesis, f.chain.head.hash(), 1, [], t0 + 1000)
    f.records.put_proposal(a.hash(), a.encode())
    f.commit(a, seed=seed_for(dev_genesis, 1), certificate=_cert(a, 0), inspect=keep_prepared)
    assert f.records.proposals() == []


def test_unknown_parent_is_refused(dev_genesis: DevGenesis, new_chain: Callable[[], Chain]) -> None:
    prod, fol = make_forks(new_chain), make_forks(new_chain)
    t0 = prod.chain.head.header.timestamp_ms
    with pytest.raises(InvalidBlock) as e:
        build_on(prod, dev_genesis, b"\x07" * 32, 1, [], t0 + 1000)
    assert e.value.code == "unknown_parent"
    a = build_on(prod, dev_genesis, prod.chain.head.hash(), 1, [], t0 + 1000)
    prod.records.put_seed(Round(0, 1), seed_for(dev_genesis, 1))
    b = build_on(prod, dev_genesis, a.hash(), 2, [], t0 + 2000)
    with pytest.raises(InvalidBlock) as e:
        fol.verify(b, leader_key=None, max_timestamp_ms=None)  # the follower never saw A
    assert e.value.code == "unknown_parent"
    assert fol.candidates == {}


def test_committing_a_block_prunes_its_siblings(dev_genesis: DevGenesis, new_chain: Callable[[], Chain]) -> None:
    f = make_forks(new_chain)
    t0 = f.chain.head.header.timestamp_ms
    genesis = f.chain.head.hash()
    a = build_on(f, dev_genesis, genesis, 1, [transfer(ALICE_SK, 0, BOB, 1)], t0 + 1000)
    sibling = build_on(f, dev_genesis, genesis, 2, [transfer(ALICE_SK, 0, BOB, 2)], t0 + 1100)
    assert {a.hash(), sibling.hash()} <= set(f.candidates)
    f.commit(a, seed=seed_for(dev_genesis, 1), certificate=None, inspect=keep_prepared)
    assert sibling.hash() not in f.candidates and f.block(sibling.hash()) is None
    assert f.block(a.hash()) == a  # committed blocks stay readable
    f.records.put_seed(Round(0, 2), seed_for(dev_genesis, 2))
    with pytest.raises(InvalidBlock) as e:
        build_on(f, dev_genesis, sibling.hash(), 3, [], t0 + 2000)
    assert e.value.code == "unknown_parent"


def test_parent_seed_of_genesis_is_the_genesis_beacon_and_later_ones_come_from_records(
        dev_genesis: DevGenesis, new_chain: Callable[[], Chain]) -> None:
    f = make_forks(new_chain)
    assert f.parent_seed(f.chain.head.header) == dev_genesis.genesis.genesis_beacon
    a = build_on(f, dev_genesis, f.chain.head.hash(), 4, [], f.chain.head.header.timestamp_ms + 1000)
    assert f.parent_seed(a.header) is None
    with pytest.raises(InvalidBlock) as e:  # no seed of A's round yet: nothing can be built on A
        build_on(f, dev_genesis, a.hash(), 5, [], a.header.timestamp_ms + 1000)
    assert e.value.code == "missing_parent_seed"
    f.records.put_seed(Round(0, 4), seed_for(dev_genesis, 4))
    assert f.parent_seed(a.header) == seed_for(dev_genesis, 4)


def test_seeds_due_lists_only_rounds_whose_seed_is_recorded(dev_genesis: DevGenesis, new_chain: Callable[[], Chain],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    chain = new_chain()
    records = ConsensusRecords(chain.store)
    asked: list[int] = []

    def due(world: object, up_to_view: int, finalized_height: int | None = None) -> list[tuple[int, int]]:
        # stand-in for the pending-selection scan: rounds (0, 2), (0, 3), (0, 5) await their seed
        asked.append(up_to_view)
        return [(0, 2), (0, 3), (0, 5)]

    monkeypatch.setattr(forks_module, "due_seed_rounds", due)
    assert seeds_due(chain.world(), Round(0, 7), records) == ()
    assert asked == [6]  # rounds strictly before the block's own
    records.put_seed(Round(0, 3), seed_for(dev_genesis, 3))
    records.put_seed(Round(0, 5), seed_for(dev_genesis, 5))
    assert seeds_due(chain.world(), Round(0, 7), records) == (
        ConsumedSeed(0, 3, seed_for(dev_genesis, 3)), ConsumedSeed(0, 5, seed_for(dev_genesis, 5)))
