"""A real chain walked from CIP-11 phase 0 to phase 3 by governance transactions, with a real runner settling an
M == 1 HTTP job in every phase.

One ``cowboy-node`` made by ``init --cip11-phase 0`` (250 ms blocks) and one ``cowboy-runner run`` (registered with
its own CLI, HTTP executor against a local aiohttp server, QUIC endpoint = the node's ``[quic] addr``). The faucet
key, a system deployer of the dev genesis, sends ``cowboy-node tx governance set-phase N`` a few blocks ahead and the
test waits until ``/params`` shows the phase's flags:

- phase 0: nothing listens on the QUIC port; the runner finds the job through the poll fallback (``source=poll``),
  the job is selected by CIP-2 v2 (``mode_byte`` 0xFF).
- phase 1: the transport starts only at node start-up, so the node is restarted after the activation
  (docs/operations.md §12); the runner's QUIC session comes up (``status --json``, the node's
  ``cowboy_runners_connected``) and the job is pushed over it, still selected by v2.
- phase 2: present-first selection (``mode_byte`` 0x00, the runner in the committed PresenceInput), job pushed.
- phase 3: ``GET /runner/{address}/jobs`` answers 410 ``poll_disabled``; the job still settles through the push.

In every phase the result is included (runner status ``last_results``), the job is ``completed`` and the actor's
callback receives the server's body. Everything is loopback; every wait is bounded.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from cowboy_protocol.codec import decode
from tests.integration.nodeproc import NodeProcess, cli, free_port, wait_for
from tests.integration.runnerproc import (
    BODY,
    HttpServer,
    RunnerProcess,
    deploy_job_actor,
    enable_runner_metrics,
    fund_and_register,
    metric_value,
    submit_job,
)

pytestmark = pytest.mark.timeout(600)

FLAGS = ("CIP11_TRANSPORT_ENABLED", "CIP11_PRESENCE_SHADOW_ENABLED", "CIP11_PRESENT_FIRST_ENABLED",
         "CIP11_POLL_DISABLED", "PRESENCE_HARD_EXCLUDE_ENABLED")
EXPECTED_FLAGS: dict[int, dict[str, bool]] = {
    0: dict.fromkeys(FLAGS, False),
    1: {**dict.fromkeys(FLAGS, False), "CIP11_TRANSPORT_ENABLED": True, "CIP11_PRESENCE_SHADOW_ENABLED": True},
    2: {**dict.fromkeys(FLAGS, False), "CIP11_TRANSPORT_ENABLED": True, "CIP11_PRESENCE_SHADOW_ENABLED": True,
        "CIP11_PRESENT_FIRST_ENABLED": True},
    3: {**dict.fromkeys(FLAGS, False), "CIP11_TRANSPORT_ENABLED": True, "CIP11_PRESENCE_SHADOW_ENABLED": True,
        "CIP11_PRESENT_FIRST_ENABLED": True, "CIP11_POLL_DISABLED": True},
}
"""``/params`` → ``cip11`` per phase: cumulative, as docs/operations.md §11.1 and ``Cip11Flags.for_phase`` (the
shadow flag set in phase 1 stays set; Mode A is never switched on here)."""
ACTIVATION_AHEAD = 32
"""Blocks between the current height and ``--at-height`` (8 s at 250 ms). The CLI is a new process that must
start, sign, submit and see its transaction included before that height; on a loaded 2-core machine its start-up
alone took several seconds, and 8 blocks (2 s) made the walk fail with an activation height already passed."""


class PhaseNode(NodeProcess):
    """:class:`NodeProcess` whose genesis starts at CIP-11 phase ``phase``."""

    def __init__(self, home: Path, phase: int, block_time_ms: int = 250) -> None:
        self.home = home
        self.rpc_port = free_port()
        self.metrics_port = free_port()
        self.url = f"http://127.0.0.1:{self.rpc_port}"
        self.proc = None
        cli("init", "--home", str(home), "--chain-id", "cowboy-it-1", "--rpc-addr", f"127.0.0.1:{self.rpc_port}",
            "--quic-addr", f"127.0.0.1:{free_port()}", "--metrics-addr", f"127.0.0.1:{self.metrics_port}",
            "--block-time-ms", str(block_time_ms), "--cip11-phase", str(phase))


def http_status(url: str) -> tuple[int, Any]:
    """Status code and JSON body of a GET (errors included)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def node_metric(node: NodeProcess, name: str) -> float:
    return metric_value(f"http://127.0.0.1:{node.metrics_port}/metrics", name)


def set_phase(node: NodeProcess, phase: int) -> int:
    """Schedule ``phase`` by governance and wait until ``/params`` shows its flags; returns the activation height."""
    at = int(node.get("/params")["height"]) + ACTIVATION_AHEAD
    out = json.loads(cli("tx", "governance", "set-phase", str(phase), "--at-height", str(at), "--key",
                         str(node.home / "keys" / "faucet.key"), "--rpc", node.url, "--wait", "--timeout", "30").stdout)
    assert out["receipt"]["status"] == "success", out
    assert [e["topic"] for e in out["receipt"]["events"]] == ["governance.scheduled"], out
    assert out["height"] < at - 1, f"included at {out['height']}, too late for activation at {at}"
    params = node.get("/params")
    if params["height"] < at - 1:
        assert params["cip11"] == EXPECTED_FLAGS[phase - 1], params["cip11"]  # still pending
        assert [(p["name"], p["value"], p["activation_height"]) for p in params["governance"]["pending"]] == \
            [("PHASE", phase, at)], params["governance"]
    params = wait_for(f"phase {phase} to activate at {at}",
                      lambda: (p := node.get("/params"))["height"] >= at - 1 and p, timeout=60)
    assert params["cip11"] == EXPECTED_FLAGS[phase], (phase, params["cip11"])
    assert params["governance"]["pending"] == [], params["governance"]
    return at


def assignments(runner: RunnerProcess, source: str) -> float:
    return metric_value(runner.metrics_url, "cowboy_runner_assignments_total",  # type: ignore[attr-defined]
                        source=source, decision="accepted")


def settle_job(node: NodeProcess, runner: RunnerProcess, actor: str, server: HttpServer) -> tuple[dict[str, Any], str]:
    """Submit an M == 1 HTTP job and wait for it to settle; returns its ``/job`` view and the runner's source of the
    assignment (``push`` or ``poll``, from the runner's ``cowboy_runner_assignments_total`` counter)."""
    before = {s: assignments(runner, s) for s in ("push", "poll")}
    hits = server.hits
    job_id = submit_job(node, actor, f"http://127.0.0.1:{server.port}/price")
    hex_id = "0x" + job_id.hex()

    def callback() -> Any:
        value = node.get(f"/actor/{actor}/state?key=0x" + b"last".hex())["value"]
        cb = None if value is None else decode(bytes.fromhex(value[2:]))
        return cb if cb is not None and cb[0] == job_id else None

    def context() -> str:
        return f"job {node.get('/job/' + hex_id)}\nrunner log: {runner.read_log()[-3000:]}"

    try:
        cb = wait_for(f"the callback of job {hex_id}", callback, timeout=30)
        job = wait_for(f"job {hex_id} completed", lambda: (j := node.get("/job/" + hex_id))["status"] == "completed"
                       and j, timeout=60)
        wait_for(f"job {hex_id} included in the runner's last results", lambda: any(
            r["job_id"] == hex_id and r["state"] == "included" for r in runner.status().get("last_results", [])),
            timeout=60)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{context()}") from None
    assert (cb[1], cb[2], cb[4]) == (True, BODY, "e2e"), cb
    assert job["reason"] == "verified", job
    assert [a.lower() for a in job["committee"]] == [runner.address.lower()], job
    assert server.hits == hits + 1
    got = {s: assignments(runner, s) - before[s] for s in ("push", "poll")}
    assert sorted(got.values()) == [0.0, 1.0], got
    return job, "push" if got["push"] else "poll"


def test_chain_walks_phase_0_to_3_by_governance_with_a_real_runner_settling_a_job_in_every_phase(
        tmp_path: Path) -> None:
    t0 = time.monotonic()
    node = PhaseNode(tmp_path / "node", phase=0)
    node.start()
    runner: RunnerProcess | None = None
    try:
        params = node.get("/params")
        assert params["cip11"] == EXPECTED_FLAGS[0], params["cip11"]
        assert "quic=None" in node.read_log()
        runner = RunnerProcess(tmp_path / "runner", node)
        runner.metrics_url = enable_runner_metrics(runner)  # type: ignore[attr-defined]
        fund_and_register(node, runner)
        actor = deploy_job_actor(node, tmp_path)
        poll_url = f"{node.url}/runner/{runner.address}/jobs"
        with HttpServer() as server:
            runner.start()
            # -- phase 0: no QUIC listener, the runner polls ------------------------------------------------------
            wait_for("the runner's poll fallback", lambda: runner.status().get("poll", {}).get("active"), timeout=60)
            assert http_status(poll_url)[0] == 200
            job, source = settle_job(node, runner, actor, server)
            assert (source, job["mode_byte"]) == ("poll", 0xFF), (source, job)
            assert not any(s["connected"] for s in runner.status().get("sessions", []))

            # -- phase 1: activation, node restart (the transport starts at start-up), QUIC session ------------
            set_phase(node, 1)
            assert node.terminate() == 0
            node.start()
            assert node.get("/params")["cip11"] == EXPECTED_FLAGS[1]
            assert "quic=None" not in node.read_log().rsplit("node started", 1)[1].split("\n", 1)[0]
            t_session = time.monotonic()
            runner.wait_session(timeout=45)
            session_s = time.monotonic() - t_session
            wait_for("the node to count the runner's session",
                     lambda: node_metric(node, "cowboy_runners_connected") >= 1, timeout=60)
            wait_for("the runner in the node's local presence",
                     lambda: node_metric(node, "cowboy_runners_present") >= 1, timeout=60)
            wait_for("the poll fallback to stop", lambda: not runner.status().get("poll", {}).get("active"),
                     timeout=60)
            job, source = settle_job(node, runner, actor, server)
            assert (source, job["mode_byte"]) == ("push", 0xFF), (source, job)
            assert http_status(poll_url)[0] == 200  # polling still answers in phase 1

            # -- phase 2: present-first selection, the job is pushed ------------------------------------------
            set_phase(node, 2)
            wait_for("the runner in the committed PresenceInput",
                     lambda: node_metric(node, "cowboy_present_pool_size") >= 1, timeout=60)
            job, source = settle_job(node, runner, actor, server)
            assert (source, job["mode_byte"]) == ("push", 0x00), (source, job)
            assert http_status(poll_url)[0] == 200  # delivery-only fallback, still served

            # -- phase 3: polling gone (410), the job still settles through the push ---------------------------
            set_phase(node, 3)
            code, body = http_status(poll_url)
            assert (code, body.get("code")) == (410, "poll_disabled"), (code, body)
            job, source = settle_job(node, runner, actor, server)
            assert (source, job["mode_byte"]) == ("push", 0x00), (source, job)
            assert any(s["connected"] for s in runner.status()["sessions"])
            rc = runner.stop()
        assert rc == 0, runner.read_log()[-3000:]
        print(f"walk took {time.monotonic() - t0:.1f} s; phase-1 session up {session_s:.1f} s after the restart")
    finally:
        if runner is not None and runner.proc is not None and not runner.log.closed:
            runner.stop()
        if node.proc is not None and not node.log.closed:
            node.terminate()
