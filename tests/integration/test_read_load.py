"""Read-only calls under load do not stall block production (issue 22 item 1), against a real node process.

A node with a 500 ms block time and an actor whose handler spins forever; 8 concurrent clients call
``POST /actor/read`` on it with the largest cycles limit (10M) for ~6 s, retrying at once when refused. The read
pool (one worker, 1 s per call, 250 ms of execution per second, 10 reads/s per client address) keeps the node
producing: consecutive block timestamps stay within 2x the block time, ``/health`` answers 200 throughout, and the
excess reads are refused with 503 ``busy`` / 429 ``rate_limited`` carrying ``Retry-After``.

:func:`run_scenario` is reusable with other ``[rpc] read_*`` settings (e.g. limits set very high, to see what the
node does without the pool's bounds).
"""

from __future__ import annotations

import collections
import itertools
import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.integration.nodeproc import NodeProcess, cli

BLOCK_TIME_MS = 500
CLIENTS = 8
LOAD_S = 6.0
SPIN = '''def spin(payload):
    while True:
        pass
'''


def _request(url: str, doc: object | None = None) -> tuple[int, dict[str, str], Any]:
    data = None if doc is None else json.dumps(doc).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


def _edit_config(node: NodeProcess, settings: dict[str, int]) -> None:
    path = node.home / "config.toml"
    toml = path.read_text()
    for key, value in settings.items():
        old = next(line for line in toml.splitlines() if line.startswith(f"{key} = "))
        toml = toml.replace(old + "\n", f"{key} = {value}\n")
    path.write_text(toml)


def run_scenario(home: Path, read_settings: dict[str, int] | None = None, *, clients: int = CLIENTS,
                 load_s: float = LOAD_S) -> dict[str, Any]:
    """Start a node, deploy the spinning actor, spin-read it from ``clients`` threads; return what was seen."""
    node = NodeProcess(home, block_time_ms=BLOCK_TIME_MS)
    _edit_config(node, read_settings or {})
    source = home.parent / "spin.py"
    source.write_text(SPIN)
    node.start()
    try:
        deployed = json.loads(cli("tx", "deploy", "--key", str(node.home / "keys" / "faucet.key"), "--source",
                                  str(source), "--rpc", node.url, "--timeout", "30", timeout=60).stdout)
        assert deployed["receipt"]["status"] == "success", deployed
        body = {"actor": deployed["address"], "handler": "spin", "cycles_limit": 10_000_000}
        start_height = node.get("/height")["height"]
        stop_at = time.monotonic() + load_s
        outcomes: collections.Counter[str] = collections.Counter()
        retry_afters: list[int] = []
        health: collections.Counter[int] = collections.Counter()
        read_ms: list[float] = []
        lock = threading.Lock()

        def client() -> None:
            while time.monotonic() < stop_at:
                t0 = time.monotonic()
                status, headers, doc = _request(node.url + "/actor/read", body)
                with lock:
                    if status == 200:
                        outcomes[f"200 {doc['error']}"] += 1
                        read_ms.append((time.monotonic() - t0) * 1000)
                    else:
                        outcomes[f"{status} {doc['code']}"] += 1
                        if "Retry-After" in headers:
                            retry_afters.append(int(headers["Retry-After"]))
                if status != 200:
                    time.sleep(0.05)  # an impatient client: ignores Retry-After

        def health_poller() -> None:
            while time.monotonic() < stop_at:
                status, _, _ = _request(node.url + "/health")
                with lock:
                    health[status] += 1
                time.sleep(0.1)

        threads = [threading.Thread(target=client) for _ in range(clients)]
        threads.append(threading.Thread(target=health_poller))
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        end_height = node.get("/height")["height"]
        stamps = [node.get(f"/block/{h}")["timestamp_ms"] for h in range(start_height, end_height + 1)]
        intervals = [b - a for a, b in itertools.pairwise(stamps)]
        return {"blocks": end_height - start_height, "max_interval_ms": max(intervals, default=None),
                "mean_interval_ms": round(sum(intervals) / len(intervals), 1) if intervals else None,
                "health": dict(health), "outcomes": dict(outcomes), "retry_after": sorted(set(retry_afters)),
                "median_read_ms": round(sorted(read_ms)[len(read_ms) // 2]) if read_ms else None}
    finally:
        node.terminate()


def test_spinning_reads_do_not_stall_blocks(tmp_path: Path) -> None:
    seen = run_scenario(tmp_path / "home")
    print(json.dumps(seen))  # the figures, with -s
    assert seen["blocks"] >= LOAD_S * 1000 / BLOCK_TIME_MS / 2, seen
    assert seen["max_interval_ms"] <= 2 * BLOCK_TIME_MS, seen
    assert set(seen["health"]) == {200}, seen
    outcomes = seen["outcomes"]
    assert outcomes.get("503 busy", 0) + outcomes.get("429 rate_limited", 0) > 0, seen
    assert seen["retry_after"] and min(seen["retry_after"]) >= 1, seen
    assert sum(n for k, n in outcomes.items() if k.startswith("200 ")) > 0, seen  # reads were still served
    assert set(outcomes) <= {"200 read_timeout", "200 out_of_cycles", "503 busy", "429 rate_limited"}, seen
