"""CLI client commands against a real HTTP server (background thread) serving an in-memory facade.

The offline-signing tests (``--sign-only``, ``--nonce``, ``tx broadcast``) also run against a real node
(tests/unit/node_harness.py) to see broadcast transactions included.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from cowboy_node.cli import commands
from cowboy_node.rpc.facade import RpcError
from cowboy_node.rpc.server import start_rpc_server
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.http_client import ApiError, NodeUnreachable, RpcClient
from cowboy_protocol.keys import load_account_private_key, write_account_key
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.transaction import Transaction
from tests.unit.node_harness import LiveNode, dev_live_node, serving

EXAMPLES = Path(__file__).resolve().parents[3] / "configs" / "examples"

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
        self.submitted: list[bytes] = []
        """Every tx_bytes admitted, in order, exactly as received."""
        self.lookups: dict[str, int] = {"status": 0, "account": 0}

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
        self.submitted.append(bytes(tx_bytes))
        self.next_pending_nonce += 1
        return {"tx_hash": "0x" + tx.tx_hash().hex(), "status": "pending"}

    def health(self) -> dict[str, Any]:
        return {"ok": True, "height": 10, "last_block_age_ms": 1}

    def status(self) -> dict[str, Any]:
        self.lookups["status"] += 1
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
        return {"tx_hash": "0x" + tx_hash.hex(), "status": "success", "height": 11, "index": 0}

    def account(self, address: bytes) -> dict[str, Any]:
        self.lookups["account"] += 1
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
    commands.register(sub)
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
                  "--amount", "12345", "--no-wait", "--rpc", server.url])
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
                   "receipt": {"tx_hash": "0x" + tx_hash.hex(), "status": "success", "height": 11, "index": 0}}
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
    error, hint = capsys.readouterr().err.strip().splitlines()
    assert error == "error: insufficient_funds: balance 0 < max fee 1"
    # issue 37: the next line says how to fund the sender on a devnet (the key's own address, the faucet key)
    sender = to_checksum_address(load_account_private_key(key_file)[1])
    assert hint == (f"hint: fund {sender} first; on a devnet from the faucet: `cowboy-node tx transfer --key "
                    f"devnet-home/keys/faucet.key --to {sender} --amount 1000000000000000000000 --wait`")
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
                    "--no-wait", "--rpc", server.url]) == 0
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
    assert client.height() == {"height": 10}
    with pytest.raises(ApiError) as info:
        client.transaction("0x1234")  # as given: the node checks it and answers with the contract's code
    assert (info.value.code, info.value.status) == ("invalid_hash", 400)
    with pytest.raises(ApiError) as info:
        client.submit(b"\x00\x00\x00\x01\x00")
    assert (info.value.code, info.value.status) == ("malformed", 400)
    with pytest.raises(NodeUnreachable):
        RpcClient(f"http://127.0.0.1:{_free_port()}").height()
    with pytest.raises(ValueError):
        RpcClient("127.0.0.1:4000")


# -- offline signing: --nonce, --chain-id, --sign-only, tx broadcast ---------------------------
OFFLINE = ["--chain-id", CHAIN_ID, "--max-fee-per-cycle", str(2 * CYCLE_BASEFEE),
           "--max-fee-per-cell", str(2 * CELL_BASEFEE)]
"""The values the default path takes from the facade's /status (2 × basefee), given explicitly."""


def _unreachable() -> str:
    return f"http://127.0.0.1:{_free_port()}"


def _signed_lines(out: str) -> list[bytes]:
    lines = out.splitlines()
    assert lines and all(line.startswith("0x") for line in lines), out
    return [bytes.fromhex(line[2:]) for line in lines]


def _transfer_argv(key_file: Path, *extra: str, amount: int = 12345) -> list[str]:
    return ["tx", "transfer", "--key", str(key_file), "--to", to_checksum_address(RECIPIENT),
            "--amount", str(amount), *extra]


def test_sign_only_offline_is_byte_identical_to_the_normal_path(server: ServerThread, key_file: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    # offline: every value given, the RPC unreachable
    assert run_cli(_transfer_argv(key_file, "--sign-only", "--nonce", "5", *OFFLINE, "--rpc", _unreachable())) == 0
    captured = capsys.readouterr()
    [signed] = _signed_lines(captured.out)
    # built independently from the transaction type
    expected = Transaction(
        chain_id=CHAIN_ID, nonce=5, sender=SENDER, instruction=Transfer(to=RECIPIENT, amount=12345),
        cycles_limit=50_000, cells_limit=2_000, max_fee_per_cycle=2 * CYCLE_BASEFEE, max_priority_fee_per_cycle=1_000,
        max_fee_per_cell=2 * CELL_BASEFEE, max_priority_fee_per_cell=2 * CELL_BASEFEE,
    ).signed(SENDER_SK)
    assert signed == expected.to_bytes()
    assert f"0x{expected.tx_hash().hex()}" in captured.err and "not sent" in captured.err
    # the normal path (nonce, chain id and fees from the node) submits exactly these bytes
    assert run_cli(_transfer_argv(key_file, "--no-wait", "--rpc", server.url)) == 0
    assert json.loads(capsys.readouterr().out) == {"tx_hash": "0x" + expected.tx_hash().hex()}
    assert server.facade.submitted == [signed]


def test_sign_only_online_fetches_what_is_missing_and_sends_nothing(server: ServerThread, key_file: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(_transfer_argv(key_file, "--sign-only", "--rpc", server.url)) == 0
    [signed] = _signed_lines(capsys.readouterr().out)
    tx = Transaction.from_bytes(signed)
    assert (tx.nonce, tx.chain_id, tx.max_fee_per_cycle, tx.max_fee_per_cell) == (5, CHAIN_ID, 2 * CYCLE_BASEFEE,
                                                                                   2 * CELL_BASEFEE)
    assert server.facade.lookups == {"status": 1, "account": 1}
    assert server.facade.submitted == []
    # --nonce skips the account lookup; --chain-id and both max fees skip /status
    assert run_cli(_transfer_argv(key_file, "--sign-only", "--nonce", "9", "--rpc", server.url)) == 0
    assert Transaction.from_bytes(_signed_lines(capsys.readouterr().out)[0]).nonce == 9
    assert server.facade.lookups == {"status": 2, "account": 1}
    assert run_cli(_transfer_argv(key_file, "--sign-only", *OFFLINE, "--rpc", server.url)) == 0
    capsys.readouterr()
    assert server.facade.lookups == {"status": 2, "account": 2}
    assert server.facade.submitted == []


def test_nonce_flag_skips_the_lookup_on_the_normal_path(server: ServerThread, key_file: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(_transfer_argv(key_file, "--nonce", "5", "--rpc", server.url)) == 0
    assert run_cli(_transfer_argv(key_file, "--nonce", "7", "--rpc", server.url)) == 1  # the facade wants 6
    assert capsys.readouterr().err.strip() == "error: nonce_too_low: nonce 7"
    assert server.facade.lookups["account"] == 0
    assert [Transaction.from_bytes(b).nonce for b in server.facade.submitted] == [5]


def test_sign_only_offline_names_the_missing_flags(key_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = _unreachable()
    assert run_cli(_transfer_argv(key_file, "--sign-only", "--nonce", "1", "--max-fee-per-cell", "9",
                                  "--rpc", url)) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"error: cannot reach node at {url}: ")
    assert captured.err.rstrip().endswith("; to sign offline also give --chain-id, --max-fee-per-cycle")


def test_chain_id_must_match_the_node_when_it_is_asked(server: ServerThread, key_file: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(_transfer_argv(key_file, "--chain-id", "other-chain", "--rpc", server.url)) == 2
    assert "--chain-id 'other-chain' does not match the node's chain id" in capsys.readouterr().err
    assert server.facade.submitted == []


def _every_tx_command(tmp: Path, key: Path) -> dict[str, tuple[list[str], int]]:
    """argv (without the shared flags) and the number of transactions of every ``tx`` subcommand."""
    source = tmp / "actor.py"
    source.write_text("def ping(ctx, payload):\n    return payload\n")
    timer = "0x" + "11" * 32
    k = ["--key", str(key)]
    return {
        "transfer": (["transfer", *k, "--to", "0x" + RECIPIENT.hex(), "--amount", "1"], 1),
        "deploy": (["deploy", *k, "--source", str(source)], 1),
        "call": (["call", *k, "--actor", "0x" + RECIPIENT.hex(), "--handler", "ping", "--payload", "0x01"], 1),
        "update-timer-config": (["update-timer-config", *k, "--max-ttl-blocks", "100", "--max-cycles-per-fire",
                                 "1000", "--max-cells-per-fire", "100", "--max-timers-per-actor", "4",
                                 "--gc-cycles-per-block", "1000"], 1),
        "cancel-timer": (["cancel-timer", *k, "--timer-id", timer], 1),
        "extend-timer": (["extend-timer", *k, "--timer-id", timer, "--expires-at", "50"], 1),
        "register-runner": (["register-runner", *k, "--stake", "10", "--capabilities",
                             str(EXAMPLES / "runner-capabilities.json")], 1),
        "runner-heartbeat": (["runner-heartbeat", *k], 1),
        "update-runner": (["update-runner", *k, "--capabilities", str(EXAMPLES / "runner-capabilities.json")], 2),
        "deregister-runner": (["deregister-runner", *k], 1),
        "submit-job": (["submit-job", *k, "--spec", str(EXAMPLES / "job-http.json"),
                        "--commit-phase-permille", "600"], 1),
        # a group: set-param signs the same way (tests/unit/cli/test_cli_governance.py)
        "governance": (["governance", "set-phase", "1", *k, "--at-height", "9"], 1),
    }


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    choices: dict[str, argparse.ArgumentParser] = action.choices
    return choices


def test_every_tx_command_signs_offline(tmp_path: Path, key_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # every `tx` subcommand that signs (all but broadcast) is listed: a new one must be added here
    commands = _every_tx_command(tmp_path, key_file)
    assert set(_subcommands(_subcommands(_parser())["tx"])) == {*commands, "broadcast"}
    for name, (argv, count) in commands.items():
        rc = run_cli(["tx", *argv, "--sign-only", "--nonce", "40", *OFFLINE, "--rpc", _unreachable()])
        captured = capsys.readouterr()
        assert rc == 0, (name, captured.err)
        txs = [Transaction.from_bytes(b) for b in _signed_lines(captured.out)]
        assert [t.nonce for t in txs] == list(range(40, 40 + count)), name
        assert all(t.recover_sender() == SENDER and t.chain_id == CHAIN_ID for t in txs), name


def test_unreachable_node_suggests_make_devnet_or_rpc(capsys: pytest.CaptureFixture[str]) -> None:
    url = _unreachable()
    assert run_cli(["status", "--rpc", url]) == 1
    error, hint = capsys.readouterr().err.strip().splitlines()
    assert error.startswith(f"error: cannot reach node at {url}")
    assert hint == (f"hint: is a node running at {url}? Start a local one with `make devnet` (RPC "
                    "http://127.0.0.1:4000), or point the command at yours with --rpc URL")


def test_submit_job_offline_needs_the_commit_phase(key_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = run_cli(["tx", "submit-job", "--key", str(key_file), "--spec", str(EXAMPLES / "job-http.json"),
                  "--sign-only", "--nonce", "1", *OFFLINE, "--rpc", _unreachable()])
    assert rc == 1
    assert capsys.readouterr().err.rstrip().endswith("; to sign offline also give --commit-phase-permille")


def _sign_offline(key_file: Path, capsys: pytest.CaptureFixture[str], nonce: int, amount: int = 1,
                  fees: list[str] = OFFLINE) -> str:
    assert run_cli(_transfer_argv(key_file, "--sign-only", "--nonce", str(nonce), *fees, "--rpc", _unreachable(),
                                  amount=amount)) == 0
    out = capsys.readouterr().out
    _signed_lines(out)
    return out.strip()


def test_broadcast_file_argument_and_stdin(server: ServerThread, key_file: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    first = _sign_offline(key_file, capsys, 5, amount=1)
    second = _sign_offline(key_file, capsys, 6, amount=2)
    third = _sign_offline(key_file, capsys, 7, amount=3)
    path = tmp_path / "signed.hex"
    path.write_text(first + "\n")
    assert run_cli(["tx", "broadcast", str(path), "--no-wait", "--rpc", server.url]) == 0
    h1 = "0x" + Transaction.from_bytes(bytes.fromhex(first[2:])).tx_hash().hex()
    assert json.loads(capsys.readouterr().out) == {"tx_hash": h1}
    assert run_cli(["tx", "broadcast", second[2:].upper(), "--rpc", server.url]) == 0  # the hex itself, no 0x
    capsys.readouterr()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(f"{third}\n".encode())))
    assert run_cli(["tx", "broadcast", "-", "--rpc", server.url]) == 0
    capsys.readouterr()
    assert [s.hex() for s in server.facade.submitted] == [first[2:], second[2:], third[2:]]


def test_broadcast_several_entries_in_order_with_wait(server: ServerThread, key_file: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    server.facade.receipt_after_polls = 0
    lines = [_sign_offline(key_file, capsys, n, amount=n) for n in (5, 6)]
    path = tmp_path / "two.hex"
    path.write_text("\n".join(lines) + "\n")
    assert run_cli(["tx", "broadcast", str(path), "--wait", "--timeout", "5", "--rpc", server.url]) == 0
    out = json.loads(capsys.readouterr().out)
    hashes = ["0x" + Transaction.from_bytes(bytes.fromhex(x[2:])).tx_hash().hex() for x in lines]
    assert out["tx_hashes"] == hashes and [r["tx_hash"] for r in out["receipts"]] == hashes


def _tampered(line: str) -> str:
    data = bytearray(bytes.fromhex(line[2:]))
    data[-2] ^= 0x01  # inside the signature's s
    return "0x" + data.hex()


@pytest.mark.parametrize(("make_input", "message"), [
    (lambda good, tmp: "0xzz12", "the argument: not hex (invalid character 'z')"),
    (lambda good, tmp: good + "0", "the argument: not hex (odd number of digits"),
    (lambda good, tmp: "0x00000005ab", "length prefix says 5 bytes but 1 follow"),
    (lambda good, tmp: "0x" + "%08x" % (len(good) // 2) + good[10:], "length prefix says"),
    (lambda good, tmp: good[:-2], "length prefix says"),
    (lambda good, tmp: _tampered(good), "not a signed transaction: bad_signature"),
    (lambda good, tmp: str(tmp / "missing.hex"), "missing.hex: No such file or directory"),
    (lambda good, tmp: str(tmp), "Is a directory"),
    (lambda good, tmp: _file(tmp, good + "\n0xnothex\n"), "entry 2: not hex (invalid character 'n')"),
    (lambda good, tmp: _file(tmp, "\n\n"), "no signed transaction"),
    (lambda good, tmp: _file(tmp, b"\xff\xfe"), "not hex text"),
])
def test_broadcast_bad_input_exits_2_and_sends_nothing(server: ServerThread, key_file: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str], make_input: Any,
                                                       message: str) -> None:
    good = _sign_offline(key_file, capsys, 5)
    rc = run_cli(["tx", "broadcast", make_input(good, tmp_path), "--rpc", server.url])
    captured = capsys.readouterr()
    assert rc == 2 and captured.out == ""
    assert message in captured.err
    assert server.facade.submitted == []


def _file(tmp: Path, content: str | bytes) -> str:
    path = tmp / "input.hex"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return str(path)


@pytest.mark.parametrize(("extra", "flag"), [
    (["--nonce", "-1"], "--nonce"),
    (["--nonce", "x"], "--nonce"),
    (["--nonce", str(2**64)], "--nonce"),
    (["--chain-id", ""], "--chain-id"),
    (["--chain-id", "c" * 65], "--chain-id"),
    (["--sign-only", "--wait"], "--wait cannot be combined with --sign-only"),
])
def test_signing_flags_bad_input_exit_2(server: ServerThread, key_file: Path, capsys: pytest.CaptureFixture[str],
                                        extra: list[str], flag: str) -> None:
    assert run_cli(_transfer_argv(key_file, *extra, "--rpc", server.url)) == 2
    captured = capsys.readouterr()
    assert flag in captured.err and captured.out == ""
    assert server.facade.submitted == []


# -- the same against a real node: broadcast output is included, nonce gaps are honoured --------
@pytest.fixture
def live() -> Iterator[LiveNode]:
    with serving(dev_live_node()) as n:
        yield n


def _live_fees(live: LiveNode) -> list[str]:
    st = live.node.api.status()
    return ["--chain-id", st["chain_id"], "--max-fee-per-cycle", str(2 * st["basefee"]["cycle"]),
            "--max-fee-per-cell", str(2 * st["basefee"]["cell"])]


def test_sign_only_offline_then_broadcast_is_included(live: LiveNode, key_file: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    signed = _sign_offline(key_file, capsys, 0, amount=77, fees=_live_fees(live))
    path = tmp_path / "tx.hex"
    path.write_text(signed + "\n")
    assert run_cli(["tx", "broadcast", str(path), "--wait", "--timeout", "20", "--rpc", live.url]) == 0
    out = json.loads(capsys.readouterr().out)
    tx = Transaction.from_bytes(bytes.fromhex(signed[2:]))
    assert out["tx_hash"] == "0x" + tx.tx_hash().hex()
    assert out["receipt"]["status"] == "success", out["receipt"]
    assert live.node.api.account(RECIPIENT)["balance"] == "77"
    # broadcasting the same bytes again is the node's error (exit 1), not bad input
    assert run_cli(["tx", "broadcast", str(path), "--rpc", live.url]) == 1
    assert capsys.readouterr().err.startswith("error: ")


def _receipt(live: LiveNode, tx_hash: str) -> dict[str, Any] | None:
    r: dict[str, Any] | None = live.node.api.receipt(bytes.fromhex(tx_hash[2:]))
    return r


def test_nonce_gap_waits_for_the_missing_nonces(live: LiveNode, key_file: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # nonce 2 first: admitted, but not included while 0 and 1 are missing
    assert run_cli(_transfer_argv(key_file, "--nonce", "2", "--no-wait", "--rpc", live.url, amount=3)) == 0
    gapped = json.loads(capsys.readouterr().out)["tx_hash"]
    start = live.node.chain.height
    deadline = time.monotonic() + 10
    while live.node.chain.height < start + 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert live.node.chain.height >= start + 5
    assert _receipt(live, gapped) is None
    # fill the gap from offline-signed bytes (both in one file); then all three are included in nonce order
    fees = _live_fees(live)
    path = tmp_path / "fill.hex"
    path.write_text("\n".join(_sign_offline(key_file, capsys, n, amount=n + 1, fees=fees) for n in (0, 1)))
    assert run_cli(["tx", "broadcast", str(path), "--wait", "--timeout", "20", "--rpc", live.url]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in out["receipts"]] == ["success", "success"]
    deadline = time.monotonic() + 20
    while _receipt(live, gapped) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    last = _receipt(live, gapped)
    assert last is not None and last["status"] == "success"
    heights = [r["height"] for r in out["receipts"]] + [last["height"]]
    assert heights == sorted(heights)
    assert live.node.api.account(RECIPIENT)["balance"] == "6"
    assert live.node.api.account(SENDER)["nonce"] == 3


def test_query_job_results_decodes_error_results() -> None:
    # issue 37: a failed job's reason was only hex in `query job --results`
    from cowboy_node.cli.job_commands import _decode_error_results
    from cowboy_protocol.jobs.error_result import error_result_for

    doc = {"reveals": [{"result": "0x" + error_result_for("http_status", "HTTP 500 from 127.0.0.1").hex()},
                       {"result": "0x" + b'{"price": 42}'.hex()}]}
    _decode_error_results(doc)
    assert doc["reveals"][0]["error"] == {"code": "http_status", "detail": "HTTP 500 from 127.0.0.1"}
    assert "error" not in doc["reveals"][1]


def test_status_text_shows_consensus_state() -> None:
    # issue 37 item 5: `cowboy-node status` (text) showed no peers, view or finalized height
    from cowboy_node.cli.client_commands import status_summary

    st = {"chain_id": "c", "height": 9, "consensus": {
        "validators": 4, "quorum": 3, "me": 0, "view": 12, "leader": 1, "finalized_view": 11, "finalized_height": 9,
        "syncing": False, "peers": [1, 3], "voting": {"enabled": True}}}
    lines = status_summary(st).splitlines()
    assert "validator:   0 of 4 (quorum 3); votes: yes" in lines
    assert "view:        12 (leader 1); finalized view 11, height 9" in lines
    assert "peers:       2 of 3 connected (1, 3)" in lines
    st["consensus"].update(voting={"enabled": False, "reason": "double_sign_check", "until_view": 40}, syncing=True)
    text = status_summary(st)
    assert "votes: NO (double_sign_check, until view 40)" in text and "; SYNCING" in text
