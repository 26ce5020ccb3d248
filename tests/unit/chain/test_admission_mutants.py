"""Admission rules that mutation testing (``make mutate-admission``, docs/testing.md) showed unguarded.

The reveal-window pre-check (``chain/admission.py`` :func:`check_reveal_window`, CIP-11 §10.3: a reveal of a
multi-runner job MUST NOT be submitted before its window opens): the boundary block ``commit_end`` itself, the
cases it leaves to execution (a sender off the committee, an unknown job, a job no longer awaiting results), and the
job's M rather than the seats drawn. Then the affordability boundary (a balance exactly the maximum fee) and a
signature recovered elsewhere (``chain/signature_pool.py``) that must not be used for other bytes of the same length.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from cowboy_node.chain.admission import admit
from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.chain.signature_pool import Prepared
from cowboy_node.execution.jobs.job_record import JobRecord, JobStatus, job_key
from cowboy_node.execution.system_state import get_account
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.node.node import Node
from cowboy_node.rpc.facade import RpcError
from cowboy_node.state.memory import MemoryStore
from cowboy_protocol.jobs.commitment import result_commitment
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit, JobSubmit
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.runner_instructions import RunnerRegister
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validation_errors import ValidationError
from tests.helpers import ALICE, ALICE_SK, BOB, BOB_SK, transfer
from tests.unit.chain.test_admission_pool import _build
from tests.unit.node_harness import JOB_EXAMPLE, RUNNER_SKS, RUNNERS, STAKE, Nonces, example_caps, make_node, produce


def _job(node: Node, job_id: bytes) -> JobRecord:
    raw = node.chain.world().get(job_key(job_id))
    assert raw is not None
    return JobRecord.decode(raw)


def _assigned_job(m: int, n: Nonces, *, registered: int = 3) -> tuple[Node, bytes]:
    """A node whose job of M = ``m`` runners is ASSIGNED, with ``registered`` runners registered."""
    node = make_node(phase=2)
    caps, card = example_caps()
    produce(node, [n.tx(sk, RunnerRegister(STAKE, caps, card)) for sk in RUNNER_SKS[:registered]])
    doc: dict[str, Any] = json.loads(JOB_EXAMPLE.read_text())
    doc.update(verification={"mode": "majority_vote" if m > 1 else "none", "runners": m,
                             "threshold": m // 2 + 1}, timeout_blocks=20)  # a strict majority
    submit = n.tx(ALICE_SK, JobSubmit(parse_job_request_json(doc)))
    produce(node, [submit])
    job_id = derive_job_id(submit.tx_hash(), 0)
    for _ in range(10):
        if _job(node, job_id).status == JobStatus.ASSIGNED:
            break
        produce(node, [])
    assert _job(node, job_id).status == JobStatus.ASSIGNED
    return node, job_id


def _refused(node: Node, tx: Transaction) -> str:
    pooled = len(node.mempool)
    with pytest.raises(RpcError) as e:
        node.api.submit_transaction(tx.to_bytes())
    assert len(node.mempool) == pooled  # nothing pooled
    assert e.value.status == 400
    return e.value.code


def _included_error(node: Node, tx: Transaction) -> str | None:
    """Pool ``tx`` (admission must accept it), produce a block and return its receipt's error code."""
    [receipt] = produce(node, [tx])  # submit_transaction raises RpcError if admission refuses it
    return receipt.error_code  # type: ignore[no-any-return]


def test_a_reveal_for_the_block_commit_end_itself_is_refused_and_for_the_next_block_admitted() -> None:
    # The reveal phase is commit_end < h <= deadline: h == commit_end is still the commit phase.
    n = Nonces()
    node, job_id = _assigned_job(3, n)
    sk, runner = RUNNER_SKS[0], RUNNERS[0]
    produce(node, [n.tx(sk, JobResultCommit(job_id, result_commitment(job_id, runner, b"A", b"salt")))])
    rec = _job(node, job_id)
    assert node.chain.height + 1 < rec.commit_end  # room to stand on the boundary
    while node.chain.height + 1 < rec.commit_end:
        produce(node, [])
    assert node.chain.height + 1 == rec.commit_end
    reveal = n.tx(sk, JobResultSubmit(job_id, b"A", b"salt", 0))
    assert _refused(node, reveal) == "reveal_window_not_open"
    produce(node, [])
    assert node.chain.height + 1 == rec.commit_end + 1
    assert _included_error(node, reveal) is None  # the same bytes, admitted and executed in the window


def test_a_reveal_from_off_the_committee_is_left_to_execution_which_names_the_committee() -> None:
    # Admission only refuses what it can say about a committee member's timing; ALICE is not a runner: she gets
    # execution's own code, not a "wait for the window" that would never come true for her.
    n = Nonces()
    node, job_id = _assigned_job(3, n)
    rec = _job(node, job_id)
    assert ALICE not in rec.committee and node.chain.height + 1 <= rec.commit_end
    assert _included_error(node, n.tx(ALICE_SK, JobResultSubmit(job_id, b"A", b"salt", 0))) == "not_on_committee"


def test_a_reveal_of_an_unknown_job_is_left_to_execution() -> None:
    n = Nonces()
    node, _ = _assigned_job(3, n)
    unknown = bytes(32)
    assert _included_error(node, n.tx(RUNNER_SKS[0], JobResultSubmit(unknown, b"A", b"s", 0))) == "job_not_found"


def test_a_reveal_of_a_job_no_longer_awaiting_results_is_left_to_execution() -> None:
    n = Nonces()
    node, job_id = _assigned_job(1, n)
    [runner] = _job(node, job_id).committee
    sk = RUNNER_SKS[RUNNERS.index(runner)]
    assert _included_error(node, n.tx(sk, JobResultSubmit(job_id, b"A", b"salt", 0))) is None
    assert _job(node, job_id).status != JobStatus.ASSIGNED  # M == 1: the one reveal concluded it
    assert _included_error(node, n.tx(sk, JobResultSubmit(job_id, b"A", b"salt", 0))) == "job_not_assigned"


def test_an_under_filled_committee_of_a_multi_runner_job_still_waits_for_its_window() -> None:
    # M = 2 with one runner registered: one seat is drawn (§9.2 under-fill), but the job is still multi-runner and
    # execution refuses its early reveal (results.py: "the job's M, not the seats drawn"), so admission must too.
    n = Nonces()
    node, job_id = _assigned_job(2, n, registered=1)
    rec = _job(node, job_id)
    assert rec.committee == (RUNNERS[0],) and node.chain.height + 1 <= rec.commit_end
    assert _refused(node, n.tx(RUNNER_SKS[0], JobResultSubmit(job_id, b"A", b"salt", 0))) == \
        "reveal_window_not_open"


def _chain(dev: DevGenesis) -> Chain:
    return Chain(MemoryStore(), dev.genesis)


def test_a_balance_of_exactly_the_maximum_fee_is_enough(dev_genesis: DevGenesis) -> None:
    # Affordability is balance >= max_fee (CIP-2: the sender must cover the worst-case fee), not balance > max_fee.
    chain, pool = _chain(dev_genesis), Mempool(MempoolConfig())
    bob_tx = transfer(BOB_SK, 0, ALICE, 0)
    with pytest.raises(ValidationError) as e:
        admit(bob_tx.to_bytes(), chain, Mempool(MempoolConfig()))
    assert e.value.code == "insufficient_funds"  # BOB starts with nothing
    admit(transfer(ALICE_SK, 0, BOB, bob_tx.max_fee()).to_bytes(), chain, pool)
    _build(chain, dev_genesis, pool)
    assert get_account(chain.world(), BOB).balance == bob_tx.max_fee()
    assert admit(bob_tx.to_bytes(), chain, Mempool(MempoolConfig())).sender == BOB


def test_a_prepared_result_is_not_used_for_other_bytes_of_the_same_length(dev_genesis: DevGenesis) -> None:
    # ``low`` and ``high`` differ from the signed ``valid`` only in the amount (same encoded length) and carry its
    # signature, which is not ALICE's over them. A result prepared for ``valid`` must not vouch for either, whichever
    # way their bytes sort against its: they are decoded and recovered here and refused.
    valid = transfer(ALICE_SK, 0, BOB, 2)
    low, high = (replace(valid, instruction=Transfer(to=BOB, amount=a), _body=None) for a in (1, 3))
    assert low.body() < valid.body() < high.body()
    assert len(low.to_bytes()) == len(valid.to_bytes()) == len(high.to_bytes())
    for sent in (low, high):
        chain, pool = _chain(dev_genesis), Mempool(MempoolConfig())
        with pytest.raises(ValidationError) as e:
            admit(sent.to_bytes(), chain, pool, prepared=Prepared(valid, valid.tx_hash(), ALICE))
        assert e.value.code == "bad_signature" and len(pool) == 0


def test_a_length_prefix_of_an_empty_body_is_malformed(dev_genesis: DevGenesis) -> None:
    # Four bytes and no body: decoded here (nothing was prepared) and refused with the decoder's typed code.
    chain, pool = _chain(dev_genesis), Mempool(MempoolConfig())
    with pytest.raises(ValidationError) as e:
        admit(bytes(4), chain, pool)
    assert e.value.code == "malformed" and len(pool) == 0
