"""HTTP actor endpoints against a real in-process node: an actor deployed and called in block 1.

Routes: ``GET /actor/{address}``, ``GET /actor/{address}/state?key=|prefix=&limit=``,
``GET /actor/{address}/timers``, ``POST /actor/read``. Bad input gets a 4xx with a stable JSON
code and changes nothing (same head, same state root, empty mempool).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.node.assemble import assemble
from cowboy_node.node.node import Node
from cowboy_node.observability import NodeMetrics
from cowboy_node.rpc.server import build_app
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.receipt import STATUS_SUCCESS
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.instructions import CallActor, CancelTimer, DeployActor, UpdateTimerConfig
from cowboy_protocol.types.params import TimerConfig
from tests.helpers import ALICE, ALICE_SK, make_dev_genesis, make_tx
from tests.unit.node_harness import expect_error, expect_ok, read_only_client

SOURCE = '''import pvm_host


def init(payload):
    pvm_host.set_state(b"count", b"0")
    for key in (b"k/c", b"k/a", b"k/b"):
        pvm_host.set_state(key, key.upper())
    return b""


def bump(payload):
    n = int(pvm_host.get_state(b"count")) + 1
    pvm_host.set_state(b"count", str(n).encode())
    return str(n).encode()


def arm(payload):
    now = pvm_host.current_block()
    pvm_host.schedule_timer(now + 100, b"late")
    pvm_host.schedule_timer(now + 50, b"early")
    return b""


def echo(payload):
    return payload


def spin(payload):
    n = 0
    while True:
        n += 1
'''
ACTOR = derive_actor_address(ALICE, b"", SOURCE)
ACTOR_TEXT = to_checksum_address(ACTOR)
NOBODY = to_checksum_address(b"\x42" * 20)  # valid address, no actor
_FIRST_LETTER = next(i for i, c in enumerate(ACTOR_TEXT) if i >= 2 and c.isalpha())
BAD_CHECKSUM = ACTOR_TEXT[:_FIRST_LETTER] + ACTOR_TEXT[_FIRST_LETTER].swapcase() + ACTOR_TEXT[_FIRST_LETTER + 1:]


def _timer_id(height: int, payload: bytes, nonce: int) -> str:
    # docs/timers.md §3: keccak256(actor ‖ height u64 BE ‖ payload ‖ actor timer nonce u64 BE)
    return "0x" + keccak256(ACTOR + height.to_bytes(8, "big") + payload + nonce.to_bytes(8, "big")).hex()


@pytest.fixture(scope="module")
def node() -> Iterator[Node]:
    """Block 1: deploy (init writes 4 keys), bump (count = 1), arm (timers at 101 and 51)."""
    dev = make_dev_genesis()
    n = assemble(Chain(MemoryStore(), dev.genesis), Mempool(MempoolConfig()), dev.validator_key, block_time_ms=1000,
             metrics=NodeMetrics())
    kw = {"cycles_limit": 2_000_000, "cells_limit": 100_000}
    for nonce, ins in enumerate([DeployActor(SOURCE, b"", "init", b""), CallActor(ACTOR, "bump", b""),
                                 CallActor(ACTOR, "arm", b"")]):
        n.api.submit_transaction(make_tx(ALICE_SK, nonce, ins, **kw).to_bytes())  # type: ignore[arg-type]
    asyncio.run(n.produce_block())
    receipts = n.chain.receipts_at(1)
    assert receipts is not None and [r.status for r in receipts] == [STATUS_SUCCESS] * 3
    yield n
    n.close()


@pytest.fixture
async def client(node: Node) -> AsyncIterator[TestClient[Any, Any]]:
    async with read_only_client(node) as c:  # asserts on exit that no request changed the chain
        yield c




# -- GET /actor/{address} ------------------------------------------------------------------------
@pytest.mark.parametrize("text", [ACTOR_TEXT, "0x" + ACTOR.hex(), "0x" + ACTOR.hex().upper()])
async def test_actor_record(client: TestClient[Any, Any], text: str) -> None:
    body = await expect_ok(await client.get(f"/actor/{text}"))
    assert body == {
        "address": ACTOR_TEXT,
        "creator": to_checksum_address(ALICE),
        "source_hash": "0x" + keccak256(SOURCE.encode()).hex(),
        "deployed_at": 1,
        "handlers": ["init", "bump", "arm", "echo", "spin"],
        "balance": "0",
        "height": 1,
    }


# -- GET /actor/{address}/state ------------------------------------------------------------------
async def test_state_single_key_set_and_unset(client: TestClient[Any, Any]) -> None:
    body = await expect_ok(await client.get(f"/actor/{ACTOR_TEXT}/state?key=0x636f756e74"))  # "count"
    assert body == {"address": ACTOR_TEXT, "key": "0x636f756e74", "value": "0x31", "height": 1}
    body = await expect_ok(await client.get(f"/actor/{ACTOR_TEXT}/state?key=6e6f6e65"))  # "none": unset
    assert body["value"] is None and body["key"] == "0x6e6f6e65"


async def test_state_scan_is_ordered_and_limited(client: TestClient[Any, Any]) -> None:
    body = await expect_ok(await client.get(f"/actor/{ACTOR_TEXT}/state"))  # no key, no prefix: everything
    assert [e["key"] for e in body["entries"]] == ["0x636f756e74", "0x6b2f61", "0x6b2f62", "0x6b2f63"]
    assert body["truncated"] is False and body["prefix"] == "0x"
    body = await expect_ok(await client.get(f"/actor/{ACTOR_TEXT}/state?prefix=0x6b2f&limit=2"))  # "k/"
    assert body["entries"] == [{"key": "0x6b2f61", "value": "0x4b2f41"}, {"key": "0x6b2f62", "value": "0x4b2f42"}]
    assert body["truncated"] is True
    body = await expect_ok(await client.get(f"/actor/{ACTOR_TEXT}/state?prefix=0x6b2f&limit=3"))
    assert len(body["entries"]) == 3 and body["truncated"] is False
    body = await expect_ok(await client.get(f"/actor/{ACTOR_TEXT}/state?prefix=0x6b2f&limit=1000"))
    assert len(body["entries"]) == 3


@pytest.mark.parametrize("query,code", [
    ("key=0x", "invalid_key"),                      # empty key
    ("key=0x123", "invalid_key"),                   # odd number of digits
    ("key=0xzz", "invalid_key"),
    ("key=0x" + "00" * 1025, "invalid_key"),        # longer than 1024 bytes
    ("prefix=xyz", "invalid_prefix"),
    ("prefix=0x" + "00" * 1025, "invalid_prefix"),
    ("prefix=0x6b&limit=0", "invalid_limit"),
    ("prefix=0x6b&limit=1001", "invalid_limit"),
    ("prefix=0x6b&limit=-1", "invalid_limit"),
    ("limit=abc", "invalid_limit"),
    ("key=0x01&prefix=0x01", "invalid_query"),
    ("key=0x01&limit=5", "invalid_query"),
])
async def test_state_query_errors(client: TestClient[Any, Any], query: str, code: str) -> None:
    await expect_error(await client.get(f"/actor/{ACTOR_TEXT}/state?{query}"), 400, code)


# -- GET /actor/{address}/timers -----------------------------------------------------------------
async def test_timers_are_listed_in_due_order(client: TestClient[Any, Any]) -> None:
    body = await expect_ok(await client.get(f"/actor/{ACTOR_TEXT}/timers"))
    common = {"handler": "handle_timer", "fee_payer": ACTOR_TEXT, "gas_limit_per_fire": 550_000,
              "expires_at": 1 + 2_592_000}
    assert body == {
        "address": ACTOR_TEXT, "count": 2, "truncated": False, "height": 1,
        "timers": [  # scheduled "late" (nonce 0) then "early" (nonce 1); listed by due height
            {"id": _timer_id(51, b"early", 1), "height": 51, "seq": 1, "payload_size": 5, **common},
            {"id": _timer_id(101, b"late", 0), "height": 101, "seq": 0, "payload_size": 4, **common},
        ],
        # no CIP-1 timer (and the FIFO policy): an empty section, the default weight 1.0, nothing scanned
        "cip1": {"active": False, "count": 0, "next_nonce": 0, "weight": 1_000_000, "effective_weight": 1_000_000,
                 "weight_epoch": 0, "starved_blocks": 0, "starving": False, "timers": [], "scanned": 0,
                 "next": None},
    }


@pytest.mark.parametrize("query,code", [
    ("cip1_after=0x12", "invalid_cursor"),            # not 32 bytes
    ("cip1_after=0x" + "00" * 33, "invalid_cursor"),
    ("cip1_after=zz", "invalid_cursor"),
    ("limit=5", "invalid_query"),                     # unknown parameter
])
async def test_timers_query_errors(client: TestClient[Any, Any], query: str, code: str) -> None:
    await expect_error(await client.get(f"/actor/{ACTOR_TEXT}/timers?{query}"), 400, code)


# -- POST /actor/read ----------------------------------------------------------------------------
async def test_read_only_call_returns_the_result(client: TestClient[Any, Any]) -> None:
    body = await expect_ok(await client.post("/actor/read", json={"actor": ACTOR_TEXT, "handler": "echo",
                                                            "payload": "0x616263"}))
    assert body["result"] == "0x616263" and body["error"] is None and body["height"] == 1
    assert 0 < body["cycles_used"] < 1_000_000


async def test_read_only_call_discards_its_writes(client: TestClient[Any, Any], node: Node) -> None:
    for _ in range(2):  # would be 2 then 3 if the write stuck
        body = await expect_ok(await client.post("/actor/read", json={"actor": ACTOR_TEXT, "handler": "bump"}))
        assert body["result"] == "0x32"
    body = await expect_ok(await client.get(f"/actor/{ACTOR_TEXT}/state?key=0x636f756e74"))
    assert body["value"] == "0x31"


async def test_read_only_call_failures_are_reported_not_raised(client: TestClient[Any, Any]) -> None:
    body = await expect_ok(await client.post("/actor/read", json={"actor": ACTOR_TEXT, "handler": "nope"}))
    assert body["result"] is None and body["error"] == "no_such_handler"
    body = await expect_ok(await client.post("/actor/read", json={"actor": ACTOR_TEXT, "handler": "spin",
                                                            "cycles_limit": 50_000}))
    assert body == {"result": None, "error": "out_of_cycles", "cycles_used": 50_000, "height": 1}


@pytest.mark.parametrize("doc,code", [
    ([], "invalid_body"),
    ("echo", "invalid_body"),
    ({"actor": ACTOR_TEXT, "handler": "echo", "gas": 1}, "invalid_body"),
    ({"handler": "echo"}, "invalid_address"),
    ({"actor": "0x1234", "handler": "echo"}, "invalid_address"),
    ({"actor": 5, "handler": "echo"}, "invalid_address"),
    ({"actor": ACTOR_TEXT}, "invalid_handler"),
    ({"actor": ACTOR_TEXT, "handler": ""}, "invalid_handler"),
    ({"actor": ACTOR_TEXT, "handler": "h" * 257}, "invalid_handler"),
    ({"actor": ACTOR_TEXT, "handler": "\ud800"}, "invalid_handler"),
    ({"actor": ACTOR_TEXT, "handler": 7}, "invalid_handler"),
    ({"actor": ACTOR_TEXT, "handler": "echo", "payload": "0x1"}, "invalid_payload"),
    ({"actor": ACTOR_TEXT, "handler": "echo", "payload": 12}, "invalid_payload"),
    ({"actor": ACTOR_TEXT, "handler": "echo", "cycles_limit": 0}, "invalid_cycles_limit"),
    ({"actor": ACTOR_TEXT, "handler": "echo", "cycles_limit": 10_000_001}, "invalid_cycles_limit"),
    ({"actor": ACTOR_TEXT, "handler": "echo", "cycles_limit": True}, "invalid_cycles_limit"),
    ({"actor": ACTOR_TEXT, "handler": "echo", "cycles_limit": "5"}, "invalid_cycles_limit"),
])
async def test_read_body_errors(client: TestClient[Any, Any], doc: object, code: str) -> None:
    await expect_error(await client.post("/actor/read", json=doc), 400, code)


async def test_read_needs_a_json_body(client: TestClient[Any, Any]) -> None:
    await expect_error(await client.post("/actor/read", data=b"{not json",
                                         headers={"Content-Type": "application/json"}), 400, "invalid_body")
    await expect_error(await client.post("/actor/read", data=b'{"actor": "x"}',
                                         headers={"Content-Type": "text/plain"}), 400, "invalid_body")
    # /actor/read is POST only: "read" is not an address, so GET does not fall through to /actor/{address}
    # (its 405 advertises only POST; schemathesis' allow_header_conformance found GET there).
    resp = await client.get("/actor/read")
    assert resp.headers["Allow"] == "POST"
    await expect_error(resp, 405, "method_not_allowed")


# -- unknown actors and malformed addresses ------------------------------------------------------
@pytest.mark.parametrize("path", [f"/actor/{NOBODY}", f"/actor/{NOBODY}/state?key=0x01", f"/actor/{NOBODY}/state",
                                  f"/actor/{NOBODY}/timers"])
async def test_unknown_actor_is_404(client: TestClient[Any, Any], path: str) -> None:
    await expect_error(await client.get(path), 404, "actor_not_found")


async def test_read_of_unknown_actor_is_404(client: TestClient[Any, Any]) -> None:
    await expect_error(await client.post("/actor/read", json={"actor": NOBODY, "handler": "echo"}), 404,
                       "actor_not_found")


@pytest.mark.parametrize("text", ["0x1234", "1234" * 10, "0x" + "g" * 40, BAD_CHECKSUM])
@pytest.mark.parametrize("suffix", ["", "/state", "/timers"])
async def test_malformed_address_is_400(client: TestClient[Any, Any], text: str, suffix: str) -> None:
    await expect_error(await client.get(f"/actor/{text}{suffix}"), 400, "invalid_address")


# -- malformed actor / timer instructions at /submit ---------------------------------------------------
def _tx_bytes_with(ins: object, old: bytes, new: bytes) -> bytes:
    """A signed tx whose body has ``old`` replaced by ``new`` (length prefix fixed up)."""
    body = make_tx(ALICE_SK, 3, ins).body()  # type: ignore[arg-type]
    assert old in body
    bad = body.replace(old, new)
    return len(bad).to_bytes(4, "big") + bad


@pytest.mark.parametrize("ins,old,new,code", [
    (CancelTimer(b"\x11" * 32), bytes.fromhex("5820") + b"\x11" * 32, bytes.fromhex("581f") + b"\x11" * 31,
     "malformed"),                                                         # timer id of 31 bytes
    (CallActor(ACTOR, "echo", b""), bytes.fromhex("02646563686f"), bytes.fromhex("0260"), "malformed"),  # ""
    (DeployActor("x=1", b"", "", b""), bytes.fromhex("0360" "0440"), bytes.fromhex("0360" "044101"),
     "malformed"),                                                         # init payload without init handler
    (UpdateTimerConfig(TimerConfig()), bytes.fromhex("03190400"), bytes.fromhex("031b0000000100000000"),
     "invalid_config"),                                                    # max_timers_per_actor = 2^32
])
async def test_submit_refuses_malformed_actor_and_timer_instructions(client: TestClient[Any, Any], ins: object,
                                                                     old: bytes, new: bytes, code: str) -> None:
    resp = await client.post("/submit", data=_tx_bytes_with(ins, old, new),
                             headers={"Content-Type": "application/octet-stream"})
    await expect_error(resp, 400, code)


# -- plumbing --------------------------------------------------------------------------------------
async def test_actor_routes_are_counted_by_template(client: TestClient[Any, Any], node: Node) -> None:
    await client.get(f"/actor/{ACTOR_TEXT}/timers")
    counter = node.metrics.rpc_requests.labels(route="/actor/{address}/timers", status="200")
    assert counter._value.get() >= 1


class _ThreadFacade:
    """Records the thread each actor call runs on."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []

    def _seen(self) -> None:
        self.threads.append(threading.current_thread())

    def actor(self, address: bytes) -> dict[str, Any] | None:
        self._seen()
        return {"address": to_checksum_address(address)}

    def read_actor(self, actor: bytes, handler: str, payload: bytes, cycles_limit: int, *,
                   interrupt: object = None) -> dict[str, Any] | None:
        self._seen()
        return {"result": "0x" + payload.hex(), "error": None, "cycles_used": cycles_limit}


async def test_actor_calls_run_off_the_event_loop_thread() -> None:
    facade = _ThreadFacade()
    c: TestClient[Any, Any] = TestClient(TestServer(build_app(facade)))  # type: ignore[arg-type]
    await c.start_server()
    try:
        assert (await expect_ok(await c.get(f"/actor/{ACTOR_TEXT}")))["address"] == ACTOR_TEXT
        body = await expect_ok(await c.post("/actor/read", json={"actor": ACTOR_TEXT, "handler": "h", "payload": "ab"}))
        assert body == {"result": "0xab", "error": None, "cycles_used": 1_000_000}  # the default cycles limit
    finally:
        await c.close()
    assert len(facade.threads) == 2
    assert all(t is not threading.main_thread() for t in facade.threads)
