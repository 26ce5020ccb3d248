"""The node's side of issue 34: pruning after commits, ``/status`` storage, ``410 pruned``, and the halt height."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.execution.validity_errors import InvalidBlock
from cowboy_node.node.assemble import assemble
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.node.node import Node
from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.state.memory import MemoryStore
from tests.unit.chain.test_chain import produce
from tests.unit.node_harness import read_only_client


def _node(dev: DevGenesis, **kw: Any) -> Node:
    halt = kw.pop("halt_height", None)
    return assemble(Chain(MemoryStore(), dev.genesis, halt_height=halt), Mempool(MempoolConfig()), dev.validator_key,
                block_time_ms=1000, metrics=NodeMetrics(), **kw)


def _produce(node: Node, blocks: int) -> None:
    async def run() -> None:
        for _ in range(blocks):
            await node.produce_block()
    asyncio.run(run())


def _prune_until_done(node: Node) -> None:
    """Run prune steps for the current head until one deletes nothing (each waits for the one in flight)."""
    while True:
        node.pruner.wait()
        fut = node.pruner.after_commit(node.chain.height)
        assert fut is not None
        if fut.result().deleted_keys == 0:
            return


def test_blocks_below_the_window_answer_410_pruned_and_status_shows_the_earliest(dev_genesis: DevGenesis) -> None:
    node = _node(dev_genesis, retain_blocks=100, prune_batch_blocks=16)
    try:
        _produce(node, 130)
        _prune_until_done(node)
        assert node.chain.earliest_height() == 31

        async def check() -> None:
            async with read_only_client(node) as c:
                r = await c.get("/block/30")
                assert r.status == 410
                body = await r.json()
                assert body["code"] == "pruned" and body["earliest_retained_height"] == 31 and body["message"]
                assert (await c.get("/block/31")).status == 200
                assert (await c.get("/block/131")).status == 404  # above the head: not found, not pruned
                status = await (await c.get("/status")).json()
                assert status["storage"] == {"earliest_retained_height": 31, "retain_blocks": 100,
                                             "halt_height": None}
                assert status["version"]["software"].startswith("cowboy-node/")
        asyncio.run(check())
    finally:
        node.close()


def test_an_archive_node_prunes_nothing(dev_genesis: DevGenesis) -> None:
    node = _node(dev_genesis)
    try:
        _produce(node, 5)
        assert node.pruner.after_commit(node.chain.height) is None
        assert node.chain.earliest_height() == 0 and node.api.block(0) is not None
    finally:
        node.close()


def test_the_node_stops_after_committing_the_halt_height_and_builds_nothing_above(dev_genesis: DevGenesis) -> None:
    node = _node(dev_genesis, halt_height=3)
    try:
        _produce(node, 2)
        assert not node.halted and not node.consensus.stopping
        _produce(node, 1)
        assert node.chain.height == 3 and node.halted and node.consensus.stopping
        with pytest.raises(RuntimeError):  # the build of block 4 is refused (halt_height)
            _produce(node, 1)
        assert node.chain.height == 3
    finally:
        node.close()


def test_the_chain_refuses_to_commit_or_verify_above_the_halt_height(dev_genesis: DevGenesis) -> None:
    from cowboy_node.consensus.header import verify_and_prepare

    free = Chain(MemoryStore(), dev_genesis.genesis)
    for _ in range(2):
        free.commit(produce(free, dev_genesis, []))
    halted = Chain(MemoryStore(), dev_genesis.genesis, halt_height=1)
    halted.commit(verify_and_prepare(halted, free.blocks.block(1)))  # type: ignore[arg-type]
    with pytest.raises(InvalidBlock) as e:
        halted.commit(verify_and_prepare(halted, free.blocks.block(2)))  # type: ignore[arg-type]
    assert e.value.code == "halt_height" and halted.height == 1
