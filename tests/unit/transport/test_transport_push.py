"""Push outcome classification (CIP-11 §10.6) and the result-frame transaction checks (§10.3)."""

from __future__ import annotations

import dataclasses

import pytest

from cowboy_node.transport.push import ACK_TIMEOUT_BLOCKS, Outcome, PushTracker
from cowboy_protocol.transport.enums import AckKind
from cowboy_protocol.transport.protocol_errors import RemoteProtocolError
from cowboy_protocol.transport.result_frames import check_result_tx
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit
from tests.helpers import ALICE, ALICE_SK, BOB, BOB_SK, make_tx

JOB = b"\x11" * 32
OTHER_JOB = b"\x22" * 32


def test_ack_timeout_default_is_15_blocks() -> None:
    assert ACK_TIMEOUT_BLOCKS == 15


@pytest.mark.parametrize(("kind", "outcome"), [(AckKind.ACCEPTED, Outcome.ACCEPTED),
                                               (AckKind.DUPLICATE, Outcome.DUPLICATE),
                                               (AckKind.REJECT, Outcome.SOFT_FAILURE)])
def test_ack_classifies_the_push(kind: AckKind, outcome: Outcome) -> None:
    t = PushTracker()
    t.pushed(JOB, 1)
    assert t.acked(JOB, 1, kind) is outcome


def test_accepted_then_forwarded_result_is_success() -> None:
    t = PushTracker()
    t.pushed(JOB, 1)
    t.acked(JOB, 1, AckKind.ACCEPTED)
    assert t.result_forwarded(JOB, 1) is Outcome.SUCCESS


def test_ack_timeout_makes_a_pending_push_a_hard_failure_but_never_reclassifies_an_answered_one() -> None:
    t = PushTracker()
    t.pushed(JOB, 1)
    t.pushed(OTHER_JOB, 2)
    t.acked(OTHER_JOB, 2, AckKind.REJECT)
    assert t.hard_failure(JOB, 1) is Outcome.HARD_FAILURE
    assert t.hard_failure(OTHER_JOB, 2) is Outcome.SOFT_FAILURE  # a framed response was received
    assert t.acked(JOB, 1, AckKind.ACCEPTED) is Outcome.HARD_FAILURE  # a late ack does not undo it


def test_forget_job_and_runner() -> None:
    t = PushTracker()
    t.pushed(JOB, 1)
    t.pushed(JOB, 2)
    t.pushed(OTHER_JOB, 2)
    assert {p.runner_index for p in t.for_job(JOB)} == {1, 2}
    t.forget_job(JOB)
    assert len(t) == 1
    assert [p.job_id for p in t.forget_runner(2)] == [OTHER_JOB]
    assert len(t) == 0


def _result_tx(sk: bytes = BOB_SK, job: bytes = JOB) -> bytes:
    return make_tx(sk, 0, JobResultSubmit(job, b'{"v":1}', b"", 0)).to_bytes()


def test_result_frame_with_the_runners_own_transaction_passes() -> None:
    tx = check_result_tx(_result_tx(), kind="result", job_id=JOB, runner_address=BOB)
    assert isinstance(tx.instruction, JobResultSubmit)
    commit = make_tx(BOB_SK, 0, JobResultCommit(JOB, b"\x44" * 32)).to_bytes()
    assert isinstance(check_result_tx(commit, kind="commit", job_id=JOB, runner_address=BOB).instruction,
                      JobResultCommit)


@pytest.mark.parametrize(("tx_bytes", "kind", "code"), [
    (b"\x00\x00\x00\x05abc", "result", "result_tx_malformed"),
    (_result_tx(ALICE_SK), "result", "result_tx_wrong_signer"),
    (_result_tx(job=OTHER_JOB), "result", "result_tx_wrong_job"),
    (_result_tx(), "commit", "result_tx_wrong_kind"),
    (make_tx(BOB_SK, 0, Transfer(ALICE, 1)).to_bytes(), "result", "result_tx_wrong_kind"),
])
def test_result_frame_is_refused_when_a_check_fails(tx_bytes: bytes, kind: str, code: str) -> None:
    with pytest.raises(RemoteProtocolError) as e:
        check_result_tx(tx_bytes, kind=kind, job_id=JOB, runner_address=BOB)  # type: ignore[arg-type]
    assert e.value.code == code


def test_result_frame_whose_sender_field_is_forged_is_refused() -> None:
    """A transaction claiming the runner as sender but signed by another key: the recovered signer decides."""
    forged = dataclasses.replace(make_tx(ALICE_SK, 0, JobResultSubmit(JOB, b"x", b"", 0)), sender=BOB)
    with pytest.raises(RemoteProtocolError) as e:
        check_result_tx(forged.to_bytes(), kind="result", job_id=JOB, runner_address=BOB)
    assert e.value.code == "result_tx_wrong_signer"
