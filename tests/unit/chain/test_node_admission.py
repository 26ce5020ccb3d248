"""Bad transactions submitted to the node get a 4xx with a stable code and change nothing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.node.assemble import assemble
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.node.node import Node
from cowboy_node.rpc.facade import RpcError
from cowboy_protocol.types.instructions import Transfer
from tests.helpers import ALICE, ALICE_SK, BOB, BOB_SK, make_tx, transfer


@pytest.fixture
def node(chain: Chain, dev_genesis: DevGenesis) -> Iterator[Node]:
    n = assemble(chain, Mempool(MempoolConfig(max_nonce_gap=8)), dev_genesis.validator_key, block_time_ms=1000)
    yield n
    n.close()


def _reject(node: Node, raw: bytes) -> RpcError:
    before = (node.chain.height, len(node.mempool), node.api.account(ALICE), node.chain.tree.root())
    with pytest.raises(RpcError) as e:
        node.api.submit_transaction(raw)
    assert (node.chain.height, len(node.mempool), node.api.account(ALICE), node.chain.tree.root()) == before
    assert 400 <= e.value.status < 500
    return e.value


def test_valid_transfer_is_pooled(node: Node) -> None:
    out = node.api.submit_transaction(transfer(ALICE_SK, 0, BOB, 1).to_bytes())
    assert out["status"] == "pending" and len(node.mempool) == 1
    assert node.api.account(ALICE)["next_pending_nonce"] == 1


@pytest.mark.parametrize("raw,code", [
    (b"", "malformed"),
    (b"\x00\x00\x00\x05abc", "malformed"),
    (b"\x00\x00\x00\x01\xff", "malformed"),
])
def test_malformed_bytes(node: Node, raw: bytes, code: str) -> None:
    assert _reject(node, raw).code == code


def test_oversized_body_is_rejected_before_decoding(node: Node) -> None:
    assert _reject(node, (200_000).to_bytes(4, "big") + b"\x00" * 200_000).code == "tx_too_large"


def test_wrong_chain_id(node: Node) -> None:
    assert _reject(node, transfer(ALICE_SK, 0, BOB, 1, chain_id="other").to_bytes()).code == "wrong_chain_id"  # type: ignore[arg-type]


def test_bad_signature(node: Node) -> None:
    tx = transfer(ALICE_SK, 0, BOB, 1)
    forged = replace(tx, signature=tx.signature[:10] + bytes([tx.signature[10] ^ 1]) + tx.signature[11:], _body=None)
    assert _reject(node, forged.to_bytes()).code == "bad_signature"


def test_nonce_too_low_and_too_far_ahead(node: Node) -> None:
    import asyncio

    node.api.submit_transaction(transfer(ALICE_SK, 0, BOB, 1).to_bytes())
    asyncio.run(node.produce_block())  # commits nonce 0
    assert _reject(node, transfer(ALICE_SK, 0, BOB, 2).to_bytes()).code == "nonce_too_low"
    assert _reject(node, transfer(ALICE_SK, 50, BOB, 2).to_bytes()).code == "nonce_gap_too_large"


def test_balance_below_max_fee(node: Node) -> None:
    assert _reject(node, transfer(BOB_SK, 0, ALICE, 0).to_bytes()).code == "insufficient_funds"


def test_limits_above_block_maximum(node: Node) -> None:
    raw = make_tx(ALICE_SK, 0, Transfer(to=BOB, amount=1), cycles_limit=40_000_001).to_bytes()
    assert _reject(node, raw).code == "cycles_limit_too_high"
    raw = make_tx(ALICE_SK, 0, Transfer(to=BOB, amount=1), cells_limit=8_000_001).to_bytes()
    assert _reject(node, raw).code == "cells_limit_too_high"


def test_fee_below_basefee(node: Node) -> None:
    raw = make_tx(ALICE_SK, 0, Transfer(to=BOB, amount=1), max_fee=10, tip=1).to_bytes()
    assert _reject(node, raw).code == "fee_below_basefee"


def test_duplicate_and_underpriced_replacement(node: Node) -> None:
    raw = transfer(ALICE_SK, 0, BOB, 1).to_bytes()
    node.api.submit_transaction(raw)
    assert _reject_keep_pool(node, raw).code == "already_known"
    assert _reject_keep_pool(node, transfer(ALICE_SK, 0, BOB, 2).to_bytes()).code == "replacement_underpriced"


def _reject_keep_pool(node: Node, raw: bytes) -> RpcError:
    pooled = len(node.mempool)
    with pytest.raises(RpcError) as e:
        node.api.submit_transaction(raw)
    assert len(node.mempool) == pooled and e.value.status == 400
    return e.value


def test_produced_block_includes_pooled_transactions(node: Node) -> None:
    import asyncio

    for n in range(3):
        node.api.submit_transaction(transfer(ALICE_SK, n, BOB, 10).to_bytes())
    asyncio.run(node.produce_block())
    assert node.chain.height == 1 and len(node.chain.head.transactions) == 3 and len(node.mempool) == 0
    assert node.api.account(BOB)["balance"] == "30"
    h = node.chain.head.header
    assert h.presence_input == b"\x01\x00" and h.consumed_seeds == ()
