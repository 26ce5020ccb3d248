"""Runner CLI commands against a real in-process node producing blocks in a background thread.

``tx register-runner|runner-heartbeat|update-runner|deregister-runner`` build, sign and submit real
transactions; ``query runners|runner|params`` read them back over HTTP. Bad input exits 2 and submits nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cowboy_protocol.crypto.address import to_checksum_address
from tests.helpers import ALICE, ALICE_FUNDS, ALICE_SK, BOB, BOB_SK
from tests.unit.node_harness import LiveNode, dev_live_node, run_cli, serving, write_keys

EXAMPLE = Path(__file__).resolve().parents[3] / "configs" / "examples" / "runner-capabilities.json"
STAKE = 10**18


@pytest.fixture(scope="module")
def live() -> Iterator[LiveNode]:
    with serving(dev_live_node({ALICE: ALICE_FUNDS, BOB: ALICE_FUNDS})) as n:
        yield n


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_keys(tmp_path_factory.mktemp("keys"), {"alice": ALICE_SK, "bob": BOB_SK})


def _next_nonce(live: LiveNode, who: bytes) -> int:
    n: int = live.node.api.account(who)["next_pending_nonce"]
    return n


def test_runner_lifecycle_through_the_cli(live: LiveNode, keys: dict[str, Path], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    rpc = ["--rpc", live.url, "--timeout", "20"]
    key = ["--key", str(keys["alice"])]
    rc, out, err = run_cli(["tx", "register-runner", *key, "--stake", str(STAKE), "--capabilities", str(EXAMPLE),
                            "--wait", *rpc], capsys)
    assert rc == 0, err
    assert out["receipt"]["status"] == "success", out["receipt"]
    assert [e["topic"] for e in out["receipt"]["events"]] == ["runner.registered"]

    rc, rec, err = run_cli(["query", "runner", to_checksum_address(ALICE), "--rpc", live.url], capsys)
    assert rc == 0, err
    assert (rec["index"], rec["health"], rec["stake"], rec["eligible_now"]) == (0, "healthy", str(STAKE), True)
    assert rec["capabilities"]["job_types"] == ["http"] and "example.com" in rec["capabilities"]["http_domains"]
    assert rec["rate_card"] == {"http": {"base_price": "1000", "price_per_unit": "0"}}

    rc, out, err = run_cli(["tx", "runner-heartbeat", *key, "--paused", "--wait", *rpc], capsys)
    assert rc == 0 and out["receipt"]["status"] == "success", err
    rc, rec, err = run_cli(["query", "runner", to_checksum_address(ALICE), "--rpc", live.url], capsys)
    assert rec["health"] == "paused" and rec["eligible_now"] is False

    update = tmp_path / "update.json"
    update.write_text(json.dumps({"job_types": ["http", "llm"], "http_domains": ["*"], "max_concurrent_jobs": 2,
                                  "rate_card": {"llm": {"base_price": 5, "price_per_unit": "6"}}}))
    rc, out, err = run_cli(["tx", "update-runner", *key, "--capabilities", str(update), "--wait", *rpc], capsys)
    assert rc == 0, err
    assert [r["status"] for r in out["receipts"]] == ["success", "success"]
    assert [r["events"][0]["topic"] for r in out["receipts"]] == ["runner.capabilities_updated",
                                                                  "runner.rate_card_updated"]
    rc, listing, err = run_cli(["query", "runners", "--rpc", live.url], capsys)
    assert rc == 0, err
    assert listing["count"] == 1 and listing["runners"][0]["address"] == to_checksum_address(ALICE)
    assert listing["runners"][0]["capabilities"]["job_types"] == ["llm", "http"]  # job-kind byte order
    assert listing["runners"][0]["rate_card"] == {"llm": {"base_price": "5", "price_per_unit": "6"}}

    rc, out, err = run_cli(["tx", "deregister-runner", *key, "--wait", *rpc], capsys)
    assert rc == 0 and out["receipt"]["status"] == "success", err
    rc, rec, err = run_cli(["query", "runner", to_checksum_address(ALICE), "--rpc", live.url], capsys)
    assert rec["health"] == "deregistered" and rec["unbonding_until"] == out["height"] + 1_000
    assert rec["index"] == 0


def test_query_params_prints_all_protocol_parameters(live: LiveNode, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(["query", "params", "--rpc", live.url], capsys)
    assert rc == 0, err
    assert out["runners"]["min_runner_stake"] == STAKE
    assert {"basefee", "timer", "limits", "cip11", "runners"} <= set(out)


def test_stake_below_the_minimum_is_a_failed_receipt(live: LiveNode, keys: dict[str, Path],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(["tx", "register-runner", "--key", str(keys["bob"]), "--stake", str(STAKE - 1),
                            "--capabilities", str(EXAMPLE), "--wait", "--rpc", live.url, "--timeout", "20"], capsys)
    assert rc == 3, err  # included and failed: exit 3, and the receipt says why
    assert (out["receipt"]["status"], out["receipt"]["error_code"]) == ("failed", "runner_stake_too_low")
    assert out["receipt"]["error_message"] == f"stake {STAKE - 1} is below the minimum {STAKE}"


def test_capabilities_file_with_an_unknown_key_exits_2_and_submits_nothing(
        live: LiveNode, keys: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    doc = json.loads(EXAMPLE.read_text())
    doc["gpus"] = 8
    bad.write_text(json.dumps(doc))
    before = _next_nonce(live, BOB)
    for cmd in (["tx", "register-runner", "--stake", str(STAKE)], ["tx", "update-runner"]):
        rc, out, err = run_cli([*cmd, "--key", str(keys["bob"]), "--capabilities", str(bad), "--rpc", live.url],
                               capsys)
        assert rc == 2 and out is None
        assert "invalid_capabilities" in err and "gpus" in err
    assert _next_nonce(live, BOB) == before


@pytest.mark.parametrize("content", ["{not json", "[]", '{"job_types": ["http"]}'])
def test_unusable_capabilities_files_exit_2(live: LiveNode, keys: dict[str, Path], tmp_path: Path, content: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "caps.json"
    path.write_text(content)
    rc, _, err = run_cli(["tx", "register-runner", "--key", str(keys["bob"]), "--stake", str(STAKE),
                          "--capabilities", str(path), "--rpc", live.url], capsys)
    assert rc == 2 and "--capabilities" in err


def test_missing_capabilities_file_exits_2(live: LiveNode, keys: dict[str, Path], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(["tx", "register-runner", "--key", str(keys["bob"]), "--stake", "1",
                          "--capabilities", str(tmp_path / "nope.json"), "--rpc", live.url], capsys)
    assert rc == 2 and "cannot read" in err


def test_query_runner_bad_and_unknown_addresses(live: LiveNode, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(["query", "runner", "0x1234", "--rpc", live.url], capsys)
    assert rc == 2 and "invalid address" in err
    rc, _, err = run_cli(["query", "runner", to_checksum_address(b"\x42" * 20), "--rpc", live.url], capsys)
    assert rc == 1 and "runner_not_found" in err


@pytest.mark.parametrize("argv", [["query", "runners", "--limit", "0"], ["query", "runners", "--limit", "1001"],
                                  ["tx", "register-runner", "--key", "k", "--stake", "-1", "--capabilities", "c"],
                                  ["tx", "register-runner", "--key", "k", "--stake", str(2**128),
                                   "--capabilities", "c"]])
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, _ = run_cli(argv, capsys)
    assert rc == 2
