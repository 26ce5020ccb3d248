"""CIP-11 §6.2 / §12.3 / §12.5 session handshake, admission, timeouts and closing, driven over real frame bytes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cowboy_protocol.codec import encode
from cowboy_protocol.transport.enums import GoodbyeReason, Role
from cowboy_protocol.transport.frames import (
    PROTOCOL_VERSION,
    AckStatus,
    BackpressureSignal,
    Frame,
    Goodbye,
    HeartbeatPing,
    HeartbeatPong,
    Hello,
    HelloAck,
    JobAck,
    JobAssignment,
    JobResult,
)
from cowboy_protocol.transport.preimages import goodbye_digest, make_assignment, verify_signature
from cowboy_protocol.transport.protocol_errors import LocalProtocolError
from cowboy_protocol.transport.session import Authenticated, Closed, SessionState
from cowboy_protocol.transport.validator_session import Admission
from tests.unit.protocol.test_transport_session_support import (
    ADDRESS,
    CB1,
    CB2,
    CHAIN,
    EPOCH,
    JOB_SPEC,
    OTHER_RUNNER,
    OTHER_VALIDATOR,
    OUTSIDER_VALIDATOR,
    R_NONCE,
    RUNNER,
    RUNNER_INDEX,
    V_NONCE,
    VALIDATOR,
    VSH,
    Pair,
    closed,
    deliver,
    deliver_bytes,
    goodbye_of,
    make_runner,
    make_validator,
)

SIG65 = b"\x11" * 65
SIG64 = b"\x22" * 64
JOB = b"\xab" * 32


def _runner_hello() -> Hello:
    r = make_runner()
    r.start(0.0, 100)
    (hello,) = r.take_outbound()
    assert isinstance(hello, Hello)
    return hello


def _validator_hello(**changes: object) -> Hello:
    hello = Hello(PROTOCOL_VERSION, CHAIN, Role.VALIDATOR, VALIDATOR.pubkey, EPOCH, VSH, V_NONCE, 100)
    return replace(hello, **changes)  # type: ignore[arg-type]


# --- happy path ---


def test_handshake_authenticates_both_sides_with_hello_then_hello_ack() -> None:
    p = Pair()
    v_events, r_events = p.handshake()
    assert v_events == [Authenticated(RUNNER.pubkey, ADDRESS, RUNNER_INDEX)]
    assert r_events == [Authenticated(VALIDATOR.pubkey)]
    assert [type(f) for f in p.sent_r] == [Hello, HelloAck]
    assert [type(f) for f in p.sent_v] == [Hello, HelloAck]
    assert p.v.state is SessionState.AUTHENTICATED and p.r.state is SessionState.AUTHENTICATED
    assert p.v.context == p.r.context
    assert p.v.context is not None and p.v.context.channel_binding == CB1 and p.v.context.version == PROTOCOL_VERSION
    # each HelloAck answers the OTHER side's challenge
    r_hello, v_hello = p.sent_r[0], p.sent_v[0]
    assert isinstance(r_hello, Hello) and isinstance(v_hello, Hello)
    assert r_hello.challenge_nonce == R_NONCE and v_hello.challenge_nonce == V_NONCE
    assert v_hello.party_role is Role.VALIDATOR and r_hello.party_role is Role.RUNNER


def test_authenticated_is_emitted_once_and_a_second_hello_or_hello_ack_is_a_protocol_error() -> None:
    for extra in (0, 1):
        p = Pair()
        p.handshake()
        events = deliver(p.v, [p.sent_r[extra]], 1.0)
        assert closed(events).reason is GoodbyeReason.PROTOCOL_ERROR
        assert not any(isinstance(e, Authenticated) for e in events)


def test_higher_minor_version_is_accepted_and_the_lower_version_is_agreed() -> None:
    v = make_validator()
    assert deliver(v, [replace(_runner_hello(), version=PROTOCOL_VERSION + 7)], 0.0) == []
    assert v.state is SessionState.HANDSHAKE
    assert v.context is not None and v.context.version == PROTOCOL_VERSION


# --- every Goodbye the validator can emit on Hello ---

HELLO_FAILURES: list[tuple[str, dict[str, object], Admission | None, GoodbyeReason]] = [
    ("major version", {"version": 0x0200}, None, GoodbyeReason.UNSUPPORTED_VERSION),
    ("lower major", {"version": 0x0001}, None, GoodbyeReason.UNSUPPORTED_VERSION),
    ("chain_id", {"chain_id": "cowboy-mainnet"}, None, GoodbyeReason.WRONG_CHAIN),
    ("validator_set_hash", {"validator_set_hash": b"\x99" * 32}, None, GoodbyeReason.WRONG_VALIDATOR_SET),
    ("subset_epoch", {"subset_epoch": EPOCH + 1}, None, GoodbyeReason.WRONG_VALIDATOR_SET),
    ("role", {"party_role": Role.VALIDATOR, "party_pubkey": OTHER_VALIDATOR.pubkey}, None,
     GoodbyeReason.PROTOCOL_ERROR),
    ("not registered", {}, Admission(False, GoodbyeReason.NOT_REGISTERED), GoodbyeReason.NOT_REGISTERED),
    ("deregistered", {}, Admission(False, GoodbyeReason.DEREGISTERED), GoodbyeReason.DEREGISTERED),
    ("not in subset", {}, Admission(False, GoodbyeReason.NOT_IN_SUBSET), GoodbyeReason.NOT_IN_SUBSET),
    ("refused, no reason", {}, Admission(False), GoodbyeReason.NOT_REGISTERED),
]


@pytest.mark.parametrize(("name", "changes", "admission", "reason"), HELLO_FAILURES, ids=[c[0] for c in HELLO_FAILURES])
def test_validator_rejects_bad_hello_with_the_matching_goodbye_and_signs_nothing(
        name: str, changes: dict[str, object], admission: Admission | None, reason: GoodbyeReason) -> None:
    seen: list[object] = []

    def admit(pk: object) -> Admission:
        seen.append(pk)
        return admission or Admission(True, None, 1, ADDRESS)

    v = make_validator(admit=admit)
    events = deliver(v, [replace(_runner_hello(), **changes)], 0.0)  # type: ignore[arg-type]
    c = closed(events)
    assert (c.reason, c.by_peer, c.advisory) == (reason, False, False)
    bye = goodbye_of(v)  # exactly one frame: no Hello/HelloAck was signed for a rejected peer
    assert bye.reason is reason and bye.signed is None  # unsigned before mutual auth (§12.5)
    assert v.state is SessionState.CLOSED
    if admission is not None:
        assert seen == [RUNNER.pubkey]  # admission is asked about the offered runner key
    else:
        assert seen == []  # cheaper checks come first


def _raw_hello_body(**over: object) -> dict[int, object]:
    h = _runner_hello()
    body: dict[int, object] = dict(h.body())
    for k, v in over.items():
        body[int(k[1:])] = v
    return body


def _raw_frame(type_byte: int, body: dict[int, object]) -> bytes:
    payload = encode(body)  # type: ignore[arg-type]
    return (1 + len(payload)).to_bytes(4, "big") + bytes([type_byte]) + payload


@pytest.mark.parametrize(("name", "over"), [
    ("runner role with an Ed25519 key", {"k3": b"\x02" + VALIDATOR.pubkey.key}),
    ("secp256k1 key of 32 bytes", {"k3": b"\x01" + b"\x02" * 32}),
    ("unknown scheme", {"k3": b"\x07" + b"\x02" * 33}),
])
def test_hello_with_a_key_that_does_not_match_its_role_or_length_is_auth_failed(
        name: str, over: dict[str, object]) -> None:
    v = make_validator()
    events = deliver_bytes(v, _raw_frame(0x01, _raw_hello_body(**over)), 0.0)
    assert closed(events).reason is GoodbyeReason.AUTH_FAILED
    assert goodbye_of(v).reason is GoodbyeReason.AUTH_FAILED


def test_malformed_bytes_are_a_protocol_error_goodbye() -> None:
    v = make_validator()
    events = deliver_bytes(v, b"\x00\x00\x00\x00", 0.0)  # length 0
    assert closed(events).reason is GoodbyeReason.PROTOCOL_ERROR
    assert goodbye_of(v).reason is GoodbyeReason.PROTOCOL_ERROR


# --- runner-side Hello checks ---

RUNNER_HELLO_FAILURES: list[tuple[str, dict[str, object], GoodbyeReason]] = [
    ("major version", {"version": 0x0200}, GoodbyeReason.UNSUPPORTED_VERSION),
    ("chain_id", {"chain_id": "other"}, GoodbyeReason.WRONG_CHAIN),
    ("validator_set_hash", {"validator_set_hash": b"\x98" * 32}, GoodbyeReason.WRONG_VALIDATOR_SET),
    ("subset_epoch", {"subset_epoch": 4}, GoodbyeReason.WRONG_VALIDATOR_SET),
    ("runner role", {"party_role": Role.RUNNER, "party_pubkey": RUNNER.pubkey}, GoodbyeReason.PROTOCOL_ERROR),
    ("not the dialled validator", {"party_pubkey": OTHER_VALIDATOR.pubkey}, GoodbyeReason.AUTH_FAILED),
]


@pytest.mark.parametrize(("name", "changes", "reason"), RUNNER_HELLO_FAILURES,
                         ids=[c[0] for c in RUNNER_HELLO_FAILURES])
def test_runner_rejects_bad_validator_hello(name: str, changes: dict[str, object], reason: GoodbyeReason) -> None:
    r = make_runner()
    r.start(0.0, 100)
    r.take_outbound()
    events = deliver(r, [_validator_hello(**changes)], 0.0)
    assert closed(events).reason is reason
    assert goodbye_of(r).reason is reason


def test_runner_without_expected_validator_still_requires_snapshot_membership() -> None:
    r = make_runner(expected=None)
    r.start(0.0, 100)
    r.take_outbound()
    assert deliver(r, [_validator_hello(party_pubkey=OTHER_VALIDATOR.pubkey)], 0.0) == []  # in the snapshot
    r2 = make_runner(expected=None)
    r2.start(0.0, 100)
    r2.take_outbound()
    events = deliver(r2, [_validator_hello(party_pubkey=OUTSIDER_VALIDATOR.pubkey)], 0.0)
    assert closed(events).reason is GoodbyeReason.AUTH_FAILED


# --- channel binding: replayed HelloAcks ---


def test_runner_hello_ack_replayed_on_another_connection_is_auth_failed() -> None:
    p = Pair()
    p.handshake()
    runner_hello, runner_ack = p.sent_r
    # Same validator, same challenge nonce, same runner Hello bytes: only the channel binding differs.
    other = make_validator(binding=CB2)
    assert deliver(other, [runner_hello], 0.0) == []
    events = deliver(other, [runner_ack], 0.0)
    assert closed(events).reason is GoodbyeReason.AUTH_FAILED
    assert not any(isinstance(e, Authenticated) for e in events)
    # Control: on a connection with the original binding the very same frames authenticate.
    same = make_validator(binding=CB1)
    deliver(same, [runner_hello], 0.0)
    assert isinstance(deliver(same, [runner_ack], 0.0)[0], Authenticated)


def test_validator_hello_ack_replayed_on_another_connection_is_auth_failed() -> None:
    p = Pair()
    p.handshake()
    v_hello, v_ack = p.sent_v
    r = make_runner(binding=CB2)
    r.start(0.0, 100)
    r.take_outbound()
    events = deliver(r, [v_hello, v_ack], 0.0)
    assert closed(events).reason is GoodbyeReason.AUTH_FAILED
    assert goodbye_of(r).reason is GoodbyeReason.AUTH_FAILED  # the only frame: no runner HelloAck was sent


def test_hello_ack_over_a_different_challenge_is_auth_failed() -> None:
    p = Pair()
    p.handshake()
    _, runner_ack = p.sent_r
    v = make_validator(nonce=b"\x78" * 32)  # fresh challenge: the old answer must not verify
    deliver(v, [p.sent_r[0]], 0.0)
    assert closed(deliver(v, [runner_ack], 0.0)).reason is GoodbyeReason.AUTH_FAILED


def test_hello_ack_from_another_key_than_the_hello_is_auth_failed() -> None:
    p = Pair()
    p.r.start(0.0, 100)
    p.r_to_v()
    p.v_to_r()
    ack = p.r.take_outbound()[0]
    assert isinstance(ack, HelloAck)
    swapped = replace(ack, party_pubkey=OTHER_RUNNER.pubkey)
    assert closed(deliver(p.v, [swapped], 0.0)).reason is GoodbyeReason.AUTH_FAILED


# --- nothing before both proofs ---

EARLY_FRAMES: list[Frame] = [
    HeartbeatPing(0, 100, SIG65),
    BackpressureSignal(False, 100, SIG65),
    JobAck(JOB, b"\xef" * 32, AckStatus.accepted(), SIG65),
    JobResult(JOB, bytes.fromhex("00000003a10000")),
    HeartbeatPong(0, True, 100, SIG64),
]


@pytest.mark.parametrize("frame", EARLY_FRAMES, ids=lambda f: type(f).__name__)
def test_validator_frames_before_hello_or_before_the_runner_proof_are_protocol_errors(frame: Frame) -> None:
    v = make_validator()
    assert closed(deliver(v, [frame], 0.0)).reason is GoodbyeReason.PROTOCOL_ERROR
    p = Pair()
    p.r.start(0.0, 100)
    p.r_to_v()  # validator has answered Hello + HelloAck but not yet verified the runner
    assert p.v.state is SessionState.HANDSHAKE
    events = deliver(p.v, [frame], 0.0)
    assert closed(events).reason is GoodbyeReason.PROTOCOL_ERROR
    assert [type(e) for e in events] == [Closed]  # no presence, no ack event
    with pytest.raises(LocalProtocolError):
        p.v.push(make_assignment(CHAIN, VALIDATOR, JOB, JOB_SPEC, 100, 160, RUNNER.pubkey))


def test_runner_frames_before_start_or_before_the_validator_proof_are_protocol_errors() -> None:
    assignment = make_assignment(CHAIN, VALIDATOR, JOB, JOB_SPEC, 100, 160, RUNNER.pubkey)
    r = make_runner()
    assert closed(deliver(r, [_validator_hello()], 0.0)).reason is GoodbyeReason.PROTOCOL_ERROR  # not started
    r = make_runner()
    r.start(0.0, 100)
    assert closed(deliver(r, [assignment], 0.0)).reason is GoodbyeReason.PROTOCOL_ERROR  # before Hello
    r = make_runner()
    r.start(0.0, 100)
    deliver(r, [_validator_hello()], 0.0)
    events = deliver(r, [assignment], 0.0)  # Hello seen, HelloAck not yet
    assert closed(events).reason is GoodbyeReason.PROTOCOL_ERROR
    assert not any(isinstance(e, Authenticated) for e in events)
    with pytest.raises(LocalProtocolError):
        r.ping(0.0, 100)


def test_wrong_direction_frames_after_auth_are_protocol_errors() -> None:
    assignment = make_assignment(CHAIN, VALIDATOR, JOB, JOB_SPEC, 100, 160, RUNNER.pubkey)
    p = Pair()
    p.handshake()
    assert closed(deliver(p.v, [assignment], 1.0)).reason is GoodbyeReason.PROTOCOL_ERROR
    p = Pair()
    p.handshake()
    assert closed(deliver(p.r, [HeartbeatPing(0, 1, SIG65)], 1.0)).reason is GoodbyeReason.PROTOCOL_ERROR
    assert isinstance(assignment, JobAssignment)


# --- timeouts ---


def test_no_hello_within_hello_timeout_is_idle_timeout() -> None:
    v = make_validator(now=50.0, hello_timeout_s=10.0)
    assert v.tick(59.99, 100) == []
    c = closed(v.tick(60.0, 100))
    assert c.reason is GoodbyeReason.IDLE_TIMEOUT
    assert goodbye_of(v).reason is GoodbyeReason.IDLE_TIMEOUT


def test_handshake_not_completed_within_hello_timeout_is_idle_timeout_on_both_sides() -> None:
    p = Pair(validator_kw={"hello_timeout_s": 5.0}, runner_kw={"hello_timeout_s": 5.0})
    p.r.start(0.0, 100)
    p.r_to_v(1.0)  # Hello arrives, but the runner's HelloAck never does
    assert p.v.tick(4.9, 100) == []
    assert closed(p.v.tick(5.0, 100)).reason is GoodbyeReason.IDLE_TIMEOUT
    assert p.r.tick(4.9, 100) == []
    assert closed(p.r.tick(5.0, 100)).reason is GoodbyeReason.IDLE_TIMEOUT


def test_no_frame_for_idle_timeout_is_idle_timeout_and_any_frame_resets_it() -> None:
    p = Pair(validator_kw={"idle_timeout_s": 30.0}, runner_kw={"idle_timeout_s": 30.0})
    p.handshake(0.0)
    assert p.v.tick(29.9, 100) == []
    p.r.ping(20.0, 101)
    p.r_to_v(20.0)  # the validator heard from the runner at t=20
    p.v.take_outbound()  # (its pong)
    assert p.v.tick(49.9, 101) == []
    assert closed(p.v.tick(50.0, 101)).reason is GoodbyeReason.IDLE_TIMEOUT
    bye = goodbye_of(p.v)
    assert bye.signed is not None  # after mutual auth the Goodbye is signed
    assert closed(deliver(p.r, [bye], 50.0)) == Closed(GoodbyeReason.IDLE_TIMEOUT, "idle timeout", True, False)


def test_runner_idle_timeout_counts_from_the_last_validator_frame() -> None:
    p = Pair(runner_kw={"idle_timeout_s": 30.0})
    p.handshake(0.0)
    p.r.ping(10.0, 101)
    p.r_to_v(10.0)
    p.v_to_r(12.0)  # pong at t=12
    assert p.r.tick(41.9, 101) == []
    assert closed(p.r.tick(42.0, 101)).reason is GoodbyeReason.IDLE_TIMEOUT


# --- closing ---


def test_close_queues_one_signed_goodbye_and_then_nothing_is_accepted() -> None:
    p = Pair()
    p.handshake()
    events = p.v.close(GoodbyeReason.SHUTDOWN, "maintenance", retry_after_blocks=30)
    assert events == [Closed(GoodbyeReason.SHUTDOWN, "maintenance", False)]
    bye = goodbye_of(p.v)
    assert (bye.reason, bye.detail, bye.retry_after_blocks) == (GoodbyeReason.SHUTDOWN, "maintenance", 30)
    ctx = p.v.context
    assert ctx is not None
    verify_signature(Role.VALIDATOR, VALIDATOR.pubkey, goodbye_digest(ctx, Role.VALIDATOR, GoodbyeReason.SHUTDOWN,
                                                                     "maintenance", 30), bye.signed)
    # CLOSED: frames, ticks and a second close do nothing; pushes raise
    p.r.ping(1.0, 101)
    assert p.r_to_v(1.0) == []
    assert p.v.take_outbound() == []
    assert p.v.tick(1000.0, 10_000) == []
    assert p.v.close(GoodbyeReason.REPLACED) == []
    assert p.v.connection_lost() == []
    with pytest.raises(LocalProtocolError):
        p.v.push(make_assignment(CHAIN, VALIDATOR, JOB, JOB_SPEC, 100, 160, RUNNER.pubkey))
    # the runner sees an authenticated (non-advisory) Goodbye
    assert p.v_to_r(1.0) == []  # nothing left queued
    assert closed(deliver(p.r, [bye], 1.0)) == Closed(GoodbyeReason.SHUTDOWN, "maintenance", True, False)
    assert p.r.closed and p.r.take_outbound() == []


def test_after_a_fatal_error_exactly_one_goodbye_is_sent_and_later_frames_are_ignored() -> None:
    p = Pair()
    p.handshake()
    events = deliver(p.v, [HeartbeatPong(0, True, 1, SIG64), HeartbeatPing(0, 1, SIG65)], 1.0)
    assert [type(e) for e in events] == [Closed]
    assert [f.reason for f in p.v.take_outbound() if isinstance(f, Goodbye)] == [GoodbyeReason.PROTOCOL_ERROR]


def test_peer_goodbye_before_auth_or_with_a_bad_signature_is_advisory() -> None:
    v = make_validator()
    assert closed(deliver(v, [Goodbye(GoodbyeReason.SHUTDOWN, None, None, None)], 0.0)) == Closed(
        GoodbyeReason.SHUTDOWN, None, True, True)
    assert v.take_outbound() == []  # no answer to a Goodbye
    p = Pair()
    p.handshake()
    forged = Goodbye(GoodbyeReason.REPLACED, "x", None, SIG64)
    assert closed(deliver(p.r, [forged], 1.0)).advisory is True
    p = Pair()
    p.handshake()
    assert closed(deliver(p.v, [Goodbye(GoodbyeReason.SHUTDOWN, None, None, None)], 1.0)).advisory is True


def test_connection_lost_closes_without_a_goodbye() -> None:
    p = Pair()
    p.handshake()
    assert p.r.connection_lost() == [Closed(None, "connection lost", True)]
    assert p.r.take_outbound() == [] and p.r.closed


def test_constructor_rejects_bad_lengths_and_wrong_role_keys() -> None:
    with pytest.raises(LocalProtocolError):
        make_validator(binding=b"\x00" * 31)
    with pytest.raises(LocalProtocolError):
        make_runner(nonce=b"\x00" * 16)
    with pytest.raises(LocalProtocolError):
        make_runner(key=VALIDATOR)  # type: ignore[arg-type]
    r = make_runner()
    r.start(0.0, 1)
    with pytest.raises(LocalProtocolError):
        r.start(0.0, 1)


def test_close_with_an_overlong_detail_still_sends_an_encodable_goodbye() -> None:
    p = Pair()
    p.handshake()
    p.v.close(GoodbyeReason.SHUTDOWN, "é" * 200)  # 400 UTF-8 bytes > MAX_TEXT_BYTES
    bye = goodbye_of(p.v)
    assert bye.detail == "é" * 128
    assert closed(deliver(p.r, [bye], 1.0)).advisory is False  # encodes, decodes and verifies
