"""Each validator executes a block once: the proposer's build and a follower's verification (on the head's own
state or over an overlay of uncommitted ancestors) are what is committed; nothing is executed again at commit
(issue 20 item 5; ``cowboy_node/consensus/forks.py``)."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import pytest

from cowboy_node.chain import chain as chain_module
from cowboy_node.chain.blockstore import TREE_PREFIX
from cowboy_node.chain.chain import Chain
from cowboy_node.consensus import header as header_module
from cowboy_node.execution.system_state import get_account
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.state.tree import StateTree
from cowboy_node.types.block import Round
from tests.helpers import ALICE, ALICE_SK, BOB, transfer
from tests.unit.consensus.forks_harness import build_on, keep_prepared, leader_key, make_forks, seed_for


@pytest.fixture
def executions(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[str]:
    """Counts block executions: ``build`` (a proposer's) and ``execute`` (a received block's), by chain."""
    counts: collections.Counter[str] = collections.Counter()
    build, execute = chain_module.build_block, header_module.execute_block

    def counting_build(*a: Any, **k: Any) -> Any:
        counts["build"] += 1
        return build(*a, **k)

    def counting_execute(*a: Any, **k: Any) -> Any:
        counts["execute"] += 1
        return execute(*a, **k)

    monkeypatch.setattr(chain_module, "build_block", counting_build)
    monkeypatch.setattr(header_module, "execute_block", counting_execute)
    return counts


def test_a_block_verified_over_an_overlay_is_committed_without_executing_it_again(
        dev_genesis: DevGenesis, new_chain: Callable[[], Chain], executions: collections.Counter[str]) -> None:
    prod, fol = make_forks(new_chain), make_forks(new_chain)
    t0 = prod.chain.head.header.timestamp_ms
    a = build_on(prod, dev_genesis, prod.chain.head.hash(), 1, [transfer(ALICE_SK, 0, BOB, 3)], t0 + 1000)
    prod.records.put_seed(Round(0, 1), seed_for(dev_genesis, 1))
    b = build_on(prod, dev_genesis, a.hash(), 3, [transfer(ALICE_SK, 1, BOB, 4)], t0 + 2000)  # over A's overlay
    assert executions == {"build": 2}
    fol.verify(a, leader_key=leader_key(dev_genesis), max_timestamp_ms=t0 + 2000)
    fol.verify(b, leader_key=leader_key(dev_genesis), max_timestamp_ms=t0 + 2000)
    assert fol.candidates[b.hash()].direct_on is None  # verified over A's overlay
    assert executions == {"build": 2, "execute": 2}

    for f in (prod, fol):
        f.commit(a, seed=seed_for(dev_genesis, 1), certificate=None, inspect=keep_prepared)
        f.commit(b, seed=seed_for(dev_genesis, 3), certificate=None, inspect=keep_prepared)
        # the head's tree adopted B's root, and the store holds B's state (read without any cache)
        assert f.chain.tree.root() == b.header.state_root
        assert StateTree(f.chain.store, TREE_PREFIX, cache_size=0).root() == b.header.state_root
        world = f.chain.world()
        assert get_account(world, ALICE).nonce == 2
        assert f.executions["commit_unverified"] == 0
    assert executions == {"build": 2, "execute": 2}  # one execution per block per validator, none at commit

    # The next block on the new head (built through the head's tree and its cache) verifies on the follower
    # and commits: the adopted tree is the one a re-execution would have left.
    prod.records.put_seed(Round(0, 3), seed_for(dev_genesis, 3))
    c = build_on(prod, dev_genesis, b.hash(), 4, [transfer(ALICE_SK, 2, BOB, 5)], t0 + 3000)
    fc = fol.verify(c, leader_key=leader_key(dev_genesis), max_timestamp_ms=t0 + 4000)
    assert fc.direct_on == b.hash() and fc.prepared.result.state_root == c.header.state_root
    for f in (prod, fol):
        f.commit(c, seed=seed_for(dev_genesis, 4), certificate=None, inspect=keep_prepared)
        assert f.chain.tree.root() == c.header.state_root
    assert prod.chain.head.header.state_root == fol.chain.head.header.state_root


def test_a_finalized_block_never_seen_before_is_executed_at_commit(
        dev_genesis: DevGenesis, new_chain: Callable[[], Chain], executions: collections.Counter[str]) -> None:
    prod, other = make_forks(new_chain), make_forks(new_chain)
    t0 = prod.chain.head.header.timestamp_ms
    a = build_on(prod, dev_genesis, prod.chain.head.hash(), 1, [transfer(ALICE_SK, 0, BOB, 3)], t0 + 1000)
    used, _ = other.commit(a, seed=seed_for(dev_genesis, 1), certificate=None, inspect=keep_prepared)
    assert executions == {"build": 1, "execute": 1}
    assert other.executions["commit_unverified"] == 1
    assert used.result.state_root == a.header.state_root == other.chain.tree.root()
