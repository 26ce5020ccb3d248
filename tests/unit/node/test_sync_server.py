"""Serving sync (``node/sync_server.py``, issue 30 §2/§3): answers sized in bytes from stored bytes, read off the
event loop, within per-peer budgets; refusals typed and counted; a repeated offender penalized; Fetch budgeted."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.consensus.simplex.types import Fetch, encode_message
from cowboy_node.consensus.sync_messages import (
    CH_CONSENSUS,
    CH_SYNC,
    BlockRequest,
    PackedPage,
    SyncPage,
    SyncRequest,
    SyncResponse,
    decode_sync,
    encode_sync,
    unpack_page,
)
from cowboy_node.node.sync_server import ServeLimits, SyncServer, read_page
from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.types.block import Block
from tests.helpers import ALICE_SK, BOB, transfer
from tests.unit.node.sync_chain import build_chain

CHAIN, BLOCKS = build_chain(8, txs=lambda h: [transfer(ALICE_SK, 2 * (h - 1) + i, BOB, 1) for i in range(2)])
SPARSE, _ = build_chain(8, cert_every=100)  # certificate of block 8 only


class FakeNet:
    def __init__(self) -> None:
        self.sent: list[tuple[int, int, bytes]] = []
        self.penalized: list[tuple[int, str]] = []

    def send(self, to: int, channel: int, payload: bytes) -> bool:
        self.sent.append((to, channel, payload))
        return True

    def connected(self) -> frozenset[int]:
        return frozenset({1, 2, 3})

    def penalize(self, peer: int, reason: str) -> None:
        self.penalized.append((peer, reason))


def _refused(m: NodeMetrics, kind: str, reason: str) -> float:
    return float(m.consensus_requests_refused.labels(kind=kind, reason=reason)._value.get())


def _server(chain: Chain, limits: ServeLimits, net: FakeNet, metrics: NodeMetrics,
            tasks: list[Any], now: list[float]) -> SyncServer:
    return SyncServer(chain.blocks, ConsensusRecords(chain.store), head=lambda: chain.height, net=lambda: net,
                      metrics=metrics, clock=lambda: now[0], limits=limits,
                      spawn=lambda c: tasks.append(asyncio.get_running_loop().create_task(c)))  # type: ignore


def test_an_answer_stays_under_its_byte_budget_and_holds_at_least_one_block() -> None:
    sizes = [len(CHAIN.blocks.block_bytes(h) or b"") for h in range(1, 9)]
    budget = sizes[0] + sizes[1] + sizes[2] + 40  # three blocks and their heads fit, not four
    records = ConsensusRecords(CHAIN.store)
    msg = decode_sync(read_page(CHAIN.blocks, records, SyncRequest(1, 64), 8, budget) or b"")
    assert isinstance(msg, SyncResponse) and len(msg.blocks) == 3
    assert sum(len(b) + 9 for b in msg.blocks) <= budget
    tiny = decode_sync(read_page(CHAIN.blocks, records, SyncRequest(1, 64), 8, 10) or b"")  # under one block
    assert isinstance(tiny, SyncResponse) and len(tiny.blocks) == 1


def test_a_run_without_a_certified_block_is_a_page_naming_the_next_certificate() -> None:
    records = ConsensusRecords(SPARSE.store)
    msg = decode_sync(read_page(SPARSE.blocks, records, SyncRequest(2, 3), 8, 1 << 20) or b"")
    assert isinstance(msg, SyncPage) and len(msg.blocks) == 3 and msg.certified_height == 8
    assert msg.finalization == records.finalization_bytes(8)


def test_blocks_are_served_as_their_stored_bytes_never_decoded_or_encoded(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: object, **k: object) -> None:
        raise AssertionError("a block was decoded or encoded while serving")
    monkeypatch.setattr(Block, "decode", boom)
    monkeypatch.setattr(Block, "encode", boom)

    async def run() -> None:
        net, metrics, tasks, now = FakeNet(), NodeMetrics(), [], [0.0]
        server = _server(CHAIN, ServeLimits(), net, metrics, tasks, now)
        server.on_sync_request(1, SyncRequest(1, 64))
        server.on_block_request(2, BLOCKS[4].hash())
        await asyncio.gather(*tasks)
        server.close()
        (_, ch1, sync), (_, _ch2, body) = sorted(net.sent)
        msg = decode_sync(sync)
        assert ch1 == CH_SYNC and isinstance(msg, SyncResponse)
        assert list(msg.blocks) == [CHAIN.blocks.block_bytes(h) for h in range(1, 9)]
        assert body == CHAIN.blocks.block_bytes(5)

    asyncio.run(run())


def test_a_request_that_accepts_a_packed_page_gets_the_plain_answer_compressed() -> None:
    async def run() -> None:
        net, metrics, tasks, now = FakeNet(), NodeMetrics(), [], [0.0]
        server = _server(CHAIN, ServeLimits(), net, metrics, tasks, now)
        server.on_sync_request(1, SyncRequest(3, 64))
        server.on_sync_request(2, SyncRequest(3, 64, packed=True))
        await asyncio.gather(*tasks)
        server.close()
        (_, _, plain), (_, _, packed_bytes) = sorted(net.sent)
        packed = decode_sync(packed_bytes)
        assert isinstance(packed, PackedPage)
        assert (packed.first_height, packed.blocks, packed.raw_size) == (3, 6, len(plain))
        assert encode_sync(unpack_page(packed)) == plain

    asyncio.run(run())


def test_serving_reads_in_a_thread_of_its_own_not_on_the_event_loop() -> None:
    readers: list[str] = []

    class Spy:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def block_bytes(self, h: int) -> bytes | None:
            readers.append(threading.current_thread().name)
            return self.inner.block_bytes(h)  # type: ignore[no-any-return]

    async def run() -> None:
        net, tasks = FakeNet(), []
        server = SyncServer(Spy(CHAIN.blocks), ConsensusRecords(CHAIN.store), head=lambda: 8,  # type: ignore
                            net=lambda: net, metrics=NodeMetrics(), clock=lambda: 0.0,
                            spawn=lambda c: tasks.append(asyncio.get_running_loop().create_task(c)))  # type: ignore
        server.on_sync_request(1, SyncRequest(1, 4))
        assert readers == []  # nothing read in the message callback
        await asyncio.gather(*tasks)
        server.close()
        assert len(net.sent) == 1

    asyncio.run(run())
    assert readers and all(name.startswith("sync-serve") for name in readers)


def test_over_budget_requests_are_refused_typed_and_counted_and_a_repeat_offender_penalized() -> None:
    async def run() -> None:
        net, metrics, tasks, now = FakeNet(), NodeMetrics(), [], [100.0]
        server = _server(CHAIN, ServeLimits(sync_rate=1, sync_burst=2, strikes=3), net, metrics, tasks, now)
        for _ in range(4):
            server.on_sync_request(1, SyncRequest(1, 1))
            await asyncio.gather(*tasks)
        assert _refused(metrics, "sync", "request_budget") == 2 and net.penalized == []
        server.on_sync_request(1, SyncRequest(1, 1))  # third refusal within the window
        await asyncio.gather(*tasks)
        assert net.penalized == [(1, "sync_request_budget")]
        now[0] += 5  # refilled: served again
        server.on_sync_request(1, SyncRequest(1, 1))
        await asyncio.gather(*tasks)
        assert len(net.sent) == 3
        server.close()

    asyncio.run(run())


def test_an_answer_over_the_peers_byte_budget_is_refused() -> None:
    async def run() -> None:
        net, metrics, tasks, now = FakeNet(), NodeMetrics(), [], [0.0]
        one = len(CHAIN.blocks.block_bytes(1) or b"")
        server = _server(CHAIN, ServeLimits(bytes_rate=1, bytes_burst=3 * one), net, metrics, tasks, now)
        server.on_sync_request(1, SyncRequest(1, 64))  # eight blocks: over the byte budget
        await asyncio.gather(*tasks)
        server.on_sync_request(1, SyncRequest(1, 1))  # one: within it
        await asyncio.gather(*tasks)
        server.close()
        assert _refused(metrics, "sync", "byte_budget") == 1 and len(net.sent) == 1

    asyncio.run(run())


def test_a_peer_with_its_answers_being_read_is_refused_more() -> None:
    async def run() -> None:
        net, metrics, tasks, now = FakeNet(), NodeMetrics(), [], [0.0]
        server = _server(CHAIN, ServeLimits(per_peer=1), net, metrics, tasks, now)
        server.on_sync_request(1, SyncRequest(1, 1))
        server.on_block_request(1, BLOCKS[0].hash())  # the first is still being read
        await asyncio.gather(*tasks)
        server.close()
        assert _refused(metrics, "block", "peer_busy") == 1 and len(net.sent) == 1

    asyncio.run(run())


def test_being_busy_with_a_peers_answers_never_gets_it_penalized() -> None:
    """A catching-up honest validator asks every peer for each missing body every 500 ms: refusing it for our own
    concurrency limit is no offence of its (a penalty would cut its consensus link too)."""
    async def run() -> None:
        net, metrics, tasks, now = FakeNet(), NodeMetrics(), [], [0.0]
        server = _server(CHAIN, ServeLimits(per_peer=1, strikes=2), net, metrics, tasks, now)
        server.on_sync_request(1, SyncRequest(1, 1))
        for _ in range(10):  # while the first answer is still being read
            server.on_block_request(1, BLOCKS[0].hash())
        await asyncio.gather(*tasks)
        server.close()
        assert _refused(metrics, "block", "peer_busy") == 10 and net.penalized == []

    asyncio.run(run())


def test_a_fetch_over_its_view_budget_never_reaches_the_engine() -> None:
    from tests.unit.node.test_consensus_preverify import _service
    svc, _ = _service(0, sync_serve=ServeLimits(fetch_views_rate=1, fetch_views_burst=64))
    svc.start_engine()
    seen: list[Any] = []
    engine = svc.engine
    assert engine is not None
    real = engine.receive
    engine.receive = lambda s, m, now: seen.append(m) or real(s, m, now)  # type: ignore[method-assign]
    fetch = encode_message(Fetch(0, tuple(range(1, 65))))
    svc.on_peer_message(2, CH_CONSENSUS, fetch)
    svc.on_peer_message(2, CH_CONSENSUS, fetch)  # 64 more views at once: over the budget
    assert len(seen) == 1
    assert _refused(svc.metrics, "fetch", "fetch_budget") == 1
    svc.close()


def test_block_request_bytes_are_pinned() -> None:
    assert encode_sync(BlockRequest(bytes(32)))[:4].hex() == "a2000101"
