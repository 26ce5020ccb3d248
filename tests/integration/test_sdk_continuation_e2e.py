"""cowboy_sdk ``@runner.continuation`` end to end with real processes (loopback only, bounded, cleaned up).

A ``cowboy-node`` devnet, a ``cowboy-runner`` whose HTTP executor reaches a local aiohttp server and whose LLM
executor talks to a local OpenAI-compatible stub (both started here), and an actor written as the SDK's docs
show: ``await runner.http(...)`` then ``await runner.llm(...)``. The actor resumes twice and stores both results.
Then the runner is killed with SIGKILL mid-job: the job times out, no runner is left to take it, and the actor's
continuation gets the failure (its slot is freed) instead of hanging. And the SDK README's Quick Start actor,
with the ``@public`` its ``chat`` needs, chats with the LLM stub.

About 2 minutes of real blocks: opt-in (``make test-sdk-e2e`` sets ``COWBOY_SDK_E2E=1``), outside the default suite.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from cowboy_sdk import codec as sdk_codec

from cowboy_node.execution.jobs.sdk_jobs import DEFAULT_MODEL, model_id
from tests.integration.nodeproc import NodeProcess, cli
from tests.integration.runnerproc import (
    BODY,
    HttpServer,
    RunnerProcess,
    ThreadedApp,
    edit_runner_toml,
    fund_and_register,
)
from tests.unit.execution.actors.test_sdk_quickstart import quick_start
from tests.unit.runner_exec_servers import LlmStub, llm_app

ACTOR = '''from cowboy_sdk import actor, capture, public, runner


@actor
class Weather:
    @public
    @runner.continuation
    async def refresh(self, city):
        ctx = capture()
        ctx.city = city
        page = await runner.http("http://127.0.0.1:PORT/price", timeout_blocks=TIMEOUT)
        self.storage["page"] = page.data
        summary = await runner.llm(f"Summarise: {page.text}", model="stub-model", max_tokens=64,
                                   timeout_blocks=TIMEOUT)
        self.storage["summary"] = summary.text
        return b"done"
'''
REPLY = "Price is 42."
pytestmark = pytest.mark.skipif(os.environ.get("COWBOY_SDK_E2E") != "1",
                                reason="opt-in: make test-sdk-e2e (COWBOY_SDK_E2E=1)")


class LlmServer(ThreadedApp):
    """:func:`llm_app` served on loopback from its own thread."""

    def __init__(self) -> None:
        super().__init__()
        self.stub = LlmStub(reply=REPLY)

    def make_app(self) -> web.Application:
        return llm_app(self.stub)


def _json(r: Any) -> Any:
    return json.loads(r.stdout)


@pytest.fixture
def devnet(tmp_path: Path) -> Iterator[tuple[NodeProcess, RunnerProcess, LlmServer]]:
    """A running node, a registered runner serving http and llm (not yet started), an LLM stub."""
    node = NodeProcess(tmp_path / "node")
    node.start()
    try:
        with LlmServer() as llm:
            runner = RunnerProcess(tmp_path / "runner", node)
            edit_runner_toml(
                runner,
                ('job_types = ["http"]', 'job_types = ["http", "llm"]'),
                ('[rate_card.http]', '[rate_card.llm]\nbase_price = "1000"\nprice_per_unit = "0"\n\n[rate_card.http]'),
                ('# base_url = "http://127.0.0.1:8000/v1"', f'base_url = "http://127.0.0.1:{llm.port}/v1"'),
                ('[executors.llm.models]', f'[executors.llm.models]\n"{model_id("stub-model").hex()}" = "tiny-model"\n'
                                           f'"{model_id(DEFAULT_MODEL).hex()}" = "tiny-model"'),
            )
            fund_and_register(node, runner)
            yield node, runner, llm
    finally:
        node.terminate()


def _deploy(node: NodeProcess, directory: Path, http_port: int, timeout_blocks: int) -> str:
    faucet = str(node.home / "keys" / "faucet.key")
    src = directory / "weather.py"
    src.write_text(ACTOR.replace("PORT", str(http_port)).replace("TIMEOUT", str(timeout_blocks)))
    deployed = _json(cli("tx", "deploy", "--key", faucet, "--source", str(src), "--rpc", node.url, "--timeout", "30"))
    actor: str = deployed["address"]
    cli("tx", "transfer", "--key", faucet, "--to", actor, "--amount", str(10**20), "--rpc", node.url, "--wait",
        "--timeout", "30")
    return actor


def _call_refresh(node: NodeProcess, actor: str) -> dict[str, Any]:
    out: dict[str, Any] = _json(cli(
        "tx", "call", "--key", str(node.home / "keys" / "faucet.key"), "--actor", actor, "--handler", "refresh",
        "--payload", "0x" + sdk_codec.encode("paris").hex(), "--rpc", node.url, "--wait", "--timeout", "30"))
    assert out["receipt"]["status"] == "success", out
    return out


def _state(node: NodeProcess, actor: str, key: bytes) -> bytes | None:
    value = node.get(f"/actor/{actor}/state?key=0x" + key.hex())["value"]
    return None if value is None else bytes.fromhex(value[2:])


def _wait(what: str, cond: Any, timeout: float, runner: RunnerProcess) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}; runner log: {runner.read_log()[-3000:]}")


def _continuations(node: NodeProcess, actor: str) -> int:
    raw = _state(node, actor, b"__continuation_count")
    return 0 if raw is None else int.from_bytes(raw, "big")


def test_actor_awaiting_http_then_llm_resumes_twice_and_stores_both(
        devnet: tuple[NodeProcess, RunnerProcess, LlmServer], tmp_path: Path) -> None:
    node, runner, llm = devnet
    with HttpServer() as http:
        actor = _deploy(node, tmp_path, http.port, 100)
        runner.start()
        try:
            runner.wait_session()
            _call_refresh(node, actor)
            assert _continuations(node, actor) == 1
            summary = _wait("the second resume", lambda: _state(node, actor, b"summary"), 90, runner)
            assert sdk_codec.decode(summary) == REPLY
            assert sdk_codec.decode(_state(node, actor, b"page") or b"") == json.loads(BODY)  # parsed JSON body
            assert http.hits == 1
            [request] = llm.stub.requests
            assert request["model"] == "tiny-model"
            assert request["messages"][-1]["content"] == "Summarise: {'price': 42}"  # RunnerResult.text of a dict
            assert request["max_tokens"] == 64
            assert _continuations(node, actor) == 0  # resumed exactly to the end: the slot is freed
        finally:
            rc = runner.stop()
    assert rc == 0, runner.read_log()[-3000:]


def test_runner_killed_mid_job_delivers_the_failure_to_the_continuation(
        devnet: tuple[NodeProcess, RunnerProcess, LlmServer], tmp_path: Path) -> None:
    node, runner, _ = devnet
    with HttpServer(delay_s=5.0) as http:  # longer than the job timeout (10 blocks of 250 ms)
        actor = _deploy(node, tmp_path, http.port, 10)
        runner.start()
        runner.wait_session()
        _call_refresh(node, actor)
        _wait("the runner to start the request", lambda: http.hits > 0, 30, runner)
        runner.kill()  # SIGKILL mid-job; never restarted
        # timeout (10 blocks), no other runner to re-select: the job fails and the failure resumes the actor
        _wait("the failure to reach the continuation", lambda: _continuations(node, actor) == 0, 120, runner)
        assert _state(node, actor, b"page") is None and _state(node, actor, b"summary") is None


def test_quick_start_with_public_chat_runs_against_the_llm_stub(
        devnet: tuple[NodeProcess, RunnerProcess, LlmServer], tmp_path: Path) -> None:
    # the README's actor; `chat` needs @public to be callable at all (docs/actors.md §8), nothing else changes
    node, runner, llm = devnet
    src = tmp_path / "quickstart.py"
    src.write_text(quick_start().replace("    @runner.continuation\n    async def chat",
                                         "    @public\n    @runner.continuation\n    async def chat"))
    faucet = str(node.home / "keys" / "faucet.key")
    actor: str = _json(cli("tx", "deploy", "--key", faucet, "--source", str(src), "--rpc", node.url,
                           "--timeout", "30"))["address"]
    cli("tx", "transfer", "--key", faucet, "--to", actor, "--amount", str(10**20), "--rpc", node.url, "--wait",
        "--timeout", "30")
    runner.start()
    try:
        runner.wait_session()
        for handler, payload in (("init", b""), ("chat", sdk_codec.encode({"message": "hi"}))):
            out = _json(cli("tx", "call", "--key", faucet, "--actor", actor, "--handler", handler, "--payload",
                            "0x" + payload.hex(), "--rpc", node.url, "--wait", "--timeout", "30"))
            assert out["receipt"]["status"] == "success", out
        reply = _wait("the chat reply", lambda: _state(node, actor, b"reply:0"), 90, runner)
        assert sdk_codec.decode(reply) == REPLY
        assert sdk_codec.decode(_state(node, actor, b"calls") or b"") == 1
        [request] = llm.stub.requests
        assert request["messages"] == [{"role": "system", "content": "You are a helpful assistant"},
                                       {"role": "user", "content": "hi"}]
    finally:
        assert runner.stop() == 0, runner.read_log()[-3000:]
