"""``POST /submit/batch`` (``rpc/submit_batch.py``, ``TxIntake.submit_batch_async``): many transactions in one
request, each answered exactly as ``POST /submit`` answers it; a body that does not split into whole transactions,
or holds too many, admits nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.config_errors import ConfigError
from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.chain.signature_pool import SignaturePool
from cowboy_node.node import intake
from cowboy_node.node.assemble import assemble
from cowboy_node.node.config import load_config, render_config
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.node.node import Node
from cowboy_node.rpc.facade import RpcError
from cowboy_node.rpc.server import build_app
from cowboy_node.rpc.submit_batch import split_tx_stream
from cowboy_protocol.http_client import RpcClient
from tests.helpers import ALICE_SK, BOB, BOB_SK, transfer
from tests.unit.chain.test_admission_pool import corpus
from tests.unit.chain.test_admission_pool_node import CountingPool

OCTETS = {"Content-Type": "application/octet-stream"}


# -- framing (golden bytes) ----------------------------------------------------------------------------------------
def test_a_stream_splits_at_each_length_prefix_keeping_the_prefix() -> None:
    body = bytes.fromhex("00000001a0" "00000000" "00000003010203")
    assert split_tx_stream(body, 3) == [bytes.fromhex("00000001a0"), bytes.fromhex("00000000"),
                                        bytes.fromhex("00000003010203")]


@pytest.mark.parametrize("body", [b"", bytes.fromhex("000001"), bytes.fromhex("00000005616263"),
                                  bytes.fromhex("00000001a0" "0000"), bytes.fromhex("00000001a0" "00000002ff")])
def test_an_empty_or_cut_short_stream_is_invalid_body(body: bytes) -> None:
    with pytest.raises(RpcError) as e:
        split_tx_stream(body, 10)
    assert (e.value.status, e.value.code) == (400, "invalid_body")


def test_more_than_the_limit_is_batch_too_large_and_the_limit_itself_is_accepted() -> None:
    one = bytes.fromhex("00000001a0")
    assert len(split_tx_stream(one * 2, 2)) == 2
    with pytest.raises(RpcError) as e:
        split_tx_stream(one * 3, 2)
    assert (e.value.status, e.value.code) == (413, "batch_too_large")


# -- through a node ------------------------------------------------------------------------------------------------
def _node(chain: Chain, dev: DevGenesis, pool: SignaturePool | None = None) -> Node:
    return assemble(chain, Mempool(MempoolConfig(max_nonce_gap=8)), dev.validator_key, block_time_ms=1000,
                    signature_pool=pool)


def _framed() -> list[bytes]:
    """The admission corpus's transactions that are whole ``tx_bytes`` (its empty and cut-short items are refused
    by the framing, as a whole batch: tested apart)."""
    return [raw for raw, _ in corpus() if raw and int.from_bytes(raw[:4], "big") == len(raw) - 4]


async def _client(node: Node, **kw: Any) -> TestClient[Any, Any]:
    client: TestClient[Any, Any] = TestClient(TestServer(build_app(node.api, **kw)))
    await client.start_server()
    return client


async def _one_by_one(node: Node, items: Sequence[bytes]) -> list[dict[str, Any]]:
    """What ``POST /submit`` answers for each item, in the batch's item form."""
    client = await _client(node)
    try:
        out = []
        for raw in items:
            resp = await client.post("/submit", data=raw, headers=OCTETS)
            body = await resp.json()
            out.append(body if resp.status == 200 else {"error": {"code": body["code"], "message": body["message"]}})
        return out
    finally:
        await client.close()


async def _batch(node: Node, body: bytes | None = None, *, json: Any = None, **kw: Any) -> tuple[int, Any]:
    client = await _client(node, **kw)
    try:
        if json is not None:
            resp = await client.post("/submit/batch", json=json)
        else:
            resp = await client.post("/submit/batch", data=body, headers=OCTETS)
        return resp.status, await resp.json()
    finally:
        await client.close()


def _hashes(node: Node) -> list[bytes]:
    return [t.tx_hash() for t in node.mempool.transactions()]


async def test_each_transaction_gets_the_answer_submit_gives_it_and_the_pool_ends_the_same(
        new_chain: Any, dev_genesis: DevGenesis) -> None:
    items = _framed()
    batched, single = _node(new_chain(), dev_genesis), _node(new_chain(), dev_genesis)
    try:
        status, got = await _batch(batched, b"".join(items))
        want = await _one_by_one(single, items)
    finally:
        batched.close()
        single.close()
    assert status == 200
    assert got["results"] == want
    codes = [r.get("status") or r["error"]["code"] for r in got["results"]]
    assert codes == [{"ok": "pending"}.get(c, c) for raw, c in corpus() if raw in items]
    assert "already_known" in codes and "bad_signature" in codes and codes.count("pending") == 4
    assert _hashes(batched) == _hashes(single)


async def test_the_json_form_answers_the_same_and_passes_a_cut_short_item_to_admission(
        new_chain: Any, dev_genesis: DevGenesis) -> None:
    items = [raw for raw, _ in corpus() if raw]  # the 3-byte body of a 5-byte prefix is one JSON item: malformed
    batched, single = _node(new_chain(), dev_genesis), _node(new_chain(), dev_genesis)
    try:
        status, got = await _batch(batched, json={"txs": ["0x" + raw.hex() for raw in items]})
        want = await _one_by_one(single, items)
    finally:
        batched.close()
        single.close()
    assert status == 200 and got["results"] == want
    assert {"code": "malformed"}.items() <= got["results"][[r for r, _ in corpus() if r].index(
        b"\x00\x00\x00\x05abc")]["error"].items()


@pytest.mark.parametrize("tail", [b"\x00\x00\x00\x05abc", b"\x00\x00"])
async def test_a_batch_that_does_not_split_into_whole_transactions_admits_nothing(
        chain: Chain, dev_genesis: DevGenesis, tail: bytes) -> None:
    node = _node(chain, dev_genesis)
    try:
        status, body = await _batch(node, transfer(ALICE_SK, 0, BOB, 1).to_bytes() + tail)
    finally:
        node.close()
    assert (status, body["code"]) == (400, "invalid_body")
    assert len(node.mempool) == 0


@pytest.mark.parametrize("doc", [{"txs": []}, {"txs": "00"}, {"txs": [1]}, {"tx": "00"}, [], {"txs": ["0xzz"]},
                                 {"txs": [""]}])
async def test_a_json_body_that_is_not_a_list_of_hex_transactions_is_invalid_body(
        chain: Chain, dev_genesis: DevGenesis, doc: Any) -> None:
    node = _node(chain, dev_genesis)
    try:
        status, body = await _batch(node, json=doc)
    finally:
        node.close()
    assert (status, body["code"]) == (400, "invalid_body")


@pytest.mark.parametrize("form", ["octets", "json"])
async def test_more_transactions_than_max_submit_batch_admit_nothing(
        chain: Chain, dev_genesis: DevGenesis, form: str) -> None:
    txs = [transfer(ALICE_SK, n, BOB, 1).to_bytes() for n in range(3)]
    node = _node(chain, dev_genesis)
    try:
        if form == "json":
            status, body = await _batch(node, json={"txs": [t.hex() for t in txs]}, max_submit_batch=2)
        else:
            status, body = await _batch(node, b"".join(txs), max_submit_batch=2)
        assert (status, body["code"]) == (413, "batch_too_large")
        assert len(node.mempool) == 0
        status, body = await _batch(node, b"".join(txs[:2]), max_submit_batch=2)
    finally:
        node.close()
    assert status == 200 and [r["status"] for r in body["results"]] == ["pending", "pending"]


async def test_with_a_signature_pool_the_batch_is_recovered_as_one_pool_batch_with_the_same_answers(
        new_chain: Any, dev_genesis: DevGenesis) -> None:
    items = _framed()
    pool = CountingPool()
    pooled, plain = _node(new_chain(), dev_genesis, pool), _node(new_chain(), dev_genesis)
    try:
        got = await _batch(pooled, b"".join(items))
        want = await _batch(plain, b"".join(items))
    finally:
        pooled.close()
        plain.close()
    assert got == want and got[0] == 200
    assert pool.batches == [len(items)]
    assert _hashes(pooled) == _hashes(plain)


async def test_a_large_batch_gives_the_event_loop_back_between_slices(
        chain: Chain, dev_genesis: DevGenesis, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(intake, "BATCH_SLICE", 2)
    node = _node(chain, dev_genesis)
    txs = [transfer(ALICE_SK, n, BOB, 1).to_bytes() for n in range(5)]
    seen: list[int] = []

    async def watch() -> None:  # scheduled before the batch starts: runs at the batch's first return to the loop
        seen.append(len(node.mempool))

    try:
        task = asyncio.ensure_future(watch())
        results = await node.api.submit_batch_async(txs)
        await task
    finally:
        node.close()
    assert [r["status"] for r in results] == ["pending"] * 5
    assert seen == [2]  # one slice admitted, the rest after the loop ran


async def test_a_stopping_node_refuses_the_batch_and_admits_nothing(chain: Chain, dev_genesis: DevGenesis) -> None:
    node = _node(chain, dev_genesis)
    node.request_stop()
    try:
        status, body = await _batch(node, transfer(ALICE_SK, 0, BOB, 1).to_bytes())
    finally:
        node.close()
    assert (status, body["code"]) == (503, "shutting_down")
    assert len(node.mempool) == 0


async def test_the_typed_client_sends_a_batch(chain: Chain, dev_genesis: DevGenesis) -> None:
    node = _node(chain, dev_genesis)
    client = await _client(node)
    try:
        rpc = RpcClient(str(client.make_url("")))
        out = await asyncio.to_thread(rpc.submit_batch, [transfer(ALICE_SK, 0, BOB, 1).to_bytes(),
                                                         transfer(BOB_SK, 0, BOB, 10**30).to_bytes()])
    finally:
        await client.close()
        node.close()
    assert out["results"][0]["status"] == "pending"
    assert out["results"][1]["error"]["code"] == "insufficient_funds"


# -- configuration -------------------------------------------------------------------------------------------------
def test_max_submit_batch_is_read_defaults_to_1000_and_out_of_range_names_the_key(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("")
    assert load_config(tmp_path).rpc_max_submit_batch == 1000
    (tmp_path / "config.toml").write_text("[rpc]\nmax_submit_batch = 7\n")
    assert load_config(tmp_path).rpc_max_submit_batch == 7
    for bad in ("0", "100001", '"7"'):
        (tmp_path / "config.toml").write_text(f"[rpc]\nmax_submit_batch = {bad}\n")
        with pytest.raises(ConfigError) as e:
            load_config(tmp_path)
        assert e.value.key == "rpc.max_submit_batch"
    text = render_config(chain_id="c", rpc_addr="127.0.0.1:4000", quic_addr="127.0.0.1:4433",
                         metrics_addr="127.0.0.1:9464", block_time_ms=1000)
    assert "\nmax_submit_batch = 1000\n" in text
    with pytest.raises(ValueError, match="max_submit_batch"):
        build_app(object(), max_submit_batch=0)  # type: ignore[arg-type]
