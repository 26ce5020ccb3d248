"""A follower's decoding of the leader's block reuses its pool's decoded transactions, and is otherwise
``Block.decode``: an equal block, the same error for bad bytes (``Block.decode(known=...)``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.consensus.forks import Forks
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.node.devgenesis import create_dev_genesis
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.block import Block, Round
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validation_errors import DecodeError

KEYS = [(i + 1).to_bytes(32, "big") for i in range(3)]
ADDRS = [private_key_to_address(k) for k in KEYS]


def _txs() -> list[Transaction]:
    return [Transaction(chain_id="bd", nonce=i // 3, sender=ADDRS[i % 3], instruction=Transfer(to=ADDRS[0], amount=i),
                        cycles_limit=50_000, cells_limit=2_000, max_fee_per_cycle=200_000,
                        max_priority_fee_per_cycle=1_000, max_fee_per_cell=200_000,
                        max_priority_fee_per_cell=1_000).signed(KEYS[i % 3]) for i in range(6)]


@pytest.fixture(scope="module")
def raw_block() -> tuple[bytes, list[Transaction]]:
    dev = create_dev_genesis(chain_id="bd", balances={a: 10**24 for a in ADDRS}, system_deployers=(),
                             fee_recipient=bytes(20), genesis_time_ms=1_700_000_000_000, entropy=bytes(range(96)))
    chain = Chain(MemoryStore(), dev.genesis)
    seed = dev.validator_key.ed25519_seed
    txs = _txs()
    c = Forks(chain, ConsensusRecords(chain.store)).build(
        chain.head.hash(), Round(0, 1), txs, timestamp_ms=chain.head.header.timestamp_ms + 1000,
        proposer=ed25519.public_key_from_seed(seed), sign=lambda d: ed25519.sign(seed, d), fee_recipient=bytes(20),
        presence=lambda w: b"\x01\x00")
    assert len(c.prepared.block.transactions) == len(txs)
    return c.prepared.block.encode(), txs


def _pool_of(txs: list[Transaction]) -> Mempool:
    """A pool holding ``txs`` as admission pools them: decoded from their bytes (so each keeps its body)."""
    pool = Mempool(MempoolConfig())
    for t in txs:
        pool.add(Transaction.from_bytes(t.to_bytes()), 0)
    return pool


def _count_from_body(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    calls: list[bytes] = []
    real = Transaction.from_body.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(Transaction, "from_body", classmethod(lambda cls, b: calls.append(b) or real(cls, b)))
    return calls


@pytest.mark.parametrize("pooled", [6, 4, 0])
def test_equal_to_block_decode_and_pooled_transactions_are_not_decoded_again(
        raw_block: tuple[bytes, list[Transaction]], pooled: int, monkeypatch: pytest.MonkeyPatch) -> None:
    raw, txs = raw_block
    pool = _pool_of(txs[:pooled])
    expected = Block.decode(raw)
    calls = _count_from_body(monkeypatch)
    got = Block.decode(raw, known=pool.by_body)
    assert got == expected and got.hash() == expected.hash() and got.encode() == raw
    assert calls == [t.body() for t in txs[pooled:]]  # only the bodies the pool does not hold
    for i, t in enumerate(got.transactions):
        assert (t is pool.by_body(t.body())) is (i < pooled)


def test_a_known_transaction_with_other_bytes_is_not_used(raw_block: tuple[bytes, list[Transaction]]) -> None:
    raw, txs = raw_block
    wrong = replace(txs[1], _body=None)  # equal fields, but bound to another transaction's bytes below
    got = Block.decode(raw, known=lambda body: wrong if body == txs[0].body() else None)
    assert got == Block.decode(raw) and got.transactions[0] == txs[0] and got.transactions[0] is not wrong


def _mutations(raw: bytes, txs: list[Transaction]) -> list[bytes]:
    m = decode(raw)
    bad_tx = bytearray(txs[2].body())
    bad_tx[1] ^= 0xFF
    return [
        raw[:-1], raw + b"\x00", b"\xa0", encode([1, 2, 3]), b"\xff",
        encode({0: m[0], 1: [*m[1][:2], bytes(bad_tx), *m[1][3:]], 2: m[2]}),  # a damaged body among pooled ones
        encode({0: m[0], 1: [*m[1][:3], 7, *m[1][3:]], 2: m[2]}),  # a transaction that is not a byte string
        encode({0: m[0], 1: {0: m[1][0]}, 2: m[2]}),  # transactions not an array
        encode({0: m[0], 1: m[1], 2: m[2][:10]}),  # short signature
        encode({0: m[0], 1: m[1]}),  # a key missing
        encode({0: 5, 1: m[1], 2: m[2]}),  # header not a map
    ]


def test_bad_bytes_raise_what_block_decode_raises(raw_block: tuple[bytes, list[Transaction]]) -> None:
    raw, txs = raw_block
    pool = _pool_of(txs)
    for bad in _mutations(raw, txs):
        with pytest.raises(DecodeError) as want:
            Block.decode(bad)
        with pytest.raises(DecodeError) as got:
            Block.decode(bad, known=pool.by_body)
        assert (got.value.code, str(got.value), got.value.field) == (want.value.code, str(want.value),
                                                                      want.value.field)


def test_the_size_limit_applies_to_pooled_bodies_too(raw_block: tuple[bytes, list[Transaction]]) -> None:
    raw, txs = raw_block
    limit = len(txs[0].body()) - 1
    with pytest.raises(DecodeError) as want:
        Block.decode(raw, max_tx_bytes=limit)
    with pytest.raises(DecodeError) as got:
        Block.decode(raw, known=_pool_of(txs).by_body, max_tx_bytes=limit)
    assert str(got.value) == str(want.value)


def test_a_validator_decodes_a_received_body_with_its_pools_transactions() -> None:
    from tests.unit.node.test_consensus_preverify import LEADER, _leader_block, _service

    block = _leader_block()
    pool = _pool_of(list(block.transactions))
    svc, _ = _service(0, known_transaction=pool.by_body)
    svc.application.on_block(LEADER, block.encode())
    got = svc.bodies.blocks[block.hash()]
    assert got == block and got.transactions and all(t is pool.by_body(t.body()) for t in got.transactions)


def test_the_node_hands_its_pool_to_the_consensus_service() -> None:
    from cowboy_node.node.assemble import assemble
    from cowboy_node.node.devgenesis import DevGenesis

    dev: DevGenesis = create_dev_genesis(chain_id="bd", balances={}, system_deployers=(), fee_recipient=bytes(20),
                                         genesis_time_ms=1_700_000_000_000, entropy=bytes(range(96)))
    node = assemble(Chain(MemoryStore(), dev.genesis), Mempool(MempoolConfig()), dev.validator_key, block_time_ms=1000)
    try:
        assert node.consensus.known_transaction == node.mempool.by_body
    finally:
        node.close()
