"""A follower executing the leader's block skips the signature recovery of transactions it admitted itself, and
only of exactly those bytes (issue 20 item 5; ``chain/signature_marks.py``, ``execution/block.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import coincurve
import pytest
from coincurve._libsecp256k1 import ffi

from cowboy_node.chain.admission import admit
from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.consensus.forks import Forks
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.execution import transactions as tx_module
from cowboy_node.execution.validity_errors import InvalidBlock
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_protocol.crypto.secp256k1 import N, recover_address
from cowboy_protocol.types.transaction import Transaction
from tests.helpers import ALICE, ALICE_SK, BOB, BOB_SK, transfer
from tests.unit.consensus.forks_harness import build_on, leader_key, seed_for


@pytest.fixture
def recoveries(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every signature recovery ``check_signature`` makes (the transaction hash of each)."""
    seen: list[bytes] = []
    real = tx_module.recover_signer

    def counting(tx: Transaction) -> bytes:
        seen.append(tx.tx_hash())
        return real(tx)

    monkeypatch.setattr(tx_module, "recover_signer", counting)
    return seen


def _follower(new_chain: Callable[[], Chain], admitted: list[Transaction] | None) -> Forks:
    """A follower; with ``admitted``, one that admitted those transactions through the node's admission."""
    chain = new_chain()
    if admitted is None:
        return Forks(chain, ConsensusRecords(chain.store))
    pool = Mempool(MempoolConfig())
    for tx in admitted:
        admit(tx.to_bytes(), chain, pool)
    return Forks(chain, ConsensusRecords(chain.store), signature_checked=pool.signature_marks.checked)


def _producer(new_chain: Callable[[], Chain]) -> Forks:
    chain = new_chain()
    return Forks(chain, ConsensusRecords(chain.store))


def _other_signature(tx: Transaction) -> bytes:
    """A second valid low-s signature of ``tx``'s payload by ALICE (another RFC 6979 nonce: extra entropy)."""
    extra = ffi.new("unsigned char[32]", b"\x07" * 32)
    sig = bytes(coincurve.PrivateKey(ALICE_SK).sign_recoverable(tx.signing_hash(), hasher=None,
                                                                custom_nonce=(ffi.NULL, extra)))
    assert sig != tx.signature and recover_address(tx.signing_hash(), sig) == ALICE
    return sig


def _high_s_twin(sig: bytes) -> bytes:
    """The same point's other ``s`` (n − s) and recovery id: recovers to the same key but breaks the low-s rule."""
    s = int.from_bytes(sig[32:64], "big")
    return sig[:32] + (N - s).to_bytes(32, "big") + bytes([sig[64] ^ 1])


def _resigned(tx: Transaction, sig: bytes) -> Transaction:
    return replace(tx, signature=sig, _body=None)


def _summary(f: Forks, block_hash: bytes) -> tuple[Any, ...]:
    r = f.candidates[block_hash].prepared.result
    return (r.state_root, r.tx_root, r.receipts_root, r.receipt_bytes, r.state_ops, r.cycles_used, r.cells_used)


def test_a_follower_that_admitted_the_transactions_executes_the_block_without_recovering_them(
        dev_genesis: DevGenesis, new_chain: Callable[[], Chain], recoveries: list[bytes]) -> None:
    txs = [transfer(ALICE_SK, n, BOB, 10 + n) for n in range(4)]
    prod = _producer(new_chain)
    t0 = prod.chain.head.header.timestamp_ms
    block = build_on(prod, dev_genesis, prod.chain.head.hash(), 1, txs, t0 + 1000)
    marked, plain = _follower(new_chain, txs), _follower(new_chain, None)
    recoveries.clear()  # the marked follower's admission recovered each once

    marked.verify(block, leader_key=leader_key(dev_genesis), max_timestamp_ms=t0 + 1000)
    assert recoveries == []
    plain.verify(block, leader_key=leader_key(dev_genesis), max_timestamp_ms=t0 + 1000)
    assert recoveries == [t.tx_hash() for t in txs]
    assert _summary(marked, block.hash()) == _summary(plain, block.hash())
    for f in (marked, plain):
        f.commit(block, seed=seed_for(dev_genesis, 1), certificate=None, inspect=lambda p, e: p)
        assert f.chain.head.header.state_root == block.header.state_root


def test_a_transaction_admitted_by_another_node_only_is_still_checked(
        dev_genesis: DevGenesis, new_chain: Callable[[], Chain], recoveries: list[bytes]) -> None:
    txs = [transfer(ALICE_SK, n, BOB, 1) for n in range(3)]
    prod = _producer(new_chain)
    t0 = prod.chain.head.header.timestamp_ms
    block = build_on(prod, dev_genesis, prod.chain.head.hash(), 1, txs, t0 + 1000)
    f = _follower(new_chain, txs[:1])  # gossip brought only the first one here
    recoveries.clear()
    f.verify(block, leader_key=leader_key(dev_genesis), max_timestamp_ms=t0 + 1000)
    assert recoveries == [txs[1].tx_hash(), txs[2].tx_hash()]


def test_another_valid_signature_over_the_same_transaction_is_checked_in_full(
        dev_genesis: DevGenesis, new_chain: Callable[[], Chain], recoveries: list[bytes]) -> None:
    admitted = transfer(ALICE_SK, 0, BOB, 5)
    twin = _resigned(admitted, _other_signature(admitted))  # same sender, nonce and payload; other bytes
    prod = _producer(new_chain)
    t0 = prod.chain.head.header.timestamp_ms
    block = build_on(prod, dev_genesis, prod.chain.head.hash(), 1, [twin], t0 + 1000)
    f = _follower(new_chain, [admitted])
    recoveries.clear()
    f.verify(block, leader_key=leader_key(dev_genesis), max_timestamp_ms=t0 + 1000)
    assert recoveries == [twin.tx_hash()]
    assert f.candidates[block.hash()].prepared.result.state_root == block.header.state_root


@pytest.mark.parametrize("forge", [
    pytest.param(lambda tx: _high_s_twin(tx.signature), id="high_s_twin"),
    pytest.param(lambda tx: tx.signature[:64] + bytes([tx.signature[64] ^ 1]), id="flipped_v"),
    pytest.param(lambda tx: tx.signature[:64] + b"\x02", id="v_out_of_range"),
    pytest.param(lambda tx: bytes(32) + tx.signature[32:], id="zero_r"),
])
def test_a_block_carrying_the_admitted_transaction_under_a_bad_signature_is_refused(
        dev_genesis: DevGenesis, new_chain: Callable[[], Chain], recoveries: list[bytes],
        forge: Callable[[Transaction], bytes]) -> None:
    admitted = transfer(ALICE_SK, 0, BOB, 5)
    forged = _resigned(admitted, forge(admitted))
    _refused(dev_genesis, new_chain, recoveries, admitted, forged)


def test_a_block_carrying_the_admitted_transaction_signed_by_another_key_is_refused(
        dev_genesis: DevGenesis, new_chain: Callable[[], Chain], recoveries: list[bytes]) -> None:
    admitted = transfer(ALICE_SK, 0, BOB, 5)
    by_bob = replace(admitted, sender=BOB, signature=b"", _body=None).signed(BOB_SK)
    forged = replace(by_bob, sender=ALICE, _body=None)  # claims ALICE, signed by BOB
    _refused(dev_genesis, new_chain, recoveries, admitted, forged)


def _refused(dev_genesis: DevGenesis, new_chain: Callable[[], Chain], recoveries: list[bytes],
             admitted: Transaction, forged: Transaction) -> None:
    assert forged.sender == admitted.sender and forged.nonce == admitted.nonce
    assert forged.tx_hash() != admitted.tx_hash()
    # The producer trusts its own pool's checks (signatures_checked=True): a leader that lies builds this block.
    prod = _producer(new_chain)
    t0 = prod.chain.head.header.timestamp_ms
    block = build_on(prod, dev_genesis, prod.chain.head.hash(), 1, [forged], t0 + 1000)
    f = _follower(new_chain, [admitted])
    recoveries.clear()
    with pytest.raises(InvalidBlock) as e:
        f.verify(block, leader_key=leader_key(dev_genesis), max_timestamp_ms=t0 + 1000)
    assert e.value.code == "invalid_transaction" and "bad_signature" in str(e.value)
    assert recoveries == [forged.tx_hash()]
    assert block.hash() not in f.candidates and f.chain.height == 0


def test_the_node_hands_its_mempool_marks_to_block_verification(dev_genesis: DevGenesis, chain: Chain) -> None:
    from cowboy_node.node.assemble import assemble

    node = assemble(chain, Mempool(MempoolConfig()), dev_genesis.validator_key, block_time_ms=1000)
    try:
        tx = transfer(ALICE_SK, 0, BOB, 1)
        check = node.consensus.forks.signature_checked
        assert check is not None and not check(tx.tx_hash())
        node.api.submit_transaction(tx.to_bytes())
        assert check(tx.tx_hash())
    finally:
        node.close()

