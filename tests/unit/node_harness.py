"""Shared setup of the CLI and HTTP tests that need a real node (in-memory chain).

- :class:`LiveNode`: a node serving HTTP on a free port and producing blocks on its own event loop thread
  (for CLI commands that wait for receipts);
- :func:`manual_node`: a node whose blocks the test produces one by one (deterministic HTTP tests);
- :func:`run_cli`: run the real ``cowboy-node`` parser in-process and parse its JSON output;
- :func:`tx`: a signed transaction with generous limits, numbering nonces per sender.

The same setup is repeated in test_cli_runners/test_cli_actors/test_rpc_runners/test_rpc_actors, which
predate this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.cli.main import build_parser
from cowboy_node.node.assemble import assemble
from cowboy_node.node.devgenesis import DevGenesis, create_dev_genesis
from cowboy_node.node.node import Node
from cowboy_node.observability import NodeMetrics
from cowboy_node.rpc.read_pool import ReadPool, ReadPoolConfig
from cowboy_node.rpc.server import build_app, start_rpc_server
from cowboy_node.state.memory import MemoryStore
from cowboy_node.transport.service import TransportConfig, TransportService
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.keys import write_account_key
from cowboy_protocol.transport.preimages import ValidatorKey as TransportValidatorKey
from cowboy_protocol.types.instructions import Instruction
from cowboy_protocol.types.params import ChainLimits, Cip11Flags
from cowboy_protocol.types.runner_json import runner_file_from_json
from cowboy_protocol.types.transaction import Transaction
from tests.helpers import ALICE, ALICE_FUNDS, ALICE_SK, BOB, CHAIN_ID, FEE_RECIPIENT, make_dev_genesis, make_tx

EXAMPLES = Path(__file__).resolve().parents[2] / "configs" / "examples"
JOB_EXAMPLE = EXAMPLES / "job-http.json"
CAPS_EXAMPLE = EXAMPLES / "runner-capabilities.json"
RUNNER_SKS = [(0x2000 + i).to_bytes(32, "big") for i in range(3)]
RUNNERS = [private_key_to_address(sk) for sk in RUNNER_SKS]
STAKE = 10**18
"""The default min_runner_stake."""
LIMITS = {"cycles_limit": 5_000_000, "cells_limit": 200_000}
LONG_HEARTBEAT = ChainLimits(heartbeat_timeout_blocks=10_000_000)
"""Runners registered once stay floor-eligible however many blocks a live test produces."""


def example_caps() -> tuple[Any, Any]:
    """(Capabilities, RateCard) of configs/examples/runner-capabilities.json."""
    return runner_file_from_json(json.loads(CAPS_EXAMPLE.read_text()), require_rate_card=True)


def make_dev(*, phase: int = 2, limits: ChainLimits | None = LONG_HEARTBEAT) -> DevGenesis:
    """A dev genesis funding ALICE, BOB and the runner keys, with its validator key."""
    balances = {ALICE: ALICE_FUNDS, BOB: ALICE_FUNDS, **{r: 10**21 for r in RUNNERS}}
    return create_dev_genesis(chain_id=CHAIN_ID, balances=balances, system_deployers=(ALICE,),
                              fee_recipient=FEE_RECIPIENT, genesis_time_ms=1_700_000_000_000,
                              cip11=Cip11Flags.for_phase(phase), limits=limits, entropy=bytes(range(96)))


def make_node(*, phase: int = 2, block_time_ms: int = 1000, limits: ChainLimits | None = LONG_HEARTBEAT,
              chain: Chain | None = None, transport_config: TransportConfig | None = None, **parts: Any) -> Node:
    """A node over ``chain`` (default: a fresh in-memory chain of :func:`make_dev`) with the dev validator key
    (``parts``: further arguments of :func:`~cowboy_node.node.assemble.assemble`, e.g. ``transport=`` or
    ``local_presence=``; ``transport_config``: build the runner transport with the node, not started)."""
    dev = make_dev(phase=phase, limits=limits)
    chain = chain or Chain(MemoryStore(), dev.genesis)
    metrics = parts.pop("metrics", None) or NodeMetrics()
    if transport_config is not None:  # the transport is built with the node, started by the test
        seed = dev.validator_key.ed25519_seed
        parts["transport"] = lambda link: TransportService(
            link, TransportValidatorKey(seed), validator_set_hash=link.genesis_snapshot().set_hash,
            config=transport_config, metrics=metrics)
    return assemble(chain, Mempool(MempoolConfig()), dev.validator_key, block_time_ms=block_time_ms,
                    metrics=metrics, **parts)


class Nonces:
    """Signs transactions with consecutive nonces per sender."""

    def __init__(self) -> None:
        self.next: dict[bytes, int] = {}

    def tx(self, sk: bytes, ins: Instruction) -> Transaction:
        """A signed transaction with :data:`LIMITS`."""
        sender = private_key_to_address(sk)
        n = self.next.get(sender, 0)
        self.next[sender] = n + 1
        return make_tx(sk, n, ins, **LIMITS)  # type: ignore[arg-type]


def produce(node: Node, txs: list[Transaction]) -> list[Any]:
    """Admit ``txs``, produce one block, and return its receipts (every transaction must be included)."""
    for t in txs:
        node.api.submit_transaction(t.to_bytes())
    asyncio.run(node.produce_block())
    receipts = node.chain.receipts_at(node.chain.height)
    assert receipts is not None and len(receipts) == len(txs), receipts
    return receipts


class LiveNode:
    """A real node serving HTTP and producing a block every ``block_time_ms`` on its own loop thread."""

    def __init__(self, *, phase: int = 2, block_time_ms: int = 50, node: Node | None = None) -> None:
        self.node = node if node is not None else make_node(phase=phase, block_time_ms=block_time_ms)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="live-node", daemon=True)
        self.runner: web.AppRunner | None = None
        self.producer: Future[None] | None = None
        self.url = ""

    def start(self) -> None:
        """Serve HTTP on a free port and start producing."""
        self.thread.start()
        fut = asyncio.run_coroutine_threadsafe(start_rpc_server(self.node.api, "127.0.0.1", 0), self.loop)
        self.runner = fut.result(timeout=10)
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"
        self.producer = asyncio.run_coroutine_threadsafe(self.node.run(), self.loop)

    def stop(self) -> None:
        """Stop producing, close the server and the loop."""
        self.loop.call_soon_threadsafe(self.node.request_stop)
        if self.producer is not None:
            self.producer.result(timeout=10)
        if self.runner is not None:
            asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


def dev_live_node(balances: dict[bytes, int] | None = None) -> LiveNode:
    """A real node over the test dev genesis (``make_dev_genesis``) producing a block every 20 ms."""
    dev = make_dev_genesis() if balances is None else make_dev_genesis(balances=balances)
    return LiveNode(node=assemble(Chain(MemoryStore(), dev.genesis), Mempool(MempoolConfig()), dev.validator_key,
                              block_time_ms=20))


def write_keys(directory: Path, secrets: dict[str, bytes]) -> dict[str, Path]:
    """Write each account key to ``directory/<name>.key``; returns name → path."""
    out = {name: directory / f"{name}.key" for name in secrets}
    for name, sk in secrets.items():
        write_account_key(out[name], sk)
    return out


def quiet_node_logs(mp: pytest.MonkeyPatch) -> None:
    """The node logs every block to stdout; tests that parse stdout as JSON silence it."""
    import structlog

    from cowboy_node.node import after_commit as node_module
    from cowboy_node.rpc import server as server_module

    mp.setattr(node_module, "log", structlog.ReturnLogger())
    mp.setattr(server_module, "log", structlog.ReturnLogger())


@contextlib.asynccontextmanager
async def read_only_client(node: Node, read_pool: ReadPool | None = None) -> AsyncIterator[TestClient[Any, Any]]:
    """An aiohttp test client of ``node``'s HTTP app; on exit, asserts nothing any request did changed the chain
    (height, state root, mempool size): reads, read-only calls and every rejected input change nothing.
    ``read_pool``: the pool of the read-only calls (default: :func:`roomy_read_pool` — these tests check answers;
    the pool's own limits are tested in tests/unit/rpc/test_read_pool*.py and test_ui_routes.py)."""
    pool = read_pool if read_pool is not None else roomy_read_pool()
    c: TestClient[Any, Any] = TestClient(TestServer(build_app(node.api, metrics=node.metrics, read_pool=pool)))
    await c.start_server()
    before = (node.chain.height, node.chain.tree.root(), len(node.mempool))
    try:
        yield c
    finally:
        await c.close()
    assert (node.chain.height, node.chain.tree.root(), len(node.mempool)) == before


def roomy_read_pool() -> ReadPool:
    """A read pool whose time budget and call timeout a loaded test machine cannot exhaust, for tests of what a
    read-only call answers (not of the pool's limits, which have their own tests)."""
    return ReadPool(ReadPoolConfig(call_timeout_ms=60_000, budget_ms_per_s=64_000, per_client_rps=100_000))


async def expect_ok(resp: Any) -> Any:
    """The JSON body of a 200 response (the body text in the failure message otherwise)."""
    assert resp.status == 200, await resp.text()
    return await resp.json()


async def expect_error(resp: Any, status: int, code: str) -> None:
    """A ``status`` response whose body is exactly ``{"code": code, "message": <non-empty>}``."""
    assert resp.status == status, await resp.text()
    body = await resp.json()
    assert set(body) == {"code", "message"} and body["code"] == code and body["message"]


@contextlib.contextmanager
def serving(live: LiveNode) -> Iterator[LiveNode]:
    """Start ``live`` with the node's per-block stdout logs silenced (stdout stays for the CLI's JSON); stop it
    on exit."""
    with pytest.MonkeyPatch.context() as mp:
        quiet_node_logs(mp)
        live.start()
        try:
            yield live
        finally:
            live.stop()


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    """Run ``cowboy-node argv`` in-process: (exit code, parsed stdout JSON or None, stderr)."""
    try:
        args = build_parser().parse_args(argv)
        rc: int = args.func(args)
    except SystemExit as e:
        rc = int(e.code or 0)
    out = capsys.readouterr()
    return rc, json.loads(out.out) if out.out.strip() else None, out.err


__all__ = [
    "ALICE_SK",
    "CAPS_EXAMPLE",
    "JOB_EXAMPLE",
    "RUNNERS",
    "RUNNER_SKS",
    "STAKE",
    "LiveNode",
    "Nonces",
    "example_caps",
    "expect_error",
    "expect_ok",
    "make_dev",
    "make_node",
    "produce",
    "quiet_node_logs",
    "read_only_client",
    "run_cli",
    "serving",
]
