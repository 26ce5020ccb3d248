"""Catching up (``node/sync_client.py``, issue 30 §2/§3): pipelined requests applied in order, peers rotated, a
lying or silent peer distrusted (not disconnected), answers that do not verify refused. Time is held by hand."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from cowboy_node.chain.chain import Chain
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.consensus.sync_messages import (
    CH_SYNC,
    PackedPage,
    SyncPage,
    SyncRequest,
    SyncResponse,
    decode_sync,
)
from cowboy_node.node.sync_client import FetchLimits, SyncClient
from cowboy_node.node.sync_server import pack_page, read_page
from cowboy_node.node.sync_verify import Answer, VerifiedPage, verify_answer
from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.state.memory import MemoryStore
from tests.unit.node.sync_chain import NET, build_chain, scheme
from tests.unit.node.test_sync_server import FakeNet

SERVER, BLOCKS = build_chain(12)
SPARSE, _ = build_chain(12, cert_every=100)


class Rig:
    def __init__(self, limits: FetchLimits | None = None) -> None:
        self.chain = Chain(MemoryStore(), NET.genesis)
        self.net = FakeNet()
        self.metrics = NodeMetrics()
        self.now = [0.0]
        self.tasks: list[asyncio.Task[Any]] = []
        self.applied: list[int] = []

        async def direct(fn: Any) -> Any:
            return fn()

        verifier = scheme(NET, None)
        self.gate: asyncio.Event | None = None
        """When set to an unset Event, every verification waits for it (an answer held in verification)."""

        async def verify(msg: Answer) -> VerifiedPage:
            if self.gate is not None:
                await self.gate.wait()
            return verify_answer(msg, verifier)

        self.client = SyncClient(
            self.chain, net=lambda: self.net, metrics=self.metrics, clock=lambda: self.now[0],
            in_builder=direct, verify=verify, spawn=self._spawn, connected=self.net.connected,
            on_applied=lambda last, seed, done: self.applied.extend(p.block.header.height for p in done),
            limits=limits or FetchLimits(page_bytes=64 * 1024 * 1024))

    def _spawn(self, coro: Any) -> None:
        self.tasks.append(asyncio.get_running_loop().create_task(coro))

    async def settle(self) -> None:
        while self.tasks:
            await self.tasks.pop(0)

    def requests(self) -> list[tuple[int, SyncRequest]]:
        out = []
        for to, ch, payload in self.net.sent:
            m = decode_sync(payload)
            if ch == CH_SYNC and isinstance(m, SyncRequest):
                out.append((to, m))
        self.net.sent.clear()
        return out

    def reply(self, req: SyncRequest, chain: Chain = SERVER, page_bytes: int = 1 << 26) -> Answer:
        """What the real server answers ``req`` with (``page_bytes``: its byte budget; a PackedPage when the
        request accepts one)."""
        raw = read_page(chain.blocks, ConsensusRecords(chain.store), req, chain.height, page_bytes)
        assert raw is not None
        m = decode_sync(pack_page(raw, req.from_height) if req.packed else raw)
        assert isinstance(m, SyncResponse | SyncPage | PackedPage)
        return m

    def answer(self, peer: int, req: SyncRequest, chain: Chain = SERVER, page_bytes: int = 1 << 26) -> None:
        """``peer`` answers ``req`` as the real server does (:meth:`reply`)."""
        self.client.on_answer(peer, self.reply(req, chain, page_bytes))

    async def serve_all(self, chain: Chain = SERVER) -> None:
        """Answer every request, and those sent in reply, until none is left."""
        while reqs := self.requests():
            for to, req in reqs:
                self.answer(to, req, chain)
            await self.settle()

    def refused(self, reason: str) -> float:
        return float(self.metrics.consensus_sync_refused.labels(reason=reason)._value.get())


def test_pipelined_requests_to_different_peers_are_applied_in_height_order() -> None:
    async def run() -> None:
        rig = Rig()
        rig.client._avg_block = 1e9  # one block per request: several requests in flight
        rig.client.on_status(1, 12)
        rig.client.on_status(2, 12)
        reqs = rig.requests()
        assert {to for to, _ in reqs} == {1, 2} and len(reqs) >= 4  # spread over both peers
        for to, req in reversed(reqs):  # the highest answered first: held, nothing applied yet
            rig.answer(to, req)
            await rig.settle()
            if req.from_height > 1:
                assert rig.applied == []
        assert rig.applied == list(range(1, len(reqs) + 1))
        assert rig.chain.head.hash() == BLOCKS[len(reqs) - 1].hash()

    asyncio.run(run())


def test_a_lying_status_peer_is_distrusted_not_disconnected_and_does_not_hold_the_node_syncing() -> None:
    async def run() -> None:
        rig = Rig()
        rig.client.on_status(2, 12)
        await rig.serve_all()
        assert rig.chain.height == 12
        rig.client.on_status(1, 1_000_000)  # a claim nobody can back
        assert rig.client.syncing
        reqs = rig.requests()
        assert {to for to, _ in reqs} == {1} and min(r.from_height for _, r in reqs) == 13  # only it claims them
        rig.now[0] += 10.0  # no answer within the timeout
        rig.client.plan()
        # Distrusted, not penalized: a late answer proves nothing (an honest loaded peer is late too), and a
        # penalty would also cut that peer's consensus link.
        assert rig.net.penalized == [] and rig.refused("timeout") == 1
        assert not rig.client.syncing and rig.requests() == []  # its claim no longer counts
        rig.client.on_status(1, 1_000_000)  # repeated while distrusted: still ignored
        assert not rig.client.syncing

    asyncio.run(run())


def test_a_peer_that_does_not_deliver_is_rotated_away_from() -> None:
    async def run() -> None:
        rig = Rig(FetchLimits(window=1, page_bytes=1 << 26))
        rig.client.on_status(1, 12)
        rig.client.on_status(2, 12)
        (first, req), = rig.requests()
        rig.now[0] += 10.0
        rig.client.plan()
        (second, again), = rig.requests()
        assert second != first and again.from_height == req.from_height == 1
        rig.answer(second, again)
        await rig.settle()
        assert rig.chain.height == 12

    asyncio.run(run())


def test_an_answer_whose_certificate_does_not_verify_is_refused_and_its_sender_penalized() -> None:
    async def run() -> None:
        rig = Rig(FetchLimits(window=1, page_bytes=1 << 26))  # one request for all 12
        rig.client.on_status(3, 12)
        (_to, req), = rig.requests()
        m = rig.reply(dataclasses.replace(req, packed=False))
        assert isinstance(m, SyncResponse)
        cert = bytearray(m.finalization)
        cert[-60] ^= 1  # inside the signature
        rig.client.on_answer(3, dataclasses.replace(m, finalization=bytes(cert)))
        await rig.settle()
        assert rig.chain.height == 0 and rig.refused("bad_certificate") + rig.refused("malformed") == 1
        assert rig.net.penalized and rig.net.penalized[0][0] == 3

    asyncio.run(run())


def test_an_unlinked_run_is_refused_and_its_sender_penalized() -> None:
    async def run() -> None:
        rig = Rig(FetchLimits(window=1, page_bytes=1 << 26))  # one request for all 12
        rig.client.on_status(3, 12)
        (_to, req), = rig.requests()
        m = rig.reply(dataclasses.replace(req, packed=False))
        assert isinstance(m, SyncResponse)
        blocks = list(m.blocks)
        blocks[3], blocks[4] = blocks[4], blocks[3]
        rig.client.on_answer(3, dataclasses.replace(m, blocks=tuple(blocks)))
        await rig.settle()
        assert rig.chain.height == 0 and rig.net.penalized == [(3, "sync_bad_heights")]

    asyncio.run(run())


def test_pages_without_their_own_certificate_wait_for_the_one_that_proves_them() -> None:
    async def run() -> None:
        rig = Rig()
        rig.client._avg_block = 1e9  # one block per request
        rig.client.on_status(1, 12)
        rig.client.on_status(2, 12)
        reqs = rig.requests()
        for to, req in reqs:  # blocks 1..n each in a page naming block 12's certificate: held
            rig.answer(to, req, chain=SPARSE)
        await rig.settle()
        assert rig.applied == [] and rig.chain.height == 0
        while rig.chain.height < 12:
            for to, req in rig.requests():
                rig.answer(to, req, chain=SPARSE)
            await rig.settle()
        assert rig.applied == list(range(1, 13))

    asyncio.run(run())


def test_a_page_that_does_not_extend_the_head_is_refused_and_its_sender_penalized() -> None:
    async def run() -> None:
        other, _ = build_chain(12, block_ms=700)  # another (certified) chain from the same genesis
        rig = Rig(FetchLimits(window=1, page_bytes=1 << 26))  # one request at a time
        rig.client.on_status(1, 12)
        (to, req), = rig.requests()
        rig.answer(to, SyncRequest(1, 1), chain=SERVER)
        await rig.settle()
        assert rig.chain.height == 1
        rig.client.on_status(1, 12)
        (to, req), = rig.requests()
        rig.answer(to, req, chain=other)  # height 2.. of a chain whose block 1 is not ours
        await rig.settle()
        assert rig.chain.height == 1 and (1, "sync_unlinked") in rig.net.penalized

    asyncio.run(run())


def test_a_valid_certificate_of_another_block_at_that_height_proves_nothing() -> None:
    async def run() -> None:
        long, _ = build_chain(14, cert_every=100)  # certificate of block 14 only
        other, _ = build_chain(12, block_ms=700)  # a certified block 12 that is not ours
        wrong = ConsensusRecords(other.store).finalization_bytes(12)
        assert wrong is not None
        rig = Rig()
        rig.client._avg_block = 1e9
        rig.client.on_status(1, 14)
        rig.client.on_status(2, 14)
        while rig.chain.height == 0 and not any(h == 12 for h in rig.client._s.held):
            for to, req in rig.requests():
                raw = read_page(long.blocks, ConsensusRecords(long.store), req, 14, 1 << 26)
                m = decode_sync(raw or b"")
                assert isinstance(m, SyncPage)
                if req.from_height < 12:  # claims block 12 is the one `wrong` finalizes
                    m = SyncPage(m.blocks, 12, wrong)
                rig.client.on_answer(to, m)
            await rig.settle()
        assert rig.chain.height == 0  # block 12's hash is not the certificate's payload: nothing applied
        while rig.chain.height < 14:
            for to, req in rig.requests():
                rig.answer(to, req, chain=long)
            await rig.settle()
        assert rig.chain.head.hash() == long.head.hash()

    asyncio.run(run())


def test_an_answer_being_verified_is_not_late_however_long_its_verification_takes() -> None:
    async def run() -> None:
        rig = Rig(FetchLimits(window=1, page_bytes=1 << 26))
        rig.gate = asyncio.Event()
        rig.client.on_status(1, 12)
        (to, req), = rig.requests()
        rig.answer(to, req)  # arrived in time; its verification is held
        await asyncio.sleep(0)
        rig.now[0] += 60.0  # verification here takes far longer than the timeout
        rig.client.plan()
        assert rig.refused("timeout") == 0 and rig.requests() == []  # not late, not asked again
        rig.gate.set()
        await rig.settle()
        assert rig.chain.height == 12 and rig.refused("timeout") == 0 and rig.refused("unsolicited") == 0

    asyncio.run(run())


def test_heights_a_page_cut_by_bytes_did_not_bring_are_asked_for_before_it_is_verified() -> None:
    async def run() -> None:
        rig = Rig(FetchLimits(window=3, per_peer=1, page_bytes=1 << 26))
        rig.gate = asyncio.Event()
        rig.client.on_status(1, 12)
        rig.client.on_status(2, 12)
        reqs = rig.requests()
        first = next((to, r) for to, r in reqs if r.from_height == 1)
        assert first[1].max_blocks == 4  # 12 heights shared among 3 slots
        small = sum(len(SERVER.blocks.block_bytes(h) or b"") for h in range(1, 4)) + 200
        rig.answer(first[0], first[1], page_bytes=small)  # the server's page holds 3 of the blocks asked
        await asyncio.sleep(0)
        again = rig.requests()  # the verification of that page is still held
        assert [r.from_height for _, r in again] == [4] and again[0][0] == first[0]
        rig.gate.set()
        await rig.settle()
        rig.gate = None
        for to, r in [*again, *[x for x in reqs if x is not first]]:
            rig.answer(to, r)
        await rig.settle()
        await rig.serve_all()
        assert rig.chain.height == 12 and rig.chain.head.hash() == SERVER.head.hash()

    asyncio.run(run())


def test_a_second_answer_to_one_request_is_not_opened() -> None:
    async def run() -> None:
        rig = Rig(FetchLimits(window=1, page_bytes=1 << 26))
        rig.gate = asyncio.Event()
        rig.client.on_status(1, 12)
        (to, req), = rig.requests()
        rig.answer(to, req)
        rig.answer(to, req)  # the same answer again while the first is verified
        rig.answer(2, req)  # and from a peer it was not asked of
        assert rig.refused("unsolicited") == 2 and len(rig.tasks) == 1
        rig.gate.set()
        await rig.settle()
        assert rig.chain.height == 12

    asyncio.run(run())


def test_an_answer_whose_first_block_does_not_decode_is_refused_and_its_sender_penalized() -> None:
    async def run() -> None:
        rig = Rig(FetchLimits(window=1, page_bytes=1 << 26))
        rig.client.on_status(3, 12)
        (_to, req), = rig.requests()
        m = rig.reply(dataclasses.replace(req, packed=False))
        assert isinstance(m, SyncResponse)
        rig.client.on_answer(3, dataclasses.replace(m, blocks=(b"\xff", *m.blocks[1:])))
        await rig.settle()
        assert rig.chain.height == 0 and rig.refused("malformed") == 1
        assert rig.net.penalized == [(3, "sync_malformed")] and rig.tasks == []

    asyncio.run(run())


def test_only_able_peers_are_asked_connected_claiming_the_height_and_under_their_request_limit() -> None:
    async def run() -> None:
        rig = Rig(FetchLimits(window=6, per_peer=2, page_bytes=1 << 26))
        rig.client._connected = lambda: frozenset({1, 2})  # 3 is not connected
        rig.client._avg_block = 1e9  # one block per request: the window could use every peer
        rig.client.on_status(3, 12)  # claims everything, but no link to it
        rig.client.on_status(2, 1)  # connected, but claims only height 1
        rig.client.on_status(1, 12)
        reqs = rig.requests()
        asked = [(to, r.from_height) for to, r in reqs]
        assert all(to != 3 for to, _ in asked)  # never a peer that is not connected
        assert all(h <= 1 for to, h in asked if to == 2)  # never above what a peer claims
        assert sum(1 for to, _ in asked if to == 1) == 2  # never more than per_peer unanswered to one peer
        assert len(reqs) == 3

    asyncio.run(run())


def test_a_distrusted_peer_is_not_asked_even_with_a_request_slot_free() -> None:
    async def run() -> None:
        rig = Rig(FetchLimits(window=3, per_peer=1, page_bytes=1 << 26))
        rig.client.on_status(1, 12)
        rig.client.on_status(2, 12)
        reqs = dict(rig.requests())  # 12 heights over 3 slots: 1..4 and 5..8 (one per peer)
        assert set(reqs) == {1, 2} and reqs[1].from_height == 1
        rig.now[0] += 5.0
        rig.answer(2, reqs[2])  # peer 2 delivers (held: 1..4 are still missing); peer 1 never does
        await rig.settle()
        (to, nxt), = rig.requests()
        assert to == 2 and nxt.from_height == 9  # peer 2 serves the rest
        rig.now[0] += 5.0
        rig.client.on_status(1, 12)  # peer 1 late: distrusted, however much it claims
        assert rig.requests() == [] and rig.refused("timeout") == 1  # a slot is free, peer 2 is busy: nobody
        rig.answer(2, nxt)
        await rig.settle()
        await rig.serve_all()
        assert rig.chain.height == 12 and all(to == 2 for to, _ in rig.requests())

    asyncio.run(run())


def test_requests_ask_for_packed_answers_which_are_applied_like_plain_ones() -> None:
    async def run() -> None:
        rig = Rig()
        rig.client.on_status(1, 12)
        rig.client.on_status(2, 12)
        reqs = rig.requests()
        assert reqs and all(r.packed for _, r in reqs)
        for to, r in reqs:
            rig.answer(to, r)  # PackedPages
        await rig.settle()
        await rig.serve_all()
        assert rig.chain.height == 12 and rig.chain.head.hash() == SERVER.head.hash()
        plain = Rig(FetchLimits(page_bytes=1 << 26, packed=False))
        plain.client.on_status(1, 12)
        assert not any(r.packed for _, r in plain.requests())

    asyncio.run(run())


def test_a_packed_page_that_lies_about_its_first_height_is_refused_and_its_sender_penalized() -> None:
    async def run() -> None:
        rig = Rig(FetchLimits(window=2, per_peer=2, page_bytes=1 << 26))
        rig.client.on_status(3, 12)
        reqs = dict((r.from_height, r) for _, r in rig.requests())
        assert set(reqs) == {1, 7}
        m = rig.reply(reqs[7])
        assert isinstance(m, PackedPage)
        rig.client.on_answer(3, dataclasses.replace(m, first_height=1))  # blocks 7.. claimed as the answer to 1..
        await rig.settle()
        assert rig.chain.height == 0 and rig.refused("malformed") == 1
        assert rig.net.penalized == [(3, "sync_malformed")]

    asyncio.run(run())
