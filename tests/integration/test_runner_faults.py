"""Fault test with real processes (issue 6 "Results that are never lost"; CIP-11 §10.3): the validator dies
(SIGKILL) after the runner's JobResult frame was sent and its transaction forwarded to the mempool, before any
block includes it.

The node's mempool lives in memory, so the forwarded transaction dies with the node; only the runner's §10.3
rebroadcast (the *same* runner-signed bytes, retained in its journal, through ``POST /submit``) can get the job
settled. The kill window is made wide instead of lucky: the node runs with 3-second blocks while the job is
pushed, and a push leaves right after the block that assigned the job, so the frame's transaction waits seconds
in the mempool; the test watches the runner's journal for ``reveal_sent`` and the node's ``GET /tx`` for
``pending``, then kills at once. The node restarts on the same home with fast blocks. Whether the kill really beat
the inclusion is not assumed: the included block must be above the head the node restarted from.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from cowboy_protocol.types.transaction import Transaction
from tests.integration.nodeproc import NodeProcess
from tests.integration.runnerproc import (
    BODY,
    HttpServer,
    RunnerProcess,
    enable_runner_metrics,
    journal_row,
    metric_value,
    runner_world,
    set_node_block_time,
    submit_job,
    wait_callback,
)

SLOW_BLOCK_MS = 3000
"""Block time while the result frame is in flight: the forwarded transaction waits this long for a block."""
FAST_BLOCK_MS = 250
"""Block time for setup and after the restart."""
RESULTS = "cowboy_runner_result_txs_total"


def _until(what: str, timeout: float, probe: Any, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def _restart(node: NodeProcess, block_time_ms: int, *, kill: bool) -> None:
    if kill:
        node.kill()
    else:
        node.terminate()
    set_node_block_time(node, block_time_ms)
    node.start()


def test_validator_killed_after_the_result_frame_the_runner_rebroadcasts_the_same_tx_and_the_job_settles(
        tmp_path: Path) -> None:
    with HttpServer() as server, runner_world(tmp_path, block_time_ms=FAST_BLOCK_MS) as (node, runner, actor):
        metrics = enable_runner_metrics(runner)
        _restart(node, SLOW_BLOCK_MS, kill=False)
        runner.start()
        try:
            _run_fault(node, runner, actor, metrics, f"http://127.0.0.1:{server.port}/price")
            assert server.hits == 1  # executed once; the outage cost no re-execution
        finally:
            rc = runner.stop()
        assert rc == 0, runner.read_log()[-3000:]


def _run_fault(node: NodeProcess, runner: RunnerProcess, actor: str, metrics: str, url: str) -> None:
    assert runner.proc is not None
    runner.wait_session()
    pid = runner.proc.pid
    connects_before = runner.status()["sessions"][0]["connects"]
    job_id = submit_job(node, actor, url)

    # The runner signed the JobResultSubmit, journaled it and sent the JobResult frame on the Accepted stream…
    row = _until("the runner's journal to show the result frame sent", 20,
                 lambda: (r := journal_row(runner, job_id)) is not None and r["state"] == "reveal_sent" and r)
    raw: bytes = row["reveal_tx"]
    tx = Transaction.from_bytes(raw)
    tx_hash = "0x" + tx.tx_hash().hex()
    assert row["attempts"] == 1 and row["sent_height"] == row["last_broadcast"]
    assert metric_value(metrics, RESULTS, kind="reveal", event="frame_sent") == 1
    assert metric_value(metrics, RESULTS, kind="any", event="rebroadcast") == 0
    # …and the validator forwarded those bytes to its mempool, where they wait for the next (slow) block.
    _until("the forwarded result tx in the node's mempool", 2,
           lambda: node.get(f"/tx/{tx_hash}").get("status") == "pending")
    node.kill()  # at once: the next block is seconds away

    set_node_block_time(node, FAST_BLOCK_MS)
    node.start()
    restart_head = int(node.get("/height")["height"])
    assert restart_head >= row["sent_height"]  # nothing committed before the kill was lost

    # The runner rebroadcasts the very same transaction over REST; it lands in a block produced after the restart.
    receipt = _until("the result tx receipt after the restart", 30,
                     lambda: "height" in (r := node.get(f"/tx/{tx_hash}/receipt")) and r, interval=0.2)
    assert receipt["status"] == "success", receipt
    assert receipt["height"] > restart_head, "the result tx was included before the kill: the window was missed"
    included = node.get(f"/tx/{tx_hash}")
    assert included["status"] == "committed" and included["hash"] == tx_hash
    assert (included["nonce"], included["signature"]) == (tx.nonce, "0x" + tx.signature.hex())
    assert metric_value(metrics, RESULTS, kind="any", event="rebroadcast") >= 1
    assert "result transaction rebroadcast" in runner.read_log()

    # The job settled and the actor's callback stored the result.
    job = node.get(f"/job/0x{job_id.hex()}")
    assert job["status"] == "completed", job
    cb = wait_callback(node, actor, 20)
    assert (cb[0], cb[1], cb[2], cb[4]) == (job_id, True, BODY, "e2e"), cb
    done = _until("the journal to record the inclusion", 20,
                  lambda: (r := journal_row(runner, job_id)) is not None and r["state"] == "included" and r,
                  interval=0.2)
    assert done["included_height"] == receipt["height"] and done["reveal_tx"] == raw

    # The daemon stayed up through the outage and its QUIC session came back (a new connection).
    assert runner.proc is not None and runner.proc.poll() is None and runner.proc.pid == pid
    # A killed peer sends no close: the runner notices when its pings go unanswered (Link.dead_after_s), then
    # reconnects.
    status = _until("the runner session to come back", 45,
                    lambda: (s := runner.status()).get("sessions") and s["sessions"][0]["connected"]
                    and s["sessions"][0]["connects"] > connects_before and s, interval=0.2)
    assert status["pid"] == pid
