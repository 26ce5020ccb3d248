"""An actor developer's workflow (issue 17 part 4) against a real in-process node producing blocks:
exit codes and messages of failed transactions, the one waiting rule, dry runs (``call --simulate``,
``--gas auto``), ``query events`` and the terminal timers of ``query timers``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cowboy_node.cli.workflow_commands import GAS_MARGIN_CELLS, GAS_MARGIN_CYCLES
from cowboy_node.execution.actors import actor_state as actor_store
from cowboy_protocol.codec import decode
from cowboy_protocol.crypto.address import to_checksum_address
from tests.helpers import ALICE, ALICE_SK
from tests.unit.node_harness import LiveNode, dev_live_node, run_cli, serving, write_keys

SOURCE = '''import pvm_host


def bump(payload):
    raw = pvm_host.get_state(b"n")
    n = 0 if raw is None else int(raw)
    pvm_host.set_state(b"n", str(n + 1).encode())
    pvm_host.emit_event("bumped", str(n + 1).encode())
    return str(n + 1).encode()


def broken(payload):
    x = 1
    return foo


def spin(payload):
    while True:
        pass


def arm(payload):
    # The actor pays for its own fires and holds nothing: the timer is removed unrun when it comes due.
    pvm_host.schedule_timer(pvm_host.current_block() + 2, b"never")
    return b""
'''
WAIT_S = 20.0
FOO_LINE = SOURCE.splitlines().index("    return foo") + 1


@pytest.fixture(scope="module")
def live() -> Iterator[LiveNode]:
    with serving(dev_live_node()) as n:
        yield n


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_keys(tmp_path_factory.mktemp("keys"), {"alice": ALICE_SK})


@pytest.fixture(scope="module")
def actor(live: LiveNode, keys: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> str:
    src = tmp_path_factory.mktemp("src") / "a.py"
    src.write_text(SOURCE)
    capsys_free = _cli_quiet(["tx", "deploy", "--key", str(keys["alice"]), "--source", str(src), "--rpc", live.url,
                              "--timeout", str(WAIT_S)])
    assert capsys_free[0] == 0, capsys_free
    address: str = capsys_free[1]["address"]
    return address


def _cli_quiet(argv: list[str]) -> tuple[int, Any]:
    """Run the CLI without pytest's capsys (module fixtures): stdout parsed as JSON."""
    import contextlib
    import io
    import json

    from cowboy_node.cli.main import build_parser

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        args = build_parser().parse_args(argv)
        rc: int = args.func(args)
    return rc, json.loads(buf.getvalue())


def _nonce(live: LiveNode) -> int:
    n: int = live.node.api.account(ALICE)["nonce"]
    return n


def _counter(live: LiveNode, address: str) -> bytes | None:
    return actor_store.get_state(live.node.chain.world(), bytes.fromhex(address[2:]), b"n")


def _wait_for(cond: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + WAIT_S  # a guard against hanging, not a timing assertion
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("condition not met")


# -- exit codes and messages -----------------------------------------------------------------------------------
def test_a_failed_call_exits_3_and_prints_why(live: LiveNode, keys: dict[str, Path], actor: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(["call", "--key", str(keys["alice"]), "--actor", actor, "--handler", "broken",
                            "--rpc", live.url, "--timeout", str(WAIT_S)], capsys)
    assert rc == 3, err
    message = f"NameError: name 'foo' is not defined at line {FOO_LINE}"
    assert out["receipt"]["status"] == "failed" and out["receipt"]["error_message"] == message
    assert out["error"] == {"code": "handler_error", "message": message}
    assert err.strip() == f"error: handler_error: transaction {out['tx_hash']} failed: {message}"


def test_a_successful_call_exits_0_and_waits_by_default(live: LiveNode, keys: dict[str, Path], actor: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(["tx", "call", "--key", str(keys["alice"]), "--actor", actor, "--handler", "bump",
                            "--rpc", live.url, "--timeout", str(WAIT_S)], capsys)
    assert rc == 0, err
    assert out["receipt"]["status"] == "success" and out["receipt"]["error_message"] is None
    assert "result" in out and "height" in out


def test_wait_is_kept_as_an_alias_and_cannot_be_combined_with_no_wait(
        live: LiveNode, keys: dict[str, Path], actor: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(["tx", "call", "--key", str(keys["alice"]), "--actor", actor, "--handler", "bump",
                            "--wait", "--rpc", live.url, "--timeout", str(WAIT_S)], capsys)
    assert rc == 0 and out["receipt"]["status"] == "success", err
    nonce = _nonce(live)
    rc, _, err = run_cli(["tx", "call", "--key", str(keys["alice"]), "--actor", actor, "--handler", "bump",
                          "--wait", "--no-wait", "--rpc", live.url], capsys)
    assert rc == 2 and "not allowed with argument" in err
    assert _nonce(live) == nonce  # nothing was sent


def test_every_tx_command_has_the_same_waiting_flags() -> None:
    from cowboy_node.cli.main import build_parser

    parser = build_parser()
    tx_cmds = [["transfer", "--key", "k", "--to", "0x" + "11" * 20, "--amount", "1"],
               ["deploy", "--key", "k", "--source", "s"], ["call", "--key", "k", "--actor", "0x" + "11" * 20,
                                                           "--handler", "h"],
               ["cancel-timer", "--key", "k", "--timer-id", "00" * 32], ["runner-heartbeat", "--key", "k"],
               ["deregister-runner", "--key", "k"], ["submit-job", "--key", "k", "--spec", "s"],
               ["broadcast", "-"], ["governance", "set-phase", "1", "--at-height", "5", "--key", "k"]]
    for argv in tx_cmds:
        assert parser.parse_args(["tx", *argv]).wait is None, argv  # default: wait
        assert parser.parse_args(["tx", *argv, "--no-wait"]).wait is False, argv
        assert parser.parse_args(["tx", *argv, "--wait"]).wait is True, argv


# -- dry runs --------------------------------------------------------------------------------------------------
def test_call_simulate_returns_result_events_and_usage_and_changes_nothing(
        live: LiveNode, keys: dict[str, Path], actor: str, capsys: pytest.CaptureFixture[str]) -> None:
    before, nonce = _counter(live, actor), _nonce(live)
    rc, out, err = run_cli(["call", "--actor", actor, "--handler", "bump", "--simulate", "--rpc", live.url], capsys)
    assert rc == 0, err
    sim = out["simulation"]
    expected = b"1" if before is None else str(int(before) + 1).encode()
    assert sim["status"] == "success" and sim["error_code"] is None and sim["error_message"] is None
    assert sim["result"] == "0x" + expected.hex()
    bumped = [e for e in sim["events"] if e["topic"] == "bumped"]
    assert bumped == [{"emitter": actor.lower(), "topic": "bumped", "data": "0x" + expected.hex()}]  # as receipts
    assert sim["cycles_used"] > 10_000 and sim["cells_used"] > 0  # the intrinsic charge is included
    assert int(sim["fee_estimate"]) == (sim["cycles_used"] * sim["basefees"]["cycle"]
                                        + sim["cells_used"] * sim["basefees"]["cell"])
    # nothing committed, nothing sent
    assert _counter(live, actor) == before and _nonce(live) == nonce and len(live.node.mempool) == 0


def test_a_failing_simulation_exits_3_with_the_error_message(live: LiveNode, actor: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(["call", "--actor", actor, "--handler", "broken", "--simulate", "--rpc", live.url],
                           capsys)
    assert rc == 3
    assert out["simulation"]["error_code"] == "handler_error"
    assert out["simulation"]["error_message"] == f"NameError: name 'foo' is not defined at line {FOO_LINE}"
    assert "simulation failed: NameError" in err


def test_a_runaway_simulation_is_stopped_by_its_cycles_limit(live: LiveNode, actor: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(["call", "--actor", actor, "--handler", "spin", "--simulate", "--cycles-limit", "300000",
                          "--rpc", live.url], capsys)
    assert rc == 3
    sim = out["simulation"]
    assert sim["error_code"] == "out_of_cycles" and sim["cycles_used"] == sim["cycles_limit"] == 300_000
    loop = SOURCE.splitlines().index("    while True:") + 1
    assert sim["error_message"] in {f"cycles limit 300000 exceeded at line {n}" for n in (loop, loop + 1)}


def test_deploy_simulate_gives_the_address_and_deploys_nothing(live: LiveNode, keys: dict[str, Path],
                                                                tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "b.py"
    src.write_text("def f(payload):\n    return payload\n")
    rc, out, err = run_cli(["tx", "deploy", "--key", str(keys["alice"]), "--source", str(src), "--simulate",
                            "--rpc", live.url], capsys)
    assert rc == 0, err
    assert out["simulation"]["status"] == "success"
    address = out["address"]
    assert [e["topic"] for e in out["simulation"]["events"]] == ["actor.deployed"]
    assert live.node.api.actor(bytes.fromhex(address[2:])) is None


def test_gas_auto_sets_the_limits_from_a_dry_run(live: LiveNode, keys: dict[str, Path], actor: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(["call", "--actor", actor, "--handler", "bump", "--simulate", "--from",
                            to_checksum_address(ALICE), "--rpc", live.url], capsys)
    assert rc == 0, err
    sim = out["simulation"]
    rc, out, err = run_cli(["tx", "call", "--key", str(keys["alice"]), "--actor", actor, "--handler", "bump",
                            "--gas", "auto", "--rpc", live.url, "--timeout", str(WAIT_S)], capsys)
    assert rc == 0, err
    tx = live.node.api.transaction(bytes.fromhex(out["tx_hash"][2:]))
    assert tx is not None
    # 125% of the dry run plus the margins (the counter grew by one digit at most: same cycles)
    assert tx["cycles_limit"] == -(-sim["cycles_used"] * 1250 // 1000) + GAS_MARGIN_CYCLES
    assert tx["cells_limit"] >= -(-sim["cells_used"] * 1250 // 1000) + GAS_MARGIN_CELLS - 2
    assert out["receipt"]["cycles_used"] <= tx["cycles_limit"]


def test_gas_auto_with_a_failing_dry_run_exits_3_and_sends_nothing(
        live: LiveNode, keys: dict[str, Path], actor: str, capsys: pytest.CaptureFixture[str]) -> None:
    nonce = _nonce(live)
    rc, out, err = run_cli(["tx", "call", "--key", str(keys["alice"]), "--actor", actor, "--handler", "broken",
                            "--gas", "auto", "--rpc", live.url], capsys)
    assert rc == 3 and out["simulation"]["error_code"] == "handler_error", err
    assert _nonce(live) == nonce and len(live.node.mempool) == 0


def test_gas_auto_with_explicit_limits_is_bad_input(live: LiveNode, keys: dict[str, Path], actor: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(["tx", "call", "--key", str(keys["alice"]), "--actor", actor, "--handler", "bump",
                          "--gas", "auto", "--cycles-limit", "5", "--rpc", live.url], capsys)
    assert rc == 2 and "--gas auto" in err


def test_a_transaction_without_key_is_bad_input(live: LiveNode, actor: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(["call", "--actor", actor, "--handler", "bump", "--rpc", live.url], capsys)
    assert rc == 2 and "--key is required" in err


# -- events ----------------------------------------------------------------------------------------------------
def test_query_events_filters_by_topic_and_pages_with_the_cursor(live: LiveNode, keys: dict[str, Path],
                                                                 actor: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    for _ in range(2):
        rc, _, err = run_cli(["tx", "call", "--key", str(keys["alice"]), "--actor", actor, "--handler", "bump",
                              "--rpc", live.url, "--timeout", str(WAIT_S)], capsys)
        assert rc == 0, err
    rc, out, err = run_cli(["query", "events", "--actor", actor, "--topic", "bumped", "--rpc", live.url], capsys)
    assert rc == 0, err
    values = [int(bytes.fromhex(e["data"][2:])) for e in out["events"]]
    assert len(values) >= 2 and values == sorted(values) and len(set(values)) == len(values)
    assert all(e["topic"] == "bumped" and e["emitter"] == actor and e["tx_index"] is not None
               for e in out["events"])
    # one per page, following the cursor, gives the same list
    rc, page, _ = run_cli(["query", "events", "--actor", actor, "--topic", "bumped", "--limit", "1",
                           "--rpc", live.url], capsys)
    assert len(page["events"]) == 1 and page["next"] is not None
    seen = [page["events"][0]]
    while page["next"] is not None:
        rc, page, _ = run_cli(["query", "events", "--actor", actor, "--topic", "bumped", "--limit", "1",
                               "--cursor", page["next"], "--rpc", live.url], capsys)
        assert rc == 0
        seen.extend(page["events"])
    assert seen[:len(out["events"])] == out["events"]
    rc, allpages, _ = run_cli(["query", "events", "--actor", actor, "--topic", "bumped", "--limit", "1", "--all",
                               "--rpc", live.url], capsys)
    assert allpages["events"][:len(out["events"])] == out["events"]
    # a height range
    first = out["events"][0]["height"]
    rc, ranged, _ = run_cli(["query", "events", "--actor", actor, "--from", str(first), "--to", str(first),
                             "--rpc", live.url], capsys)
    assert ranged["events"] and {e["height"] for e in ranged["events"]} == {first}
    # every topic of the actor, without the filter, includes the deployment and the returns
    rc, everything, _ = run_cli(["query", "events", "--actor", actor, "--rpc", live.url], capsys)
    assert {"actor.deployed", "actor.returned", "bumped"} <= {e["topic"] for e in everything["events"]}


def test_query_events_bad_input_exits_2(live: LiveNode, actor: str, capsys: pytest.CaptureFixture[str]) -> None:
    for extra in (["--limit", "0"], ["--cursor", "nope"], ["--from", "5", "--to", "4"], ["--all", "--cursor", "1:0"]):
        rc, _, err = run_cli(["query", "events", "--actor", actor, *extra, "--rpc", live.url], capsys)
        assert rc == 2, (extra, err)


# -- terminal timers -------------------------------------------------------------------------------------------
def test_query_timers_shows_a_timer_removed_for_insufficient_funds_and_counts_it(
        live: LiveNode, keys: dict[str, Path], actor: str, capsys: pytest.CaptureFixture[str]) -> None:
    metric = live.node.metrics.timers_terminal.labels(reason="insufficient_funds")
    before = metric._value.get()
    rc, out, err = run_cli(["tx", "call", "--key", str(keys["alice"]), "--actor", actor, "--handler", "arm",
                            "--rpc", live.url, "--timeout", str(WAIT_S)], capsys)
    assert rc == 0, err
    armed_at = out["height"]

    def terminal() -> list[dict[str, Any]]:
        rc, doc, _ = run_cli(["query", "timers", actor, "--rpc", live.url], capsys)
        assert rc == 0
        return [t for t in doc["recent_terminal"] if t["height"] > armed_at]

    [entry] = _wait_for(terminal)
    assert entry["reason"] == "insufficient_funds" and entry["topic"] == "timer.cancelled_insufficient_funds"
    assert entry["height"] == armed_at + 2 and entry["fee_payer"] == actor and entry["available"] == "0"
    assert len(entry["timer_id"]) == 66
    # the live list no longer has it, the metric counted it
    rc, doc, _ = run_cli(["query", "timers", actor, "--rpc", live.url], capsys)
    assert entry["timer_id"] not in {t["id"] for t in doc["timers"]}
    assert metric._value.get() >= before + 1
    # the same removal is an event of the actor (a block-level one: no transaction)
    rc, ev, _ = run_cli(["query", "events", "--actor", actor, "--topic", "timer.cancelled_insufficient_funds",
                         "--rpc", live.url], capsys)
    mine = [e for e in ev["events"] if e["height"] == entry["height"]]
    assert len(mine) == 1 and mine[0]["tx_index"] is None
    assert decode(bytes.fromhex(mine[0]["data"][2:]))[0] == bytes.fromhex(entry["timer_id"][2:])
