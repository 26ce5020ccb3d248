"""ValidatorSession rules that mutation testing (``make mutate-validator-session``, docs/testing.md) showed unguarded
(``cowboy_protocol/transport/validator_session.py``): the §13 ACK_TIMEOUT_BLOCKS default, the bound of its governed
value, and its firing when the head jumped past the block; a JobAck whose assignment hash differs in either direction;
the idle timeout of an authenticated session with no job, ticked after (not only at) its deadline; the §5.3 paired
admission binding the connection to the offered pair, and the admission verdict kept; an admission refusal naming
only an admission reason; after a cancel, a second commitment or a result without a commitment dropped (§10.5)."""

from __future__ import annotations

import pytest

from cowboy_protocol.transport.enums import CancelReason, GoodbyeReason
from cowboy_protocol.transport.frames import AckStatus, Hello, HelloAck, JobAck, JobResult, JobResultCommit
from cowboy_protocol.transport.preimages import make_assignment, sign_frame, validator_set_hash
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.runner_session import RunnerSession
from cowboy_protocol.transport.session import AckReceived, AckTimedOut, Authenticated, ResultDropped, ResultFrame
from cowboy_protocol.transport.validator_session import DEFAULT_ACK_TIMEOUT_BLOCKS, Admission
from tests.unit.protocol.test_transport_session_support import (
    ADDRESS,
    CB1,
    CHAIN,
    JOB_SPEC,
    OTHER_VALIDATOR,
    R_NONCE,
    RUNNER,
    RUNNER_INDEX,
    TX,
    VALIDATOR,
    Pair,
    closed,
    deliver,
    make_validator,
)

JOB = b"\xab" * 32


def _pair(**kw: object) -> Pair:
    p = Pair(**kw)  # type: ignore[arg-type]
    p.handshake(0.0)
    return p


def _accepted(p: Pair) -> None:
    p.v.push(make_assignment(CHAIN, VALIDATOR, JOB, JOB_SPEC, 100, 160, RUNNER.pubkey))
    p.v_to_r(1.0)
    p.r.ack(JOB, AckStatus.accepted())
    assert p.r_to_v(1.1) == [AckReceived(JOB, AckStatus.accepted())]


def test_the_default_ack_timeout_is_fifteen_blocks() -> None:
    # CIP-11 §13: "ACK_TIMEOUT_BLOCKS (default 15)"; a session built without the governed value uses it.
    assert DEFAULT_ACK_TIMEOUT_BLOCKS == 15
    p = _pair()
    assert p.v.ack_timeout_blocks == 15
    p.height[0] = 200
    p.v.push(make_assignment(CHAIN, VALIDATOR, JOB, JOB_SPEC, 100, 260, RUNNER.pubkey))
    assert p.v.tick(1.0, 214) == []
    assert p.v.tick(1.0, 215) == [AckTimedOut(JOB)]


def test_a_governed_ack_timeout_must_be_at_least_one_block() -> None:
    p = _pair()
    for bad in (0, -1):
        with pytest.raises(ValueError):
            p.v.ack_timeout_blocks = bad
        assert p.v.ack_timeout_blocks == 15  # unchanged
    for good in (1, 2, 40):
        p.v.ack_timeout_blocks = good
        assert p.v.ack_timeout_blocks == good


@pytest.mark.parametrize("forged_hash", [bytes(32), b"\xff" * 32], ids=["below", "above"])
def test_an_ack_for_another_assignment_hash_is_refused_whichever_way_it_sorts(forged_hash: bytes) -> None:
    p = _pair()
    a = make_assignment(CHAIN, VALIDATOR, JOB, JOB_SPEC, 100, 160, RUNNER.pubkey)
    p.v.push(a)
    p.v_to_r(1.0)
    assert bytes(32) < a.assignment_hash < b"\xff" * 32
    assert p.r.context is not None
    ack = sign_frame(p.r.context, RUNNER, JobAck(JOB, forged_hash, AckStatus.accepted(), b""))
    assert closed(deliver(p.v, [ack], 1.1)).reason is GoodbyeReason.PROTOCOL_ERROR


def test_an_authenticated_session_without_jobs_times_out_when_ticked_well_after_its_deadline() -> None:
    # Ticks are not exact: the first one after a quiet spell may come long after the idle deadline (a loaded host).
    p = Pair(validator_kw={"idle_timeout_s": 30.0})
    p.handshake(0.0)
    assert p.v.tick(29.0, 100) == []
    assert closed(p.v.tick(95.0, 100)).reason is GoodbyeReason.IDLE_TIMEOUT


def test_paired_admission_binds_the_connection_to_the_offered_epoch_and_hash() -> None:
    # §5.3 overlap: the runner offers the next epoch's pair; the node's admit_paired accepts it, and the session is
    # bound to that pair (not to the one it was built with) for its HelloAck and everything after.
    next_vset = (VALIDATOR.pubkey.key, OTHER_VALIDATOR.pubkey.key, b"\x09" * 32)
    offered: list[tuple[int, bytes]] = []

    def admit_paired(_runner: PubKey, epoch: int, vsh: bytes) -> Admission:
        offered.append((epoch, vsh))
        return Admission(True, None, RUNNER_INDEX, ADDRESS)

    v = make_validator(admit_paired=admit_paired)  # type: ignore[arg-type]
    r = RunnerSession(chain_id=CHAIN, key=RUNNER, expected_validator=VALIDATOR.pubkey, validator_set=next_vset,
                      subset_epoch=1, channel_binding=CB1, challenge_nonce=R_NONCE)
    r.start(0.0, 100)
    assert deliver(v, r.take_outbound(), 0.0) == []
    assert offered == [(1, validator_set_hash(next_vset))]
    assert (v.subset_epoch, v.validator_set_hash) == (1, validator_set_hash(next_vset))
    back = v.take_outbound()
    assert [type(f) for f in back] == [Hello, HelloAck]
    assert isinstance(back[0], Hello) and back[0].subset_epoch == 1
    deliver(r, back, 0.0)  # the runner verifies the validator's HelloAck over the offered pair ...
    events = deliver(v, r.take_outbound(), 0.0)  # ... and the validator the runner's
    assert [type(e) for e in events] == [Authenticated]


def test_an_admission_refusal_must_name_an_admission_reason() -> None:
    Admission(False, GoodbyeReason.NOT_IN_SUBSET)
    Admission(False)  # None: NotRegistered
    Admission(True, None, RUNNER_INDEX, ADDRESS)
    with pytest.raises(ValueError):
        Admission(False, GoodbyeReason.PROTOCOL_ERROR)


def test_a_second_commitment_after_a_cancel_is_dropped_even_after_a_first_one() -> None:
    # §10.5: after a cancel only the reveal of a commitment already received still flows; a new commitment does not.
    p = _pair()
    _accepted(p)
    p.r.send_commit(JOB, TX)
    assert p.r_to_v(1.5) == [ResultFrame(JOB, "commit", TX)]
    p.v.cancel(JOB, CancelReason.RESELECTED)
    assert deliver(p.v, [JobResultCommit(JOB, TX)], 2.0) == [ResultDropped(JOB, "commit")]
    assert not p.v.closed


def test_the_ack_timeout_fires_when_the_head_jumped_past_its_block() -> None:
    # The head may advance several blocks between two ticks (a burst of blocks, a sync): the timeout is "at or after
    # pushed + ACK_TIMEOUT_BLOCKS", not only at that exact height.
    p = _pair(validator_kw={"ack_timeout_blocks": 15})
    p.height[0] = 200
    p.v.push(make_assignment(CHAIN, VALIDATOR, JOB, JOB_SPEC, 100, 260, RUNNER.pubkey))
    assert p.v.tick(1.0, 210) == []
    assert p.v.tick(2.0, 230) == [AckTimedOut(JOB)]


def test_a_second_result_after_a_cancel_without_a_commitment_is_dropped() -> None:
    # §10.5: only the reveal of a commitment already received survives a cancel. A JobResult sent directly (M == 1,
    # no commitment) is not a commitment, so after the cancel a further result frame is dropped.
    p = _pair()
    _accepted(p)
    p.r.send_result(JOB, TX)
    assert p.r_to_v(1.5) == [ResultFrame(JOB, "result", TX)]
    p.v.cancel(JOB, CancelReason.JOB_SETTLED)
    assert deliver(p.v, [JobResult(JOB, TX)], 2.0) == [ResultDropped(JOB, "result")]
    assert not p.v.closed


def test_the_admission_verdict_is_kept_from_the_hello() -> None:
    p = Pair()
    assert p.v.admission is None
    p.handshake(0.0)
    assert p.v.admission == Admission(True, None, RUNNER_INDEX, ADDRESS)
