"""A real node process: deploy an actor with the CLI, call it, read its state and timers over HTTP."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.integration.nodeproc import NodeProcess, cli

SOURCE = '''import pvm_host


def init(payload):
    pvm_host.set_state(b"count", b"0")
    return b""


def bump(payload):
    n = int(pvm_host.get_state(b"count")) + 1
    pvm_host.set_state(b"count", str(n).encode())
    pvm_host.schedule_timer(pvm_host.current_block() + 100000, b"later")
    return str(n).encode()


def get(payload):
    return pvm_host.get_state(b"count")


def arm(payload):
    sender = pvm_host.context()["sender"]
    pvm_host.schedule_timer_ex(pvm_host.current_block() + 2, payload, fee_payer=sender)
    return b""


def handle_timer(payload):
    pvm_host.set_state(b"fired", payload)
    return b""
'''


def _post_json(url: str, doc: object) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=json.dumps(doc).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_deploy_call_and_query_an_actor_through_a_running_node(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "home")
    source = tmp_path / "counter.py"
    source.write_text(SOURCE)
    key = str(node.home / "keys" / "faucet.key")
    node.start()
    try:
        deployed = json.loads(cli("tx", "deploy", "--key", key, "--source", str(source), "--init", "init",
                                  "--rpc", node.url, "--timeout", "30", timeout=60).stdout)
        assert deployed["receipt"]["status"] == "success", deployed
        address = deployed["address"]
        called = json.loads(cli("tx", "call", "--key", key, "--actor", address, "--handler", "bump",
                                "--rpc", node.url, "--wait", "--timeout", "30", timeout=60).stdout)
        assert called["receipt"]["status"] == "success", called
        assert called["result"] == "0x31"  # b"1"
        assert [e["topic"] for e in called["receipt"]["events"]] == ["actor.returned"]

        record = node.get(f"/actor/{address}")
        assert record["address"] == address and record["deployed_at"] == deployed["height"]
        assert record["handlers"] == ["init", "bump", "get", "arm", "handle_timer"]
        state = node.get(f"/actor/{address}/state?key=0x" + b"count".hex())
        assert state["value"] == "0x31"
        timers = node.get(f"/actor/{address}/timers")
        assert timers["count"] == 1
        [timer] = timers["timers"]
        assert timer["height"] == called["height"] + 100000 and timer["fee_payer"] == address

        status, out = _post_json(node.url + "/actor/read", {"actor": address, "handler": "get"})
        assert (status, out["result"], out["error"]) == (200, "0x31", None)
        status, out = _post_json(node.url + "/actor/read", {"actor": address, "handler": ""})
        assert (status, out["code"]) == (400, "invalid_handler")
        assert node.get("/actor/0x" + "42" * 20)["code"] == "actor_not_found"
        assert json.loads(cli("query", "timers", address, "--rpc", node.url).stdout)["count"] == 1

        # A timer paid by the caller fires two blocks later in End of Block and writes its payload.
        armed = json.loads(cli("tx", "call", "--key", key, "--actor", address, "--handler", "arm",
                               "--payload", "0x7069", "--rpc", node.url, "--wait", "--timeout", "30",
                               timeout=60).stdout)
        assert armed["receipt"]["status"] == "success", armed
        deadline = time.monotonic() + 30
        while node.get(f"/actor/{address}/state?key=0x" + b"fired".hex())["value"] is None:
            assert time.monotonic() < deadline, "timer never fired"
            time.sleep(0.1)
        assert node.get(f"/actor/{address}/state?key=0x" + b"fired".hex())["value"] == "0x7069"
        assert node.get(f"/actor/{address}/timers")["count"] == 1  # only bump's far-future timer is left

        with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        metrics = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
        assert float(metrics["cowboy_timers_fired_total"]) >= 1
        for name in ("cowboy_timers_deferred_total", "cowboy_timers_expired_total",
                     "cowboy_timers_self_destructed_total"):
            assert name in metrics, name
        assert 'cowboy_eob_step_seconds_count{step="deliver_timers"}' in metrics
    finally:
        rc = node.terminate()
    assert rc == 0
    # Every block, actor execution included, replays to the same state roots.
    replay = json.loads(cli("replay", "--home", str(node.home), timeout=120).stdout)
    assert replay["ok"] is True and replay["height"] >= called["height"]
