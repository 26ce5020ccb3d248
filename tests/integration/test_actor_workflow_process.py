"""An actor developer's workflow against a real node process (LevelDB), through the real ``cowboy-node``
executable: exit codes a script can rely on, receipt error messages, ``--gas auto``, events and terminal
timers."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

from tests.integration.nodeproc import NodeProcess, cli

SOURCE = '''import pvm_host


def bump(payload):
    raw = pvm_host.get_state(b"n")
    n = 0 if raw is None else int(raw)
    pvm_host.set_state(b"n", str(n + 1).encode())
    pvm_host.emit_event("bumped", str(n + 1).encode())
    return str(n + 1).encode()


def broken(payload):
    return foo


def arm(payload):
    pvm_host.schedule_timer(pvm_host.current_block() + 2, b"never")
    return b""
'''
FOO_LINE = SOURCE.splitlines().index("    return foo") + 1


def test_exit_codes_messages_dry_runs_events_and_terminal_timers(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "home", block_time_ms=100)
    source = tmp_path / "a.py"
    source.write_text(SOURCE)
    key = str(node.home / "keys" / "faucet.key")
    wait = ["--rpc", node.url, "--timeout", "30"]
    node.start()
    try:
        deployed = cli("tx", "deploy", "--key", key, "--source", str(source), *wait, timeout=60)
        address = json.loads(deployed.stdout)["address"]

        # a failed transaction: exit 3, the receipt's message on stderr
        failed = cli("call", "--key", key, "--actor", address, "--handler", "broken", *wait, timeout=60, check=False)
        assert failed.returncode == 3, failed.stderr
        message = f"NameError: name 'foo' is not defined at line {FOO_LINE}"
        assert failed.stderr.startswith("error: handler_error: transaction 0x") and message in failed.stderr
        assert json.loads(failed.stdout)["receipt"]["error_message"] == message

        # --gas auto: a dry run (which commits nothing), then the transaction with limits from it
        sent = cli("tx", "call", "--key", key, "--actor", address, "--handler", "bump", "--gas", "auto", *wait,
                   timeout=60)
        assert json.loads(sent.stdout)["result"] == "0x31"

        # a timer the actor cannot pay for is removed two blocks later: query timers says why
        armed = json.loads(cli("tx", "call", "--key", key, "--actor", address, "--handler", "arm", *wait,
                               timeout=60).stdout)
        deadline = time.monotonic() + 30
        while not (recent := [t for t in node.get(f"/actor/{address}/timers/history")["terminal"]
                              if t["height"] > armed["height"]]):
            assert time.monotonic() < deadline, "the unfunded timer was never removed"
            time.sleep(0.1)
        assert recent[0]["reason"] == "insufficient_funds" and recent[0]["height"] == armed["height"] + 2
        with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        assert 'cowboy_timers_terminal_total{reason="insufficient_funds"} 1.0' in text
        # the events, block-level ones included, from the node's LevelDB event index
        events = node.get(f"/events?actor={address}")
        topics = [e["topic"] for e in events["events"]]
        assert topics.count("bumped") == 1 and topics.count("timer.cancelled_insufficient_funds") == 1
        timers = json.loads(cli("query", "timers", address, "--rpc", node.url, timeout=60).stdout)
        assert [t["reason"] for t in timers["recent_terminal"]] == ["insufficient_funds"]
    finally:
        assert node.terminate() == 0
