"""Header boundaries that mutation testing (``make mutate-header``, docs/testing.md) checks
(``cowboy_node/consensus/header.py``): a timestamp equal to the parent's is not "after" it, and a consumed seed
of the block's own round is not of an earlier round, even when it is that round's genuine group signature."""

from __future__ import annotations

from collections.abc import Callable

from cowboy_node.chain.chain import Chain
from cowboy_node.consensus.beacon import sign_beacon
from cowboy_node.consensus.header import verify_and_prepare
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.types.block import ConsumedSeed, Round
from tests.unit.consensus.test_header_rules import _build, _code, _resign, _secret


def test_a_timestamp_equal_to_the_parents_is_refused_and_one_more_is_accepted(
        dev_genesis: DevGenesis, new_chain: Callable[[], Chain]) -> None:
    producer, follower = new_chain(), new_chain()
    parent_ts = producer.head.header.timestamp_ms
    block = _build(producer, dev_genesis, 1, ts=parent_ts + 1).block
    assert _code(follower, _resign(dev_genesis, block, timestamp_ms=parent_ts)) == "timestamp_not_increasing"
    follower.commit(verify_and_prepare(follower, block))  # one millisecond after the parent is enough
    assert follower.head.header.timestamp_ms == parent_ts + 1


def test_a_consumed_seed_of_the_blocks_own_round_is_refused_even_if_genuine(
        dev_genesis: DevGenesis, new_chain: Callable[[], Chain]) -> None:
    # CIP-11 §9.2: a block consumes seeds of rounds before its own; its own round's seed exists only once the
    # block is certified, so carrying it (however it was obtained) is refused by the header check.
    producer, follower = new_chain(), new_chain()
    block = _build(producer, dev_genesis, 3).block
    own = ConsumedSeed(0, 3, sign_beacon(_secret(dev_genesis), Round(0, 3)))
    assert _code(follower, _resign(dev_genesis, block, consumed_seeds=(own,))) == "bad_consumed_seed"
    earlier = ConsumedSeed(0, 2, sign_beacon(_secret(dev_genesis), Round(0, 2)))
    # The round just before passes the header check (then execution refuses it: nothing consumes it).
    assert _code(follower, _resign(dev_genesis, block, consumed_seeds=(earlier,))) == "unconsumed_seed"
    assert follower.height == 0
