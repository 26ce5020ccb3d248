"""RunnerSession rules that mutation testing (``make mutate-runner-session``, docs/testing.md) showed unguarded
(``cowboy_protocol/transport/runner_session.py``): a Mode A PresenceReceipt (§8.3) must be bound to the connection in
each of its four fields, whichever way a wrong value sorts, and a badly signed one is named as such; an unverifiable
assignment for a job in flight does not replace it (§10.1: Reject and carry on); the result frame's ``tx_bytes`` is
exactly ``u32_be(len(body)) ‖ body`` with a non-empty body (§10.3); a pong behind the last answered nonce is refused
(§6.3) and a pong's round trip is the time since its ping; a JobCancel names the assignment's own hash (§10.5)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cowboy_protocol.transport.enums import CancelReason, GoodbyeReason, RejectReason
from cowboy_protocol.transport.frames import (
    AckStatus,
    JobAck,
    JobCancel,
    JobResultCommit,
    PresenceReceiptFrame,
    PresenceReceiptRequest,
)
from cowboy_protocol.transport.preimages import make_assignment, presence_receipt_digest, sign_frame, validator_set_hash
from cowboy_protocol.transport.protocol_errors import LocalProtocolError
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.runner_session import RunnerSession
from cowboy_protocol.transport.session import (
    AckReceived,
    AssignmentReceived,
    AssignmentRejected,
    PongReceived,
    PresenceReceiptReceived,
    ResultFrame,
)
from cowboy_protocol.transport.validator_session import ValidatorSession
from tests.unit.protocol.test_transport_session_support import (
    ADMIT_OK,
    CB1,
    CHAIN,
    JOB_SPEC,
    OTHER_RUNNER,
    R_NONCE,
    RUNNER,
    V_NONCE,
    VALIDATOR,
    VSET,
    VSH,
    Pair,
    closed,
    deliver,
)

JOB = b"\xab" * 32
EPOCH_1 = 1
"""A connection bound to subset epoch 1, so that a receipt may name an epoch below it as well as above."""


def _connected(epoch: int = EPOCH_1) -> tuple[RunnerSession, ValidatorSession]:
    r = RunnerSession(chain_id=CHAIN, key=RUNNER, expected_validator=VALIDATOR.pubkey, validator_set=VSET,
                      subset_epoch=epoch, channel_binding=CB1, challenge_nonce=R_NONCE)
    v = ValidatorSession(chain_id=CHAIN, key=VALIDATOR, validator_set_hash=VSH, subset_epoch=epoch,
                         channel_binding=CB1, challenge_nonce=V_NONCE, admit=lambda _pk: ADMIT_OK,
                         height=lambda: 100, now=0.0)
    r.start(0.0, 100)
    deliver(v, r.take_outbound(), 0.0)
    deliver(r, v.take_outbound(), 0.0)
    deliver(v, r.take_outbound(), 0.0)
    assert r.context is not None and v.context is not None
    return r, v


def _receipt(r: RunnerSession, **changes: object) -> PresenceReceiptFrame:
    """A receipt for ``r``'s connection with ``changes``, validly signed by the connection's validator."""
    ctx = r.context
    assert ctx is not None
    f = replace(PresenceReceiptFrame(ctx.runner_pubkey, ctx.validator_pubkey, ctx.subset_epoch,
                                     ctx.validator_set_hash, 100, 0, True, b""), **changes)  # type: ignore[arg-type]
    digest = presence_receipt_digest(CHAIN, f.runner_pubkey, f.validator_pubkey, f.subset_epoch,
                                     f.validator_set_hash, f.block_height, f.nonce_echo, f.accepting_new)
    return replace(f, validator_signed=VALIDATOR.sign(digest))


def test_a_receipt_bound_to_the_connection_is_kept() -> None:
    r, _ = _connected()
    receipt = _receipt(r)
    assert deliver(r, [receipt], 1.0) == [PresenceReceiptReceived(receipt)]
    assert not r.closed


@pytest.mark.parametrize(("field", "value"), [
    ("runner_pubkey", OTHER_RUNNER.pubkey),
    ("validator_pubkey", PubKey.validator(b"\x00" * 32)),
    ("validator_pubkey", PubKey.validator(b"\xff" * 32)),
    ("subset_epoch", EPOCH_1 - 1),
    ("subset_epoch", EPOCH_1 + 1),
    ("validator_set_hash", b"\x00" * 32),
    ("validator_set_hash", b"\xff" * 32),
])
def test_a_receipt_not_bound_to_the_connection_is_auth_failed(field: str, value: object) -> None:
    # Signed by the connection's own validator, so only the binding clause can refuse it (§8.3: a receipt the chain
    # would not accept for this runner from this validator is misbehaviour).
    r, _ = _connected()
    assert getattr(r.context, field) != value
    c = closed(deliver(r, [_receipt(r, **{field: value})], 1.0))
    assert c.reason is GoodbyeReason.AUTH_FAILED and c.detail == "receipt_binding"


def test_an_unverifiable_assignment_for_a_job_in_flight_does_not_replace_it() -> None:
    # §10.1: an assignment that does not verify is answered Reject(UnverifiableAssignment); the job accepted on this
    # session under the genuine assignment is still the one the runner may send results for.
    p = Pair()
    p.handshake(0.0)
    good = make_assignment(CHAIN, VALIDATOR, JOB, JOB_SPEC, 100, 160, RUNNER.pubkey)
    p.v.push(good)
    assert p.v_to_r(1.0) == [AssignmentReceived(good)]
    p.r.ack(JOB, AckStatus.accepted())
    assert p.r_to_v(1.1) == [AckReceived(JOB, AckStatus.accepted())]
    forged = replace(good, deadline_block=999)  # its assignment_hash no longer matches
    assert deliver(p.r, [forged], 1.2) == [AssignmentRejected(JOB, "assignment_hash_mismatch")]
    (reject,) = p.r.take_outbound()
    assert isinstance(reject, JobAck) and reject.status == AckStatus.reject(RejectReason.UNVERIFIABLE_ASSIGNMENT)
    tx = bytes.fromhex("00000003a10000")
    p.r.send_commit(JOB, tx)  # still Accepted here
    assert p.r.take_outbound() == [JobResultCommit(JOB, tx)]


def test_result_tx_bytes_must_be_a_length_prefix_and_a_non_empty_body() -> None:
    p = Pair()
    p.handshake(0.0)
    p.v.push(make_assignment(CHAIN, VALIDATOR, JOB, JOB_SPEC, 100, 160, RUNNER.pubkey))
    p.v_to_r(1.0)
    p.r.ack(JOB, AckStatus.accepted())
    p.r_to_v(1.1)
    smallest = b"\x00\x00\x00\x01" + b"\xa0"  # a one-byte body (5 bytes in all) is enough
    p.r.send_result(JOB, smallest)
    assert p.r_to_v(1.2) == [ResultFrame(JOB, "result", smallest)]
    for bad in (b"\x00\x00\x00\x00",  # an empty body
                b"\x00\x00\x00\x01",  # a prefix promising a byte that is not there
                b"\x00\x00\x00\x01\xa0\x00",  # a body longer than its prefix
                b"\x00\x00\x00\x03\xa0\x00"):  # a body shorter than its prefix
        with pytest.raises(LocalProtocolError) as e:
            p.r.send_result(JOB, bad)
        assert e.value.code == "bad_tx_bytes"
        with pytest.raises(LocalProtocolError):
            p.r.send_commit(JOB, bad)
    assert p.r.take_outbound() == []  # nothing queued for any of them


def test_the_runner_offers_the_hash_of_its_snapshot() -> None:
    r, _ = _connected()
    assert r.validator_set_hash == validator_set_hash(VSET) == VSH


def _accepted_pair() -> Pair:
    p = Pair()
    p.handshake(0.0)
    p.v.push(make_assignment(CHAIN, VALIDATOR, JOB, JOB_SPEC, 100, 160, RUNNER.pubkey))
    p.v_to_r(1.0)
    p.r.ack(JOB, AckStatus.accepted())
    p.r_to_v(1.1)
    return p


def test_a_four_byte_body_is_a_valid_result_transaction() -> None:
    # The prefix is the body's length, whatever that length is (here 4, where len % 4 would be 0).
    p = _accepted_pair()
    tx = b"\x00\x00\x00\x04" + b"\xa1\x00\x00\x00"
    p.r.send_result(JOB, tx)
    assert p.r_to_v(1.2) == [ResultFrame(JOB, "result", tx)]


def test_the_pong_round_trip_is_the_time_since_its_ping() -> None:
    # Ping at 1.0, pong at 3.5: 2.5 s (times where the difference is not also a remainder, 3.5 % 1.0 = 0.5).
    p = Pair()
    p.handshake(0.0)
    nonce = p.r.ping(1.0, 101)
    p.r_to_v(1.0)
    assert p.v_to_r(3.5) == [PongReceived(nonce, 2.5, True, 100)]


def test_a_pong_older_than_the_last_answered_is_a_protocol_error() -> None:
    # Pongs 0 and 1 both crossed ping 1 in flight; 1 was answered first, so 0 is behind the last answered nonce.
    p = Pair()
    p.handshake(0.0)
    p.r.ping(1.0, 101)
    p.r.ping(2.0, 102)
    p.r_to_v(2.0)
    pong0, pong1 = p.v.take_outbound()
    assert [type(e) for e in deliver(p.r, [pong1], 2.5)] == [PongReceived]
    assert closed(deliver(p.r, [pong0], 2.6)).reason is GoodbyeReason.PROTOCOL_ERROR


def test_a_cancel_for_another_assignment_hash_is_refused_whichever_way_it_sorts() -> None:
    for forged in (b"\x00" * 32, b"\xff" * 32):
        p = _accepted_pair()
        assert p.r.context is not None
        cancel = sign_frame(p.r.context, VALIDATOR, JobCancel(JOB, forged, CancelReason.EXPIRED, b""))
        assert closed(deliver(p.r, [cancel], 2.0)).reason is GoodbyeReason.PROTOCOL_ERROR


def test_requesting_receipts_asks_for_them_by_default() -> None:
    p = Pair()
    p.handshake(0.0)
    p.r.request_presence_receipts()
    assert p.r.take_outbound() == [PresenceReceiptRequest(True)]


def test_a_receipt_with_a_bad_signature_is_named_as_such() -> None:
    # The binding holds, the signature does not: the refusal names the receipt's signature (AuthFailed).
    r, _ = _connected()
    bad = replace(_receipt(r), block_height=101)  # signed over height 100
    c = closed(deliver(r, [bad], 1.0))
    assert c.reason is GoodbyeReason.AUTH_FAILED and c.detail == "receipt_signature"
