"""``GET /subscribe``: topics and server-side filters, replay + live without gap or duplicate, resumption,
bounded per-connection buffers with slow consumers told and dropped, limits (``rpc/subscriptions.py``)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from cowboy_node.chain.event_index import index_ops
from cowboy_node.execution.system_state import JOB_DISPATCHER
from cowboy_node.rpc.server import build_app
from cowboy_node.rpc.subscription_source import ChainSource, Filter, parse_filter
from cowboy_node.rpc.subscriptions import CLOSE_SLOW_CONSUMER, SubscriptionHub, SubscriptionLimits
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import encode
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.types.instructions import Transfer
from tests.helpers import ALICE, ALICE_SK, BOB
from tests.unit.node_harness import make_node, produce
from tests.unit.rpc.test_rpc_server import FakeFacade


class FakeSource:
    """Heights 1..head, each one block message of ``pad`` bytes of padding."""

    def __init__(self, head: int = 0, pad: int = 0) -> None:
        self.h = head
        self.pad = pad
        self.rendered: list[int] = []
        self.threads: set[int] = set()

    def head(self) -> int:
        return self.h

    def message(self, f: Filter, height: int) -> bytes | None:
        self.rendered.append(height)
        self.threads.add(threading.get_ident())
        return json.dumps({"type": "block", "height": height, "pad": "x" * self.pad}).encode()


async def _wait(what: str, cond: Any, timeout: float = 20.0) -> None:
    """Wait (bounded) until ``cond()`` holds, yielding to the loop in between."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


@pytest.fixture
async def served() -> AsyncIterator[tuple[TestClient[Any, Any], SubscriptionHub, FakeSource]]:
    source = FakeSource(head=5)
    hub = SubscriptionHub(source, SubscriptionLimits(max_subscriptions=3, max_lag_blocks=50))
    client: TestClient[Any, Any] = TestClient(TestServer(build_app(FakeFacade(), subscriptions=hub)))  # type: ignore[arg-type]
    await client.start_server()
    try:
        yield client, hub, source
    finally:
        await client.close()


def _publish(hub: SubscriptionHub, source: FakeSource, height: int) -> None:
    source.h = height
    hub.publish(height)


async def _heights(ws: aiohttp.ClientWebSocketResponse, n: int) -> list[int]:
    out = []
    while len(out) < n:
        msg = json.loads((await asyncio.wait_for(ws.receive(), 20)).data)
        assert msg["type"] == "block"
        out.append(msg["height"])
    return out


async def test_replay_from_a_height_then_live_without_gap_or_duplicate(served: Any) -> None:
    client, hub, source = served
    async with client.ws_connect("/subscribe?topic=blocks&from=2") as ws:
        first = json.loads((await ws.receive()).data)
        assert first == {"type": "subscribed", "topic": "blocks", "from": 2, "head": 5}
        assert await _heights(ws, 4) == [2, 3, 4, 5]  # the replay
        _publish(hub, source, 6)
        _publish(hub, source, 8)  # two heights in one wake: both sent, in order
        assert await _heights(ws, 3) == [6, 7, 8]


async def test_resuming_after_a_reconnect_from_the_next_height_sees_every_height_once(served: Any) -> None:
    client, hub, source = served
    got: list[int] = []
    async with client.ws_connect("/subscribe?topic=blocks&from=1") as ws:
        await ws.receive()
        got += await _heights(ws, 3)
    _publish(hub, source, 9)  # blocks committed while the client was away
    async with client.ws_connect(f"/subscribe?topic=blocks&from={got[-1] + 1}") as ws:
        await ws.receive()
        got += await _heights(ws, 6)
    assert got == list(range(1, 10))


async def test_without_from_the_stream_starts_at_the_next_block(served: Any) -> None:
    client, hub, source = served
    async with client.ws_connect("/subscribe?topic=blocks") as ws:
        assert json.loads((await ws.receive()).data)["from"] == 6
        _publish(hub, source, 6)
        assert await _heights(ws, 1) == [6]


async def test_a_consumer_too_far_behind_is_told_and_dropped(served: Any) -> None:
    client, hub, source = served
    async with client.ws_connect("/subscribe?topic=blocks") as ws:
        await ws.receive()
        _publish(hub, source, 6 + 51)  # lag 57 - 6 = 51 > max_lag_blocks 50 before anything is sent
        msg = await asyncio.wait_for(ws.receive(), 20)
        assert json.loads(msg.data) == {"type": "dropped", "reason": "slow_consumer", "resume_from": 6}
        closing = await asyncio.wait_for(ws.receive(), 20)
        assert closing.type == aiohttp.WSMsgType.CLOSE and closing.data == CLOSE_SLOW_CONSUMER
    assert hub.dropped == 1


async def test_a_consumer_that_stops_reading_is_dropped_and_others_keep_every_height() -> None:
    source = FakeSource(head=0, pad=16_000)
    hub = SubscriptionHub(source, SubscriptionLimits(buffer_bytes=4096, send_timeout_ms=200, max_lag_blocks=10_000))
    client: TestClient[Any, Any] = TestClient(TestServer(build_app(FakeFacade(), subscriptions=hub)))  # type: ignore[arg-type]
    await client.start_server()
    try:
        stuck = await client.ws_connect("/subscribe?topic=blocks&from=1", max_msg_size=0)
        fast = await client.ws_connect("/subscribe?topic=blocks&from=1", max_msg_size=0)
        await fast.receive()
        received: list[int] = []

        async def read_fast() -> None:
            while len(received) < 400:
                received.append(json.loads((await fast.receive()).data)["height"])

        reader = asyncio.create_task(read_fast())
        for h in range(1, 401):  # ~6 MiB to each subscriber; the stuck one never reads
            _publish(hub, source, h)
            await asyncio.sleep(0)
        await _wait("the stuck subscriber dropped", lambda: hub.dropped == 1)
        await asyncio.wait_for(reader, 30)
        assert received == list(range(1, 401))
        await _wait("the dropped subscription released", lambda: hub.open == 1)
        await fast.close()
        await stuck.close()
    finally:
        await client.close()


async def test_subscription_limits_and_bad_requests_get_typed_errors(served: Any) -> None:
    client, hub, _ = served
    for query, status, code in [
        ("topic=nope", 400, "invalid_topic"), ("", 400, "invalid_query"),
        ("topic=blocks&sender=0x" + "11" * 20, 400, "invalid_query"),
        ("topic=events", 400, "invalid_query"), ("topic=txs&sender=0x12", 400, "invalid_address"),
        ("topic=blocks&from=x", 400, "invalid_height"),
    ]:
        resp = await client.get("/subscribe?" + query, headers={"Upgrade": "websocket", "Connection": "Upgrade",
                                                                  "Sec-WebSocket-Version": "13",
                                                                  "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
        assert (resp.status, (await resp.json())["code"]) == (status, code), query
    resp = await client.get("/subscribe?topic=blocks")
    assert (resp.status, (await resp.json())["code"]) == (400, "not_websocket")
    hub.limits = SubscriptionLimits(max_subscriptions=3, max_lag_blocks=2)
    with pytest.raises(aiohttp.WSServerHandshakeError) as e:
        await client.ws_connect("/subscribe?topic=blocks&from=1")  # head 5: more than 2 below
    assert e.value.status == 400
    hub.limits = SubscriptionLimits(max_subscriptions=1)
    async with client.ws_connect("/subscribe?topic=blocks"):
        await _wait("one open", lambda: hub.open == 1)
        resp = await client.get("/subscribe?topic=blocks", headers={
            "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
        assert (resp.status, (await resp.json())["code"]) == (503, "too_many_subscriptions")
        assert resp.headers["Retry-After"] == "1"


async def test_catching_up_goes_through_the_replay_budget_and_the_newest_height_does_not(served: Any) -> None:
    client, hub, _ = served
    async with client.ws_connect("/subscribe?topic=blocks&from=5") as ws:  # 5 is the head: nothing to catch up
        await ws.receive()
        assert await _heights(ws, 1) == [5]
    assert hub.replayed == 0
    async with client.ws_connect("/subscribe?topic=blocks&from=3") as ws:
        await ws.receive()
        assert await _heights(ws, 3) == [3, 4, 5]
    assert hub.replayed == 2  # heights 3 and 4; the head itself is never held back


async def test_publish_renders_nothing_in_the_commit_path(served: Any) -> None:
    client, hub, source = served
    async with client.ws_connect("/subscribe?topic=blocks"):
        await _wait("subscribed", lambda: hub.open == 1)
        source.rendered.clear()
        _publish(hub, source, 6)
        assert source.rendered == []  # rendering happens in the subscriber's own task, later


@pytest.fixture
def server_frames(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bytes]]:
    """Every data frame the server side writes: (writer id, the payload object itself)."""
    from aiohttp._websocket.writer import WebSocketWriter
    frames: list[tuple[int, bytes]] = []
    original = WebSocketWriter.send_frame

    async def recording(self: WebSocketWriter, message: bytes, opcode: int, compress: int | None = None) -> None:
        if not self.use_mask and opcode == aiohttp.WSMsgType.TEXT:  # the server's writer (a client masks)
            frames.append((id(self), message))
        await original(self, message, opcode, compress)

    monkeypatch.setattr(WebSocketWriter, "send_frame", recording)
    return frames


async def test_each_message_is_read_and_encoded_once_and_the_same_bytes_go_to_every_subscriber(
        server_frames: list[tuple[int, bytes]]) -> None:
    source = FakeSource(head=5)
    hub = SubscriptionHub(source, SubscriptionLimits(max_subscriptions=100))
    client: TestClient[Any, Any] = TestClient(TestServer(build_app(FakeFacade(), subscriptions=hub)))  # type: ignore[arg-type]
    await client.start_server()
    try:
        subscribers = [await client.ws_connect("/subscribe?topic=blocks&from=1") for _ in range(20)]
        for ws in subscribers:
            await ws.receive()
            assert await _heights(ws, 5) == [1, 2, 3, 4, 5]
        _publish(hub, source, 6)
        for ws in subscribers:
            assert await _heights(ws, 1) == [6]
        assert sorted(source.rendered) == [1, 2, 3, 4, 5, 6]  # once per height, not once per subscriber
        by_height: dict[int, list[bytes]] = {}
        for _, payload in server_frames:
            doc = json.loads(payload)
            if doc["type"] == "block":
                by_height.setdefault(doc["height"], []).append(payload)
        assert sorted(by_height) == [1, 2, 3, 4, 5, 6]
        for height, payloads in by_height.items():  # one encoding shared: the very same bytes object, 20 times
            assert len(payloads) == 20 and all(p is payloads[0] for p in payloads), height
        assert threading.get_ident() not in source.threads  # the store is read in the reader thread
        for ws in subscribers:
            await ws.close()
    finally:
        await client.close()


async def test_a_client_offering_permessage_deflate_gets_uncompressed_frames(served: Any) -> None:
    client, _, _ = served  # compression would cost one deflate per subscriber per message
    async with client.ws_connect("/subscribe?topic=blocks", compress=15) as ws:
        await ws.receive()
        assert ws.compress == 0


class BlockingSource(FakeSource):
    """A source whose reads wait until the test lets them go."""

    def __init__(self, head: int) -> None:
        super().__init__(head)
        self.go = threading.Event()
        self.entered = threading.Event()

    def message(self, f: Filter, height: int) -> bytes | None:
        self.entered.set()
        assert self.go.wait(30)
        return super().message(f, height)


async def test_a_subscriber_leaving_during_a_read_does_not_cancel_it_for_the_others() -> None:
    source = BlockingSource(head=3)
    hub = SubscriptionHub(source)
    client: TestClient[Any, Any] = TestClient(TestServer(build_app(FakeFacade(), subscriptions=hub)))  # type: ignore[arg-type]
    await client.start_server()
    try:
        leaving = await client.ws_connect("/subscribe?topic=blocks&from=3")
        staying = await client.ws_connect("/subscribe?topic=blocks&from=3")
        await leaving.receive()
        await staying.receive()
        await asyncio.to_thread(source.entered.wait, 30)  # both wait on the one read of height 3
        await leaving.close()
        await _wait("the leaving subscription released", lambda: hub.open == 1)
        source.go.set()
        assert await _heights(staying, 1) == [3]
        assert source.rendered == [3]
        await staying.close()
    finally:
        source.go.set()
        await client.close()


async def test_node_shutdown_closes_every_subscription_with_going_away(served: Any) -> None:
    client, hub, source = served
    async with client.ws_connect("/subscribe?topic=blocks&from=5") as ws:
        await ws.receive()
        assert await _heights(ws, 1) == [5]
        hub.close()
        _publish(hub, source, 7)  # committed after the stop began: not sent
        msg = await asyncio.wait_for(ws.receive(), 20)
        assert (msg.type, msg.data) == (aiohttp.WSMsgType.CLOSE, 1001)


async def test_subscriptions_waiting_for_the_replay_budget_are_parked_in_its_queue_not_polling() -> None:
    """Ten subscribers replaying 50 heights at one height a second: between grants all ten wait in the budget's
    queue (each woken once, when granted, then queued again for its next height), none in a sleep-and-retry loop."""
    source = FakeSource(head=50)
    hub = SubscriptionHub(source, SubscriptionLimits(replay_per_s=1))
    client: TestClient[Any, Any] = TestClient(TestServer(build_app(FakeFacade(), subscriptions=hub)))  # type: ignore[arg-type]
    await client.start_server()
    try:
        conns = [await client.ws_connect("/subscribe?topic=blocks&from=1") for _ in range(10)]
        await _wait("ten queued for the budget", lambda: hub.catching_up == 10)
        assert hub.replayed < 50  # one a second: the replay is still in progress
        for ws in conns:
            await ws.close()
    finally:
        hub.close()
        await client.close()


async def test_node_shutdown_during_a_replay_stops_it_and_closes_with_going_away() -> None:
    source = FakeSource(head=50)
    hub = SubscriptionHub(source, SubscriptionLimits(replay_per_s=1))  # one catching-up height a second
    client: TestClient[Any, Any] = TestClient(TestServer(build_app(FakeFacade(), subscriptions=hub)))  # type: ignore[arg-type]
    await client.start_server()
    try:
        async with client.ws_connect("/subscribe?topic=blocks&from=1") as ws:
            await ws.receive()
            assert await _heights(ws, 1) == [1]  # the bucket's one token; height 2 waits for the next
            hub.close()
            msg = await asyncio.wait_for(ws.receive(), 20)
            while msg.type == aiohttp.WSMsgType.TEXT:  # at most the height already on its way
                assert json.loads(msg.data)["height"] <= 2
                msg = await asyncio.wait_for(ws.receive(), 20)
            assert (msg.type, msg.data) == (aiohttp.WSMsgType.CLOSE, 1001)
    finally:
        await client.close()


# -- topics and filters over a real chain ---------------------------------------------------------------------
def test_txs_filtered_by_sender_and_hash_carry_their_receipts() -> None:
    node = make_node()
    from tests.unit.node_harness import Nonces
    nonces = Nonces()
    from tests.helpers import BOB_SK
    a, b = nonces.tx(ALICE_SK, Transfer(BOB, 5)), nonces.tx(BOB_SK, Transfer(ALICE, 7))
    produce(node, [a, b])
    src = ChainSource(node.chain)
    by_sender = json.loads(src.message(Filter("txs", None, sender=ALICE), 1) or "null")
    assert [t["hash"] for t in by_sender["txs"]] == ["0x" + a.tx_hash().hex()]
    assert by_sender["txs"][0]["receipt"]["status"] == "success"
    by_hash = json.loads(src.message(Filter("txs", None, tx_hash=b.tx_hash()), 1) or "null")
    assert [t["hash"] for t in by_hash["txs"]] == ["0x" + b.tx_hash().hex()]
    assert src.message(Filter("txs", None, sender=b"\x99" * 20), 1) is None
    block = json.loads(src.message(Filter("blocks", None), 1) or "null")
    assert block["block"]["transactions"] == ["0x" + a.tx_hash().hex(), "0x" + b.tx_hash().hex()]
    events = json.loads(src.message(Filter("events", None, actor=ALICE, name="transfer"), 1) or "null")
    assert [e["emitter"] for e in events["events"]] == [to_checksum_address(ALICE)]
    assert src.message(Filter("events", None, actor=ALICE, name="other"), 1) is None


class _JobChain:
    """Just what ChainSource's jobs topic reads: the store with the event index."""

    def __init__(self, events: list[Event]) -> None:
        self.store = MemoryStore()
        self.store.write_batch(index_ops(3, [], events))


def test_job_status_changes_filtered_by_job() -> None:
    j1, j2 = b"\x01" * 32, b"\x02" * 32
    chain = _JobChain([Event(JOB_DISPATCHER, "job.assigned", encode({0: j1, 1: []})),
                       Event(JOB_DISPATCHER, "job.completed", encode({0: j2, 1: []})),
                       Event(JOB_DISPATCHER, "runner.slashed", encode({0: b"\x03" * 20, 1: j1}))])
    src = ChainSource(chain)  # type: ignore[arg-type]
    every = json.loads(src.message(Filter("jobs", None), 3) or "null")
    assert [(j["job_id"], j["status"]) for j in every["jobs"]] == [("0x" + j1.hex(), "assigned"),
                                                                   ("0x" + j2.hex(), "completed")]
    one = json.loads(src.message(Filter("jobs", None, job=j2), 3) or "null")
    assert [j["status"] for j in one["jobs"]] == ["completed"]
    assert src.message(Filter("jobs", None), 4) is None


def test_filters_are_parsed_per_topic() -> None:
    from multidict import MultiDict
    f = parse_filter(MultiDict(topic="txs", sender="0x" + ALICE.hex(), **{"from": "7"}))
    assert (f.topic, f.sender, f.from_height) == ("txs", ALICE, 7)
    f = parse_filter(MultiDict(topic="events", actor="0x" + ALICE.hex(), name="bumped"))
    assert (f.actor, f.name) == (ALICE, "bumped")
