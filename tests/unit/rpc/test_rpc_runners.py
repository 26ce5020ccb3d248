"""HTTP runner and parameter endpoints against a real in-process node (docs/api.md "Runners and parameters").

Block 1 registers ALICE then BOB (registry indices 0 and 1); block 2 pauses BOB. Routes: ``GET /params``,
``GET /runners/active``, ``GET /runner/{address}``. Bad input gets a 4xx with a stable JSON code and
changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.node.assemble import assemble
from cowboy_node.node.node import Node
from cowboy_node.observability import NodeMetrics
from cowboy_node.rpc.server import build_app
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.receipt import STATUS_SUCCESS
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.types.runner_instructions import RunnerHeartbeat, RunnerRegister
from tests.helpers import ALICE, ALICE_FUNDS, ALICE_SK, BOB, BOB_SK, make_dev_genesis, make_tx
from tests.unit.node_harness import expect_error, expect_ok, read_only_client
from tests.unit.runner.test_runner_support import CAPS, CARD

STAKE = 10**18  # the default min_runner_stake
ALICE_TEXT = to_checksum_address(ALICE)
BOB_TEXT = to_checksum_address(BOB)
NOBODY = to_checksum_address(b"\x42" * 20)
_FIRST_LETTER = next(i for i, c in enumerate(ALICE_TEXT) if i >= 2 and c.isalpha())
BAD_CHECKSUM = ALICE_TEXT[:_FIRST_LETTER] + ALICE_TEXT[_FIRST_LETTER].swapcase() + ALICE_TEXT[_FIRST_LETTER + 1:]
CAPS_JSON = {"job_types": ["http"], "regions": ["eu"], "http_domains": ["example.com"], "max_concurrent_jobs": 4,
             "tee_types": [], "pools": []}
CARD_JSON = {"http": {"base_price": "1000", "price_per_unit": "0"}}


@pytest.fixture(scope="module")
def node() -> Iterator[Node]:
    dev = make_dev_genesis(balances={ALICE: ALICE_FUNDS, BOB: ALICE_FUNDS})
    n = assemble(Chain(MemoryStore(), dev.genesis), Mempool(MempoolConfig()), dev.validator_key,
                   block_time_ms=1000, metrics=NodeMetrics())
    kw = {"cycles_limit": 100_000, "cells_limit": 5_000}
    for sk in (ALICE_SK, BOB_SK):
        n.api.submit_transaction(make_tx(sk, 0, RunnerRegister(STAKE, CAPS, CARD), **kw).to_bytes())  # type: ignore[arg-type]
    asyncio.run(n.produce_block())
    n.api.submit_transaction(make_tx(BOB_SK, 1, RunnerHeartbeat(accepting=False), **kw).to_bytes())  # type: ignore[arg-type]
    asyncio.run(n.produce_block())
    for h in (1, 2):
        receipts = n.chain.receipts_at(h)
        assert receipts is not None and all(r.status == STATUS_SUCCESS for r in receipts), receipts
    yield n
    n.close()


@pytest.fixture
async def client(node: Node) -> AsyncIterator[TestClient[Any, Any]]:
    async with read_only_client(node) as c:  # asserts on exit that no request changed the chain
        yield c




def _record(address: str, index: int, health: str, last_heartbeat: int, eligible: bool) -> dict[str, Any]:
    return {"address": address, "index": index, "stake": str(STAKE), "health": health, "registered_at": 1,
            "last_heartbeat": last_heartbeat, "reputation_x1e9": 50_000_000_000, "active_jobs": 0,
            "unbonding_until": 0, "capabilities": CAPS_JSON, "rate_card": CARD_JSON, "eligible_now": eligible}


# -- GET /params -----------------------------------------------------------------------------------
async def test_params_lists_every_governed_parameter(client: TestClient[Any, Any]) -> None:
    body = await expect_ok(await client.get("/params"))
    assert set(body) == {"height", "basefee", "basefees", "timer", "timer_policy", "limits", "cip11", "runners",
                         "cip11_params", "governance"}
    assert body["height"] == 2
    assert body["runners"]["min_runner_stake"] == STAKE and body["runners"]["unbonding_blocks"] == 1_000
    assert body["limits"]["heartbeat_timeout_blocks"] == 100
    assert body["cip11"]["CIP11_PRESENT_FIRST_ENABLED"] is True  # make_dev_genesis: phase 2
    assert body["basefee"]["min_basefee"] == 10_000 and body["timer"]["max_ttl_blocks"] == 2_592_000
    assert set(body["basefees"]) == {"cycle", "cell"}


# -- GET /runners/active ----------------------------------------------------------------------------
async def test_active_runners_in_registry_index_order(client: TestClient[Any, Any]) -> None:
    body = await expect_ok(await client.get("/runners/active"))
    assert body == {"height": 2, "count": 2, "offset": 0, "heartbeat_timeout_blocks": 100, "truncated": False,
                    "runners": [_record(ALICE_TEXT, 0, "healthy", 1, True),
                                _record(BOB_TEXT, 1, "paused", 2, False)]}


async def test_active_runners_offset_and_limit(client: TestClient[Any, Any]) -> None:
    body = await expect_ok(await client.get("/runners/active?limit=1"))
    assert [r["index"] for r in body["runners"]] == [0] and body["truncated"] is True and body["count"] == 2
    body = await expect_ok(await client.get("/runners/active?offset=1&limit=1000"))
    assert [r["address"] for r in body["runners"]] == [BOB_TEXT] and body["truncated"] is False
    body = await expect_ok(await client.get("/runners/active?offset=5"))
    assert body["runners"] == [] and body["count"] == 2 and body["offset"] == 5


@pytest.mark.parametrize("query,code", [
    ("limit=0", "invalid_limit"), ("limit=1001", "invalid_limit"), ("limit=x", "invalid_limit"),
    ("offset=-1", "invalid_offset"), ("offset=4294967296", "invalid_offset"), ("offset=", "invalid_offset"),
])
async def test_active_runners_query_errors(client: TestClient[Any, Any], query: str, code: str) -> None:
    await expect_error(await client.get(f"/runners/active?{query}"), 400, code)


# -- GET /runner/{address} ----------------------------------------------------------------------------
@pytest.mark.parametrize("text", [ALICE_TEXT, "0x" + ALICE.hex(), "0x" + ALICE.hex().upper()])
async def test_runner_record(client: TestClient[Any, Any], text: str) -> None:
    body = await expect_ok(await client.get(f"/runner/{text}"))
    assert body == {**_record(ALICE_TEXT, 0, "healthy", 1, True), "height": 2}


async def test_unknown_runner_is_404_runner_not_found(client: TestClient[Any, Any]) -> None:
    await expect_error(await client.get(f"/runner/{NOBODY}"), 404, "runner_not_found")


@pytest.mark.parametrize("text", [BAD_CHECKSUM, "0x1234", "zz", "0x" + "g" * 40, ALICE.hex()])
async def test_bad_runner_address_is_400_invalid_address(client: TestClient[Any, Any], text: str) -> None:
    await expect_error(await client.get(f"/runner/{text}"), 400, "invalid_address")


async def test_runner_routes_answer_405_for_post(client: TestClient[Any, Any]) -> None:
    await expect_error(await client.post("/params"), 405, "method_not_allowed")


async def test_a_facade_without_the_runner_methods_answers_501() -> None:
    c: TestClient[Any, Any] = TestClient(TestServer(build_app(object())))  # type: ignore[arg-type]
    await c.start_server()
    try:
        for path in ("/params", "/runners/active", f"/runner/{ALICE_TEXT}"):
            await expect_error(await c.get(path), 501, "not_implemented")
    finally:
        await c.close()
