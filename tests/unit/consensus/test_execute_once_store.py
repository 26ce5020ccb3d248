"""Committing a block with the writes of its verification over an overlay leaves the same store as executing it
again on the head (``Forks.commit``, issue 20 item 5): every key and value, tree nodes included, not only the
root. The blocks create and update many accounts so the tree splits nodes on several levels."""

from __future__ import annotations

from collections.abc import Callable

from cowboy_node.chain.chain import Chain
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.types.block import Round
from cowboy_protocol.crypto import ed25519
from tests.helpers import ALICE_SK, transfer
from tests.unit.consensus.forks_harness import build_on, keep_prepared, make_forks, seed_for


def _recipient(i: int) -> bytes:
    return (0xC0B0 + i).to_bytes(2, "big") * 10


def test_overlay_verified_commit_leaves_the_store_a_re_execution_leaves(
        dev_genesis: DevGenesis, new_chain: Callable[[], Chain]) -> None:
    prod, verified, reexecuted = make_forks(new_chain), make_forks(new_chain), make_forks(new_chain)
    t0 = prod.chain.head.header.timestamp_ms
    leader = ed25519.public_key_from_seed(dev_genesis.validator_key.ed25519_seed)
    a = build_on(prod, dev_genesis, prod.chain.head.hash(), 1,
               [transfer(ALICE_SK, n, _recipient(n), 1 + n) for n in range(40)], t0 + 1000)
    prod.records.put_seed(Round(0, 1), seed_for(dev_genesis, 1))
    # B over A's overlay: half new recipients, half updates of A's
    b = build_on(prod, dev_genesis, a.hash(), 3,
               [transfer(ALICE_SK, 40 + n, _recipient(20 + n), 7) for n in range(40)], t0 + 2000)
    verified.verify(a, leader_key=leader, max_timestamp_ms=t0 + 2000)
    verified.verify(b, leader_key=leader, max_timestamp_ms=t0 + 2000)
    assert verified.candidates[b.hash()].direct_on is None  # the path under test: verified over an overlay
    for f in (verified, reexecuted):
        f.commit(a, seed=seed_for(dev_genesis, 1), certificate=None, inspect=keep_prepared)
        f.commit(b, seed=seed_for(dev_genesis, 3), certificate=None, inspect=keep_prepared)
    assert verified.executions["commit_unverified"] == 0
    assert reexecuted.executions["commit_unverified"] == 2
    left, right = dict(verified.chain.store.iterate()), dict(reexecuted.chain.store.iterate())
    assert left.keys() == right.keys()
    assert [k for k in left if left[k] != right[k]] == []
    # and the head's in-memory tree answers as the store does: the next block verifies the same on both
    prod.records.put_seed(Round(0, 3), seed_for(dev_genesis, 3))
    c = build_on(prod, dev_genesis, b.hash(), 4, [transfer(ALICE_SK, 80, _recipient(3), 9)], t0 + 3000)
    for f in (verified, reexecuted):
        got = f.verify(c, leader_key=leader, max_timestamp_ms=t0 + 4000)
        assert got.prepared.result.state_root == c.header.state_root
