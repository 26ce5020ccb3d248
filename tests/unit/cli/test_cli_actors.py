"""Actor and timer CLI commands against a real in-process node producing blocks in a background thread.

``tx deploy`` / ``tx call`` build, sign and submit real transactions that the node executes; the
query commands read them back over HTTP. Bad input exits 2 and submits nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cowboy_node.cli.main import build_parser
from cowboy_node.execution.system_state import get_timer_config
from cowboy_node.execution.timers import timer_state as timer_store
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.params import TimerConfig
from tests.helpers import ALICE, ALICE_SK, BOB_SK
from tests.unit.node_harness import LiveNode, dev_live_node, run_cli, serving, write_keys

SOURCE = '''import pvm_host


def init(payload):
    pvm_host.set_state(b"count", payload)
    for key in (b"k/c", b"k/a", b"k/b"):
        pvm_host.set_state(key, key.upper())
    return b""


def bump(payload):
    n = int(pvm_host.get_state(b"count")) + 1
    pvm_host.set_state(b"count", str(n).encode())
    pvm_host.schedule_timer(pvm_host.current_block() + 1000, b"t" + payload)
    return str(n).encode()


def echo(payload):
    return payload
'''


def _address(sender: bytes, salt: bytes, source: str) -> bytes:
    # The spec formula: keccak256(creator ‖ salt ‖ keccak256(source))[12:].
    return keccak256(sender + salt + keccak256(source.encode()))[12:]


@pytest.fixture(scope="module")
def live() -> Iterator[LiveNode]:
    with serving(dev_live_node()) as n:
        yield n


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_keys(tmp_path_factory.mktemp("keys"), {"alice": ALICE_SK, "bob": BOB_SK})


@pytest.fixture(scope="module")
def source_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("src") / "counter.py"
    path.write_text(SOURCE)
    return path


@pytest.fixture(scope="module")
def deployed(live: LiveNode, keys: dict[str, Path], source_file: Path) -> dict[str, Any]:
    """Deploy once for the module (salt 01, init payload "5"), via the CLI's own code path."""
    import contextlib
    import io

    args = build_parser().parse_args(["tx", "deploy", "--key", str(keys["alice"]), "--source", str(source_file),
                                 "--salt", "0x01", "--init", "init", "--payload", "35", "--rpc", live.url,
                                 "--timeout", "20"])
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert args.func(args) == 0
    out: dict[str, Any] = json.loads(buf.getvalue())
    return out


# -- tx deploy / tx call -----------------------------------------------------------------------------
def test_deploy_prints_the_derived_address_and_a_successful_receipt(deployed: dict[str, Any]) -> None:
    assert deployed["address"] == to_checksum_address(_address(ALICE, b"\x01", SOURCE))
    receipt = deployed["receipt"]
    assert receipt["status"] == "success", receipt
    assert [e["topic"] for e in receipt["events"]] == ["actor.deployed"]
    assert deployed["height"] == receipt["height"] >= 1
    assert deployed["tx_hash"] == receipt["tx_hash"]


def test_deploy_transaction_carries_the_instruction(live: LiveNode, deployed: dict[str, Any]) -> None:
    tx = live.node.api.transaction(bytes.fromhex(deployed["tx_hash"][2:]))
    assert tx is not None and tx["status"] == "committed"
    assert tx["instruction"] == {"kind": "deploy_actor", "source": SOURCE, "salt": "01", "init_handler": "init",
                                 "init_payload": "35"}


def test_call_with_wait_prints_receipt_events_and_the_result(live: LiveNode, keys: dict[str, Path],
                                                              deployed: dict[str, Any],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(["tx", "call", "--key", str(keys["alice"]), "--actor", deployed["address"],
                            "--handler", "bump", "--payload", "0xaa", "--rpc", live.url, "--wait",
                            "--timeout", "20"], capsys)
    assert rc == 0, err
    assert out["receipt"]["status"] == "success"
    assert [e["topic"] for e in out["receipt"]["events"]] == ["actor.returned"]
    assert out["result"] == "0x36"  # "6": init stored "5", bump added one
    # query actor --key with a text key, then the timer bump scheduled
    rc, out, err = run_cli(["query", "actor", deployed["address"], "--key", "count", "--rpc", live.url], capsys)
    assert rc == 0, err
    assert out["value"] == "0x36" and out["key"] == "0x" + b"count".hex()
    rc, out, err = run_cli(["query", "timers", deployed["address"], "--rpc", live.url], capsys)
    assert rc == 0, err
    [timer] = out["timers"]
    assert timer["handler"] == "handle_timer" and timer["payload_size"] == 2
    assert timer["fee_payer"] == deployed["address"]


def test_deploy_of_a_refused_source_is_a_failed_charged_receipt(live: LiveNode, keys: dict[str, Path],
                                                                tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n")
    rc, out, err = run_cli(["tx", "deploy", "--key", str(keys["alice"]), "--source", str(bad), "--rpc", live.url,
                            "--timeout", "20"], capsys)
    assert rc == 3, err  # included and failed (and charged): exit 3, and the receipt says why
    assert out["receipt"]["status"] == "failed" and int(out["receipt"]["fee_paid"]) > 0
    assert out["receipt"]["error_code"] == "actor_rejected:import_not_allowed:1"
    assert out["receipt"]["error_message"] == "line 1: import_not_allowed: import of 'os' is not allowed"
    assert out["error"] == {"code": "actor_rejected:import_not_allowed:1",
                            "message": "line 1: import_not_allowed: import of 'os' is not allowed"}
    assert "error: actor_rejected:import_not_allowed:1: " in err and "import of 'os' is not allowed" in err
    rc, _, err = run_cli(["query", "actor", out["address"], "--rpc", live.url], capsys)
    assert rc == 1 and "actor_not_found" in err


def test_call_without_wait_prints_only_the_hash(live: LiveNode, keys: dict[str, Path], deployed: dict[str, Any],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(["tx", "call", "--key", str(keys["alice"]), "--actor", deployed["address"],
                            "--handler", "echo", "--no-wait", "--rpc", live.url], capsys)
    assert rc == 0, err
    assert set(out) == {"tx_hash"} and len(out["tx_hash"]) == 66


# -- queries ---------------------------------------------------------------------------------------
def test_query_actor_record_and_scan(live: LiveNode, deployed: dict[str, Any],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(["query", "actor", deployed["address"], "--rpc", live.url], capsys)
    assert rc == 0
    assert out["creator"] == to_checksum_address(ALICE)
    assert out["source_hash"] == "0x" + keccak256(SOURCE.encode()).hex()
    assert out["handlers"] == ["init", "bump", "echo"]
    rc, out, _ = run_cli(["query", "actor", deployed["address"], "--prefix", "k/", "--limit", "2",
                          "--rpc", live.url], capsys)
    assert rc == 0
    assert [e["key"] for e in out["entries"]] == ["0x6b2f61", "0x6b2f62"] and out["truncated"] is True
    rc, out, _ = run_cli(["query", "actor", deployed["address"], "--key", "0x6b2f63", "--rpc", live.url], capsys)
    assert out["value"] == "0x4b2f43"


def test_query_read_runs_a_handler_without_a_transaction(live: LiveNode, deployed: dict[str, Any],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(["query", "read", deployed["address"], "--handler", "echo", "--payload", "0102",
                          "--rpc", live.url], capsys)
    assert rc == 0
    assert out["result"] == "0x0102" and out["error"] is None


def test_query_of_an_unknown_actor_exits_1_with_the_code(live: LiveNode, capsys: pytest.CaptureFixture[str]) -> None:
    nobody = to_checksum_address(b"\x42" * 20)
    for argv in (["query", "actor", nobody], ["query", "timers", nobody],
                 ["query", "read", nobody, "--handler", "echo"]):
        rc, out, err = run_cli([*argv, "--rpc", live.url], capsys)
        assert rc == 1 and out is None
        assert err.startswith("error: actor_not_found:")


# -- system timer instructions ----------------------------------------------------------------------
def test_timer_system_instructions_by_a_system_deployer(live: LiveNode, keys: dict[str, Path],
                                                        deployed: dict[str, Any],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    actor = bytes.fromhex(deployed["address"][2:])
    rc, out, err = run_cli(["tx", "call", "--key", str(keys["alice"]), "--actor", deployed["address"],
                            "--handler", "bump", "--payload", "bb", "--rpc", live.url, "--wait"], capsys)
    assert rc == 0 and out["receipt"]["status"] == "success", err
    ids = [t["id"] for t in run_cli(["query", "timers", deployed["address"], "--rpc", live.url], capsys)[1]["timers"]]
    target = ids[-1]
    rc, out, err = run_cli(["tx", "extend-timer", "--key", str(keys["alice"]), "--timer-id", target,
                            "--expires-at", "99999999999", "--rpc", live.url, "--wait"], capsys)
    assert rc == 0 and out["receipt"]["status"] == "success", err
    assert [e["topic"] for e in out["receipt"]["events"]] == ["timer.extended_by_governance"]
    for _ in range(2):  # idempotent
        rc, out, err = run_cli(["tx", "cancel-timer", "--key", str(keys["alice"]), "--timer-id", target,
                                "--rpc", live.url, "--wait"], capsys)
        assert rc == 0 and out["receipt"]["status"] == "success", err
    world = live.node.chain.world()
    assert timer_store.get_timer(world, bytes.fromhex(target[2:])) is None
    assert all(t != bytes.fromhex(target[2:]) for t, _ in timer_store.actor_timers(world, actor))
    rc, out, err = run_cli(["tx", "update-timer-config", "--key", str(keys["alice"]), "--max-ttl-blocks", "5000000",
                            "--max-cycles-per-fire", "550000", "--max-cells-per-fire", "550000",
                            "--max-timers-per-actor", "1024", "--gc-cycles-per-block", "5000000",
                            "--rpc", live.url, "--wait"], capsys)
    assert rc == 0 and out["receipt"]["status"] == "success", err
    assert get_timer_config(live.node.chain.world()) == TimerConfig(max_ttl_blocks=5_000_000)


def test_timer_system_instruction_by_anyone_else_fails_unauthorized(live: LiveNode, keys: dict[str, Path],
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # fund BOB, then his CancelTimer is included, charged and failed
    from tests.helpers import BOB

    rc, _, err = run_cli(["tx", "transfer", "--key", str(keys["alice"]), "--to", to_checksum_address(BOB),
                          "--amount", str(10**20), "--rpc", live.url, "--wait"], capsys)
    assert rc == 0, err
    rc, out, err = run_cli(["tx", "cancel-timer", "--key", str(keys["bob"]), "--timer-id", "0x" + "11" * 32,
                            "--rpc", live.url, "--wait"], capsys)
    assert rc == 3, err
    assert out["receipt"]["status"] == "failed" and out["receipt"]["error_code"] == "unauthorized"


# -- bad input: exit 2, nothing submitted -----------------------------------------------------------
@pytest.mark.parametrize("extra,needle", [
    (["--salt", "0x" + "00" * 33], "--salt"),
    (["--salt", "xyz"], "--salt"),
    (["--payload", "35"], "--payload needs --init"),
    (["--init", ""], "--init"),
    (["--init", "h" * 257], "--init"),
    (["--payload", "0x1", "--init", "init"], "--payload"),
])
def test_deploy_bad_input_exits_2_and_submits_nothing(live: LiveNode, keys: dict[str, Path], source_file: Path,
                                                      capsys: pytest.CaptureFixture[str], extra: list[str],
                                                      needle: str) -> None:
    nonce = live.node.api.account(ALICE)["next_pending_nonce"]
    rc, out, err = run_cli(["tx", "deploy", "--key", str(keys["alice"]), "--source", str(source_file), *extra,
                            "--rpc", live.url, "--no-wait"], capsys)
    assert rc == 2 and out is None
    assert needle in err
    assert live.node.api.account(ALICE)["next_pending_nonce"] == nonce


def test_deploy_source_problems_exit_2(live: LiveNode, keys: dict[str, Path], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    bad_utf8 = tmp_path / "bad.py"
    bad_utf8.write_bytes(b"x = '\xff'\n")
    big = tmp_path / "big.py"
    big.write_text("#" * (128 * 1024 + 1))
    for path, needle in ((tmp_path / "missing.py", "cannot read"), (bad_utf8, "not UTF-8"), (big, "limit")):
        rc, out, err = run_cli(["tx", "deploy", "--key", str(keys["alice"]), "--source", str(path),
                                "--rpc", live.url], capsys)
        assert rc == 2 and out is None and needle in err, err


@pytest.mark.parametrize("argv,needle", [
    (["tx", "call", "--actor", "0x1234", "--handler", "h"], "--actor"),
    (["tx", "call", "--actor", "0x" + "42" * 20, "--handler", ""], "--handler"),
    (["tx", "call", "--actor", "0x" + "42" * 20, "--handler", "h", "--payload", "zz"], "--payload"),
    (["tx", "cancel-timer", "--timer-id", "0x" + "11" * 31], "--timer-id"),
    (["tx", "extend-timer", "--timer-id", "0x" + "11" * 32, "--expires-at", "-1"], "--expires-at"),
    (["tx", "update-timer-config", "--max-ttl-blocks", "1", "--max-cycles-per-fire", "1",
      "--max-cells-per-fire", "1", "--max-timers-per-actor", str(2**32), "--gc-cycles-per-block", "1"], "u32"),
])
def test_tx_bad_input_exits_2(live: LiveNode, keys: dict[str, Path], capsys: pytest.CaptureFixture[str],
                              argv: list[str], needle: str) -> None:
    nonce = live.node.api.account(ALICE)["next_pending_nonce"]
    rc, out, err = run_cli([*argv, "--key", str(keys["alice"]), "--rpc", live.url], capsys)
    assert rc == 2 and out is None and needle in err, err
    assert live.node.api.account(ALICE)["next_pending_nonce"] == nonce


@pytest.mark.parametrize("argv,needle", [
    (["query", "actor", "0x12"], "ADDRESS"),
    (["query", "actor", "0x" + "42" * 20, "--limit", "0"], "--limit"),
    (["query", "actor", "0x" + "42" * 20, "--limit", "1001"], "--limit"),
    (["query", "actor", "0x" + "42" * 20, "--key", "0x123"], "--key"),
    (["query", "actor", "0x" + "42" * 20, "--key", ""], "--key"),
    (["query", "actor", "0x" + "42" * 20, "--key", "a", "--prefix", "b"], "--key cannot be combined"),
    (["query", "read", "0x" + "42" * 20, "--handler", "h", "--cycles-limit", "10000001"], "--cycles-limit"),
])
def test_query_bad_input_exits_2(live: LiveNode, capsys: pytest.CaptureFixture[str], argv: list[str],
                                 needle: str) -> None:
    rc, out, err = run_cli([*argv, "--rpc", live.url], capsys)
    assert rc == 2 and out is None and needle in err, err
