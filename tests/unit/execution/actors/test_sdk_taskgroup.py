"""TaskGroup fan-out in a ``@runner.continuation``: every task sent at once, one resume once all replied."""

from __future__ import annotations

from pathlib import Path

import pytest
from cowboy_sdk import codec as sdk_codec

from cowboy_node.execution.actors.actor_state import get_state, scan_state
from cowboy_node.execution.actors.sdk_surface import transform
from cowboy_node.execution.pvm import ActorRejected, compile_actor
from cowboy_protocol.types.instructions import CallActor
from cowboy_protocol.types.jobspec import HttpJob, LlmJob, decode_job_spec
from tests.helpers import ALICE_SK
from tests.unit.execution.actors.test_sdk_continuations import _net, _pending_sdk_jobs, _reveal

FANOUT = (Path(__file__).resolve().parents[4] / "tests/vectors/sdk_actors/fanout.py").read_text(encoding="utf-8")


def test_fan_out_sends_every_task_and_resumes_once_with_results_in_creation_order() -> None:
    net, actor = _net(FANOUT)
    p = net.block([net.tx(ALICE_SK, CallActor(actor, "survey", sdk_codec.encode("rain")))])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    jobs = sorted(_pending_sdk_jobs(net), key=lambda j: j[1].task_index or 0)
    assert [(r.job_type, r.task_index, r.reply_handler) for _, r in jobs] == [
        ("http", 0, "survey__resume"), ("llm", 1, "survey__resume")]
    (http_id, rec0), (llm_id, rec1) = jobs
    assert rec0.cid == rec1.cid
    assert isinstance(decode_job_spec(net.job(http_id).spec).job_type, HttpJob)
    llm = decode_job_spec(net.job(llm_id).spec).job_type
    assert isinstance(llm, LlmJob) and llm.prompt == "About rain?"
    world = net.chain.world()
    barrier = get_state(world, actor, b"__taskgroup_barrier:" + rec0.cid)
    assert barrier is not None and sdk_codec.decode(barrier)["task_count"] == 2

    _reveal(net, llm_id, b"Bring an umbrella.")  # the second task first: the group waits
    assert get_state(net.chain.world(), actor, b"answer") is None
    assert len(_pending_sdk_jobs(net)) == 1
    _reveal(net, http_id, b'{"mm": 12}')  # the last reply resumes the continuation, once
    world = net.chain.world()
    assert sdk_codec.decode(get_state(world, actor, b"page") or b"") == {"mm": 12}
    assert sdk_codec.decode(get_state(world, actor, b"answer") or b"") == "Bring an umbrella."
    assert get_state(world, actor, b"__taskgroup_barrier:" + rec0.cid) is None
    assert [k for k, _ in scan_state(world, actor, b"__continuation:", 10)] == []


@pytest.mark.parametrize("body", [
    "        async with TaskGroup(timeout_blocks=5) as tg:\n            a = tg.create_task(runner.llm('x'))\n",
    "        async with TaskGroup() as tg:\n            a = tg.create_task(runner.llm('x'))\n            n = 1\n",
    "        if payload:\n            async with TaskGroup() as tg:\n"
    "                a = tg.create_task(runner.llm('x'))\n",
])
def test_other_task_group_shapes_are_refused_at_deploy(body: str) -> None:
    src = ("from cowboy_sdk import TaskGroup, actor, public, runner\n\n@actor\nclass A:\n    @public\n"
           "    @runner.continuation\n    async def f(self, payload):\n" + body + "        return b''\n")
    with pytest.raises(ActorRejected) as err:
        compile_actor(src, transform=transform)
    assert err.value.rule == "continuation_taskgroup"
