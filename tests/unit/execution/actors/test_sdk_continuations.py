"""cowboy_sdk ``@runner.continuation`` actors on a real chain: runner_job messages become jobs, verified results
(scripted runners signing real JobResultSubmit transactions) resume the continuation through the real result path
(ResolveOffchain -> Mailbox -> the actor's resume leg), with the continuation store in the actor's state.

The actor (tests/vectors/sdk_actors/weather.py) is written as the SDK's docs show: ``await runner.http(...)``
then ``await runner.llm(...)``. Each test builds and verifies blocks through ``Chain`` with a follower, so every
step also replays to the same state root.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cowboy_sdk import codec as sdk_codec

from cowboy_node.execution.actors import actor_state as store
from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.execution.actors.actor_state import get_state, scan_state
from cowboy_node.execution.jobs import sdk_jobs
from cowboy_node.execution.jobs.job_record import JobStatus
from cowboy_node.execution.system_state import get_account
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.types.instructions import CallActor, DeployActor, Transfer
from cowboy_protocol.types.job_instructions import JobResultSubmit
from cowboy_protocol.types.jobspec import HttpJob, LlmJob, decode_job_spec
from cowboy_protocol.types.params import Cip11Flags
from cowboy_protocol.types.runner_instructions import RunnerRegister
from cowboy_protocol.types.runner_json import runner_file_from_json
from tests.helpers import ALICE, ALICE_SK, make_dev_genesis, run_under_hash_seeds
from tests.unit.execution.jobs.test_jobs_e2e import Net

ROOT = Path(__file__).resolve().parents[4]
WEATHER = (ROOT / "tests/vectors/sdk_actors/weather.py").read_text(encoding="utf-8")
RUNNER_SK = (0x2000).to_bytes(32, "big")
RUNNER = private_key_to_address(RUNNER_SK)
CAPS = {"job_types": ["http", "llm"], "regions": ["eu-west"], "http_domains": ["127.0.0.1"],
        "max_concurrent_jobs": 4, "tee_types": [], "pools": [],
        "rate_card": {"http": {"base_price": "1000", "price_per_unit": "0"},
                      "llm": {"base_price": "1000", "price_per_unit": "0"}}}
CONT = b"__continuation:"


def _net(source: str = WEATHER) -> tuple[Net, bytes]:
    net = Net(make_dev_genesis(Cip11Flags.for_phase(2), balances={ALICE: 10**24, RUNNER: 10**21}))
    caps, card = runner_file_from_json(CAPS, require_rate_card=True)
    net.block([net.tx(RUNNER_SK, RunnerRegister(10**18, caps, card))])
    net.block([net.tx(ALICE_SK, DeployActor(source, b"", "", b""))])
    actor = derive_actor_address(ALICE, b"", source)
    net.block([net.tx(ALICE_SK, Transfer(actor, 10**20))])
    net.present = frozenset({0})
    return net, actor


def _submitted(p: object) -> list[tuple[bytes, bytes, str]]:
    """(job_id, cid, job_type) of every runner.job_submitted event of a block's transactions."""
    out = []
    for r in p.result.receipts:  # type: ignore[attr-defined]
        for e in r.events:
            if e.topic == sdk_jobs.TOPIC_SUBMITTED:
                m = decode(e.data)
                out.append((m[0], m[1], m[2]))
    return out


def _state(net: Net, actor: bytes, key: str) -> object:
    raw = get_state(net.chain.world(), actor, key.encode())
    return None if raw is None else sdk_codec.decode(raw)


def _conts(net: Net, actor: bytes) -> list[bytes]:
    return [k for k, _ in scan_state(net.chain.world(), actor, CONT, 100)]


def _reveal(net: Net, job_id: bytes, result: bytes) -> object:
    p = net.block([net.tx(RUNNER_SK, JobResultSubmit(job_id, result, b"", 0))])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    return p


def _pending_sdk_jobs(net: Net) -> list[tuple[bytes, sdk_jobs.SdkJob]]:
    """(job_id, record) of every SDK runner job still waiting for its reply."""
    return [(k[len(sdk_jobs.PREFIX):], sdk_jobs.SdkJob.decode(v))
            for k, v in net.chain.world().iterate(sdk_jobs.PREFIX)]


def test_two_awaits_resume_twice_and_store_both_results() -> None:
    net, actor = _net()
    before = get_account(net.chain.world(), actor).balance
    p = net.block([net.tx(ALICE_SK, CallActor(actor, "refresh", sdk_codec.encode("paris")))])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    [(job1, cid, kind)] = _submitted(p)
    assert kind == "http" and len(cid) == 32
    assert net.job(job1).status == JobStatus.ASSIGNED and net.job(job1).payer == actor  # escrow from the actor
    assert get_account(net.chain.world(), actor).balance < before
    assert _conts(net, actor) == [CONT + cid]
    record = sdk_codec.decode(get_state(net.chain.world(), actor, CONT + cid) or b"")
    assert record["state"] == 0 and record["handler"] == "refresh__resume" and record["ctx"] == {"city": "paris"}

    # the http job's verified result resumes the continuation: it stores the page and sends the llm job
    _reveal(net, job1, b'{"text": "21C, sunny", "temp": 21}')
    [(job2, rec2)] = _pending_sdk_jobs(net)
    assert (rec2.actor, rec2.cid, rec2.job_type, rec2.reply_handler) == (actor, cid, "llm", "refresh__resume")
    assert _state(net, actor, "page") == {"text": "21C, sunny", "temp": 21}  # the JSON body, parsed
    assert sdk_codec.decode(get_state(net.chain.world(), actor, CONT + cid) or b"")["state"] == 1
    assert net.job(job2).status == JobStatus.ASSIGNED
    prompt = decode_job_spec(net.job(job2).spec).job_type
    assert isinstance(prompt, LlmJob) and prompt.prompt == "Summarise: 21C, sunny"  # RunnerResult.text

    # the llm job's result is the second resume: summary stored, continuation deleted, count back to 0
    _reveal(net, job2, b"Mild, 21 degrees.")
    assert _state(net, actor, "summary") == "Mild, 21 degrees."
    assert _state(net, actor, "steps") == 1
    assert _conts(net, actor) == []
    assert get_state(net.chain.world(), actor, b"__continuation_count") == (0).to_bytes(4, "big")
    assert _pending_sdk_jobs(net) == []  # every reply consumed its record


def test_llm_job_maps_model_and_prompt_onto_the_jobspec() -> None:
    net, actor = _net()
    p = net.block([net.tx(ALICE_SK, CallActor(actor, "refresh", sdk_codec.encode("oslo")))])
    [(job1, _, _)] = _submitted(p)
    first = decode_job_spec(net.job(job1).spec)
    assert isinstance(first.job_type, HttpJob)
    assert (first.job_type.url, first.job_type.method) == ("http://127.0.0.1:9/oslo", "GET")
    assert (first.max_price, first.timeout_blocks, first.submitter) == (sdk_jobs.DEFAULT_MAX_PRICE, 100, actor)
    _reveal(net, job1, b"cold")
    [(job2, _)] = _pending_sdk_jobs(net)
    spec = decode_job_spec(net.job(job2).spec)
    assert isinstance(spec.job_type, LlmJob)
    assert spec.job_type.model_id == keccak256(b"stub-model")
    assert (spec.job_type.prompt, spec.job_type.max_tokens) == ("Summarise: cold", 64)
    assert (spec.callback.actor, spec.callback.handler) == (actor, "refresh__resume")
    assert spec.callback.context == first.callback.context and len(spec.callback.context) == 32


def test_failed_job_delivers_the_failure_and_ends_the_continuation() -> None:
    net, actor = _net()
    p = net.block([net.tx(ALICE_SK, CallActor(actor, "refresh", sdk_codec.encode("rome")))])
    [(job1, _, _)] = _submitted(p)
    # the runner stays silent: the job times out, is re-selected up to max_retries, then fails
    for _ in range(2000):
        if net.job(job1).status == JobStatus.FAILED:
            break
        net.block([])
    assert net.job(job1).status == JobStatus.FAILED
    net.block([])  # the callback runs in the ExecuteMailbox after the failure
    assert _conts(net, actor) == []  # the unguarded await's failure frees the slot (SDK _chain_failure_ends)
    assert _state(net, actor, "page") is None
    assert net.chain.world().get(sdk_jobs.PREFIX + job1) is None


def test_reply_for_a_resumed_or_unknown_cid_is_dropped_with_an_event() -> None:
    net, actor = _net()
    p = net.block([net.tx(ALICE_SK, CallActor(actor, "refresh", sdk_codec.encode("lima")))])
    [(job1, cid, _)] = _submitted(p)
    # the continuation is gone before the reply (already resumed): the reply is dropped, not delivered
    world = net.chain.world()
    store.delete_state(world, actor, CONT + cid)
    reply = sdk_jobs.reply_for(world, encode({0: job1, 1: True, 2: b"x", 3: "verified", 4: "", 5: cid, 6: None}),
                               actor)
    assert reply is not None and reply.payload is None and reply.dropped is not None
    assert reply.dropped.topic == sdk_jobs.TOPIC_DROPPED
    # and only once: the record is consumed, a second callback for the same job is not an SDK reply
    again = sdk_jobs.reply_for(world, encode({0: job1, 1: True, 2: b"x", 3: "verified", 4: "", 5: cid, 6: None}),
                               actor)
    assert again is None


@pytest.mark.parametrize(("job_type", "code"), [("container", "runner_job_unsupported"),
                                                  ("teleport", "runner_job_unknown_type")])
def test_unsupported_and_unknown_job_types_are_refused_with_a_typed_error(job_type: str, code: str) -> None:
    src = WEATHER.replace("await runner.http(", f"await runner.{job_type}(")
    net, actor = _net(src)
    p = net.block([net.tx(ALICE_SK, CallActor(actor, "refresh", sdk_codec.encode("x")))])
    assert p.result.receipts[0].error_code == code
    assert _conts(net, actor) == []  # the failed leg's save_cont was reverted


_SEED_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from cowboy_sdk import codec
from cowboy_protocol.types.instructions import CallActor
from tests.helpers import ALICE_SK
from tests.unit.execution.actors.test_sdk_continuations import _net, _pending_sdk_jobs, _reveal
net, actor = _net()
net.block([net.tx(ALICE_SK, CallActor(actor, "refresh", codec.encode("paris")))])
[(job, _)] = _pending_sdk_jobs(net)
_reveal(net, job, b'{{"text": "sunny"}}')
[(job, _)] = _pending_sdk_jobs(net)
_reveal(net, job, b"ok")
print(net.chain.head.header.state_root.hex())
"""


def test_state_roots_do_not_depend_on_the_hash_seed() -> None:

    roots = {out.strip() for out in run_under_hash_seeds(_SEED_SCRIPT.format(root=str(ROOT)), ("0", "7"))}
    assert len(roots) == 1 and len(next(iter(roots))) == 64
