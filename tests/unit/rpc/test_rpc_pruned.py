"""``GET /tx/{hash}`` and ``/tx/{hash}/receipt`` once blocks are pruned (issue 34 §2, ``rpc/pruned_reads.py``): a
transaction committed below the earliest retained height answers ``410 pruned`` with that height, not 404; one in a
retained block answers as usual; a pending one keeps its 404 for the receipt; an archive node answers 404 for a hash
it never saw (it can tell); the OpenAPI contract lists 410 for those routes."""

from __future__ import annotations

import asyncio
from typing import Any

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.node.assemble import assemble
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.node.node import Node
from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.rpc.openapi import contract
from cowboy_node.state.memory import MemoryStore
from tests.helpers import ALICE_SK, transfer
from tests.unit.node_harness import read_only_client
from tests.unit.storage.test_node_storage import _prune_until_done


def _node(dev: DevGenesis, **kw: Any) -> Node:
    return assemble(Chain(MemoryStore(), dev.genesis), Mempool(MempoolConfig()), dev.validator_key, block_time_ms=1000,
                metrics=NodeMetrics(), **kw)


def _run(node: Node, blocks: int, tx_at: dict[int, bytes]) -> None:
    """Produce ``blocks`` blocks; before block ``h`` in ``tx_at``, submit that transaction."""
    async def go() -> None:
        for _ in range(blocks):
            raw = tx_at.get(node.chain.height + 1)
            if raw is not None:
                node.api.submit_transaction(raw)
            await node.produce_block()
    asyncio.run(go())


async def _get(c: Any, path: str) -> tuple[int, dict[str, Any]]:
    r = await c.get(path)
    return r.status, await r.json()


def test_a_transaction_below_the_earliest_retained_height_answers_410_with_that_height(
        dev_genesis: DevGenesis) -> None:
    old, kept, pending = (transfer(ALICE_SK, n, bytes([0x51 + n]) * 20, 1) for n in range(3))
    node = _node(dev_genesis, retain_blocks=100, prune_batch_blocks=64)
    try:
        _run(node, 130, {2: old.to_bytes(), 120: kept.to_bytes()})
        _prune_until_done(node)
        assert node.chain.earliest_height() == 31
        node.api.submit_transaction(pending.to_bytes())

        async def check() -> None:
            async with read_only_client(node) as c:
                for path in (f"/tx/0x{old.tx_hash().hex()}", f"/tx/0x{old.tx_hash().hex()}/receipt"):
                    status, body = await _get(c, path)
                    assert status == 410, path
                    assert body["code"] == "pruned" and body["earliest_retained_height"] == 31, path
                    assert "never existed" in body["message"]  # it says it cannot tell
                status, body = await _get(c, f"/tx/0x{kept.tx_hash().hex()}")
                assert status == 200 and body["status"] == "committed" and body["height"] == 120
                status, body = await _get(c, f"/tx/0x{kept.tx_hash().hex()}/receipt")
                assert status == 200 and body["height"] == 120
                status, body = await _get(c, f"/tx/0x{pending.tx_hash().hex()}")
                assert status == 200 and body["status"] == "pending"
                status, body = await _get(c, f"/tx/0x{pending.tx_hash().hex()}/receipt")
                assert status == 404 and body["code"] == "not_found"  # known, not committed yet
        asyncio.run(check())
    finally:
        node.close()


def test_an_archive_node_answers_404_for_an_unknown_transaction(dev_genesis: DevGenesis) -> None:
    node = _node(dev_genesis)
    try:
        _run(node, 3, {})
        unknown = "0x" + "ab" * 32

        async def check() -> None:
            async with read_only_client(node) as c:
                for path in (f"/tx/{unknown}", f"/tx/{unknown}/receipt"):
                    status, body = await _get(c, path)
                    assert status == 404 and body["code"] == "not_found", path
        asyncio.run(check())
    finally:
        node.close()


def test_the_contract_lists_410_pruned_for_blocks_transactions_and_receipts() -> None:
    paths = contract()["paths"]
    for path in ("/block/{height}", "/tx/{hash}", "/tx/{hash}/receipt"):
        resp = paths[path]["get"]["responses"]["410"]
        assert resp["content"]["application/json"]["schema"]["allOf"][1]["properties"]["code"]["enum"] == ["pruned"]
