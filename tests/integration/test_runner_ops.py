"""Runner operations against real processes (issue 6 items 1, 6, 7, 8): ``status`` (text form, and with no daemon),
``drain``, ``deregister``, the §6.6 on-chain heartbeat, the poll fallback and the metrics endpoint.

One ``cowboy-node`` (phase 2, 250 ms blocks, ``heartbeat_timeout_blocks`` lowered in its genesis before the first
start) and one job-submitting actor serve the whole module. Each test registers its own runner whose
``capabilities.http_domains`` names a loopback address of its own (``127.0.0.N``) and submits jobs for a server on
that address, so the on-chain capability filter routes every job to that test's runner only. Everything is
loopback; every wait is bounded.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cowboy_protocol.codec import decode
from cowboy_runner.cli import EXIT_NOT_RUNNING, EXIT_OK
from tests.integration.nodeproc import NodeProcess, free_port
from tests.integration.runnerproc import (
    BODY,
    HostHttpServer,
    RunnerProcess,
    deploy_job_actor,
    edit_runner_toml,
    fund_and_register,
    runner_cli,
    submit_job,
    submit_job_call,
)

pytestmark = pytest.mark.timeout(600)

HEARTBEAT_TIMEOUT_BLOCKS = 60
"""The node's genesis ``limits.heartbeat_timeout_blocks`` (default 100): 15 s at 250 ms blocks."""


@dataclass
class World:
    """The module's node and actor, and a counter handing out loopback hosts."""

    node: NodeProcess
    actor: str
    root: Path
    hosts: Iterator[int]

    def runner(self, name: str, *, metrics: bool = False, quic_endpoint: str | None = None,
               safety_margin_blocks: int | None = None) -> tuple[RunnerProcess, str]:
        """A registered (not yet running) runner serving HTTP jobs for its own loopback host; returns it and the
        host. ``metrics`` turns its metrics endpoint on (``runner.metrics_url``)."""
        host = f"127.0.0.{next(self.hosts)}"
        runner = RunnerProcess(self.root / name, self.node)
        edits = [('http_domains = ["127.0.0.1"]', f'http_domains = ["{host}"]')]
        if metrics:
            port = free_port()
            edits += [("enabled = false", "enabled = true"),
                      ('addr = "127.0.0.1:9465"', f'addr = "127.0.0.1:{port}"')]
            runner.metrics_url = f"http://127.0.0.1:{port}/metrics"  # type: ignore[attr-defined]
        if quic_endpoint is not None:
            edits.append((re.search(r'^quic_endpoint = "[^"]+"', (runner.home / "runner.toml").read_text(),
                                    re.M).group(0), f'quic_endpoint = "{quic_endpoint}"'))  # type: ignore[union-attr]
        if safety_margin_blocks is not None:
            edits.append(("safety_margin_blocks = 20", f"safety_margin_blocks = {safety_margin_blocks}"))
        edit_runner_toml(runner, *edits)
        fund_and_register(self.node, runner)
        return runner, host


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("runner_ops")
    node = NodeProcess(root / "node", block_time_ms=250)
    genesis = node.home / "genesis.json"
    text = genesis.read_text()
    assert text.count('"heartbeat_timeout_blocks": 100') == 1
    genesis.write_text(text.replace('"heartbeat_timeout_blocks": 100',
                                    f'"heartbeat_timeout_blocks": {HEARTBEAT_TIMEOUT_BLOCKS}'))
    node.start()
    try:
        assert node.get("/params")["limits"]["heartbeat_timeout_blocks"] == HEARTBEAT_TIMEOUT_BLOCKS
        yield World(node, deploy_job_actor(node, root), root, iter(range(10, 250)))
    finally:
        node.terminate()


@pytest.fixture
def running() -> Iterator[Callable[[RunnerProcess], RunnerProcess]]:
    """Start runners; every one still running at the end of the test is stopped (SIGTERM)."""
    started: list[RunnerProcess] = []

    def start(runner: RunnerProcess) -> RunnerProcess:
        runner.start()
        started.append(runner)
        return runner

    yield start
    for r in started:
        if not r.log.closed:
            r.stop()


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60.0, interval: float = 0.2,
             context: Callable[[], str] = lambda: "") -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}. {context()[-3000:]}")
        time.sleep(interval)


def status_text(runner: RunnerProcess) -> tuple[int, str]:
    r = runner_cli("status", "--home", str(runner.home), check=False)
    return r.returncode, r.stdout + r.stderr


def scrape(runner: RunnerProcess) -> str:
    with urllib.request.urlopen(runner.metrics_url, timeout=5) as r:  # type: ignore[attr-defined]
        return str(r.read().decode())


def node_present(node: NodeProcess) -> float:
    """The validator's local presence size (``cowboy_runners_present``)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics", timeout=5) as r:
        return sample(r.read().decode(), "cowboy_runners_present")


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample of a Prometheus exposition (0 when absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        key, value = line.rsplit(" ", 1)
        base, _, rest = key.partition("{")
        got = ",".join(sorted(p for p in rest.rstrip("}").split(",") if p))
        if base == name and got == want:
            return float(value)
    return 0.0


def job_callback(world: World, job_id: bytes, timeout: float = 60.0) -> Any:
    """The actor's callback payload for ``job_id`` (the actor keeps only the last one; jobs here are sequential)."""

    def stored() -> Any:
        value = world.node.get(f"/actor/{world.actor}/state?key=0x" + b"last".hex())["value"]
        cb: Any = None if value is None else decode(bytes.fromhex(value[2:]))
        return cb if cb is not None and cb[0] == job_id else None

    return wait_for(f"the callback of job 0x{job_id.hex()}", stored, timeout=timeout)


def runner_record(node: NodeProcess, address: str) -> dict[str, Any]:
    rec: dict[str, Any] = node.get(f"/runner/{address}")
    return rec


def included(runner: RunnerProcess, job_id: bytes) -> bool:
    return any(r["job_id"] == "0x" + job_id.hex() and r["state"] == "included"
               for r in runner.status().get("last_results", []))


# -- 1. status ------------------------------------------------------------------------------------------------
def test_status_text_names_address_session_jobs_in_flight_and_last_results(
        world: World, running: Callable[[RunnerProcess], RunnerProcess]) -> None:
    runner, host = world.runner("status")
    rc, out = status_text(runner)  # never run: there is no status file yet
    assert rc == EXIT_NOT_RUNNING and "has not run" in out, out
    # The answer is held until the in-flight checks are done (not a 2 s delay raced against a CLI per poll: at load
    # 11 one `status` took longer than the window and the test timed out).
    with HostHttpServer(host, hold=True) as server:
        running(runner).wait_session()
        job_id = submit_job(world.node, world.actor, server.url)
        wait_for("the runner to execute the job", lambda: server.hits >= 1, context=runner.read_log)

        def in_flight() -> str | None:
            _rc, out = status_text(runner)
            return out if "0x" + job_id.hex() in out.split("last results:")[0] else None

        out = wait_for("status to show the job in flight", in_flight, context=runner.read_log)
        assert f"address:    {runner.address}" in out, out
        assert "daemon:     running (pid" in out, out
        assert re.search(r"^session: .* UP connects=1 ", out, re.M), out
        assert "in flight:  1;" in out, out
        server.release()
        cb = job_callback(world, job_id)
        assert (cb[0], cb[1], cb[2]) == (job_id, True, BODY), cb
        wait_for("the result to be included", lambda: included(runner, job_id), context=runner.read_log)
        rc, out = status_text(runner)
        assert rc == EXIT_OK, out
        assert "in flight:  0;" in out, out
        last = out.split("last results:", 1)[1]
        assert f"0x{job_id.hex()} included" in last, out
    assert runner.stop() == 0
    rc, out = status_text(runner)  # the status file remains, the daemon is gone
    assert rc == EXIT_NOT_RUNNING, out
    assert "NOT running" in out, out


# -- 2. drain -------------------------------------------------------------------------------------------------
def test_drain_signals_backpressure_finishes_the_in_flight_job_and_exits_0(
        world: World, running: Callable[[RunnerProcess], RunnerProcess]) -> None:
    runner, host = world.runner("drain")
    r = runner_cli("drain", "--home", str(runner.home), check=False)  # no daemon yet
    assert r.returncode == EXIT_NOT_RUNNING, r.stderr
    with HostHttpServer(host, hold=True) as server:  # the first job stays in flight until released below
        running(runner).wait_session()
        assert runner.status()["accepting"] is True
        wait_for("the validator to count the runner present", lambda: node_present(world.node) == 1)
        first = submit_job(world.node, world.actor, server.url)
        wait_for("the runner to execute the first job", lambda: server.hits >= 1, context=runner.read_log)
        r = runner_cli("drain", "--home", str(runner.home), check=False)
        assert r.returncode == EXIT_OK and "drain requested" in r.stdout, r.stderr
        st = wait_for("status to show draining", lambda: (s := runner.status()).get("draining") and s,
                      context=runner.read_log)
        assert st["accepting"] is False and st["running"] is True
        # Backpressure (§6.4): the validator drops the draining runner from its local presence.
        wait_for("the validator to drop the draining runner from presence", lambda: node_present(world.node) == 0,
                 timeout=60)
        assert [j["job_id"] for j in st["jobs_in_flight"]] == ["0x" + first.hex()]
        # A job submitted while draining: either refused by the chain (the drain's on-chain heartbeat says
        # accepting=false, which pauses the registration) or assigned but never pushed to or run by this runner.
        called = submit_job_call(world.node, world.actor, server.url)
        receipt = called["receipt"]
        assert receipt["status"] == "success" or receipt["error_code"] == "no_eligible_runner", called
        second = bytes.fromhex(called["result"][2:]) if receipt["status"] == "success" else None
        server.release()  # every check above ran with the first job in flight; now let it finish
        assert runner.proc is not None
        runner.proc.wait(timeout=60)  # exits by itself once the in-flight job's result is out
        assert runner.stop() == 0, runner.read_log()[-3000:]  # (stop only collects the exit code here)
        cb = job_callback(world, first)
        assert (cb[0], cb[1], cb[2]) == (first, True, BODY), cb
        wait_for("the first job to settle on chain",
                 lambda: world.node.get(f"/job/0x{first.hex()}")["status"] == "completed")
        assert server.hits == 1, "the job submitted after the drain was executed"
        if second is not None:
            assert world.node.get(f"/job/0x{second.hex()}")["status"] != "completed"
    assert "drained" in runner.read_log()


# -- 3. deregister --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def deregistered(world: World) -> Iterator[tuple[RunnerProcess, int]]:
    """A runner deregistered with its CLI while its daemon ran, then restarted (the validator admits sessions at
    the handshake, §6.2, so the refusal shows on the next connection); yields it still running, and the height at
    which the deregistration was included."""
    runner, _host = world.runner("dereg")
    runner.start()
    try:
        runner.wait_session()
        r = runner_cli("deregister", "--home", str(runner.home), check=False)
        assert r.returncode == EXIT_OK, r.stderr + r.stdout
        out = json.loads(r.stdout)
        assert out["action"] == "deregister" and out["status"] == "success", out
        assert runner.stop() == 0
        runner.start()
        yield runner, int(out["height"])
    finally:
        if not runner.log.closed:
            runner.stop()


def test_deregister_marks_the_registry_and_the_validator_refuses_the_session(
        world: World, deregistered: tuple[RunnerProcess, int]) -> None:
    runner, _height = deregistered
    assert runner_record(world.node, runner.address)["health"] == "deregistered"
    # runner.log is appended across restarts: look for the refusal in the restarted daemon's part only (the first
    # run may already have logged the validator's Goodbye{Deregistered} of its live session).
    refusals = wait_for("the validator's refusal in the runner's log",
                        lambda: runner.read_log().count("runner started") >= 2 and re.findall(
                            r"session closed: DEREGISTERED", runner.read_log().split("runner started")[-1]),
                        context=runner.read_log)
    assert refusals
    st = wait_for("the restarted daemon's status", lambda: (lambda d: d if d.get("running") else None)(
        runner.status()), context=runner.read_log)
    assert st["running"] is True, st  # the daemon stays up and keeps reporting
    assert not any(s["connected"] for s in st["sessions"]), st
    assert "session authenticated" not in runner.read_log().split("runner started")[-1]
    assert runner.proc is not None and runner.proc.poll() is None


def test_deregistered_daemon_says_so_in_status_and_stops_heartbeating(
        world: World, deregistered: tuple[RunnerProcess, int]) -> None:
    runner, _height = deregistered
    wait_for("last_error to name the deregistration",
             lambda: "deregistered" in str(runner.status().get("last_error", "")).lower(), timeout=60)
    restarted = runner.read_log().split("runner started")[-1]
    assert "on-chain heartbeat submitted" not in restarted


# -- 4. on-chain heartbeat ------------------------------------------------------------------------------------
def test_onchain_heartbeat_advances_last_heartbeat_while_the_daemon_runs(
        world: World, running: Callable[[RunnerProcess], RunnerProcess]) -> None:
    # safety margin 56 of 60 → cadence 4 blocks (1 s): the steady-state phase bucket comes round every second.
    runner, _host = world.runner("heartbeat", metrics=True, safety_margin_blocks=HEARTBEAT_TIMEOUT_BLOCKS - 4)
    registered = runner_record(world.node, runner.address)["last_heartbeat"]
    running(runner).wait_session()
    seen = [registered]

    def advanced() -> bool:
        last = int(runner_record(world.node, runner.address)["last_heartbeat"])
        if last > seen[-1]:
            seen.append(last)
        return len(seen) >= 3  # two heartbeats included after the registration

    wait_for("two on-chain heartbeats", advanced, timeout=40, context=runner.read_log)
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    text = scrape(runner)
    assert sample(text, "cowboy_runner_onchain_heartbeats_total", outcome="ok") >= 2, text
    assert sample(text, "cowboy_runner_onchain_heartbeats_total", outcome="error") == 0
    assert runner_record(world.node, runner.address)["eligible_now"] is True
    assert runner.stop() == 0


# -- 5. poll fallback -----------------------------------------------------------------------------------------
def test_poll_fallback_executes_a_job_when_no_session_is_up(
        world: World, running: Callable[[RunnerProcess], RunnerProcess]) -> None:
    runner, host = world.runner("poll", metrics=True, quic_endpoint=f"127.0.0.1:{free_port()}")  # nothing there
    with HostHttpServer(host) as server:
        running(runner)
        wait_for("the poll fallback to start", lambda: runner.status().get("poll", {}).get("active"),
                 context=runner.read_log)
        assert not any(s["connected"] for s in runner.status()["sessions"])
        job_id = submit_job(world.node, world.actor, server.url)
        cb = job_callback(world, job_id)
        assert (cb[0], cb[1], cb[2]) == (job_id, True, BODY), cb
        assert server.hits == 1
        wait_for("the result to be included", lambda: included(runner, job_id), context=runner.read_log)
    text = scrape(runner)
    assert sample(text, "cowboy_runner_polls_total", outcome="ok") > 0, text
    assert sample(text, "cowboy_runner_assignments_total", source="poll", decision="accepted") == 1, text
    assert sample(text, "cowboy_runner_sessions_up") == 0
    assert runner.stop() == 0


# -- 6. metrics -----------------------------------------------------------------------------------------------
DOCUMENTED_METRICS = ("cowboy_runner_job_stage_seconds", "cowboy_runner_assignments_total",
                      "cowboy_runner_executor_failures_total", "cowboy_runner_result_txs_total",
                      "cowboy_runner_sessions_up", "cowboy_runner_session_connects_total",
                      "cowboy_runner_jobs_in_flight", "cowboy_runner_onchain_heartbeats_total",
                      "cowboy_runner_polls_total")
"""The metric names of docs/runner.md §9."""


def test_metrics_endpoint_serves_the_documented_names_and_per_stage_latency(
        world: World, running: Callable[[RunnerProcess], RunnerProcess]) -> None:
    runner, host = world.runner("metrics", metrics=True)
    with HostHttpServer(host) as server:
        running(runner).wait_session()
        text = scrape(runner)
        types = dict(line.split(" ")[2:4] for line in text.splitlines() if line.startswith("# TYPE "))
        for name in DOCUMENTED_METRICS:
            kind = "counter" if name.endswith("_total") else "histogram" if name.endswith("_seconds") else "gauge"
            assert types.get(name, types.get(name.removesuffix("_total"))) == kind, (name, text)
        assert sample(text, "cowboy_runner_sessions_up") == 1
        assert sample(text, "cowboy_runner_session_connects_total") == 1
        job_id = submit_job(world.node, world.actor, server.url)
        job_callback(world, job_id)
        wait_for("the result to be included", lambda: included(runner, job_id), context=runner.read_log)
    text = scrape(runner)
    for stage in ("ack", "execution_start", "execution_end", "result_included"):
        assert sample(text, "cowboy_runner_job_stage_seconds_count", stage=stage) == 1, (stage, text)
    assert sample(text, "cowboy_runner_assignments_total", source="push", decision="accepted") == 1
    assert sample(text, "cowboy_runner_result_txs_total", kind="reveal", event="included") == 1
    assert sample(text, "cowboy_runner_jobs_in_flight") == 0
    assert runner.stop() == 0


# -- stale pid file -------------------------------------------------------------------------------------------
def test_drain_never_signals_a_process_that_only_a_stale_pid_file_names(tmp_path: Path) -> None:
    home = tmp_path / "stale"
    runner_cli("init", "--home", str(home), "--validator-rpc", f"http://127.0.0.1:{free_port()}")
    bystander = subprocess.Popen(["sleep", "60"])  # SIGUSR1 would terminate it
    try:
        (home / "data").mkdir(exist_ok=True)
        (home / "data" / "runner.pid").write_text(f"{bystander.pid}\n")  # left behind by a crashed daemon
        r = runner_cli("drain", "--home", str(home), check=False)
        assert r.returncode == EXIT_NOT_RUNNING, r.stderr
        assert f"names {bystander.pid}" in r.stderr
        time.sleep(0.2)
        assert bystander.poll() is None  # not signalled
    finally:
        bystander.kill()
        bystander.wait(timeout=10)
