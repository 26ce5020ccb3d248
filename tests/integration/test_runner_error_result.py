"""A failed execution is reported, not swallowed: a real ``cowboy-node`` and ``cowboy-runner run`` against an HTTP
target answering 500. The runner reveals a signed error result (docs/jobs.md "Error results") and the job settles
as failed with ``runner_error:http_status`` within a few blocks — not after its 200-block timeout — the actor's
callback gets the failure with the reason and the envelope, the escrow is refunded and the runner keeps its
reputation and health (an honest error is not a no-show)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from cowboy_protocol.jobs.error_result import ErrorResult, decode_error_result
from tests.integration.nodeproc import NodeProcess
from tests.integration.runnerproc import HttpServer, RunnerProcess, runner_world, submit_job, wait_callback


class FailingServer(HttpServer):
    """The job target: every request answers HTTP 500."""

    async def _handle(self, request: web.Request) -> web.Response:
        self.hits += 1
        return web.Response(status=500, text="boom")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[NodeProcess, RunnerProcess, str]]:
    with runner_world(tmp_path) as w:
        yield w


def test_http_500_settles_as_failed_with_the_reason_within_a_few_blocks(
        world: tuple[NodeProcess, RunnerProcess, str]) -> None:
    node, runner, actor = world
    with FailingServer() as server:
        runner.start()
        try:
            runner.wait_session()
            job_id = submit_job(node, actor, f"http://127.0.0.1:{server.port}/price")  # timeout_blocks 200
            submitted = node.get(f"/job/0x{job_id.hex()}")
            cb = wait_callback(node, actor, 20)  # 200 blocks would take 50 s
            assert (cb[0], cb[1], cb[3], cb[4]) == (job_id, False, "runner_error:http_status", "e2e"), cb
            err = decode_error_result(cb[2])
            assert isinstance(err, ErrorResult) and err.code == "http_status" and "500" in err.detail
            job = node.get(f"/job/0x{job_id.hex()}")
            assert job["status"] == "failed" and job["reason"] == "runner_error:http_status", job
            assert job["attempt"] == 0 and job["excluded"] == [], job  # never re-selected
            assert job["finished_at"] - submitted["assignment_height"] < 20, job  # ≪ timeout_blocks
            assert server.hits == 1
            me = node.get(f"/runner/{runner.address}")
            assert me["health"] == "healthy", me
            assert int(me["reputation_x1e9"]) == 50 * 10**9, me
            assert int(node.get("/account/0x" + "00" * 19 + "02")["balance"]) == 0  # escrow refunded
        finally:
            rc = runner.stop()
    assert rc == 0, runner.read_log()[-3000:]
