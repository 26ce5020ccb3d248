"""What the network page (``/ui``) costs a node (prints JSON).

1. ``refresh``: CPU of one ``/ui/snapshot`` refresh (``UiTracker.refresh``, what runs in the read pool) over a real
   in-process node whose last 20 blocks each hold 32 transactions (transfers, and job submissions with a registered
   runner): a cold refresh (20 blocks, 640 transactions and receipts read) and a warm one (one new block of 32).
   Same-run baselines: ``status_us`` (``facade.status()``, what ``GET /status`` computes) and ``block_build_ms`` (CPU
   of producing one of those 32-transaction blocks). Timing is ``time.process_time``, best of ``--repeat``.
2. ``production``: a real ``cowboy-node`` process (250 ms blocks). Block interval p50/p99 (from committed header
   timestamps) over ``--seconds`` with no page, then with ``--pollers`` clients each requesting ``/ui/snapshot``
   again as soon as the previous answer arrives (a real page asks once a second); the snapshot requests served,
   and the read-pool refreshes per block (``cowboy_rpc_read_seconds_count``). Baseline: the same node, same run,
   without pollers.

The machine is shared: compare within one run.

Usage: python bench/ui_snapshot.py [--repeat 5] [--seconds 15] [--pollers 8]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_harness import quiet_logs
from cowboy_node.rpc.ui_snapshot import LoopView, UiTracker
from cowboy_protocol.types.job_instructions import JobSubmit
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.runner_instructions import RunnerRegister
from tests.helpers import ALICE, ALICE_SK, BOB, BOB_SK, transfer
from tests.integration.nodeproc import NodeProcess
from tests.integration.runnerproc import metric_value
from tests.unit.node_harness import JOB_EXAMPLE, RUNNER_SKS, STAKE, Nonces, example_caps, make_node, produce

TXS_PER_BLOCK = 32


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[max(0, math.ceil(q * len(s)) - 1)] if s else float("nan")


def _block(n: Nonces, jobs: int) -> list[Any]:
    """``jobs`` JobSubmits from BOB, the rest of the 32 transfers from ALICE."""
    request = parse_job_request_json(json.loads(JOB_EXAMPLE.read_text()))
    txs = [n.tx(BOB_SK, JobSubmit(request)) for _ in range(jobs)]
    for _ in range(TXS_PER_BLOCK - jobs):
        nonce = n.next.get(ALICE, 0)
        n.next[ALICE] = nonce + 1
        txs.append(transfer(ALICE_SK, nonce, BOB, 1))
    return txs


def refresh_cost(repeat: int) -> dict[str, Any]:
    """CPU of cold and warm refreshes over 20 full blocks, with same-run baselines."""
    node = make_node(phase=2)
    n = Nonces()
    caps, card = example_caps()
    caps = dataclasses.replace(caps, max_concurrent_jobs=1000)  # every submission is assigned, none refused
    produce(node, [n.tx(RUNNER_SKS[0], RunnerRegister(STAKE, caps, card))])
    build: list[float] = []
    for _ in range(20):
        txs = _block(n, 4)
        t0 = time.process_time()
        produce(node, txs)
        build.append(time.process_time() - t0)
    cold, warm, status = [], [], []
    for _ in range(repeat):
        tracker = UiTracker()
        t0 = time.process_time()
        view = LoopView(node.api.status(), None)
        status.append(time.process_time() - t0)
        t0 = time.process_time()
        doc = tracker.refresh(node, view)
        cold.append(time.process_time() - t0)
        assert len(doc["blocks"]) == 20 and len(doc["jobs"]) == 50, (len(doc["blocks"]), len(doc["jobs"]))
        produce(node, _block(n, 4))
        t0 = time.process_time()
        tracker.refresh(node, LoopView(node.api.status(), None))
        warm.append(time.process_time() - t0)
    node.close()
    return {"cold_refresh_ms": round(min(cold) * 1000, 2), "warm_refresh_ms": round(min(warm) * 1000, 2),
            "status_us": round(min(status) * 1e6, 1), "block_build_ms": round(_pct(build, 0.5) * 1000, 2),
            "blocks": 20, "txs_per_block": TXS_PER_BLOCK, "jobs_tracked": 50}


def _intervals(node: NodeProcess, first: int, last: int) -> list[float]:
    stamps = [node.get(f"/block/{h}")["timestamp_ms"] for h in range(first, last + 1)]
    return [float(b - a) for a, b in itertools.pairwise(stamps)]


def _window(node: NodeProcess, seconds: float, pollers: int) -> dict[str, Any]:
    stop = threading.Event()
    served = [0]

    def poll() -> None:
        while not stop.is_set():
            with urllib.request.urlopen(node.url + "/ui/snapshot", timeout=10) as r:
                r.read()
            served[0] += 1

    threads = [threading.Thread(target=poll, daemon=True) for _ in range(pollers)]
    metrics_url = f"http://127.0.0.1:{node.metrics_port}/metrics"
    reads0 = metric_value(metrics_url, "cowboy_rpc_read_seconds_count")
    first = node.get("/height")["height"]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(15)
    last = node.get("/height")["height"]
    reads = metric_value(metrics_url, "cowboy_rpc_read_seconds_count") - reads0
    iv = _intervals(node, first, last)
    return {"pollers": pollers, "blocks": last - first, "interval_p50_ms": _pct(iv, 0.5),
            "interval_p99_ms": _pct(iv, 0.99), "interval_max_ms": max(iv) if iv else None,
            "snapshots_served": served[0], "snapshots_per_s": round(served[0] / seconds, 1),
            "refreshes_per_block": round(reads / max(1, last - first), 2)}


def production(seconds: float, pollers: int) -> dict[str, Any]:
    """Block intervals of a real node without and with pollers (same node, same run)."""
    with tempfile.TemporaryDirectory() as d:
        node = NodeProcess(Path(d) / "node", block_time_ms=250)
        node.start()
        try:
            time.sleep(2)
            baseline = _window(node, seconds, 0)
            loaded = _window(node, seconds, pollers)
        finally:
            node.terminate()
    return {"block_time_ms": 250, "baseline": baseline, "with_pollers": loaded}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--pollers", type=int, default=8)
    args = ap.parse_args()
    quiet_logs()
    out = {"bench": "ui_snapshot", "refresh": refresh_cost(args.repeat),
           "production": production(args.seconds, args.pollers)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
