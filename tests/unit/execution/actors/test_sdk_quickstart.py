"""The cowboy-actor-sdk README Quick Start actor (``MyAgent``: ``capture()``, ``await runner.llm(...)``, module-level
shims with the private ``_a()``), copied unmodified from the installed package's README, on a real chain."""

from __future__ import annotations

import re
from pathlib import Path

from cowboy_sdk import codec as sdk_codec

from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.execution.actors.actor_state import get_state
from cowboy_protocol.types.instructions import CallActor, DeployActor, Transfer
from cowboy_protocol.types.jobspec import LlmJob, decode_job_spec
from tests.helpers import ALICE, ALICE_SK
from tests.unit.execution.actors.test_sdk_continuations import _net, _pending_sdk_jobs, _reveal

_README = next(Path(__file__).resolve().parents[4].glob(".venv/lib/python3*/site-packages/"
                                                         "cowboy_actor_sdk-0.1.6.dist-info/METADATA"), None)


def quick_start() -> str:
    """The README's Quick Start Python block, byte for byte."""
    if _README is not None:
        text = _README.read_text(encoding="utf-8")
    else:  # an environment without the dist-info next to the venv: the same text via importlib.metadata
        from importlib.metadata import metadata
        text = str(metadata("cowboy-actor-sdk").get_payload())  # type: ignore[attr-defined]
    block = re.search(r"```python\n(from cowboy_sdk import actor, public, runner, capture\n.*?)```", text, re.S)
    assert block is not None
    return block.group(1)


def _deploy(net: object, source: str) -> bytes:
    net.block([net.tx(ALICE_SK, DeployActor(source, b"", "", b""))])  # type: ignore[attr-defined]
    actor = derive_actor_address(ALICE, b"", source)
    net.block([net.tx(ALICE_SK, Transfer(actor, 10**20))])  # type: ignore[attr-defined]
    return actor


def test_quick_start_deploys_unmodified_and_init_runs_but_chat_is_deny_by_default() -> None:
    src = quick_start()
    assert "def _a(): return MyAgent()" in src and "@runner.continuation" in src
    net, _ = _net()
    actor = _deploy(net, src)
    p = net.block([net.tx(ALICE_SK, CallActor(actor, "init", b""))])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    assert get_state(net.chain.world(), actor, b"calls") == sdk_codec.encode(0)
    p = net.block([net.tx(ALICE_SK, CallActor(actor, "chat", sdk_codec.encode({"message": "hi"})))])
    r = p.result.receipts[0]
    # what cowboy_sdk.testing.SimulatedChain answers too: `chat` has no @public (SDK 0.1.6 denies by default)
    assert r.error_code == "handler_error" and "PermissionDeniedError" in (r.error_message or "")


def test_quick_start_with_public_chat_awaits_the_llm_and_stores_the_reply() -> None:
    src = quick_start().replace("    @runner.continuation\n    async def chat",
                                "    @public\n    @runner.continuation\n    async def chat")
    net, _ = _net()
    actor = _deploy(net, src)
    net.block([net.tx(ALICE_SK, CallActor(actor, "init", b""))])
    p = net.block([net.tx(ALICE_SK, CallActor(actor, "chat", sdk_codec.encode({"message": "hi"})))])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    [(job, rec)] = _pending_sdk_jobs(net)
    assert (rec.job_type, rec.reply_handler) == ("llm", "chat__resume")
    llm = decode_job_spec(net.job(job).spec).job_type
    assert isinstance(llm, LlmJob)
    assert (llm.prompt, llm.system_prompt) == ("hi", "You are a helpful assistant")
    _reveal(net, job, b"Hello! How can I help?")
    world = net.chain.world()
    assert get_state(world, actor, b"reply:0") == sdk_codec.encode("Hello! How can I help?")
    assert get_state(world, actor, b"calls") == sdk_codec.encode(1)
    assert _pending_sdk_jobs(net) == []
