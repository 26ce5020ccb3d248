"""End to end with real processes: a ``cowboy-node`` (phase 2, QUIC transport on) and a ``cowboy-runner run``.

The runner is created and registered with its own CLI; an actor submits an HTTP job with ``pvm_host.submit_job``
to a local aiohttp server started by the test; the runner receives the push over QUIC, executes the request,
journals and sends its signed JobResultSubmit; the job settles and the actor's callback stores the result.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.nodeproc import NodeProcess
from tests.integration.runnerproc import BODY, HttpServer, RunnerProcess, runner_world, submit_job, wait_callback


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[NodeProcess, RunnerProcess, str]]:
    """A running node with a registered (not yet running) runner and a funded job-submitting actor."""
    with runner_world(tmp_path) as w:
        yield w


def test_actor_http_job_executed_by_a_real_runner_process_and_delivered_to_the_callback(
        world: tuple[NodeProcess, RunnerProcess, str]) -> None:
    node, runner, actor = world
    with HttpServer() as server:
        runner.start()
        try:
            runner.wait_session()
            job_id = submit_job(node, actor, f"http://127.0.0.1:{server.port}/price")
            cb = wait_callback(node, actor, 60)
            assert (cb[0], cb[1], cb[2], cb[4]) == (job_id, True, BODY, "e2e"), cb
            assert server.hits == 1
            deadline = time.monotonic() + 20
            while not any(r["job_id"] == "0x" + job_id.hex() and r["state"] == "included"
                          for r in runner.status().get("last_results", [])):
                assert time.monotonic() < deadline, runner.status()
                time.sleep(0.2)
        finally:
            rc = runner.stop()
    assert rc == 0, runner.read_log()[-3000:]


def test_kill_9_mid_job_then_restart_resumes_from_the_journal(world: tuple[NodeProcess, RunnerProcess, str]) -> None:
    node, runner, actor = world
    with HttpServer(delay_s=3.0) as server:
        runner.start()
        try:
            runner.wait_session()
            job_id = submit_job(node, actor, f"http://127.0.0.1:{server.port}/price")
            deadline = time.monotonic() + 30
            while server.hits == 0:  # the runner accepted and is executing (the server answers in 3 s)
                assert time.monotonic() < deadline, runner.read_log()[-3000:]
                time.sleep(0.05)
            runner.kill()
            runner.start()  # the journal holds the accepted job: it is executed again and settled
            cb = wait_callback(node, actor, 60)
            assert (cb[0], cb[1], cb[2]) == (job_id, True, BODY), cb
            assert server.hits == 2
        finally:
            runner.stop()
