"""A finished SDK job's ``sdkjob/`` record is consumed outside the resume leg's checkpoint: a resume leg that
raises has its writes reverted, but the job still counts as replied (docs/actors.md §6: the record is deleted
"whatever the leg then does"), so no later callback for that job can resume the continuation again."""

from __future__ import annotations

from cowboy_sdk import codec as sdk_codec

from cowboy_node.execution.eob.execute_mailbox import TOPIC_DELIVERED
from cowboy_node.execution.jobs import sdk_jobs
from cowboy_protocol.codec import decode
from cowboy_protocol.types.instructions import CallActor
from tests.helpers import ALICE_SK
from tests.unit.execution.actors.test_sdk_continuations import (
    _conts,
    _net,
    _pending_sdk_jobs,
    _reveal,
    _state,
    _submitted,
)

FLAKY = '''from cowboy_sdk import actor, public, runner


@actor
class Flaky:
    @public
    @runner.continuation
    async def go(self, city):
        page = await runner.http("http://127.0.0.1:9/" + city)
        self.storage["page"] = page.text
        raise ValueError("the resume leg fails after writing")
'''


def test_a_resume_leg_that_raises_still_consumes_its_jobs_record() -> None:
    net, actor = _net(FLAKY)
    p = net.block([net.tx(ALICE_SK, CallActor(actor, "go", sdk_codec.encode("oslo")))])
    [(job, cid, _)] = _submitted(p)
    assert [j for j, _ in _pending_sdk_jobs(net)] == [job]
    reveal = _reveal(net, job, b"cold")
    delivered = [decode(e.data) for e in reveal.result.block_events  # type: ignore[attr-defined]
                 if e.topic == TOPIC_DELIVERED and e.emitter == actor]
    assert [d[2] for d in delivered] == [False]  # the resume leg ran and failed
    assert _state(net, actor, "page") is None  # its writes were reverted
    assert _pending_sdk_jobs(net) == []  # but the job's record is gone: it never resumes again
    assert net.chain.world().get(sdk_jobs.PREFIX + job) is None
    assert len(_conts(net, actor)) == 1 and cid  # the continuation the failed leg did not finish stays
