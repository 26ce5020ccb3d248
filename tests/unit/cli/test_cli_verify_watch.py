"""``cowboy-node query … --verify`` (checked against the genesis group key) and ``cowboy-node watch`` against a
real in-process node serving HTTP and subscriptions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.genesis import genesis_document
from cowboy_node.cli.verify_commands import EXIT_UNVERIFIED
from cowboy_node.crypto import bls
from cowboy_node.rpc.server import start_rpc_server
from cowboy_node.rpc.subscription_source import ChainSource
from cowboy_node.rpc.subscriptions import SubscriptionHub
from cowboy_node.state.memory import MemoryStore
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.http_client import RpcClient
from tests.helpers import ALICE
from tests.integration.nodeproc import wait_for
from tests.unit.node_harness import LiveNode, make_dev, make_node, quiet_node_logs, run_cli


class SubscribingLiveNode(LiveNode):
    """:class:`LiveNode` whose HTTP API also serves ``GET /subscribe`` (the hub listens to every commit)."""

    def __init__(self, *, block_time_ms: int) -> None:
        dev = make_dev()
        chain = Chain(MemoryStore(), dev.genesis)
        self.hub = SubscriptionHub(ChainSource(chain))
        super().__init__(node=make_node(chain=chain, block_time_ms=block_time_ms,
                                        commit_listeners=(self.hub.publish,)))

    def start(self) -> None:
        self.thread.start()

        async def serve() -> Any:
            return await start_rpc_server(self.node.api, "127.0.0.1", 0, subscriptions=self.hub)

        self.runner = asyncio.run_coroutine_threadsafe(serve(), self.loop).result(timeout=10)
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"
        self.producer = asyncio.run_coroutine_threadsafe(self.node.run(), self.loop)


@pytest.fixture(scope="module")
def live() -> Iterator[LiveNode]:
    mp = pytest.MonkeyPatch()
    quiet_node_logs(mp)  # stdout is the commands' JSON
    ln = SubscribingLiveNode(block_time_ms=50)
    ln.start()
    try:
        wait_for("block 3", lambda: RpcClient(ln.url).height()["height"] >= 3, timeout=30)
        yield ln
    finally:
        ln.stop()
        mp.undo()


def _key(live: LiveNode) -> str:
    return "0x" + live.node.chain.genesis.group_public_key.hex()


def test_query_account_verify_prints_the_certified_account(live: LiveNode, capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    genesis = tmp_path / "genesis.json"
    genesis.write_text(json.dumps(genesis_document(live.node.chain.genesis)))
    rc, out, err = run_cli(["query", "account", to_checksum_address(ALICE), "--verify", "--genesis", str(genesis),
                            "--rpc", live.url], capsys)
    assert rc == 0, err
    assert out["verified"] is True and int(out["balance"]) > 0 and out["height"] >= 1


def test_query_state_verify_against_a_wrong_group_key_fails_typed(live: LiveNode,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    other = bls.public_key(bls.secret_key_from_seed(b"\x05" * 32))  # a valid key, not the group's
    rc, _, err = run_cli(["query", "state", "0x" + (b"acct/" + ALICE).hex(), "--verify", "--group-key",
                          "0x" + other.hex(), "--rpc", live.url], capsys)
    assert rc == EXIT_UNVERIFIED and "bad_certificate" in err


def test_query_verify_needs_a_group_key(live: LiveNode, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(["query", "account", to_checksum_address(ALICE), "--verify", "--rpc", live.url], capsys)
    assert rc != 0 and "--genesis" in err


def test_query_without_verify_is_unchanged(live: LiveNode, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(["query", "account", to_checksum_address(ALICE), "--rpc", live.url], capsys)
    assert rc == 0 and set(out) == {"address", "balance", "nonce", "next_pending_nonce"}


def test_query_actor_verify_needs_key(live: LiveNode, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(["query", "actor", to_checksum_address(ALICE), "--verify", "--group-key", _key(live),
                          "--rpc", live.url], capsys)
    assert rc != 0 and "--key" in err


def test_watch_output_is_one_message_per_height(live: LiveNode, capsys: pytest.CaptureFixture[str]) -> None:
    from cowboy_node.cli.main import build_parser
    args = build_parser().parse_args(["watch", "blocks", "--from", "2", "--count", "3", "--rpc", live.url])
    assert args.func(args) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(m["type"], m["height"]) for m in lines] == [("block", 2), ("block", 3), ("block", 4)]
    assert lines[0]["block"]["height"] == 2
