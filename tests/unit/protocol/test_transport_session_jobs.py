"""CIP-11 §10.1–§10.6 on a session pair: push, verification, acks, result frames, cancellation, ack timeout."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cowboy_protocol.transport.enums import AckKind, CancelReason, GoodbyeReason, RejectReason, Role
from cowboy_protocol.transport.frames import (
    AckStatus,
    JobAck,
    JobAssignment,
    JobCancel,
    JobProgress,
    JobResult,
    JobResultCommit,
)
from cowboy_protocol.transport.preimages import (
    ConnectionContext,
    ack_digest,
    cancel_digest,
    make_assignment,
    sign_frame,
    verify_signature,
)
from cowboy_protocol.transport.protocol_errors import LocalProtocolError
from cowboy_protocol.transport.session import (
    AckReceived,
    AckTimedOut,
    AssignmentReceived,
    AssignmentRejected,
    CancelReceived,
    ProgressReceived,
    ResultDropped,
    ResultFrame,
)
from tests.unit.protocol.test_transport_session_support import (
    CHAIN,
    JOB_SPEC,
    OTHER_RUNNER,
    OTHER_VALIDATOR,
    OUTSIDER_VALIDATOR,
    RUNNER,
    TX,
    VALIDATOR,
    Pair,
    closed,
    deliver,
)

JOB = b"\xab" * 32
JOB2 = b"\xac" * 32
TX2 = bytes.fromhex("00000003a10001")


def _pair(**kw: object) -> Pair:
    p = Pair(**kw)  # type: ignore[arg-type]
    p.handshake(0.0)
    return p


def _ctx(p: Pair) -> ConnectionContext:
    assert p.r.context is not None
    return p.r.context


def _assignment(job: bytes = JOB, deadline: int = 160) -> JobAssignment:
    return make_assignment(CHAIN, VALIDATOR, job, JOB_SPEC, 100, deadline, RUNNER.pubkey)


def _pushed(p: Pair, job: bytes = JOB) -> JobAssignment:
    a = _assignment(job)
    p.v.push(a)
    assert p.v_to_r(1.0) == [AssignmentReceived(a)]
    return a


def _accepted(p: Pair, job: bytes = JOB) -> JobAssignment:
    a = _pushed(p, job)
    p.r.ack(job, AckStatus.accepted())
    assert p.r_to_v(1.1) == [AckReceived(job, AckStatus.accepted())]
    return a


@pytest.mark.parametrize("status", [AckStatus.accepted(), AckStatus.duplicate(),
                                    AckStatus.reject(RejectReason.AT_CAPACITY, "busy"),
                                    AckStatus.reject(RejectReason.DRAINING)], ids=lambda s: s.kind.name)
def test_push_is_verified_by_the_runner_and_its_signed_ack_reaches_the_validator(status: AckStatus) -> None:
    p = _pair()
    a = _pushed(p)
    p.r.ack(JOB, status)
    (ack,) = p.r.take_outbound()
    assert isinstance(ack, JobAck) and ack.assignment_hash == a.assignment_hash
    verify_signature(Role.RUNNER, RUNNER.pubkey, ack_digest(_ctx(p), JOB, a.assignment_hash, status), ack.signed)
    assert deliver(p.v, [ack], 1.1) == [AckReceived(JOB, status)]


def test_ack_for_an_unknown_job_is_a_protocol_error() -> None:
    p = _pair()
    ack = sign_frame(_ctx(p), RUNNER, JobAck(JOB, b"\xef" * 32, AckStatus.accepted(), b""))
    assert closed(deliver(p.v, [ack], 1.0)).reason is GoodbyeReason.PROTOCOL_ERROR


def test_ack_with_another_assignment_hash_or_a_second_ack_is_a_protocol_error() -> None:
    p = _pair()
    _pushed(p)
    ack = sign_frame(_ctx(p), RUNNER, JobAck(JOB, b"\xef" * 32, AckStatus.accepted(), b""))
    assert closed(deliver(p.v, [ack], 1.1)).reason is GoodbyeReason.PROTOCOL_ERROR
    p = _pair()
    a = _accepted(p)
    again = sign_frame(_ctx(p), RUNNER, JobAck(JOB, a.assignment_hash, AckStatus.duplicate(), b""))
    assert closed(deliver(p.v, [again], 1.2)).reason is GoodbyeReason.PROTOCOL_ERROR


def test_ack_with_a_bad_signature_is_auth_failed() -> None:
    p = _pair()
    a = _pushed(p)
    forged = JobAck(JOB, a.assignment_hash, AckStatus.accepted(),
                    OTHER_RUNNER.sign(ack_digest(_ctx(p), JOB, a.assignment_hash, AckStatus.accepted())))
    assert closed(deliver(p.v, [forged], 1.1)).reason is GoodbyeReason.AUTH_FAILED
    p = _pair()
    a = _pushed(p)
    p.r.ack(JOB, AckStatus.reject(RejectReason.AT_CAPACITY))
    (ack,) = p.r.take_outbound()
    flipped = replace(ack, status=AckStatus.accepted())  # the status is signed
    assert closed(deliver(p.v, [flipped], 1.1)).reason is GoodbyeReason.AUTH_FAILED


def test_result_frames_on_the_accepted_job_are_passed_through_undecoded() -> None:
    p = _pair()
    _accepted(p)
    p.r.send_progress(JOB, 500, "half")
    p.r.send_commit(JOB, TX)
    p.r.send_result(JOB, TX2)
    assert p.r_to_v(2.0) == [ProgressReceived(JOB, 500, "half"), ResultFrame(JOB, "commit", TX),
                             ResultFrame(JOB, "result", TX2)]


@pytest.mark.parametrize("frame", [JobResultCommit(JOB, TX), JobResult(JOB, TX), JobProgress(JOB, 1, None)],
                         ids=lambda f: type(f).__name__)
@pytest.mark.parametrize("situation", ["awaiting ack", "other job", "duplicate", "rejected", "never pushed"])
def test_result_frames_for_a_job_not_acked_accepted_on_this_session_are_protocol_errors(
        frame: object, situation: str) -> None:
    p = _pair()
    if situation == "awaiting ack":
        _pushed(p)
    elif situation == "other job":
        _accepted(p, JOB2)
    elif situation in ("duplicate", "rejected"):
        _pushed(p)
        p.r.ack(JOB, AckStatus.duplicate() if situation == "duplicate" else AckStatus.reject(RejectReason.INTERNAL))
        assert len(p.r_to_v(1.1)) == 1
    events = deliver(p.v, [frame], 2.0)  # type: ignore[list-item]
    assert closed(events).reason is GoodbyeReason.PROTOCOL_ERROR
    assert not any(isinstance(e, ResultFrame) for e in events)


def test_runner_may_send_results_only_on_a_job_it_acked_accepted() -> None:
    p = _pair()
    _pushed(p)
    with pytest.raises(LocalProtocolError):
        p.r.send_commit(JOB, TX)  # not acked yet
    p.r.ack(JOB, AckStatus.duplicate())
    with pytest.raises(LocalProtocolError):
        p.r.send_result(JOB, TX)  # Duplicate stream: MUST NOT send result frames (§10.1)
    with pytest.raises(LocalProtocolError):
        p.r.send_result(JOB2, TX)  # never assigned
    with pytest.raises(LocalProtocolError):
        p.r.ack(JOB, AckStatus.accepted())  # already acked
    p2 = _pair()
    _accepted(p2)
    with pytest.raises(LocalProtocolError):
        p2.r.send_commit(JOB, b"\x00\x00\x00\x05ab")  # length prefix does not match


def _forgeries() -> list[tuple[str, JobAssignment, str]]:
    good = _assignment()
    other_chain = make_assignment("other-chain", VALIDATOR, JOB, JOB_SPEC, 100, 160, RUNNER.pubkey)
    return [
        ("assignment_hash altered", replace(good, assignment_hash=b"\x01" * 32), "assignment_hash_mismatch"),
        ("deadline altered", replace(good, deadline_block=161), "assignment_hash_mismatch"),
        ("job_spec altered", replace(good, job_spec=b"\xa1\x00\x02"), "job_spec_hash_mismatch"),
        ("other chain_id", other_chain, "assignment_hash_mismatch"),
        ("for another runner", make_assignment(CHAIN, VALIDATOR, JOB, JOB_SPEC, 100, 160, OTHER_RUNNER.pubkey),
         "not_our_assignment"),
        ("from another snapshot validator",
         make_assignment(CHAIN, OTHER_VALIDATOR, JOB, JOB_SPEC, 100, 160, RUNNER.pubkey), "unknown_validator"),
        ("from a validator outside the snapshot",
         make_assignment(CHAIN, OUTSIDER_VALIDATOR, JOB, JOB_SPEC, 100, 160, RUNNER.pubkey), "unknown_validator"),
        ("signature by another key", replace(good, validator_signed=OTHER_VALIDATOR.sign(good.assignment_hash)),
         "bad_signature"),
    ]


@pytest.mark.parametrize(("name", "forged", "code"), _forgeries(), ids=[f[0] for f in _forgeries()])
def test_forged_assignment_is_rejected_unverifiable_without_closing(name: str, forged: JobAssignment,
                                                                     code: str) -> None:
    p = _pair()
    events = deliver(p.r, [forged], 1.0)
    assert events == [AssignmentRejected(forged.job_id, code)]
    assert not p.r.closed
    (ack,) = p.r.take_outbound()
    assert isinstance(ack, JobAck)
    assert ack.status == AckStatus(AckKind.REJECT, RejectReason.UNVERIFIABLE_ASSIGNMENT)
    assert ack.assignment_hash == forged.assignment_hash
    verify_signature(Role.RUNNER, RUNNER.pubkey, ack_digest(_ctx(p), JOB, forged.assignment_hash, ack.status),
                     ack.signed)
    with pytest.raises(LocalProtocolError):
        p.r.ack(JOB, AckStatus.accepted())  # nothing to accept


def test_validator_learns_of_an_unverifiable_push_through_the_reject_ack() -> None:
    p = _pair()
    bad = replace(_assignment(), deadline_block=999)  # hash no longer matches; pubkeys still this connection's
    p.v.push(bad)
    assert p.v_to_r(1.0) == [AssignmentRejected(JOB, "assignment_hash_mismatch")]
    reject = AckStatus.reject(RejectReason.UNVERIFIABLE_ASSIGNMENT)
    assert p.r_to_v(1.1) == [AckReceived(JOB, reject)]


def test_push_is_refused_locally_for_another_connection_or_a_job_in_flight() -> None:
    p = _pair()
    with pytest.raises(LocalProtocolError):
        p.v.push(make_assignment(CHAIN, VALIDATOR, JOB, JOB_SPEC, 100, 160, OTHER_RUNNER.pubkey))
    with pytest.raises(LocalProtocolError):
        p.v.push(make_assignment(CHAIN, OTHER_VALIDATOR, JOB, JOB_SPEC, 100, 160, RUNNER.pubkey))
    _pushed(p)
    with pytest.raises(LocalProtocolError):
        p.v.push(_assignment(deadline=170))


def test_runner_closes_on_a_second_assignment_for_a_job_in_flight() -> None:
    p = _pair()
    _pushed(p)
    events = deliver(p.r, [_assignment(deadline=170)], 1.0)
    assert closed(events).reason is GoodbyeReason.PROTOCOL_ERROR


def test_cancel_is_signed_verified_and_stops_new_result_frames() -> None:
    p = _pair()
    a = _accepted(p)
    assert p.v.cancel(JOB, CancelReason.RESELECTED) is True
    (cancel,) = p.v.take_outbound()
    assert isinstance(cancel, JobCancel) and cancel.assignment_hash == a.assignment_hash
    verify_signature(Role.VALIDATOR, VALIDATOR.pubkey,
                     cancel_digest(_ctx(p), JOB, a.assignment_hash, CancelReason.RESELECTED), cancel.signed)
    assert deliver(p.r, [cancel], 2.0) == [CancelReceived(JOB, CancelReason.RESELECTED)]
    with pytest.raises(LocalProtocolError):
        p.r.send_commit(JOB, TX)  # §10.5: no new result frames without a prior commitment
    with pytest.raises(LocalProtocolError):
        p.r.send_result(JOB, TX)
    assert p.v.cancel(JOB, CancelReason.RESELECTED) is False  # already cancelled


def test_after_cancel_a_committed_runner_still_reveals_and_the_validator_forwards_only_that() -> None:
    p = _pair()
    _accepted(p)
    p.r.send_commit(JOB, TX)
    assert p.r_to_v(1.5) == [ResultFrame(JOB, "commit", TX)]
    p.v.cancel(JOB, CancelReason.RESELECTED)
    assert p.v_to_r(2.0) == [CancelReceived(JOB, CancelReason.RESELECTED)]
    p.r.send_result(JOB, TX2)  # the reveal obligation survives the cancel (§10.5)
    assert p.r_to_v(2.5) == [ResultFrame(JOB, "result", TX2)]
    # a commit that crossed the cancel is dropped, not an error
    p2 = _pair()
    _accepted(p2)
    p2.v.cancel(JOB, CancelReason.JOB_SETTLED)
    p2.r.send_commit(JOB, TX)
    assert p2.r_to_v(2.0) == [ResultDropped(JOB, "commit")]
    p2.r.send_result(JOB, TX2)
    assert p2.r_to_v(2.1) == [ResultDropped(JOB, "result")]
    assert not p2.v.closed


def test_cancel_with_a_bad_signature_is_auth_failed() -> None:
    p = _pair()
    a = _accepted(p)
    forged = JobCancel(JOB, a.assignment_hash, CancelReason.EXPIRED,
                       OTHER_VALIDATOR.sign(cancel_digest(_ctx(p), JOB, a.assignment_hash, CancelReason.EXPIRED)))
    assert closed(deliver(p.r, [forged], 2.0)).reason is GoodbyeReason.AUTH_FAILED


def test_cancel_for_an_unknown_job_or_another_assignment_is_a_protocol_error() -> None:
    p = _pair()
    unknown = sign_frame(_ctx(p), VALIDATOR, JobCancel(JOB, b"\x01" * 32, CancelReason.EXPIRED, b""))
    assert closed(deliver(p.r, [unknown], 2.0)).reason is GoodbyeReason.PROTOCOL_ERROR
    p = _pair()
    _accepted(p)
    mismatch = sign_frame(_ctx(p), VALIDATOR, JobCancel(JOB, b"\x01" * 32, CancelReason.EXPIRED, b""))
    assert closed(deliver(p.r, [mismatch], 2.0)).reason is GoodbyeReason.PROTOCOL_ERROR


def test_cancel_crossing_a_reject_is_ignored_by_the_runner() -> None:
    p = _pair()
    a = _assignment()
    p.v.push(a)
    p.v.cancel(JOB, CancelReason.RESELECTED)  # cancelled before any ack arrived
    assert p.v_to_r(1.0) == [AssignmentReceived(a), CancelReceived(JOB, CancelReason.RESELECTED)]
    p.r.ack(JOB, AckStatus.reject(RejectReason.DRAINING))
    assert p.r_to_v(1.1) == [AckReceived(JOB, AckStatus.reject(RejectReason.DRAINING))]
    p2 = _pair()
    _pushed(p2)
    p2.r.ack(JOB, AckStatus.duplicate())
    p2.v.cancel(JOB, CancelReason.RESELECTED)  # the validator has not seen the Duplicate yet
    assert p2.v_to_r(1.2) == []
    assert not p2.r.closed
    with pytest.raises(LocalProtocolError):
        p2.v.cancel(JOB2, CancelReason.RESELECTED)  # never pushed here


def test_no_ack_within_ack_timeout_blocks_is_reported_once() -> None:
    p = _pair(validator_kw={"ack_timeout_blocks": 15})
    p.height[0] = 200
    p.v.push(_assignment())
    assert p.v.tick(1.0, 214) == []
    assert p.v.tick(2.0, 215) == [AckTimedOut(JOB)]
    assert p.v.tick(3.0, 216) == []
    p2 = _pair()
    p2.height[0] = 200
    _accepted(p2)
    assert p2.v.tick(1.0, 300) == []  # acked: no HardFailure


def test_forget_releases_a_job_and_a_later_push_of_the_same_job_id_is_allowed() -> None:
    p = _pair()
    _accepted(p)
    p.v.forget(JOB)
    p.r.forget(JOB)
    _pushed(p)
