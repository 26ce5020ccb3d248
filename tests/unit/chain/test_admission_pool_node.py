"""The node's signature pool: ``[mempool] admission_workers``, and ``POST /submit`` through the pool answering
exactly as without it. The pool here recovers in-process (``SignaturePool(0)``, the same function the workers run);
real worker processes are exercised in ``tests/e2e/test_admission_pool_processes.py``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.config_errors import ConfigError
from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.chain.signature_pool import PreparedOrUndecodable, SignaturePool
from cowboy_node.node.assemble import assemble
from cowboy_node.node.config import load_config, render_config
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.node.node import Node
from cowboy_node.rpc.facade import RpcError
from cowboy_node.rpc.server import build_app
from tests.helpers import ALICE_SK, BOB, transfer
from tests.unit.chain.test_admission_pool import corpus


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "config.toml").write_text(text)
    return tmp_path


def test_default_is_in_process(tmp_path: Path) -> None:
    assert load_config(_write(tmp_path, "")).mempool_admission_workers == 0


def test_workers_is_read(tmp_path: Path) -> None:
    assert load_config(_write(tmp_path, "[mempool]\nadmission_workers = 2\n")).mempool_admission_workers == 2


@pytest.mark.parametrize("value", ["65", "-1", '"1"', "1.0"])
def test_out_of_range_or_mistyped_is_refused_naming_the_key(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(_write(tmp_path, f"[mempool]\nadmission_workers = {value}\n"))
    assert e.value.key == "mempool.admission_workers"


def test_rendered_config_documents_the_key_and_keeps_the_default(tmp_path: Path) -> None:
    text = render_config(chain_id="c", rpc_addr="127.0.0.1:4000", quic_addr="127.0.0.1:4433",
                         metrics_addr="127.0.0.1:9464", block_time_ms=1000)
    assert "# admission_workers = 0" in text
    assert load_config(_write(tmp_path, text)).mempool_admission_workers == 0


class CountingPool(SignaturePool):
    """In-process pool that counts the batches and transactions it was given."""

    def __init__(self) -> None:
        super().__init__(0)
        self.batches: list[int] = []

    def submit(self, batch: Sequence[bytes], max_body: int | None = None) -> Future[list[PreparedOrUndecodable]]:
        self.batches.append(len(batch))
        return super().submit(batch, max_body)


def _node(chain: Chain, dev: DevGenesis, pool: SignaturePool | None) -> Node:
    return assemble(chain, Mempool(MempoolConfig(max_nonce_gap=8)), dev.validator_key, block_time_ms=1000,
                    signature_pool=pool)


async def _post_all(node: Node, items: list[bytes]) -> list[tuple[int, Any]]:
    client: TestClient[Any, Any] = TestClient(TestServer(build_app(node.api)))
    await client.start_server()
    try:
        out = []
        for raw in items:
            resp = await client.post("/submit", data=raw, headers={"Content-Type": "application/octet-stream"})
            out.append((resp.status, await resp.json()))
        return out
    finally:
        await client.close()


async def test_submit_through_the_pool_answers_as_without(new_chain: Any, dev_genesis: DevGenesis) -> None:
    items = [raw for raw, _ in corpus()]
    pool = CountingPool()
    with_pool, without = _node(new_chain(), dev_genesis, pool), _node(new_chain(), dev_genesis, None)
    try:
        got = await _post_all(with_pool, items)
        want = await _post_all(without, items)
    finally:
        with_pool.close()
        without.close()
    assert got == want
    assert sum(pool.batches) == len(items) - 1  # every submission but the empty body (refused by the RPC layer)
    codes = [body.get("code", body.get("status")) for _, body in got]
    assert codes == [{"ok": "pending"}.get(code, code) if raw else "invalid_body" for raw, code in corpus()]
    assert [t.tx_hash() for t in with_pool.mempool.transactions()] == \
        [t.tx_hash() for t in without.mempool.transactions()]


def _code(outcome: object) -> str:
    if isinstance(outcome, RpcError):
        return outcome.code
    assert isinstance(outcome, dict)
    return str(outcome["status"])


async def test_submissions_of_one_loop_iteration_share_a_batch(new_chain: Any, dev_genesis: DevGenesis) -> None:
    items = [raw for raw, _ in corpus()]
    pool = CountingPool()
    node, reference = _node(new_chain(), dev_genesis, pool), _node(new_chain(), dev_genesis, None)
    try:
        out = await asyncio.gather(*(node.api.submit_transaction_async(r) for r in items), return_exceptions=True)
        want = []
        for r in items:
            try:
                want.append(reference.api.submit_transaction(r))
            except RpcError as e:
                want.append(e)
    finally:
        node.close()
        reference.close()
    assert pool.batches == [len(items)]  # one batch, and each caller got its own transaction's result
    assert [_code(o) for o in out] == [_code(o) for o in want] == \
        [{"ok": "pending"}.get(code, code) for _, code in corpus()]
    assert node.workers.pool is None  # close() stopped and dropped the pool


async def test_a_failed_pool_falls_back_to_recovering_in_process(chain: Chain, dev_genesis: DevGenesis) -> None:
    pool = SignaturePool(0)
    pool.close()  # submit now raises: the batcher hands None and admission recovers itself
    node = _node(chain, dev_genesis, pool)
    try:
        ok = await node.api.submit_transaction_async(transfer(ALICE_SK, 0, BOB, 1).to_bytes())
    finally:
        node.close()
    assert ok["status"] == "pending"
