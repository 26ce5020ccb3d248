"""Chain: genesis, building, verifying, atomic commits, restart checks, header rules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from cowboy_node.chain.blockstore import KEY_HEAD
from cowboy_node.chain.chain import Chain, ChainError, PreparedBlock
from cowboy_node.consensus.beacon import sign_beacon
from cowboy_node.consensus.header import verify_and_prepare
from cowboy_node.crypto import bls
from cowboy_node.execution.system_state import get_account
from cowboy_node.execution.validity_errors import InvalidBlock
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.block import Block, ConsumedSeed, Round
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.types.transaction import Transaction
from tests.helpers import ALICE_SK, BOB, FEE_RECIPIENT, make_dev_genesis, transfer


def produce(chain: Chain, dev: DevGenesis, txs: list[Transaction], *, presence: bytes | None = b"\x01\x00",
            ts: int | None = None) -> PreparedBlock:
    key = dev.validator_key
    secret = bls.secret_key_from_bytes(key.bls_secret)
    rnd = Round(0, chain.height + 1)
    env = chain.env_for(timestamp_ms=ts or chain.head.header.timestamp_ms + 1000, fee_recipient=FEE_RECIPIENT,
                        beacon=sign_beacon(secret, chain.head.header.round), presence_input=presence)
    return chain.build(txs, env=env, round_=rnd, proposer=ed25519.public_key_from_seed(key.ed25519_seed),
                       sign=lambda d: ed25519.sign(key.ed25519_seed, d), signatures_checked=False)


def test_genesis_block_is_derived_from_genesis_json(dev_genesis: DevGenesis, new_chain: Callable[[], Chain]) -> None:
    a, b = new_chain(), new_chain()
    assert a.height == 0 and a.head.hash() == b.head.hash()
    assert a.head.header.beacon == dev_genesis.genesis.genesis_beacon
    other = make_dev_genesis(balances={BOB: 1})
    assert Chain(MemoryStore(), other.genesis).head.header.state_root != a.head.header.state_root


def test_produced_blocks_verify_and_replay_to_identical_roots(dev_genesis: DevGenesis,
                                                              new_chain: Callable[[], Chain]) -> None:
    producer, follower = new_chain(), new_chain()
    for n in range(3):
        txs = [transfer(ALICE_SK, 2 * n + i, BOB, 10 + i) for i in range(2)]
        p = produce(producer, dev_genesis, txs)
        assert [r.status for r in p.result.receipts] == [0, 0]
        producer.commit(p)
        f = verify_and_prepare(follower, p.block)
        follower.commit(f)
        assert follower.head.header.state_root == producer.head.header.state_root
    assert get_account(follower.world(), BOB).balance == 3 * (10 + 11)


def test_block_digest_covers_every_header_field(dev_genesis: DevGenesis, chain: Chain) -> None:
    h = produce(chain, dev_genesis, []).block.header
    changes = {
        "chain_id": "x", "height": h.height + 1, "parent_hash": b"\x01" * 32, "round": Round(1, 1),
        "timestamp_ms": h.timestamp_ms + 1, "proposer": b"\x02" * 32, "tx_root": b"\x03" * 32,
        "state_root": b"\x04" * 32, "receipts_root": b"\x05" * 32, "beacon": b"\x06" * 48,
        "presence_input": None, "consumed_seeds": (ConsumedSeed(0, 1, b"\x07" * 48),),
        "cycles_used": 1, "cells_used": 1, "cycle_basefee": 1, "cell_basefee": 1,
    }
    assert set(changes) == set(h.__dataclass_fields__)
    for name, value in changes.items():
        assert replace(h, **{name: value}).digest() != h.digest(), name


def _resign(dev: DevGenesis, block: Block, **fields: object) -> Block:
    header = replace(block.header, **fields)  # type: ignore[arg-type]
    return Block(header, block.transactions, ed25519.sign(dev.validator_key.ed25519_seed, header.digest()))


@pytest.mark.parametrize("fields,code", [
    ({"chain_id": "other"}, "wrong_chain_id"),
    ({"height": 5}, "wrong_height"),
    ({"parent_hash": b"\x01" * 32}, "wrong_parent"),
    ({"timestamp_ms": 0}, "timestamp_not_increasing"),
    ({"round": Round(0, 0)}, "wrong_round"),  # not after the parent's round
    ({"round": Round(1, 1)}, "wrong_round"),  # one static epoch
    ({"beacon": b"\x00" * 48}, "bad_beacon"),
    ({"consumed_seeds": (ConsumedSeed(0, 1, b"\x07" * 48),)}, "bad_consumed_seed"),
    # A genuine seed (the genesis beacon is the seed of Round(0, 0)) that no pending selection consumes.
    ({"consumed_seeds": (ConsumedSeed(0, 0, make_dev_genesis().genesis.genesis_beacon),)}, "unconsumed_seed"),
    ({"consumed_seeds": (ConsumedSeed(0, 0, make_dev_genesis().genesis.genesis_beacon),) * 2},
     "consumed_seeds_not_sorted"),
    ({"presence_input": None}, "missing_presence_input"),
    ({"presence_input": b"\x01\x01\x00\x00\x00\x00\x00"}, "invalid_presence_input"),
    ({"state_root": b"\x09" * 32}, "state_root_mismatch"),
    ({"cycle_basefee": 1}, "cycle_basefee_mismatch"),
])
def test_follower_rejects_blocks_breaking_a_rule(dev_genesis: DevGenesis, new_chain: Callable[[], Chain],
                                                 fields: dict[str, object], code: str) -> None:
    producer, follower = new_chain(), new_chain()
    block = produce(producer, dev_genesis, [transfer(ALICE_SK, 0, BOB, 1)]).block
    with pytest.raises(InvalidBlock) as e:
        verify_and_prepare(follower, _resign(dev_genesis, block, **fields))
    assert e.value.code == code
    assert follower.height == 0


def test_block_with_bad_signature_or_foreign_proposer_is_rejected(dev_genesis: DevGenesis,
                                                                  new_chain: Callable[[], Chain]) -> None:
    producer, follower = new_chain(), new_chain()
    block = produce(producer, dev_genesis, []).block
    with pytest.raises(InvalidBlock) as e:
        verify_and_prepare(follower, Block(block.header, (), b"\x00" * 64))
    assert e.value.code == "bad_block_signature"
    stranger = b"\x11" * 32
    forged = replace(block.header, proposer=ed25519.public_key_from_seed(stranger))
    with pytest.raises(InvalidBlock) as e:
        verify_and_prepare(follower, Block(forged, (), ed25519.sign(stranger, forged.digest())))
    assert e.value.code == "unknown_proposer"


def test_block_with_invalid_transaction_is_rejected(dev_genesis: DevGenesis, new_chain: Callable[[], Chain]) -> None:
    producer, follower = new_chain(), new_chain()
    good = produce(producer, dev_genesis, [transfer(ALICE_SK, 0, BOB, 1)]).block
    bad_tx = transfer(ALICE_SK, 5, BOB, 1)  # nonce gap
    block = _resign(dev_genesis, Block(good.header, (bad_tx,), b""))
    with pytest.raises(InvalidBlock) as e:
        verify_and_prepare(follower, block)
    assert e.value.code == "invalid_transaction"


def test_presence_input_optional_while_present_first_is_off() -> None:
    from cowboy_protocol.types.params import Cip11Flags

    dev = make_dev_genesis(flags=Cip11Flags.for_phase(0))
    producer, follower = Chain(MemoryStore(), dev.genesis), Chain(MemoryStore(), dev.genesis)
    block = produce(producer, dev, [], presence=None).block
    follower.commit(verify_and_prepare(follower, block))
    assert follower.height == 1


def test_builder_skips_invalid_candidates_and_reports_them(dev_genesis: DevGenesis, chain: Chain) -> None:
    p = produce(chain, dev_genesis, [transfer(ALICE_SK, 1, BOB, 1), transfer(ALICE_SK, 0, BOB, 1)])
    assert [t.nonce for t in p.block.transactions] == [0]
    assert [e.code for _, e in p.result.rejected] == ["nonce_too_high"]


class FailingStore(MemoryStore):
    """Raises in the middle of consuming a write batch."""

    fail = False

    def write_batch(self, ops, *, sync: bool = True) -> None:  # type: ignore[no-untyped-def,override]
        if self.fail:
            def boom():  # type: ignore[no-untyped-def]
                for i, op in enumerate(ops):
                    if i == 3:
                        raise OSError("disk full")
                    yield op
            return super().write_batch(boom(), sync=sync)
        return super().write_batch(ops, sync=sync)


def test_failed_commit_writes_nothing_and_keeps_the_head(dev_genesis: DevGenesis) -> None:
    store = FailingStore()
    chain = Chain(store, dev_genesis.genesis)
    before = dict(store.iterate())
    p = produce(chain, dev_genesis, [transfer(ALICE_SK, 0, BOB, 1)])
    store.fail = True
    with pytest.raises(OSError):
        chain.commit(p)
    assert dict(store.iterate()) == before
    assert chain.height == 0
    reopened = Chain(store, dev_genesis.genesis)
    assert reopened.height == 0


def test_restart_resumes_from_the_committed_head(dev_genesis: DevGenesis) -> None:
    store = MemoryStore()
    chain = Chain(store, dev_genesis.genesis)
    for n in range(2):
        chain.commit(produce(chain, dev_genesis, [transfer(ALICE_SK, n, BOB, 1)]))
    again = Chain(store, dev_genesis.genesis)
    assert again.height == 2 and again.head.hash() == chain.head.hash()
    assert again.tree.root() == chain.head.header.state_root


def test_data_directory_of_another_chain_is_refused(dev_genesis: DevGenesis) -> None:
    store = MemoryStore()
    Chain(store, dev_genesis.genesis)
    other = make_dev_genesis(balances={BOB: 5})
    with pytest.raises(ChainError, match="belongs to chain"):
        Chain(store, other.genesis)


def test_head_without_its_state_is_refused(dev_genesis: DevGenesis) -> None:
    store = MemoryStore()
    chain = Chain(store, dev_genesis.genesis)
    p = produce(chain, dev_genesis, [transfer(ALICE_SK, 0, BOB, 1)])
    # Simulate a torn write: the block and head landed, the state did not.
    from cowboy_node.chain.blockstore import block_ops
    store.write_batch(block_ops(p.block, p.result.receipts))
    with pytest.raises(ChainError, match="state root"):
        Chain(store, dev_genesis.genesis)
    assert store.get(KEY_HEAD) is not None
