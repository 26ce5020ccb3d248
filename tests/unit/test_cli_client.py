"""CLI client commands against a real HTTP server (background thread) serving an in-memory facade."""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from cowboy_node.chain.keys import write_account_key
from cowboy_node.cli import client_commands
from cowboy_node.cli.client import ApiError, NodeUnreachable, RpcClient
from cowboy_node.crypto.address import to_checksum_address
from cowboy_node.crypto.secp256k1 import private_key_to_address
from cowboy_node.rpc.facade import RpcError
from cowboy_node.rpc.server import start_rpc_server
from cowboy_node.types.instructions import Transfer
from cowboy_node.types.transaction import Transaction

CHAIN_ID = "cowboy-test-1"
SENDER_SK = bytes.fromhex("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318")
SENDER = private_key_to_address(SENDER_SK)
RECIPIENT = bytes(range(100, 120))
CYCLE_BASEFEE = 100_000
CELL_BASEFEE = 7


class ChainFacade:
    """A fake node that decodes and checks submitted transactions like the real admission would."""

    def __init__(self) -> None:
        self.txs: dict[bytes, Transaction] = {}
        self.receipt_polls = 0
        self.receipt_after_polls: int | None = 2
        self.next_pending_nonce = 5
        self.reject_with: RpcError | None = None

    def submit_transaction(self, tx_bytes: bytes) -> dict[str, Any]:
        if self.reject_with is not None:
            raise self.reject_with
        try:
            tx = Transaction.from_bytes(tx_bytes)
        except ValueError as e:
            raise RpcError(400, "malformed", str(e)) from None
        if tx.chain_id != CHAIN_ID:
            raise RpcError(400, "wrong_chain_id", f"chain id {tx.chain_id!r}")
        if tx.recover_sender() != tx.sender:
            raise RpcError(400, "bad_signature", "signature is not by the sender")
        if tx.nonce != self.next_pending_nonce:
            raise RpcError(400, "nonce_too_low", f"nonce {tx.nonce}")
        self.txs[tx.tx_hash()] = tx
        self.next_pending_nonce += 1
        return {"tx_hash": "0x" + tx.tx_hash().hex(), "status": "pending"}

    def health(self) -> dict[str, Any]:
        return {"ok": True, "height": 10, "last_block_age_ms": 1}

    def status(self) -> dict[str, Any]:
        return {"chain_id": CHAIN_ID, "height": 10, "hash": "0x" + "aa" * 32, "state_root": "0x" + "bb" * 32,
                "timestamp_ms": 1, "basefee": {"cycle": CYCLE_BASEFEE, "cell": CELL_BASEFEE},
                "mempool": {"txs": len(self.txs), "bytes": 123}}

    def height(self) -> int:
        return 10

    def block(self, height: int) -> dict[str, Any] | None:
        return {"height": height, "transactions": []} if height <= 10 else None

    def transaction(self, tx_hash: bytes) -> dict[str, Any] | None:
        tx = self.txs.get(tx_hash)
        return None if tx is None else {**tx.to_json(), "status": "pending"}

    def receipt(self, tx_hash: bytes) -> dict[str, Any] | None:
        if tx_hash not in self.txs:
            return None
        self.receipt_polls += 1
        if self.receipt_after_polls is None or self.receipt_polls <= self.receipt_after_polls:
            return None
        return {"tx_hash": "0x" + tx_hash.hex(), "success": True, "height": 11, "index": 0}

    def account(self, address: bytes) -> dict[str, Any]:
        return {"address": to_checksum_address(address), "balance": "1000000", "nonce": 3,
                "next_pending_nonce": self.next_pending_nonce}

    def state_proof(self, key: bytes) -> dict[str, Any]:
        return {"root": "0x" + "bb" * 32, "height": 10, "proof": {}}


class ServerThread:
    """Runs the RPC server on its own event loop in a background thread."""

    def __init__(self, facade: ChainFacade) -> None:
        self.facade = facade
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="rpc-test-server", daemon=True)
        self.runner: web.AppRunner | None = None
        self.url = ""

    def start(self) -> None:
        self.thread.start()
        fut = asyncio.run_coroutine_threadsafe(start_rpc_server(self.facade, "127.0.0.1", 0), self.loop)
        self.runner = fut.result(timeout=10)
        port = self.runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        if self.runner is not None:
            asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@pytest.fixture
def facade() -> ChainFacade:
    return ChainFacade()


@pytest.fixture
def server(facade: ChainFacade) -> Iterator[ServerThread]:
    s = ServerThread(facade)
    s.start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "sender.key"
    write_account_key(path, SENDER_SK)
    return path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cowboy-node")
    sub = p.add_subparsers(dest="command", required=True)
    client_commands.register(sub)
    return p


def run_cli(argv: list[str]) -> int:
    """Parse like the real CLI (argparse errors become exit code 2) and run the command."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    rc: int = args.func(args)
    return rc


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


# -- status ----------------------------------------------------------------------------------
def test_status_json(server: ServerThread, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["status", "--rpc", server.url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == server.facade.status()


def test_status_human(server: ServerThread, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["status", "--rpc", server.url + "/"]) == 0
    out = capsys.readouterr().out
    for text in (CHAIN_ID, "height:      10", "0x" + "aa" * 32, "0x" + "bb" * 32, "cycle 100000", "cell 7",
                 "0 txs (123 bytes)"):
        assert text in out


# -- keys ------------------------------------------------------------------------------------
def test_keys_new_and_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "k.key"
    assert run_cli(["keys", "new", "--out", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["file"] == str(path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert run_cli(["keys", "show", str(path)]) == 0
    shown = capsys.readouterr().out.strip()
    assert shown == out["address"]
    assert json.loads(path.read_text())["private_key"][2:] not in shown
    # never overwrites
    assert run_cli(["keys", "new", "--out", str(path)]) == 1
    assert "already exists" in capsys.readouterr().err


def test_keys_show_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["keys", "show", str(tmp_path / "missing.key")]) == 2
    assert "missing.key" in capsys.readouterr().err


# -- tx transfer -----------------------------------------------------------------------------
def test_transfer_builds_correctly_signed_tx(server: ServerThread, key_file: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    rc = run_cli(["tx", "transfer", "--key", str(key_file), "--to", to_checksum_address(RECIPIENT),
                  "--amount", "12345", "--rpc", server.url])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    out = json.loads(captured.out)
    [(tx_hash, tx)] = server.facade.txs.items()
    assert out == {"tx_hash": "0x" + tx_hash.hex()}
    assert tx.recover_sender() == SENDER == tx.sender
    assert tx.chain_id == CHAIN_ID
    assert tx.nonce == 5
    assert tx.instruction == Transfer(to=RECIPIENT, amount=12345)
    assert (tx.cycles_limit, tx.cells_limit) == (50_000, 2_000)
    assert tx.max_fee_per_cycle == 2 * CYCLE_BASEFEE
    assert tx.max_fee_per_cell == 2 * CELL_BASEFEE
    assert tx.max_priority_fee_per_cycle == 1_000
    assert tx.max_priority_fee_per_cell == 2 * CELL_BASEFEE  # default tip capped at the max fee


def test_transfer_uses_next_pending_nonce_and_explicit_fees(server: ServerThread, key_file: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    base = ["tx", "transfer", "--key", str(key_file), "--to", "0x" + RECIPIENT.hex(), "--rpc", server.url]
    assert run_cli([*base, "--amount", "1"]) == 0
    assert run_cli([*base, "--amount", "2", "--cycles-limit", "60000", "--cells-limit", "3000",
                    "--max-fee-per-cycle", "500000", "--priority-fee-per-cycle", "7",
                    "--max-fee-per-cell", "900", "--priority-fee-per-cell", "900"]) == 0
    capsys.readouterr()
    txs = sorted(server.facade.txs.values(), key=lambda t: t.nonce)
    assert [t.nonce for t in txs] == [5, 6]
    t = txs[1]
    assert (t.cycles_limit, t.cells_limit, t.max_fee_per_cycle, t.max_priority_fee_per_cycle,
            t.max_fee_per_cell, t.max_priority_fee_per_cell) == (60_000, 3_000, 500_000, 7, 900, 900)


def test_transfer_wait_prints_receipt(server: ServerThread, key_file: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    rc = run_cli(["tx", "transfer", "--key", str(key_file), "--to", to_checksum_address(RECIPIENT),
                  "--amount", "1", "--rpc", server.url, "--wait", "--timeout", "10"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    out = json.loads(captured.out)
    [tx_hash] = server.facade.txs
    assert out == {"tx_hash": "0x" + tx_hash.hex(), "height": 11,
                   "receipt": {"tx_hash": "0x" + tx_hash.hex(), "success": True, "height": 11, "index": 0}}
    assert server.facade.receipt_polls == 3


def test_transfer_wait_timeout(server: ServerThread, key_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server.facade.receipt_after_polls = None
    rc = run_cli(["tx", "transfer", "--key", str(key_file), "--to", to_checksum_address(RECIPIENT),
                  "--amount", "1", "--rpc", server.url, "--wait", "--timeout", "0.5"])
    captured = capsys.readouterr()
    assert rc == 1
    out = json.loads(captured.out)
    assert out["error"]["code"] == "timeout"
    assert out["tx_hash"] == "0x" + next(iter(server.facade.txs)).hex()
    assert "error: timeout" in captured.err


def test_transfer_api_error_exit_1(server: ServerThread, key_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server.facade.reject_with = RpcError(400, "insufficient_funds", "balance 0 < max fee 1")
    rc = run_cli(["tx", "transfer", "--key", str(key_file), "--to", to_checksum_address(RECIPIENT),
                  "--amount", "1", "--rpc", server.url])
    assert rc == 1
    assert capsys.readouterr().err.strip() == "error: insufficient_funds: balance 0 < max fee 1"
    assert server.facade.txs == {}


@pytest.mark.parametrize(("extra", "flag"), [
    (["--to", "0x1234", "--amount", "1"], "--to"),
    (["--to", "0x" + "zz" * 20, "--amount", "1"], "--to"),
    (["--to", "0x" + RECIPIENT.hex(), "--amount", "-5"], "--amount"),
    (["--to", "0x" + RECIPIENT.hex(), "--amount", "abc"], "--amount"),
    (["--to", "0x" + RECIPIENT.hex(), "--amount", str(2**128)], "--amount"),
    (["--to", "0x" + RECIPIENT.hex(), "--amount", "1", "--cycles-limit", "-1"], "--cycles-limit"),
    (["--to", "0x" + RECIPIENT.hex(), "--amount", "1", "--timeout", "0"], "--timeout"),
    (["--to", "0x" + RECIPIENT.hex(), "--amount", "1", "--rpc", "ftp://x"], "--rpc"),
    (["--to", "0x" + RECIPIENT.hex(), "--amount", "1", "--max-fee-per-cycle", "10",
      "--priority-fee-per-cycle", "11"], "--priority-fee-per-cycle"),
])
def test_transfer_bad_input_exit_2(server: ServerThread, key_file: Path, capsys: pytest.CaptureFixture[str],
                                   extra: list[str], flag: str) -> None:
    rc = run_cli(["tx", "transfer", "--key", str(key_file), "--rpc", server.url, *extra])
    assert rc == 2
    assert flag in capsys.readouterr().err
    assert server.facade.txs == {}


def test_transfer_bad_key_file_exit_2(server: ServerThread, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.key"
    bad.write_text('{"type": "secp256k1", "private_key": "0x00", "address": "0x00"}')
    rc = run_cli(["tx", "transfer", "--key", str(bad), "--to", "0x" + RECIPIENT.hex(), "--amount", "1",
                  "--rpc", server.url])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--key" in err and str(bad) in err


def test_unreachable_node_exit_1(key_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    assert run_cli(["status", "--rpc", url]) == 1
    assert capsys.readouterr().err.startswith(f"error: cannot reach node at {url}: ")
    rc = run_cli(["tx", "transfer", "--key", str(key_file), "--to", "0x" + RECIPIENT.hex(), "--amount", "1",
                  "--rpc", url])
    assert rc == 1
    assert capsys.readouterr().err.startswith(f"error: cannot reach node at {url}: ")


# -- query -----------------------------------------------------------------------------------
def test_query_account(server: ServerThread, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["query", "account", "0x" + RECIPIENT.hex(), "--rpc", server.url]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"address": to_checksum_address(RECIPIENT), "balance": "1000000", "nonce": 3,
                   "next_pending_nonce": 5}
    assert run_cli(["query", "account", "0x1234", "--rpc", server.url]) == 2


def test_query_block(server: ServerThread, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["query", "block", "3", "--rpc", server.url]) == 0
    assert json.loads(capsys.readouterr().out) == {"height": 3, "transactions": []}
    assert run_cli(["query", "block", "99", "--rpc", server.url]) == 1
    assert capsys.readouterr().err.startswith("error: not_found: ")
    assert run_cli(["query", "block", "-1", "--rpc", server.url]) == 2


def test_query_tx_with_and_without_receipt(server: ServerThread, key_file: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["tx", "transfer", "--key", str(key_file), "--to", "0x" + RECIPIENT.hex(), "--amount", "9",
                    "--rpc", server.url]) == 0
    tx_hash = json.loads(capsys.readouterr().out)["tx_hash"]
    server.facade.receipt_after_polls = 1
    assert run_cli(["query", "tx", tx_hash, "--rpc", server.url]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["hash"] == tx_hash
    assert out["instruction"] == {"kind": "transfer", "to": to_checksum_address(RECIPIENT), "amount": "9"}
    assert out["receipt"] is None
    assert run_cli(["query", "tx", tx_hash[2:].upper(), "--rpc", server.url]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["receipt"]["height"] == 11
    assert run_cli(["query", "tx", "0x" + "00" * 32, "--rpc", server.url]) == 1
    assert capsys.readouterr().err.startswith("error: not_found: ")
    assert run_cli(["query", "tx", "0x1234", "--rpc", server.url]) == 2


# -- the HTTP client itself ------------------------------------------------------------------
def test_rpc_client_errors(server: ServerThread) -> None:
    client = RpcClient(server.url)
    assert client.get_json("/height") == {"height": 10}
    with pytest.raises(ApiError) as info:
        client.get_json("/nope")
    assert (info.value.code, info.value.status) == ("not_found", 404)
    with pytest.raises(ApiError) as info:
        client.post_tx(b"\x00\x00\x00\x01\x00")
    assert (info.value.code, info.value.status) == ("malformed", 400)
    with pytest.raises(NodeUnreachable):
        RpcClient(f"http://127.0.0.1:{_free_port()}").get_json("/height")
    with pytest.raises(ValueError):
        RpcClient("127.0.0.1:4000")
