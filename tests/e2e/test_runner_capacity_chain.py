"""``bench/runner_capacity_chain.py`` end to end on a small scale: a real node with 2 QUIC workers, 20 runners
registered on chain and connected from 2 client processes, jobs pushed and acked, block intervals measured.

Bounded: the bench runs in its own process group with a timeout; on timeout the whole group is killed. The test
also checks that the bench left none of its processes (node, workers, clients) behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "runner_capacity_chain.py"
RUNNERS = 20
TIMEOUT_S = 100.0


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_chain_mode_heartbeats_pushes_and_block_intervals() -> None:
    cmd = [sys.executable, str(BENCH), "--runners", str(RUNNERS), "--workers", "2", "--client-procs", "2",
           "--idle-s", "4", "--seconds", "8", "--warmup-s", "2", "--jobs-per-s", "1", "--max-wall-s", "90",
           "--register-timeout-s", "30", "--connect-timeout-s", "30"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None or _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert proc.returncode == 0, err.decode(errors="replace")[-3000:]
    deadline = time.monotonic() + 10
    while _group_alive(proc.pid) and time.monotonic() < deadline:  # exited children may still be reaped
        time.sleep(0.1)
    assert not _group_alive(proc.pid), "the bench left processes behind"
    doc = json.loads(out)
    assert doc["params"]["workers"] == 2
    assert doc["setup"]["held"] == RUNNERS and doc["setup"]["connect_failures"] == 0
    loaded, idle = doc["loaded"], doc["idle"]
    # Heartbeats: every held runner pings at 1 Hz; at least 90 % of those pings were answered in the window.
    assert loaded["heartbeats_answered_share"] >= 0.9, loaded
    assert loaded["rtt_ms_p50"] is not None
    # Pushes: jobs submitted through the RPC were assigned on chain, pushed, verified and acked by a runner, and
    # the node saw the acks (its push_latency histogram).
    assert loaded["jobs_submitted"] >= 4 and loaded["jobs_refused"] == 0
    assert loaded["jobs_pushed_and_acked"] >= 1
    assert loaded["push_node"]["count"] >= 1 and loaded["push_client_ms"]["count"] >= 1
    # Block intervals from the headers of both windows, against the 1,000 ms target.
    for w in (idle, loaded):
        iv = w["block_interval"]
        assert iv["blocks"] >= 3 and iv["p50_ms"] is not None and iv["p99_ms"] is not None, iv
        assert iv["p99_over_target"] == round(iv["p99_ms"] / 1000, 3)
    assert loaded["usage"]["workers"] == 2 and len(loaded["usage"]["workers_cpu_s"]) == 2
