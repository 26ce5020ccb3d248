"""Mempool admission refuses a reveal (JobResultSubmit) of a multi-runner job whose reveal window is not open at
head + 1 (CIP-11 §10.3: "it MUST NOT submit an early reveal"; CIP-2 commit/reveal windows), so an early reveal
can be pooled neither through REST nor through the QUIC transport, where it would only fail in execution with
``reveal_window_not_open`` and cost the runner its fee."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cowboy_node.execution.jobs.job_record import JobRecord, JobStatus, job_key
from cowboy_node.node.node import Node
from cowboy_node.rpc.facade import RpcError
from cowboy_protocol.jobs.commitment import result_commitment
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit, JobSubmit
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.runner_instructions import RunnerRegister
from tests.helpers import ALICE_SK
from tests.unit.node_harness import JOB_EXAMPLE, RUNNER_SKS, RUNNERS, STAKE, Nonces, example_caps, make_node, produce


def _job(node: Node, job_id: bytes) -> JobRecord:
    raw = node.chain.world().get(job_key(job_id))
    assert raw is not None
    return JobRecord.decode(raw)


def _assigned_job(runners: int, n: Nonces) -> tuple[Node, bytes]:
    node = make_node(phase=2)
    caps, card = example_caps()
    produce(node, [n.tx(sk, RunnerRegister(STAKE, caps, card)) for sk in RUNNER_SKS])
    doc: dict[str, Any] = json.loads(JOB_EXAMPLE.read_text())
    doc.update(verification={"mode": "majority_vote" if runners > 1 else "none", "runners": runners,
                             "threshold": max(1, runners - 1)}, timeout_blocks=20)
    submit = n.tx(ALICE_SK, JobSubmit(parse_job_request_json(doc)))
    produce(node, [submit])
    job_id = derive_job_id(submit.tx_hash(), 0)
    for _ in range(10):
        if _job(node, job_id).status == JobStatus.ASSIGNED:
            break
        produce(node, [])
    assert _job(node, job_id).status == JobStatus.ASSIGNED
    return node, job_id


def test_reveal_before_the_window_is_refused_at_admission_then_accepted_once_open() -> None:
    n = Nonces()
    node, job_id = _assigned_job(3, n)
    sk, runner = RUNNER_SKS[0], RUNNERS[0]
    produce(node, [n.tx(sk, JobResultCommit(job_id, result_commitment(job_id, runner, b"A", b"salt")))])
    rec = _job(node, job_id)
    assert node.chain.height + 1 <= rec.commit_end  # the window opens after commit_end
    reveal = n.tx(sk, JobResultSubmit(job_id, b"A", b"salt", 0))
    pooled = len(node.mempool)
    with pytest.raises(RpcError) as e:
        node.api.submit_transaction(reveal.to_bytes())
    assert (e.value.status, e.value.code) == (400, "reveal_window_not_open")
    assert len(node.mempool) == pooled  # nothing pooled
    while node.chain.height + 1 <= rec.commit_end:
        produce(node, [])
    assert node.api.submit_transaction(reveal.to_bytes())["status"] == "pending"  # same bytes, now in the window


def test_reveal_without_an_included_commitment_is_refused_once_the_commit_phase_is_over() -> None:
    n = Nonces()
    node, job_id = _assigned_job(3, n)
    rec = _job(node, job_id)
    while node.chain.height + 1 <= rec.commit_end:
        produce(node, [])
    reveal = n.tx(RUNNER_SKS[1], JobResultSubmit(job_id, b"A", b"salt", 0))
    with pytest.raises(RpcError) as e:
        node.api.submit_transaction(reveal.to_bytes())
    assert e.value.code == "reveal_without_commit"


def test_single_runner_reveal_is_admitted_at_once() -> None:
    # M == 1: the runner MAY skip the commit (§10.3); there is no window to wait for.
    n = Nonces()
    node, job_id = _assigned_job(1, n)
    [runner] = _job(node, job_id).committee
    sk = RUNNER_SKS[RUNNERS.index(runner)]
    assert node.api.submit_transaction(n.tx(sk, JobResultSubmit(job_id, b"A", b"salt", 0)).to_bytes())["status"] == \
        "pending"
