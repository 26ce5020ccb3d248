"""Awaits inside loops of a ``@runner.continuation`` under ``@bounded_loop`` (issue 18 item 1), on a real chain.

The actor (tests/vectors/sdk_actors/looper.py) is deployed as source; the node lowers its loops at deploy
(``actors/fsm_loops.py``). Scripted runners sign real JobResultSubmit transactions; every block is verified by a
follower (same state root), as in test_sdk_continuations.py, whose set-up this reuses.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cowboy_sdk import codec as sdk_codec

from cowboy_node.execution.actors.actor_state import get_state
from cowboy_node.execution.actors.fsm_loops import LOOP_KEY
from cowboy_node.execution.actors.sdk_surface import transform
from cowboy_node.execution.eob.execute_mailbox import TOPIC_DELIVERED
from cowboy_node.execution.jobs import sdk_jobs
from cowboy_node.execution.jobs.job_record import JobStatus
from cowboy_node.execution.pvm import ActorRejected, compile_actor
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.instructions import CallActor
from cowboy_protocol.types.jobspec import HttpJob, LlmJob, decode_job_spec
from tests.helpers import ALICE_SK, run_under_hash_seeds
from tests.unit.execution.actors.test_sdk_continuations import (
    CONT,
    _conts,
    _net,
    _pending_sdk_jobs,
    _reveal,
    _state,
)

LOOPER = (Path(__file__).resolve().parents[4] / "tests/vectors/sdk_actors/looper.py").read_text(encoding="utf-8")


def _call(net, actor: bytes, method: str, arg: object):  # type: ignore[no-untyped-def]
    p = net.block([net.tx(ALICE_SK, CallActor(actor, method, sdk_codec.encode(arg)))])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    return p


def _only_job(net) -> tuple[bytes, sdk_jobs.SdkJob, object]:  # type: ignore[no-untyped-def]
    """The one pending SDK job: (job_id, record, decoded JobSpec job)."""
    [(job_id, rec)] = _pending_sdk_jobs(net)
    return job_id, rec, decode_job_spec(net.job(job_id).spec).job_type


def _record(net, actor: bytes, cid: bytes) -> dict:  # type: ignore[no-untyped-def]
    raw = get_state(net.chain.world(), actor, CONT + cid)
    assert raw is not None
    return sdk_codec.decode(raw)  # type: ignore[no-any-return]


def _deliveries(p) -> list[tuple[bool, object]]:  # type: ignore[no-untyped-def]
    """(ok, error_code) of every Mailbox delivery of the block."""
    return [(decode(e.data)[2], decode(e.data)[6]) for e in p.result.block_events if e.topic == TOPIC_DELIVERED]


def test_a_loop_of_three_awaits_resumes_three_times_and_stores_every_result_in_order() -> None:
    net, actor = _net(LOOPER)
    _call(net, actor, "crawl", ["x", "y", "z"])
    job, rec, spec = _only_job(net)
    cid = rec.cid
    assert isinstance(spec, LlmJob) and spec.prompt == "About x" and rec.reply_handler == "crawl__resume"
    record = _record(net, actor, cid)
    # the SDK's record: state = the await, ctx = the capture() fields + the lowered function's locals
    assert record["state"] == 0 and record["handler"] == "crawl__resume"
    assert record["ctx"] == {"count": 3, LOOP_KEY: {"results": [], "locals": {
        "_cowboy_it0": {"items": ["x", "y", "z"]}, "_cowboy_ix0": 1, "_cowboy_n": 1,
        "notes": {"seen": [], "meta": {"n": 0, "pairs": [[0, "start"]]}, "raw": b"\x00\xff"},
        "topic": "x", "topics": ["x", "y", "z"]}}}

    prompts = ["About x"]
    for i, text in enumerate(["one", "two", "three"]):
        _reveal(net, job, text.encode())
        assert _conts(net, actor) == [CONT + cid]  # one continuation throughout, the same cid
        job, rec, spec = _only_job(net)  # each resume sends exactly one job
        assert rec.cid == cid
        notes = _state(net, actor, "notes")
        assert isinstance(notes, dict) and notes["seen"] == ["one", "two", "three"][:i + 1]
        if i < 2:
            assert isinstance(spec, LlmJob)
            prompts.append(spec.prompt)
            saved = _record(net, actor, cid)["ctx"][LOOP_KEY]
            assert saved["locals"]["_cowboy_ix0"] == i + 2
            assert saved["results"] == ["answer"] and saved["locals"]["answer"] == ["one", "two"][i]
    assert prompts == ["About x", "About y", "About z"]
    assert isinstance(spec, HttpJob) and spec.url == "http://127.0.0.1:9/done/3"  # the await after the loop
    assert _record(net, actor, cid)["state"] == 1
    _reveal(net, job, b'{"ok": true}')
    # nested data in locals survived every leg (bytes, nested lists and maps)
    assert _state(net, actor, "notes") == {"seen": ["one", "two", "three"], "raw": b"\x00\xff", "meta": {
        "n": 3, "pairs": [[0, "start"], ["x", "one"], ["y", "two"], ["z", "three"]]}}
    assert _state(net, actor, "final") == [{"ok": True}, 3]
    assert _conts(net, actor) == []
    assert get_state(net.chain.world(), actor, b"__continuation_count") == (0).to_bytes(4, "big")
    assert _pending_sdk_jobs(net) == []


def test_the_loop_record_bytes_are_the_sdk_record_with_the_locals_map() -> None:
    net, actor = _net(LOOPER)
    _call(net, actor, "capped", 3)
    [(_, rec)] = _pending_sdk_jobs(net)
    raw = get_state(net.chain.world(), actor, CONT + rec.cid) or b""
    # ctx = {"__cowboy_loop__": {"locals": {"i": 0, "n": 3, "got": [], "_cowboy_n": 1,
    # "_cowboy_it0": {"range": [0, 3, 1]}, "_cowboy_ix0": 1}, "results": []}}, written by hand as canonical CBOR
    # (map keys ordered by their encoded bytes)
    cowboy = "5f636f77626f795f"  # "_cowboy_"
    ctx = ("a1" + "6f" + b"__cowboy_loop__".hex() + "a2" + "66" + b"locals".hex() + "a6"
           + "6169" + "00" + "616e" + "03" + "63" + b"got".hex() + "80"
           + "69" + cowboy + "6e" + "01"
           + "6b" + cowboy + "697430" + "a1" + "65" + b"range".hex() + "83" + "000301"
           + "6b" + cowboy + "697830" + "01"
           + "67" + b"results".hex() + "80")
    assert ("63" + b"ctx".hex() + ctx) in raw.hex()
    assert _record(net, actor, rec.cid)["state"] == 0


def test_exceeding_max_iterations_raises_loop_bound_exceeded_and_sends_nothing_more() -> None:
    net, actor = _net(LOOPER)
    _call(net, actor, "capped", 3)  # max_iterations=2
    job, rec, spec = _only_job(net)
    assert isinstance(spec, HttpJob) and spec.url == "http://127.0.0.1:9/page/0"
    _reveal(net, job, b'{"p": 0}')
    job, _, spec = _only_job(net)
    assert isinstance(spec, HttpJob) and spec.url == "http://127.0.0.1:9/page/1"
    p = _reveal(net, job, b'{"p": 1}')
    # the third iteration is the (N + 1)th: the resume leg raises the SDK's LoopBoundExceeded; its writes revert
    assert _deliveries(p) == [(False, "handler_error")]
    # no third job was sent (what remains is page/1's own sdkjob/ record: the failed leg's writes revert with it)
    assert [j for j, _ in _pending_sdk_jobs(net)] in ([], [job])
    # that leg ran iteration 2's tail before it raised; all its writes revert (a raising call's do), the record's
    # deletion included: the record stays where iteration 2 suspended
    assert _state(net, actor, "got") == [{"p": 0}]
    assert _record(net, actor, rec.cid)["ctx"][LOOP_KEY]["locals"]["_cowboy_n"] == 2


def test_exactly_max_iterations_complete_and_every_save_keeps_the_decorator_options() -> None:
    net, actor = _net(LOOPER)
    _call(net, actor, "capped", 2)  # @runner.continuation(timeout_blocks=500, guard_keys=["cfg"])
    for i in range(2):
        job, rec, _ = _only_job(net)
        record = _record(net, actor, rec.cid)
        assert record["timeout_at_block"] == record["created_at_block"] + 500 == net.chain.height + 500
        assert record["guard_hashes"] == {b"cfg".hex(): None}
        p = _reveal(net, job, f'{{"p": {i}}}'.encode())
        assert _deliveries(p) == [(True, None)]
    assert _state(net, actor, "got") == [{"p": 0}, {"p": 1}]
    assert _conts(net, actor) == [] and _pending_sdk_jobs(net) == []


def test_a_loop_that_never_runs_finishes_in_the_initial_leg() -> None:
    net, actor = _net(LOOPER)
    p = _call(net, actor, "capped", 0)
    assert _pending_sdk_jobs(net) == [] and _conts(net, actor) == []
    assert p.result.receipts[0].error_code is None


def test_a_failing_job_mid_loop_ends_the_continuation() -> None:
    net, actor = _net(LOOPER)
    _call(net, actor, "crawl", ["x", "y", "z"])
    job, _, _ = _only_job(net)
    _reveal(net, job, b"one")
    job2, _, spec = _only_job(net)
    assert isinstance(spec, LlmJob) and spec.prompt == "About y"
    # the runner stays silent: the job times out through every re-selection and fails
    for _ in range(2000):
        if net.job(job2).status == JobStatus.FAILED:
            break
        net.block([])
    assert net.job(job2).status == JobStatus.FAILED
    net.block([])  # the failure reply runs in the next ExecuteMailbox
    # the unguarded await's failure ends the continuation (SDK _chain_failure_ends): nothing else is sent
    assert _conts(net, actor) == [] and _pending_sdk_jobs(net) == []
    assert get_state(net.chain.world(), actor, b"__continuation_count") == (0).to_bytes(4, "big")
    notes = _state(net, actor, "notes")
    assert isinstance(notes, dict) and notes["seen"] == ["one"]
    assert _state(net, actor, "final") is None


def test_a_runner_result_local_keeps_working_and_an_unstorable_dead_local_does_not_stop_the_loop() -> None:
    net, actor = _net(LOOPER)
    _call(net, actor, "digest", 2)
    job, rec, _ = _only_job(net)
    saved = _record(net, actor, rec.cid)["ctx"][LOOP_KEY]["locals"]
    assert list(saved["store"]) == ["__cowboy_uncarried__"]  # the SDK carry's marker for a refused value
    _reveal(net, job, b'{"title": "T", "body": "b"}')
    for i, text in enumerate(["l0", "l1"]):
        job, rec, spec = _only_job(net)
        assert isinstance(spec, LlmJob) and spec.prompt.startswith(f"Line {i} of ")
        _reveal(net, job, text.encode())
    # page (a RunnerResult bound before the loop) still had .data after every later await
    assert _state(net, actor, "lines") == ["l0/T", "l1/T"]
    assert _state(net, actor, "started") is True
    assert _conts(net, actor) == []


def _callback(job_id: bytes, cid: bytes) -> bytes:
    """A verified job's callback payload (resolve_offchain.callback_payload's shape)."""
    return encode({0: job_id, 1: True, 2: b"dup", 3: "verified", 4: "", 5: cid, 6: None})


def test_a_duplicate_reply_is_not_delivered_and_a_late_one_is_dropped_with_an_event() -> None:
    net, actor = _net(LOOPER)
    _call(net, actor, "crawl", ["x", "y"])
    job1, rec, _ = _only_job(net)
    _reveal(net, job1, b"one")
    before = get_state(net.chain.world(), actor, CONT + rec.cid)
    # iteration 1's job already resumed the loop: its record is consumed, a second callback is no SDK reply
    world = net.chain.world()
    assert sdk_jobs.reply_for(world, _callback(job1, rec.cid), actor) is None
    assert get_state(world, actor, CONT + rec.cid) == before
    job2, _, _ = _only_job(net)
    _reveal(net, job2, b"two")
    job3, _, _ = _only_job(net)
    _reveal(net, job3, b"{}")
    assert _conts(net, actor) == []
    # a reply for the finished continuation's cid (a record left for it) is dropped with runner.reply_dropped
    world = net.chain.world()
    late = b"\x42" * 32
    world.set(sdk_jobs.PREFIX + late, sdk_jobs.SdkJob(actor, rec.cid, "crawl__resume", "llm").encode())
    reply = sdk_jobs.reply_for(world, _callback(late, rec.cid), actor)
    assert reply is not None and reply.payload is None and reply.dropped is not None
    assert reply.dropped.topic == sdk_jobs.TOPIC_DROPPED
    assert decode(reply.dropped.data) == {0: late, 1: rec.cid, 2: "no_continuation"}


def test_a_while_loop_with_an_await_in_a_branch_resumes_at_the_right_await() -> None:
    net, actor = _net(LOOPER)
    _call(net, actor, "until", 5)
    seen = []
    replies = {"http://127.0.0.1:9/step/1": b'{"add": 2}', "http://127.0.0.1:9/step/2": b'{"add": 1}',
               "odd 3": b"A", "http://127.0.0.1:9/step/3": b'{"add": 2}', "odd 5": b"B"}
    while _pending_sdk_jobs(net):
        job, rec, spec = _only_job(net)
        key = spec.url if isinstance(spec, HttpJob) else spec.prompt  # type: ignore[attr-defined]
        seen.append((key, _record(net, actor, rec.cid)["state"]))
        _reveal(net, job, replies[key])
    assert seen == [("http://127.0.0.1:9/step/1", 0), ("http://127.0.0.1:9/step/2", 0), ("odd 3", 1),
                    ("http://127.0.0.1:9/step/3", 0), ("odd 5", 1)]
    assert _state(net, actor, "total") == [5, 3]
    assert _state(net, actor, "odd") == ["A", "B"]
    assert _conts(net, actor) == []


def test_break_after_a_resume_leaves_the_loop() -> None:
    net, actor = _net(LOOPER)
    _call(net, actor, "until", 1000)
    job, _, _ = _only_job(net)
    _reveal(net, job, b'{"add": 200}')  # even and > 100: break
    assert _state(net, actor, "total") == [200, 1]
    assert _pending_sdk_jobs(net) == [] and _conts(net, actor) == []


@pytest.mark.parametrize(("rows", "prompts", "error"), [(2, ["0a", "0b", "1a"], None), (3, ["0a", "0b", "1a"], True)])
def test_nested_loops_resume_inside_the_inner_loop_and_count_every_iteration(rows: int, prompts: list[str],
                                                                             error: bool | None) -> None:
    net, actor = _net(LOOPER)
    _call(net, actor, "grid", rows)  # BoundedRange(rows) x ["a", "b"], max_iterations=6
    seen: list[str] = []
    done: set[bytes] = set()
    p = None
    while _pending_sdk_jobs(net):
        job, _, spec = _only_job(net)
        if job in done:  # a raising leg's writes revert, its job's sdkjob/ record with them: nothing new was sent
            break
        assert isinstance(spec, LlmJob)
        seen.append(spec.prompt)
        done.add(job)
        p = _reveal(net, job, spec.prompt.upper().encode())
    assert seen == prompts
    if error:  # outer 3 is the 7th started iteration (0, 0a, 0b, 1, 1a, 1b-continued, 2)
        assert p is not None and _deliveries(p) == [(False, "handler_error")]
        assert _state(net, actor, "cells") is None
    else:
        assert _state(net, actor, "cells") == ["0A", "0B", "1A"]
        assert _conts(net, actor) == []


_HEAD = ("from cowboy_sdk import TaskGroup, actor, bounded_loop, public, runner\n\n@actor\nclass A:\n    @public\n"
         "{deco}    @runner.continuation\n    async def f(self, items):\n")
_BOUNDED = "    @bounded_loop(max_iterations=4)\n"


def _refusal(body: str, deco: str = _BOUNDED) -> ActorRejected:
    src = _HEAD.format(deco=deco) + body + "        return b''\n"
    with pytest.raises(ActorRejected) as err:
        compile_actor(src, transform=transform)
    return err.value


def test_a_loop_await_without_bounded_loop_is_refused_with_the_sdk_message() -> None:
    err = _refusal("        for x in items:\n            await runner.llm(x)\n", deco="")
    assert err.rule == "continuation_invalid"
    assert "await inside a loop requires @bounded_loop decorator (CIP-6 Appendix A rule 8)" in err.message


@pytest.mark.parametrize(("deco", "why"), [
    ("    @bounded_loop\n", "write @bounded_loop(max_iterations=N)"),
    ("    @bounded_loop(max_iterations=len('ab'))\n", "non-negative int literal"),
])
def test_a_bound_that_is_not_a_literal_is_refused(deco: str, why: str) -> None:
    err = _refusal("        for x in items:\n            await runner.llm(x)\n", deco=deco)
    assert err.rule == "continuation_invalid" and why in err.message


@pytest.mark.parametrize("body", [
    "        if items:\n            await runner.llm('x')\n",  # a branch outside every loop
    "        for x in items:\n            await runner.llm(x)\n        else:\n            pass\n",
    "        for x in items:\n            try:\n                await runner.llm(x)\n"
    "            except ValueError:\n                pass\n",
    "        for x in items:\n            y = 1 + await runner.llm(x)\n",
    "        for x in items:\n            self.storage[x] = [await runner.llm(x)]\n",
    "        while await runner.llm('x'):\n            await runner.llm('y')\n",
])
def test_unsupported_await_positions_stay_refused(body: str) -> None:
    assert _refusal(body).rule == "continuation_await_position"


@pytest.mark.parametrize(("body", "rule"), [
    ("        def g():\n            return 1\n        for x in items:\n            await runner.llm(x)\n",
     "continuation_invalid"),
    ("        _cowboy_n = 1\n        for x in items:\n            await runner.llm(x)\n", "continuation_invalid"),
    ("        async with TaskGroup() as tg:\n            a = tg.create_task(runner.llm('x'))\n"
     "        for x in items:\n            await runner.llm(x)\n", "continuation_taskgroup"),
])
def test_statements_a_resume_leg_could_not_restore_are_refused(body: str, rule: str) -> None:
    assert _refusal(body).rule == rule


_SEED_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from tests.unit.execution.actors.test_sdk_loop_continuations import LOOPER, _call, _net, _only_job, _reveal
net, actor = _net(LOOPER)
_call(net, actor, "crawl", ["b", "a"])
for reply in (b"1", b"2", b'{{"z": 1, "a": [1, 2]}}'):
    job, _, _ = _only_job(net)
    _reveal(net, job, reply)
print(net.chain.head.header.state_root.hex())
"""


def test_state_roots_do_not_depend_on_the_hash_seed() -> None:

    root = str(Path(__file__).resolve().parents[4])
    roots = {out.strip() for out in run_under_hash_seeds(_SEED_SCRIPT.format(root=root), ("0", "7"))}
    assert len(roots) == 1 and len(next(iter(roots))) == 64
