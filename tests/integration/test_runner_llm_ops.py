"""Issue 21 with real processes: a ``cowboy-node`` and a ``cowboy-runner run`` whose LLM executor points at a local
OpenAI-compatible stub.

1. The stub answers the first completion with HTTP 429 (Retry-After: 0) and the second normally: the runner
   retries, the job settles successfully and the actor's callback stores the reply.
2. The stub's ``/v1/models`` then fails (503): the runner's health probe marks the LLM executor unhealthy,
   ``cowboy-runner status`` shows it, the kind leaves the advertised capabilities (a CapabilityDelta is sent on
   the session), and when the endpoint recovers the kind comes back.

About 60 s of real blocks: opt-in (``make test-runner-ops`` sets ``COWBOY_RUNNER_OPS_E2E=1``), outside the default
suite.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.integration.nodeproc import NodeProcess, cli
from tests.integration.runnerproc import (
    RunnerProcess,
    ThreadedApp,
    deploy_job_actor,
    edit_runner_toml,
    fund_and_register,
    runner_cli,
    wait_callback,
)
from tests.unit.runner_exec_servers import LlmStub, llm_app

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(os.environ.get("COWBOY_RUNNER_OPS_E2E") != "1",
                                 reason="opt-in: make test-runner-ops (COWBOY_RUNNER_OPS_E2E=1)")]

MODEL_ID = "0x" + "ab" * 32


class ThreadedLlmStub(ThreadedApp):
    """:func:`llm_app` served from its own thread (the test's main thread drives the CLIs)."""

    def __init__(self) -> None:
        super().__init__()
        self.stub = LlmStub(reply="forty-two")

    def make_app(self) -> web.Application:
        return llm_app(self.stub)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[NodeProcess, RunnerProcess, str, ThreadedLlmStub]]:
    node = NodeProcess(tmp_path / "node", block_time_ms=250)
    node.start()
    try:
        with ThreadedLlmStub() as llm:
            runner = RunnerProcess(tmp_path / "runner", node)
            edit_runner_toml(
                runner,
                ('job_types = ["http"]', 'job_types = ["http", "llm"]'),
                ("[rate_card.http]", '[rate_card.llm]\nbase_price = "1000"\nprice_per_unit = "1"\n\n[rate_card.http]'),
                ('# base_url = "http://127.0.0.1:8000/v1"',
                 f'base_url = "http://127.0.0.1:{llm.port}/v1"\nretry_base_delay_s = 0.05'),
                ('[executors.llm.models]', f'[executors.llm.models]\n"{MODEL_ID}" = "tiny-model"'),
                ("[executors.http]", "[executors]\nhealth_interval_s = 0.5\n\n[executors.http]"),
            )
            fund_and_register(node, runner)
            actor = deploy_job_actor(node, tmp_path)
            yield node, runner, actor, llm
    finally:
        node.terminate()


def _submit_llm_job(node: NodeProcess, actor: str) -> bytes:
    doc = {"job_type": {"kind": "llm", "model_id": MODEL_ID, "prompt": "What is 6*7?", "max_tokens": 16},
           "verification": {"mode": "none", "runners": 1, "threshold": 1}, "max_price": "1000000",
           "timeout_blocks": 200, "callback": {"actor": actor, "handler": "on_result", "correlation_id": "llm"}}
    called = json.loads(cli("tx", "call", "--key", str(node.home / "keys" / "faucet.key"), "--actor", actor,
                            "--handler", "start", "--payload", "0x" + json.dumps(doc).encode().hex(), "--rpc",
                            node.url, "--wait", "--timeout", "30").stdout)
    assert called["receipt"]["status"] == "success", called
    return bytes.fromhex(called["result"][2:])


def _wait_status(runner: RunnerProcess, what: str, ok: Callable[[dict[str, Any]], bool],
                 timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    doc: dict[str, Any] = {}
    while time.monotonic() < deadline:
        doc = runner.status()
        if ok(doc):
            return doc
        time.sleep(0.2)
    raise AssertionError(f"status never showed {what}: {json.dumps(doc)[:2000]}\n{runner.read_log()[-3000:]}")


def test_llm_job_survives_a_429_and_an_unhealthy_endpoint_leaves_the_capabilities(
        world: tuple[NodeProcess, RunnerProcess, str, ThreadedLlmStub]) -> None:
    node, runner, actor, llm = world
    llm.stub.script = [(429, {"Retry-After": "0"}, '{"error": {"message": "rate limited"}}')]
    runner.start()
    try:
        runner.wait_session()
        _wait_status(runner, "the llm executor healthy and advertised",
                     lambda d: d.get("executors", {}).get("llm", {}).get("advertised") is True)
        job_id = _submit_llm_job(node, actor)
        cb = wait_callback(node, actor, 90)
        assert (cb[0], cb[1], cb[2], cb[4]) == (job_id, True, b"forty-two", "llm"), cb
        completions = [r for r in llm.stub.requests if "messages" in r]
        assert len(completions) == 2  # the 429, then the retry that succeeded

        llm.stub.models_status = 503  # the endpoint goes down: the next probe fails
        doc = _wait_status(runner, "the llm executor unhealthy",
                           lambda d: bool(d.get("executors", {}).get("llm", {}).get("unhealthy")))
        assert doc["executors"]["llm"]["advertised"] is False and doc["executors"]["http"]["advertised"] is True
        _wait_status(runner, "llm removed on the session (CapabilityDelta)",
                     lambda d: any(s.get("unavailable_kinds") == ["llm"] and s.get("capability_deltas", 0) >= 1
                                   for s in d.get("sessions", [])))
        text = runner_cli("status", "--home", str(runner.home)).stdout
        assert "executor:   llm UNHEALTHY" in text and "HTTP 503" in text and "NOT advertised" in text, text

        llm.stub.models_status = 200  # back: the kind is advertised again
        _wait_status(runner, "the llm executor advertised again",
                     lambda d: d.get("executors", {}).get("llm", {}).get("advertised") is True
                     and all(not s.get("unavailable_kinds") for s in d.get("sessions", [])))
    finally:
        assert runner.stop() == 0
    assert "executor unhealthy; its job kind is not advertised" in runner.read_log()
