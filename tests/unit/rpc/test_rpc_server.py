"""HTTP API server: every route's success path and every error path, against an in-memory facade."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry, Counter

from cowboy_node.rpc.facade import RpcError
from cowboy_node.rpc.server import build_app, start_rpc_server
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.crypto.keccak import keccak256

ADDR = bytes(range(1, 21))
TX_HASH = bytes(range(32))
UNKNOWN_HASH = b"\xee" * 32


class FakeFacade:
    """In-memory NodeFacade: a couple of blocks, one committed transaction, accounts on demand."""

    def __init__(self) -> None:
        self.healthy = True
        self.submitted: list[bytes] = []
        self.calls: list[str] = []
        self.fail_with: dict[str, BaseException] = {}
        self.blocks: dict[int, dict[str, Any]] = {
            0: {"height": 0, "hash": "0x" + "00" * 32, "transactions": []},
            1: {"height": 1, "hash": "0x" + "11" * 32, "transactions": ["0x" + TX_HASH.hex()]},
        }
        self.txs: dict[bytes, dict[str, Any]] = {TX_HASH: {"hash": "0x" + TX_HASH.hex(), "status": "committed",
                                                           "height": 1, "index": 0}}
        self.receipts: dict[bytes, dict[str, Any]] = {TX_HASH: {"tx_hash": "0x" + TX_HASH.hex(), "success": True,
                                                                "height": 1, "index": 0}}
        self.proof_keys: list[bytes] = []

    def _call(self, name: str) -> None:
        self.calls.append(name)
        exc = self.fail_with.get(name)
        if exc is not None:
            raise exc

    def submit_transaction(self, tx_bytes: bytes) -> dict[str, Any]:
        self._call("submit_transaction")
        self.submitted.append(tx_bytes)
        return {"tx_hash": "0x" + keccak256(tx_bytes).hex(), "status": "pending"}

    def health(self) -> dict[str, Any]:
        self._call("health")
        return {"ok": self.healthy, "height": 1, "last_block_age_ms": 5 if self.healthy else 99_999}

    def status(self) -> dict[str, Any]:
        self._call("status")
        return {"chain_id": "cowboy-test-1", "height": 1, "hash": "0x" + "11" * 32, "state_root": "0x" + "22" * 32,
                "timestamp_ms": 1, "basefee": {"cycle": 100_000, "cell": 100_000},
                "mempool": {"txs": 0, "bytes": 0}}

    def height(self) -> int:
        self._call("height")
        return 1

    def block(self, height: int) -> dict[str, Any] | None:
        self._call("block")
        return self.blocks.get(height)

    def transaction(self, tx_hash: bytes) -> dict[str, Any] | None:
        self._call("transaction")
        return self.txs.get(tx_hash)

    def receipt(self, tx_hash: bytes) -> dict[str, Any] | None:
        self._call("receipt")
        return self.receipts.get(tx_hash)

    def account(self, address: bytes) -> dict[str, Any]:
        self._call("account")
        return {"address": to_checksum_address(address), "balance": "1000", "nonce": 3, "next_pending_nonce": 4}

    def state_proof(self, key: bytes) -> dict[str, Any]:
        self._call("state_proof")
        self.proof_keys.append(key)
        return {"root": "0x" + "22" * 32, "height": 1, "proof": {"key": "0x" + key.hex()}}


MakeClient = Callable[..., Awaitable[TestClient[Any, Any]]]


@pytest.fixture
async def make_client() -> AsyncIterator[MakeClient]:
    clients: list[TestClient[Any, Any]] = []

    async def make(facade: FakeFacade, **kw: Any) -> TestClient[Any, Any]:
        client: TestClient[Any, Any] = TestClient(TestServer(build_app(facade, **kw)))
        await client.start_server()
        clients.append(client)
        return client

    yield make
    for c in clients:
        await c.close()


@pytest.fixture
def facade() -> FakeFacade:
    return FakeFacade()


@pytest.fixture
async def client(make_client: MakeClient, facade: FakeFacade) -> TestClient[Any, Any]:
    return await make_client(facade)


async def _error(resp: Any, status: int, code: str) -> str:
    assert resp.status == status, await resp.text()
    assert resp.content_type == "application/json"
    body = await resp.json()
    assert set(body) == {"code", "message"}
    assert body["code"] == code
    assert isinstance(body["message"], str) and body["message"]
    message: str = body["message"]
    return message


# -- success paths ---------------------------------------------------------------------------
async def test_submit_raw_octet_stream(client: TestClient[Any, Any], facade: FakeFacade) -> None:
    raw = b"\x00\x00\x00\x03abc"
    resp = await client.post("/submit", data=raw, headers={"Content-Type": "application/octet-stream"})
    assert resp.status == 200
    assert await resp.json() == {"tx_hash": "0x" + keccak256(raw).hex(), "status": "pending"}
    assert facade.submitted == [raw]


@pytest.mark.parametrize("prefix", ["0x", ""])
async def test_submit_json_hex(client: TestClient[Any, Any], facade: FakeFacade, prefix: str) -> None:
    raw = b"\x00\x00\x00\x02\xab\xcd"
    resp = await client.post("/submit", json={"tx": prefix + raw.hex()})
    assert resp.status == 200
    assert (await resp.json())["tx_hash"] == "0x" + keccak256(raw).hex()
    assert facade.submitted == [raw]


async def test_submit_json_with_charset(client: TestClient[Any, Any], facade: FakeFacade) -> None:
    resp = await client.post("/submit", data=json.dumps({"tx": "0x0102"}),
                             headers={"Content-Type": "application/json; charset=utf-8"})
    assert resp.status == 200
    assert facade.submitted == [b"\x01\x02"]


async def test_health_ok_and_unhealthy(client: TestClient[Any, Any], facade: FakeFacade) -> None:
    resp = await client.get("/health")
    assert resp.status == 200
    assert await resp.json() == {"ok": True, "height": 1, "last_block_age_ms": 5}
    facade.healthy = False
    resp = await client.get("/health")
    assert resp.status == 503
    assert await resp.json() == {"ok": False, "height": 1, "last_block_age_ms": 99_999}


async def test_status(client: TestClient[Any, Any]) -> None:
    resp = await client.get("/status")
    assert resp.status == 200
    body = await resp.json()
    assert body["chain_id"] == "cowboy-test-1"
    assert body["basefee"] == {"cycle": 100_000, "cell": 100_000}


async def test_height(client: TestClient[Any, Any]) -> None:
    resp = await client.get("/height")
    assert resp.status == 200
    assert await resp.json() == {"height": 1}


async def test_block(client: TestClient[Any, Any], facade: FakeFacade) -> None:
    for h in (0, 1):
        resp = await client.get(f"/block/{h}")
        assert resp.status == 200
        assert await resp.json() == facade.blocks[h]


@pytest.mark.parametrize("text", ["0x" + TX_HASH.hex(), TX_HASH.hex(), "0X" + TX_HASH.hex().upper()])
async def test_tx_and_receipt(client: TestClient[Any, Any], facade: FakeFacade, text: str) -> None:
    resp = await client.get(f"/tx/{text}")
    assert resp.status == 200
    assert await resp.json() == facade.txs[TX_HASH]
    resp = await client.get(f"/tx/{text}/receipt")
    assert resp.status == 200
    assert await resp.json() == facade.receipts[TX_HASH]


@pytest.mark.parametrize("text", ["0x" + ADDR.hex(), to_checksum_address(ADDR)])
async def test_account(client: TestClient[Any, Any], text: str) -> None:
    resp = await client.get(f"/account/{text}")
    assert resp.status == 200
    body = await resp.json()
    assert body == {"address": to_checksum_address(ADDR), "balance": "1000", "nonce": 3, "next_pending_nonce": 4}


async def test_state_proof(client: TestClient[Any, Any], facade: FakeFacade) -> None:
    resp = await client.get("/state/proof", params={"key": "0xdeadbeef"})
    assert resp.status == 200
    assert (await resp.json())["proof"] == {"key": "0xdeadbeef"}
    assert facade.proof_keys == [b"\xde\xad\xbe\xef"]


# -- error paths -----------------------------------------------------------------------------
@pytest.mark.parametrize("height", ["-1", "abc", "1.5", "+1", "%201", "99999999999999999999999", "0x10"])
async def test_block_bad_height(client: TestClient[Any, Any], height: str) -> None:
    msg = await _error(await client.get(f"/block/{height}"), 400, "invalid_height")
    assert "height" in msg


async def test_block_unknown(client: TestClient[Any, Any]) -> None:
    await _error(await client.get("/block/7"), 404, "not_found")


@pytest.mark.parametrize("text", ["0x1234", "zz" * 32, "0x" + "00" * 33, "0x" + "g" * 64, "0x" + "0" * 63])
async def test_tx_bad_hash(client: TestClient[Any, Any], text: str) -> None:
    msg = await _error(await client.get(f"/tx/{text}"), 400, "invalid_hash")
    assert "hash" in msg
    await _error(await client.get(f"/tx/{text}/receipt"), 400, "invalid_hash")


async def test_tx_and_receipt_unknown(client: TestClient[Any, Any], facade: FakeFacade) -> None:
    await _error(await client.get(f"/tx/0x{UNKNOWN_HASH.hex()}"), 404, "not_found")
    await _error(await client.get(f"/tx/0x{UNKNOWN_HASH.hex()}/receipt"), 404, "not_found")
    facade.txs[UNKNOWN_HASH] = {"hash": "0x" + UNKNOWN_HASH.hex(), "status": "pending"}
    resp = await client.get(f"/tx/0x{UNKNOWN_HASH.hex()}")
    assert resp.status == 200
    await _error(await client.get(f"/tx/0x{UNKNOWN_HASH.hex()}/receipt"), 404, "not_found")


@pytest.mark.parametrize("text", ["0x1234", "0x" + "zz" * 20, ADDR.hex(), "0x" + "00" * 21,
                                  # mixed case with a wrong checksum
                                  "0x" + to_checksum_address(ADDR)[2:].swapcase()[:-1] + "A"])
async def test_account_bad_address(client: TestClient[Any, Any], facade: FakeFacade, text: str) -> None:
    msg = await _error(await client.get(f"/account/{text}"), 400, "invalid_address")
    assert "address" in msg
    assert "account" not in facade.calls


@pytest.mark.parametrize("query", ["", "?key=", "?key=0x", "?key=0x123", "?key=xyz", "?key=0x" + "00" * 1025])
async def test_state_proof_bad_key(client: TestClient[Any, Any], query: str) -> None:
    msg = await _error(await client.get("/state/proof" + query), 400, "invalid_key")
    assert "key" in msg


@pytest.mark.parametrize("key", [b"timer/t/" + b"\x22" * 32, b"timer/a/" + b"\x11" * 52])
async def test_state_proof_of_a_derived_key_is_refused(client: TestClient[Any, Any], facade: FakeFacade,
                                                       key: bytes) -> None:
    """A derived key is stored but not in the tree: its exclusion proof would say a present key is absent."""
    msg = await _error(await client.get("/state/proof", params={"key": "0x" + key.hex()}), 400, "derived_key")
    assert "timer/h/" in msg and facade.proof_keys == []
    resp = await client.get("/state/proof", params={"key": "0x" + b"timer/h/".hex()})  # a committed key is proven
    assert resp.status == 200 and facade.proof_keys == [b"timer/h/"]


@pytest.mark.parametrize(("body", "ctype"), [
    (b"not json", "application/json"),
    (b'["0x00"]', "application/json"),
    (b'{"tx": 5}', "application/json"),
    (b'{"transaction": "0x00"}', "application/json"),
    (b'{"tx": "0xzz"}', "application/json"),
    (b'{"tx": "0x123"}', "application/json"),
    (b'{"tx": "0x"}', "application/json"),
    (b"\xff\xfe", "application/json"),
    (b"", "application/octet-stream"),
    (b"tx=00", "application/x-www-form-urlencoded"),
    (b"00", "text/plain"),
])
async def test_submit_bad_body(client: TestClient[Any, Any], facade: FakeFacade, body: bytes, ctype: str) -> None:
    await _error(await client.post("/submit", data=body, headers={"Content-Type": ctype}), 400, "invalid_body")
    assert facade.submitted == []


async def test_submit_body_too_large_raw(make_client: MakeClient, facade: FakeFacade) -> None:
    client = await make_client(facade, max_body_bytes=1000)
    resp = await client.post("/submit", data=b"\x00" * 1000, headers={"Content-Type": "application/octet-stream"})
    assert resp.status == 200  # exactly the limit is fine
    resp = await client.post("/submit", data=b"\x00" * 1001, headers={"Content-Type": "application/octet-stream"})
    await _error(resp, 413, "body_too_large")
    assert len(facade.submitted) == 1


async def test_submit_body_too_large_default_limit(client: TestClient[Any, Any], facade: FakeFacade) -> None:
    resp = await client.post("/submit", data=io.BytesIO(b"\x00" * (1_048_576 + 1)),
                             headers={"Content-Type": "application/octet-stream"})
    await _error(resp, 413, "body_too_large")
    body = json.dumps({"tx": "0x" + "00" * 524_288}).encode()
    assert len(body) > 1_048_576
    await _error(await client.post("/submit", data=io.BytesIO(body), headers={"Content-Type": "application/json"}),
                 413, "body_too_large")
    assert facade.submitted == []


async def test_submit_body_too_large_chunked(make_client: MakeClient, facade: FakeFacade) -> None:
    """Without a Content-Length the limit is enforced while reading (client_max_size)."""
    client = await make_client(facade, max_body_bytes=1000)

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(5):
            yield b"\x00" * 300

    resp = await client.post("/submit", data=chunks(), headers={"Content-Type": "application/octet-stream"})
    await _error(resp, 413, "body_too_large")
    assert facade.submitted == []


async def test_oversized_content_length_rejected_before_body_is_sent(make_client: MakeClient,
                                                                     facade: FakeFacade) -> None:
    client = await make_client(facade, max_body_bytes=1000)
    reader, writer = await asyncio.open_connection(client.host, client.port)
    try:
        writer.write(b"POST /submit HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                     b"Content-Length: 1000000000\r\n\r\n" + b"\x00" * 10)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), timeout=5)
    finally:
        writer.close()
        await writer.wait_closed()
    assert status_line.split()[1] == b"413"
    assert facade.submitted == []


async def _raw_exchange(client: TestClient[Any, Any], request: bytes) -> list[bytes]:
    """Send ``request`` on a fresh connection; return the first status line and, if 100, the next one."""
    reader, writer = await asyncio.open_connection(client.host, client.port)
    try:
        writer.write(request)
        await writer.drain()
        lines = [await asyncio.wait_for(reader.readline(), timeout=5)]
        if lines[0].split()[1] == b"100":
            await asyncio.wait_for(reader.readline(), timeout=5)  # blank line after the interim response
            writer.write(b"\x00\x00\x00\x01\x00")
            await writer.drain()
            lines.append(await asyncio.wait_for(reader.readline(), timeout=5))
    finally:
        writer.close()
        await writer.wait_closed()
    return lines


async def test_expect_continue_oversized_is_refused_before_body(make_client: MakeClient,
                                                                facade: FakeFacade) -> None:
    client = await make_client(facade, max_body_bytes=1000)
    lines = await _raw_exchange(client, b"POST /submit HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                                        b"Content-Type: application/octet-stream\r\nContent-Length: 5000\r\n\r\n")
    assert [line.split()[1] for line in lines] == [b"413"]
    assert facade.submitted == []


async def test_expect_continue_within_limit_is_accepted(make_client: MakeClient, facade: FakeFacade) -> None:
    client = await make_client(facade, max_body_bytes=1000)
    lines = await _raw_exchange(client, b"POST /submit HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                                        b"Content-Type: application/octet-stream\r\nContent-Length: 5\r\n\r\n")
    assert [line.split()[1] for line in lines] == [b"100", b"200"]
    assert facade.submitted == [b"\x00\x00\x00\x01\x00"]


async def test_unknown_expectation_is_417(client: TestClient[Any, Any]) -> None:
    resp = await client.post("/submit", data=b"\x00", headers={"Expect": "something-else",
                                                              "Content-Type": "application/octet-stream"})
    await _error(resp, 417, "expectation_failed")


async def test_unknown_route_is_json_404(client: TestClient[Any, Any]) -> None:
    for path in ("/nope", "/block", "/tx/" + "00" * 32 + "/other", "/"):
        msg = await _error(await client.get(path), 404, "not_found")
        assert path in msg


async def test_wrong_method_is_json_405(client: TestClient[Any, Any]) -> None:
    await _error(await client.get("/submit"), 405, "method_not_allowed")
    resp = await client.post("/status", data=b"")
    await _error(resp, 405, "method_not_allowed")
    assert resp.headers["Allow"] == "GET"
    await _error(await client.delete("/block/1"), 405, "method_not_allowed")


async def test_rpc_error_passthrough(client: TestClient[Any, Any], facade: FakeFacade) -> None:
    facade.fail_with["submit_transaction"] = RpcError(400, "nonce_too_low", "nonce 1 is below the account nonce 3")
    resp = await client.post("/submit", data=b"\x00", headers={"Content-Type": "application/octet-stream"})
    assert await _error(resp, 400, "nonce_too_low") == "nonce 1 is below the account nonce 3"
    facade.fail_with["status"] = RpcError(503, "shutting_down", "node is shutting down")
    assert await _error(await client.get("/status"), 503, "shutting_down") == "node is shutting down"


async def test_handler_exception_is_generic_500(client: TestClient[Any, Any], facade: FakeFacade) -> None:
    facade.fail_with["block"] = RuntimeError("secret internal detail")
    msg = await _error(await client.get("/block/1"), 500, "internal_error")
    assert "secret" not in msg
    facade.fail_with["health"] = KeyError("boom")
    await _error(await client.get("/health"), 500, "internal_error")
    # The server keeps serving afterwards.
    assert (await client.get("/height")).status == 200


async def test_metrics_count_route_templates(make_client: MakeClient, facade: FakeFacade) -> None:
    class Metrics:
        def __init__(self) -> None:
            self.registry = CollectorRegistry()
            self.rpc_requests = Counter("rpc_requests", "test", ["route", "status"], registry=self.registry)

    m = Metrics()
    client = await make_client(facade, metrics=m)
    await client.get("/block/1")
    await client.get("/block/0")
    await client.get("/block/9")
    await client.get(f"/tx/{TX_HASH.hex()}/receipt")
    await client.get("/nope")

    def count(route: str, status: str) -> float | None:
        return m.registry.get_sample_value("rpc_requests_total", {"route": route, "status": status})

    assert count("/block/{height}", "200") == 2
    assert count("/block/{height}", "404") == 1
    assert count("/tx/{hash}/receipt", "200") == 1
    assert count("/block/1", "200") is None
    assert count("unmatched", "404") == 1


async def test_metrics_without_counter_attribute_is_ignored(make_client: MakeClient, facade: FakeFacade) -> None:
    client = await make_client(facade, metrics=object())
    assert (await client.get("/height")).status == 200


async def test_start_rpc_server_binds_and_cleans_up(facade: FakeFacade) -> None:
    runner = await start_rpc_server(facade, "127.0.0.1", 0)
    try:
        host, port = runner.addresses[0][:2]
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET /height HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), timeout=5)
        writer.close()
        await writer.wait_closed()
    finally:
        await runner.cleanup()
    assert data.startswith(b"HTTP/1.1 200")
    assert data.endswith(b'{"height": 1}')


def test_build_app_rejects_nonpositive_limit(facade: FakeFacade) -> None:
    with pytest.raises(ValueError, match="max_body_bytes"):
        build_app(facade, max_body_bytes=0)
