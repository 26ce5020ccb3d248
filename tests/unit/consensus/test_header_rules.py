"""Threshold-Simplex header rules (cowboy_node/consensus/header.py): the round is after the parent's (gaps
allowed) and in epoch 0, the beacon is the group signature over the PARENT's round, the proposer is the
elected leader when the caller knows it, and the timestamp is not beyond the caller's clock bound."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from cowboy_node.chain.chain import Chain, PreparedBlock
from cowboy_node.consensus.beacon import sign_beacon
from cowboy_node.consensus.header import verify_and_prepare
from cowboy_node.crypto import bls
from cowboy_node.execution.validity_errors import InvalidBlock
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.types.block import Block, ConsumedSeed, Round
from cowboy_protocol.crypto import ed25519
from tests.helpers import ALICE_SK, BOB, FEE_RECIPIENT, transfer


def _secret(dev: DevGenesis) -> int:
    return bls.secret_key_from_bytes(dev.validator_key.bls_secret)


def _pk(dev: DevGenesis) -> bytes:
    return ed25519.public_key_from_seed(dev.validator_key.ed25519_seed)


def _build(chain: Chain, dev: DevGenesis, view: int, *, beacon_round: Round | None = None,
           ts: int | None = None, nonce: int = 0) -> PreparedBlock:
    """The next block on ``chain``'s head, proposed in view ``view`` (beacon over ``beacon_round``, by
    default the head's round, as the rule says)."""
    head = chain.head.header
    rnd = Round(0, view)
    env = chain.env_at(height=head.height + 1, timestamp_ms=ts or head.timestamp_ms + 1000,
                       fee_recipient=FEE_RECIPIENT,
                       beacon=sign_beacon(_secret(dev), beacon_round if beacon_round is not None else head.round),
                       presence_input=b"\x01\x00", round_=rnd, consumed_seeds=())
    key = dev.validator_key
    return chain.build([transfer(ALICE_SK, nonce, BOB, 1)], env=env, round_=rnd, proposer=_pk(dev),
                       sign=lambda d: ed25519.sign(key.ed25519_seed, d), signatures_checked=False)


def _resign(dev: DevGenesis, block: Block, **fields: object) -> Block:
    header = replace(block.header, **fields)  # type: ignore[arg-type]
    return Block(header, block.transactions, ed25519.sign(dev.validator_key.ed25519_seed, header.digest()))


def _code(chain: Chain, block: Block, **kw: object) -> str:
    with pytest.raises(InvalidBlock) as e:
        verify_and_prepare(chain, block, **kw)  # type: ignore[arg-type]
    return e.value.code


def test_genesis_beacon_is_the_group_signature_over_round_zero(dev_genesis: DevGenesis) -> None:
    g = dev_genesis.genesis
    assert g.genesis_beacon == sign_beacon(_secret(dev_genesis), Round(0, 0))


def test_block_from_the_elected_leader_is_accepted_and_another_proposer_is_not_leader(
        dev_genesis: DevGenesis, new_chain: Callable[[], Chain]) -> None:
    producer, follower = new_chain(), new_chain()
    block = _build(producer, dev_genesis, 1).block
    other = ed25519.public_key_from_seed(b"\x42" * 32)
    assert _code(follower, block, leader_key=other) == "not_leader"
    follower.commit(verify_and_prepare(follower, block, leader_key=_pk(dev_genesis)))
    assert follower.head.hash() == block.hash()


def test_beacon_over_the_blocks_own_round_is_refused(dev_genesis: DevGenesis, new_chain: Callable[[], Chain]) -> None:
    producer, follower = new_chain(), new_chain()
    own_round = _build(producer, dev_genesis, 1, beacon_round=Round(0, 1)).block
    assert _code(follower, own_round) == "bad_beacon"
    # block 2 (parent round (0, 1)): the seed of its own round (0, 2) is refused, the parent's accepted
    producer.commit(_build(producer, dev_genesis, 1))
    follower.commit(verify_and_prepare(follower, producer.head))
    own2 = _build(producer, dev_genesis, 2, beacon_round=Round(0, 2), nonce=1).block
    assert _code(follower, own2) == "bad_beacon"
    good2 = _build(producer, dev_genesis, 2, nonce=1).block
    assert good2.header.beacon == sign_beacon(_secret(dev_genesis), Round(0, 1))
    follower.commit(verify_and_prepare(follower, good2))
    assert follower.head.hash() == good2.hash()


def test_round_may_skip_views_after_the_parent(dev_genesis: DevGenesis, new_chain: Callable[[], Chain]) -> None:
    producer, follower = new_chain(), new_chain()
    b1 = _build(producer, dev_genesis, 2)  # view 1 nullified
    producer.commit(b1)
    b2 = _build(producer, dev_genesis, 5, nonce=1)  # views 3, 4 nullified; beacon over the parent's (0, 2)
    assert b2.block.header.beacon == sign_beacon(_secret(dev_genesis), Round(0, 2))
    producer.commit(b2)
    for b in (b1.block, b2.block):
        follower.commit(verify_and_prepare(follower, b, leader_key=_pk(dev_genesis)))
    assert follower.head.hash() == producer.head.hash()
    assert follower.head.header.round == Round(0, 5)
    assert follower.tree.root() == producer.tree.root()


def test_round_equal_to_the_parents_or_in_another_epoch_is_refused(
        dev_genesis: DevGenesis, new_chain: Callable[[], Chain]) -> None:
    producer, follower = new_chain(), new_chain()
    b1 = _build(producer, dev_genesis, 3)
    producer.commit(b1)
    follower.commit(verify_and_prepare(follower, b1.block))
    b2 = _build(producer, dev_genesis, 4, nonce=1).block
    assert _code(follower, _resign(dev_genesis, b2, round=Round(0, 3))) == "wrong_round"  # parent's round
    assert _code(follower, _resign(dev_genesis, b2, round=Round(0, 2))) == "wrong_round"  # before it
    assert _code(follower, _resign(dev_genesis, b2, round=Round(1, 4))) == "wrong_round"  # epoch 1
    assert follower.height == 1


def test_timestamp_beyond_the_bound_is_in_the_future(dev_genesis: DevGenesis, new_chain: Callable[[], Chain]) -> None:
    producer, follower = new_chain(), new_chain()
    block = _build(producer, dev_genesis, 1).block
    ts = block.header.timestamp_ms
    assert _code(follower, block, max_timestamp_ms=ts - 1) == "timestamp_in_future"
    follower.commit(verify_and_prepare(follower, block, max_timestamp_ms=ts))  # the bound is inclusive
    assert follower.height == 1


def test_consumed_seed_whose_only_defect_is_its_signature_is_refused(dev_genesis: DevGenesis,
                                                                      new_chain: Callable[[], Chain]) -> None:
    """CIP-11 §9.2 "every entry MUST verify": a ConsumedSeedsV1 entry for an earlier round (round order holds,
    sorted, one entry) carrying a genuine group signature over *another* round is refused as
    ``bad_consumed_seed``; the same entry with its round's own seed passes the header check (it is then refused
    by execution only because no pending selection consumes it)."""
    producer, follower = new_chain(), new_chain()
    block = _build(producer, dev_genesis, 3).block
    wrong = sign_beacon(_secret(dev_genesis), Round(0, 2))  # a valid seed, but of round (0, 2)
    assert _code(follower, _resign(dev_genesis, block, consumed_seeds=(ConsumedSeed(0, 1, wrong),))) \
        == "bad_consumed_seed"
    right = sign_beacon(_secret(dev_genesis), Round(0, 1))
    assert _code(follower, _resign(dev_genesis, block, consumed_seeds=(ConsumedSeed(0, 1, right),))) \
        == "unconsumed_seed"
    assert follower.height == 0
