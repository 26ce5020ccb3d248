"""Header rules that mutation testing (``make mutate-header``, docs/testing.md) showed unguarded
(``cowboy_node/consensus/header.py``): a timestamp equal to the parent's is not "after" it; a consumed seed of the
block's own round is not of an earlier round, even when it is that round's genuine group signature; a proposer other
than the elected leader is refused whichever way the keys sort; a timestamp below the clock bound (not only at it)
is accepted; "sorted without duplicates" fails in either direction; another chain id or height is refused
whichever way it sorts (and the error names the expected height); each proposer gets its own fee recipient."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.consensus.beacon import sign_beacon
from cowboy_node.consensus.header import fee_recipient_of, verify_and_prepare
from cowboy_node.execution.validity_errors import InvalidBlock
from cowboy_node.node.devgenesis import DevGenesis, create_genesis
from cowboy_node.types.block import ConsumedSeed, Round
from cowboy_protocol.crypto import ed25519
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


def test_a_proposer_other_than_the_leader_is_refused_whichever_way_their_keys_sort(
        dev_genesis: DevGenesis, new_chain: Callable[[], Chain]) -> None:
    producer, follower = new_chain(), new_chain()
    block = _build(producer, dev_genesis, 1).block
    below, above = bytes(32), b"\xff" * 32  # the leader's key as the caller knows it: compared, not verified here
    assert below < block.header.proposer < above
    for leader in (below, above, ed25519.public_key_from_seed(b"\x42" * 32)):
        assert _code(follower, block, leader_key=leader) == "not_leader"
    assert follower.height == 0


def test_a_timestamp_well_within_the_clock_bound_is_accepted(dev_genesis: DevGenesis,
                                                             new_chain: Callable[[], Chain]) -> None:
    producer, follower = new_chain(), new_chain()
    block = _build(producer, dev_genesis, 1).block
    follower.commit(verify_and_prepare(follower, block, max_timestamp_ms=block.header.timestamp_ms + 60_000))
    assert follower.height == 1


def test_a_duplicate_consumed_seed_before_a_later_one_is_not_sorted(dev_genesis: DevGenesis,
                                                                    new_chain: Callable[[], Chain]) -> None:
    # [A, A, B] sorts *below* its sorted, duplicate-free form [A, B]: "not sorted without duplicates" is "differs
    # from that form", in either direction.
    producer, follower = new_chain(), new_chain()
    block = _build(producer, dev_genesis, 3).block
    a, b = (ConsumedSeed(0, v, sign_beacon(_secret(dev_genesis), Round(0, v))) for v in (1, 2))
    assert _code(follower, _resign(dev_genesis, block, consumed_seeds=(a, a, b))) == "consumed_seeds_not_sorted"
    assert _code(follower, _resign(dev_genesis, block, consumed_seeds=(b, a))) == "consumed_seeds_not_sorted"
    assert follower.height == 0


@pytest.mark.parametrize("chain_id", ["a", "zzzz"])
def test_another_chain_id_is_refused_whichever_way_it_sorts(dev_genesis: DevGenesis, new_chain: Callable[[], Chain],
                                                            chain_id: str) -> None:
    assert chain_id < dev_genesis.genesis.chain_id or chain_id > dev_genesis.genesis.chain_id
    producer, follower = new_chain(), new_chain()
    block = _build(producer, dev_genesis, 1).block
    assert _code(follower, _resign(dev_genesis, block, chain_id=chain_id)) == "wrong_chain_id"


def test_a_height_below_or_above_the_next_is_refused_and_named(dev_genesis: DevGenesis,
                                                                new_chain: Callable[[], Chain]) -> None:
    producer, follower = new_chain(), new_chain()
    block = _build(producer, dev_genesis, 1).block
    for height in (0, 2):
        with pytest.raises(InvalidBlock) as e:
            verify_and_prepare(follower, _resign(dev_genesis, block, height=height))
        assert (e.value.code, e.value.message) == ("wrong_height", f"expected height 1, got {height}")


def test_each_proposers_own_fee_recipient() -> None:
    # Four validators with distinct fee recipients: the proposer's own is found, whatever its place.
    net = create_genesis(chain_id="fees-of", n_validators=4, fee_recipients=[bytes([0x70 + i]) * 20 for i in range(4)],
                         balances={}, system_deployers=(), genesis_time_ms=1_700_000_000_000,
                         entropy=bytes(range(200)))
    for i, v in enumerate(net.genesis.validators):
        key = bytes(bytearray(v.ed25519_public_key))  # an equal key that is not the same object
        assert fee_recipient_of(net.genesis, key) == bytes([0x70 + i]) * 20


def test_a_parent_hash_other_than_the_parents_is_refused_whichever_way_it_sorts(
        dev_genesis: DevGenesis, new_chain: Callable[[], Chain]) -> None:
    # The block names its parent by digest: any other 32 bytes, above or below the real one, are "wrong_parent"
    # (the rule is equality, not an order). Each block below differs from a valid one only in parent_hash.
    producer, follower = new_chain(), new_chain()
    block = _build(producer, dev_genesis, 1).block
    real = block.header.parent_hash
    below, above = bytes(32), b"\xff" * 32
    assert below < real < above
    for parent_hash in (below, above):
        assert _code(follower, _resign(dev_genesis, block, parent_hash=parent_hash)) == "wrong_parent"
    assert follower.height == 0
    follower.commit(verify_and_prepare(follower, block))  # the real parent hash is accepted
    assert follower.height == 1


def test_a_genuine_consumed_seed_of_a_round_after_the_blocks_own_is_refused(
        dev_genesis: DevGenesis, new_chain: Callable[[], Chain]) -> None:
    # CIP-11 §9.2 (commit-then-reveal: a round's randomness must not affect execution in that same round, still
    # less an earlier one): a block consumes only seeds of rounds before its own. A seed of a later round, signed
    # with the group key (so its signature verifies), is refused by the round clause alone — in the view and in
    # the epoch component of the round order.
    producer, follower = new_chain(), new_chain()
    block = _build(producer, dev_genesis, 3).block
    for later in (Round(0, 4), Round(0, 2**20), Round(1, 0)):
        seed = ConsumedSeed(later.epoch, later.view, sign_beacon(_secret(dev_genesis), later))
        assert _code(follower, _resign(dev_genesis, block, consumed_seeds=(seed,))) == "bad_consumed_seed"
    assert follower.height == 0
