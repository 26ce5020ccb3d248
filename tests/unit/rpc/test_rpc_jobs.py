"""HTTP job endpoints and the poll fallback against a real in-process node (docs/api.md "Jobs").

Block 1 registers runner R0 (configs/examples/runner-capabilities.json); block 2 submits four copies of
configs/examples/job-http.json (A, B, D, E: M == 1, all assigned to R0, the only runner); block 3 has R0 reveal
A (JSON) and D (not JSON) and commit B, and registers R1 (no assignment). Routes: ``GET /job/{id}``,
``/job/{id}/status``, ``/job/{id}/results``, ``GET /runner/{address}/jobs``. A second node at CIP-11 phase 3
answers the poll with 410 ``poll_disabled``.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from cowboy_node.node.node import Node
from cowboy_node.rpc.server import build_app
from cowboy_node.types.receipt import STATUS_SUCCESS
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.jobs.commitment import result_commitment
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit, JobSubmit
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.runner_instructions import RunnerRegister
from tests.helpers import ALICE, ALICE_SK
from tests.unit.node_harness import (
    JOB_EXAMPLE,
    RUNNER_SKS,
    RUNNERS,
    STAKE,
    Nonces,
    example_caps,
    expect_error,
    expect_ok,
    make_node,
    produce,
    read_only_client,
)

R0 = RUNNERS[0]
R0_TEXT = to_checksum_address(R0)
NOBODY = b"\x42" * 32
JSON_RESULT = b'{"v": 1}'
RAW_RESULT = b"\xff\x00"


def _submit(n: Nonces, doc: dict[str, Any] | None = None) -> Any:
    return n.tx(ALICE_SK, JobSubmit(parse_job_request_json(doc or json.loads(JOB_EXAMPLE.read_text()))))


class Setup:
    """The node and the ids of its jobs."""

    def __init__(self) -> None:
        self.node = make_node(phase=2)
        n = Nonces()
        caps, card = example_caps()
        assert [r.status for r in produce(self.node, [n.tx(RUNNER_SKS[0], RunnerRegister(STAKE, caps, card))])] \
            == [STATUS_SUCCESS]
        submits = [_submit(n) for _ in range(4)]
        assert all(r.status == STATUS_SUCCESS for r in produce(self.node, submits))
        self.a, self.b, self.d, self.e = (derive_job_id(t.tx_hash(), 0) for t in submits)
        receipts = produce(self.node, [
            n.tx(RUNNER_SKS[0], JobResultSubmit(self.a, JSON_RESULT, b"", 0)),
            n.tx(RUNNER_SKS[0], JobResultSubmit(self.d, RAW_RESULT, b"", 0)),
            n.tx(RUNNER_SKS[0], JobResultCommit(self.b, result_commitment(self.b, R0, b"x", b"salt"))),
            n.tx(RUNNER_SKS[1], RunnerRegister(STAKE, caps, card)),  # registered after the jobs: none assigned
        ])
        assert [r.error_code for r in receipts] == [None, None, None, None]


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    s = Setup()
    yield s
    s.node.close()


@pytest.fixture
async def client(setup: Setup) -> AsyncIterator[TestClient[Any, Any]]:
    async with read_only_client(setup.node) as c:  # asserts on exit that no request changed the chain
        yield c




def _h(b: bytes) -> str:
    return "0x" + b.hex()


# -- GET /job/{id} ------------------------------------------------------------------------------------------
async def test_job_record_of_a_settled_job(client: TestClient[Any, Any], setup: Setup) -> None:
    doc = await expect_ok(await client.get(f"/job/{_h(setup.a)}"))
    spec, seed = doc.pop("spec"), doc.pop("seed")
    job_spec = doc.pop("job_spec")
    assert re.fullmatch(r"0x[0-9a-f]{64}", seed)
    # The example file, deadline = submitted_at + 100 (§10.1), commit phase 0.6 · 100 blocks; mode 0x00 (M == 1).
    assert doc == {
        "job_id": _h(setup.a), "status": "completed", "job_spec_hash": _h(keccak256(bytes.fromhex(job_spec[2:]))),
        "mode_byte": 0, "committee": [R0_TEXT], "attempt": 0, "excluded": [], "assignment_height": 2,
        "deadline_block": 102, "commit_end": 62, "commits": [],
        "reveals": [{"runner": R0_TEXT, "result": "0x7b2276223a20317d", "units": 0}],
        "escrow": "1000000", "payer": to_checksum_address(ALICE), "outcome": "0x7b2276223a20317d",
        "reason": "verified", "finished_at": 3, "height": 3,
    }
    assert spec["job_id"] == _h(setup.a) and spec["job_spec_hash"] == doc["job_spec_hash"]
    assert (spec["submitter"], spec["submitted_at"]) == (to_checksum_address(ALICE), 2)
    example = json.loads(JOB_EXAMPLE.read_text())
    assert {k: spec["job_type"][k] for k in example["job_type"]} == example["job_type"]
    assert (spec["max_price"], spec["tip"], spec["timeout_blocks"]) == ("1000000", "0", 100)
    assert spec["verification"]["mode"] == "none" and spec["verification"]["runners"] == 1


@pytest.mark.parametrize("text", ["0x1234", "zz", "0x" + "0" * 65, "0x" + "g" * 64, "1" * 63])
@pytest.mark.parametrize("suffix", ["", "/status", "/results"])
async def test_bad_job_id_is_400_invalid_job_id(client: TestClient[Any, Any], text: str, suffix: str) -> None:
    await expect_error(await client.get(f"/job/{text}{suffix}"), 400, "invalid_job_id")


@pytest.mark.parametrize("suffix", ["", "/status", "/results"])
async def test_unknown_job_is_404_job_not_found(client: TestClient[Any, Any], suffix: str) -> None:
    await expect_error(await client.get(f"/job/{_h(NOBODY)}{suffix}"), 404, "job_not_found")


async def test_job_id_without_prefix_and_in_upper_case(client: TestClient[Any, Any], setup: Setup) -> None:
    doc = await expect_ok(await client.get(f"/job/{setup.a.hex().upper()}/status"))
    assert doc["job_id"] == _h(setup.a)


# -- GET /job/{id}/status -----------------------------------------------------------------------------------
async def test_status_of_a_committed_live_job(client: TestClient[Any, Any], setup: Setup) -> None:
    doc = await expect_ok(await client.get(f"/job/{_h(setup.b)}/status"))
    assert doc == {"job_id": _h(setup.b), "status": "assigned", "attempt": 0, "committee": [R0_TEXT],
                   "assignment_height": 2, "commit_end": 62, "deadline_block": 102, "committed": [R0_TEXT],
                   "revealed": [], "reason": "", "finished_at": 0, "height": 3}


# -- GET /job/{id}/results ----------------------------------------------------------------------------------
async def test_results_of_a_json_result(client: TestClient[Any, Any], setup: Setup) -> None:
    doc = await expect_ok(await client.get(f"/job/{_h(setup.a)}/results"))
    result = {"result": "0x7b2276223a20317d", "is_json": True, "result_json": {"v": 1}}
    assert doc == {"job_id": _h(setup.a), "status": "completed", "attempt": 0,
                   "reveals": [{"runner": R0_TEXT, "units": 0, **result}],
                   "outcome": {"ok": True, "reason": "verified", **result}, "finished_at": 3, "height": 3}


async def test_results_of_bytes_that_are_not_json(client: TestClient[Any, Any], setup: Setup) -> None:
    doc = await expect_ok(await client.get(f"/job/{_h(setup.d)}/results"))
    result = {"result": "0xff00", "is_json": False, "result_json": None}
    assert doc["reveals"] == [{"runner": R0_TEXT, "units": 0, **result}]
    assert doc["outcome"] == {"ok": True, "reason": "verified", **result}


async def test_results_of_a_live_job_have_no_outcome(client: TestClient[Any, Any], setup: Setup) -> None:
    doc = await expect_ok(await client.get(f"/job/{_h(setup.b)}/results"))
    assert (doc["status"], doc["reveals"], doc["outcome"], doc["finished_at"]) == ("assigned", [], None, 0)


# -- GET /runner/{address}/jobs (poll fallback) -------------------------------------------------------------
def _assignment(job_id: bytes, committed: bool) -> dict[str, Any]:
    return {"job_id": _h(job_id), "assignment_height": 2, "deadline_block": 102, "commit_end": 62, "attempt": 0,
            "committee_size": 1, "committed": committed, "revealed": False}


async def test_poll_lists_the_runners_live_assignments_in_job_id_order(client: TestClient[Any, Any],
                                                                      setup: Setup) -> None:
    doc = await expect_ok(await client.get(f"/runner/{R0_TEXT}/jobs"))
    live = sorted([setup.b, setup.e])  # A and D settled: their index entries are gone
    jobs = doc.pop("jobs")
    assert doc == {"runner": R0_TEXT, "height": 3, "truncated": False, "next_after": None}
    assert [j["job_id"] for j in jobs] == [_h(j) for j in live]
    for j, job_id in zip(jobs, live, strict=True):
        raw = bytes.fromhex(j.pop("job_spec")[2:])
        spec = j.pop("spec")
        assert j.pop("job_spec_hash") == _h(keccak256(raw)) == spec["job_spec_hash"]
        assert spec["job_id"] == _h(job_id) and spec["job_type"]["url"] == "https://example.com/data.json"
        assert j == _assignment(job_id, committed=job_id == setup.b)


async def test_poll_pages_with_limit_and_after(client: TestClient[Any, Any], setup: Setup) -> None:
    first, second = sorted([setup.b, setup.e])
    page = await expect_ok(await client.get(f"/runner/{R0_TEXT}/jobs?limit=1"))
    assert [j["job_id"] for j in page["jobs"]] == [_h(first)]
    assert (page["truncated"], page["next_after"]) == (True, _h(first))
    page = await expect_ok(await client.get(f"/runner/{R0_TEXT}/jobs?limit=1&after={page['next_after']}"))
    assert [j["job_id"] for j in page["jobs"]] == [_h(second)]
    assert (page["truncated"], page["next_after"]) == (False, None)
    page = await expect_ok(await client.get(f"/runner/{R0_TEXT}/jobs?after={_h(second)}"))
    assert page["jobs"] == [] and page["truncated"] is False


async def test_poll_of_a_runner_with_no_assignment_is_empty(client: TestClient[Any, Any]) -> None:
    doc = await expect_ok(await client.get(f"/runner/{to_checksum_address(RUNNERS[1])}/jobs"))
    assert doc == {"runner": to_checksum_address(RUNNERS[1]), "height": 3, "jobs": [], "truncated": False,
                   "next_after": None}


async def test_poll_of_an_unregistered_address_is_404_runner_not_found(client: TestClient[Any, Any]) -> None:
    await expect_error(await client.get(f"/runner/{to_checksum_address(RUNNERS[2])}/jobs"), 404, "runner_not_found")


@pytest.mark.parametrize("query,code", [("limit=0", "invalid_limit"), ("limit=1001", "invalid_limit"),
                                        ("after=zz", "invalid_job_id"), ("after=0x12", "invalid_job_id")])
async def test_poll_query_errors(client: TestClient[Any, Any], query: str, code: str) -> None:
    await expect_error(await client.get(f"/runner/{R0_TEXT}/jobs?{query}"), 400, code)


async def test_poll_with_a_bad_address_is_400(client: TestClient[Any, Any]) -> None:
    await expect_error(await client.get("/runner/0x1234/jobs"), 400, "invalid_address")


async def test_a_facade_without_the_job_methods_answers_501() -> None:
    c: TestClient[Any, Any] = TestClient(TestServer(build_app(object())))  # type: ignore[arg-type]
    await c.start_server()
    try:
        for path in (f"/job/{_h(NOBODY)}", f"/job/{_h(NOBODY)}/status", f"/job/{_h(NOBODY)}/results",
                     f"/runner/{R0_TEXT}/jobs"):
            await expect_error(await c.get(path), 501, "not_implemented")
    finally:
        await c.close()


# -- phase 3: CIP11_POLL_DISABLED --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def phase3() -> Iterator[tuple[Node, bytes]]:
    node = make_node(phase=3)
    n = Nonces()
    caps, card = example_caps()
    produce(node, [n.tx(sk, RunnerRegister(STAKE, caps, card)) for sk in RUNNER_SKS[:2]])
    doc = json.loads(JOB_EXAMPLE.read_text())
    doc["verification"] = {"mode": "majority_vote", "runners": 2, "threshold": 2}
    submit = _submit(n, doc)
    assert [r.error_code for r in produce(node, [submit])] == [None]
    yield node, derive_job_id(submit.tx_hash(), 0)
    node.close()


async def test_poll_answers_410_gone_when_the_flag_is_set(phase3: tuple[Node, bytes]) -> None:
    node, _ = phase3
    c: TestClient[Any, Any] = TestClient(TestServer(build_app(node.api)))
    await c.start_server()
    try:
        for runner in (R0_TEXT, to_checksum_address(b"\x42" * 20)):
            await expect_error(await c.get(f"/runner/{runner}/jobs"), 410, "poll_disabled")
    finally:
        await c.close()


async def test_job_waiting_for_its_seed_is_pending_selection(phase3: tuple[Node, bytes]) -> None:
    node, job_id = phase3
    c: TestClient[Any, Any] = TestClient(TestServer(build_app(node.api)))
    await c.start_server()
    try:
        doc = await expect_ok(await c.get(f"/job/{_h(job_id)}/status"))
    finally:
        await c.close()
    assert (doc["status"], doc["committee"], doc["assignment_height"], doc["deadline_block"]) == \
        ("pending_selection", [], 0, 0)
