"""Sync against a pruned peer (issue 34 §2): the server answers a request below its earliest retained height with a
typed SyncPruned (no strike), and the requester asks another peer without penalizing the pruned one."""

from __future__ import annotations

import asyncio
from typing import Any

from cowboy_node.chain.pruning import prune_step
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.consensus.sync_messages import CH_SYNC, SyncPruned, SyncRequest, SyncResponse, decode_sync
from cowboy_node.node.sync_server import ServeLimits, SyncServer
from cowboy_node.observability.metrics import NodeMetrics
from tests.unit.node.sync_chain import build_chain
from tests.unit.node.test_sync_client import Rig
from tests.unit.node.test_sync_server import FakeNet, _refused

PRUNED, _ = build_chain(12)
prune_step(PRUNED.store, head=12, retain_blocks=4)  # earliest retained: 9


def _serve(req: SyncRequest) -> tuple[FakeNet, NodeMetrics]:
    async def run() -> tuple[FakeNet, NodeMetrics]:
        net, metrics, tasks = FakeNet(), NodeMetrics(), []
        server = SyncServer(PRUNED.blocks, ConsensusRecords(PRUNED.store), head=lambda: PRUNED.height,
                            net=lambda: net, metrics=metrics, clock=lambda: 0.0, limits=ServeLimits(),
                            spawn=lambda c: tasks.append(asyncio.get_running_loop().create_task(c)),  # type: ignore
                            earliest=PRUNED.earliest_height)
        for _ in range(20):  # well past the strike count: a pruned answer is never the asker's fault
            server.on_sync_request(3, req)
        for t in tasks:
            await t
        server.close()
        return net, metrics
    return asyncio.run(run())


def test_a_request_below_the_earliest_retained_height_is_answered_sync_pruned_without_strikes() -> None:
    assert PRUNED.earliest_height() == 9
    net, metrics = _serve(SyncRequest(2, 8))
    answers = [decode_sync(p) for _, ch, p in net.sent if ch == CH_SYNC]
    assert answers and all(a == SyncPruned(9) for a in answers)
    assert _refused(metrics, "sync", "pruned") == len(answers) and net.penalized == []


def test_a_request_from_the_earliest_retained_height_is_served() -> None:
    net, _ = _serve(SyncRequest(9, 4))
    answers = [decode_sync(p) for _, ch, p in net.sent if ch == CH_SYNC]
    assert answers and isinstance(answers[0], SyncResponse) and len(answers[0].blocks) >= 1


def test_the_requester_asks_another_peer_and_penalizes_no_one() -> None:
    async def run() -> None:
        rig = Rig()
        rig.client.on_status(1, 12)
        first = rig.requests()
        assert first and {to for to, _ in first} == {1}
        rig.client.on_pruned(1, 9)  # peer 1 pruned below 9; we are at 0
        rig.client.on_status(2, 12)
        again: list[tuple[int, Any]] = rig.requests()
        assert again and {to for to, _ in again} == {2}
        assert min(r.from_height for _, r in again) == 1
        rig.client.on_status(1, 12)  # its next status does not make it eligible for heights it pruned
        assert all(to != 1 for to, r in rig.requests() if r.from_height < 9)
        assert rig.net.penalized == [] and rig.refused("pruned") == 1
    asyncio.run(run())
