"""``cowboy-node tx governance set-phase|set-param`` and ``query governance`` against a live node (phase 2)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cowboy_node.cli.main import build_parser
from cowboy_protocol.types.governance_instructions import GovernanceSetParam, GovernanceSetPhase
from cowboy_protocol.types.transaction import Transaction
from tests.helpers import ALICE, ALICE_FUNDS, ALICE_SK, BOB, BOB_SK
from tests.unit.node_harness import LiveNode, dev_live_node, run_cli, serving, write_keys


@pytest.fixture(scope="module")
def live() -> Iterator[LiveNode]:
    with serving(dev_live_node({ALICE: ALICE_FUNDS, BOB: ALICE_FUNDS})) as n:
        yield n


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_keys(tmp_path_factory.mktemp("keys"), {"alice": ALICE_SK, "bob": BOB_SK})


def _governance(live: LiveNode, capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    rc, out, err = run_cli(["query", "governance", "--rpc", live.url], capsys)
    assert rc == 0, err
    assert isinstance(out, dict)
    return out


def test_set_phase_and_param_through_the_cli(live: LiveNode, keys: dict[str, Path],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    rpc = ["--rpc", live.url, "--timeout", "20"]
    key = ["--key", str(keys["alice"])]
    before = _governance(live, capsys)
    assert before["active"]["phase"] == 2 and before["pending"] == []
    assert before["active"]["params"]["OVERLAP_BLOCKS"] == 160
    at = before["height"] + 40
    rc, out, err = run_cli(["tx", "governance", "set-phase", "3", "--at-height", str(at), *key, "--wait", *rpc],
                           capsys)
    assert rc == 0, err
    assert out["receipt"]["status"] == "success", out["receipt"]
    assert [e["topic"] for e in out["receipt"]["events"]] == ["governance.scheduled"]
    rc, out, err = run_cli(["tx", "governance", "set-param", "OVERLAP_BLOCKS", "320", "--at-height", str(at), *key,
                            "--wait", *rpc], capsys)
    assert rc == 0 and out["receipt"]["status"] == "success", (err, out)
    pending = _governance(live, capsys)["pending"]
    assert [(c["name"], c["value"], c["activation_height"]) for c in pending] == \
        [("PHASE", 3, at), ("OVERLAP_BLOCKS", 320, at)]
    deadline = time.monotonic() + 30
    while live.node.chain.height < at and time.monotonic() < deadline:
        time.sleep(0.05)
    after = _governance(live, capsys)
    assert after["active"]["phase"] == 3 and after["active"]["flags"]["CIP11_POLL_DISABLED"] is True
    assert after["active"]["params"]["OVERLAP_BLOCKS"] == 320 and after["pending"] == []


def test_refusals_are_failed_receipts_with_their_code(live: LiveNode, keys: dict[str, Path],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    rpc = ["--rpc", live.url, "--timeout", "20", "--wait"]
    h = _governance(live, capsys)["height"]
    cases = [
        (["set-phase", "1", "--at-height", str(h + 50), "--key", str(keys["bob"])], "unauthorized"),
        (["set-param", "MRU_WEIGHT_MULTIPLIER", "0", "--at-height", str(h + 50), "--key", str(keys["alice"])],
         "param_out_of_range"),
        (["set-param", "OVERLAP_BLOCKS", "200", "--at-height", "1", "--key", str(keys["alice"])],
         "activation_not_future"),
    ]
    for argv, code in cases:
        rc, out, err = run_cli(["tx", "governance", *argv, *rpc], capsys)
        assert rc == 3, err  # included and failed
        assert (out["receipt"]["status"], out["receipt"]["error_code"]) == ("failed", code), argv


def test_sign_only_offline_prints_the_signed_instruction(keys: dict[str, Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    offline = ["--sign-only", "--nonce", "7", "--chain-id", "c", "--max-fee-per-cycle", "1",
               "--max-fee-per-cell", "1", "--rpc", "http://127.0.0.1:9"]
    for argv, ins in [(["set-phase", "1", "--at-height", "99"], GovernanceSetPhase(1, 99)),
                      (["set-param", "PRESENCE_HARD_EXCLUDE_ENABLED", "true", "--at-height", "99"],
                       GovernanceSetParam("PRESENCE_HARD_EXCLUDE_ENABLED", 1, 99))]:
        args = build_parser().parse_args(["tx", "governance", *argv, "--key", str(keys["alice"]), *offline])
        assert args.func(args) == 0
        hex_line = capsys.readouterr().out.strip()
        tx = Transaction.from_bytes(bytes.fromhex(hex_line.removeprefix("0x")))
        assert (tx.instruction, tx.nonce, tx.chain_id, tx.sender) == (ins, 7, "c", ALICE)


@pytest.mark.parametrize("argv", [
    ["tx", "governance", "set-phase", "4", "--at-height", "9", "--key", "k"],
    ["tx", "governance", "set-phase", "1", "--key", "k"],
    ["tx", "governance", "set-param", "bad name!", "1", "--at-height", "9", "--key", "k"],
    ["tx", "governance", "set-param", "OVERLAP_BLOCKS", "-1", "--at-height", "9", "--key", "k"],
])
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, _ = run_cli(argv, capsys)
    assert rc == 2
