"""RunnerSession rules that mutation testing (``make mutate-runner-session``, docs/testing.md) showed unguarded
(``cowboy_protocol/transport/runner_session.py``): a Mode A PresenceReceipt (§8.3) must be bound to the connection in
each of its four fields, whichever way a wrong value sorts; an unverifiable assignment for a job already in flight
does not replace it (§10.1: Reject and carry on); the result frame's ``tx_bytes`` must be exactly
``u32_be(len(body)) ‖ body`` with a non-empty body (§10.3); the snapshot's validator_set_hash is exposed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cowboy_protocol.transport.enums import GoodbyeReason, RejectReason
from cowboy_protocol.transport.errors import LocalProtocolError
from cowboy_protocol.transport.frames import AckStatus, JobAck, JobResultCommit, PresenceReceiptFrame
from cowboy_protocol.transport.preimages import make_assignment, presence_receipt_digest, validator_set_hash
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.runner_session import RunnerSession
from cowboy_protocol.transport.session import (
    AckReceived,
    AssignmentReceived,
    AssignmentRejected,
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
