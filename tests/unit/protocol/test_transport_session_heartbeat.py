"""CIP-11 §6.3–§6.5 on a session pair: heartbeat nonces and echoes, signatures bound to the connection,
rate limits, backpressure and presence events, advisory capability deltas."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cowboy_protocol.transport.enums import GoodbyeReason, Role
from cowboy_protocol.transport.frames import BackpressureSignal, CapabilityDelta, HeartbeatPing, HeartbeatPong
from cowboy_protocol.transport.preimages import (
    ConnectionContext,
    heartbeat_ping_digest,
    heartbeat_pong_digest,
    sign_frame,
    verify_signature,
)
from cowboy_protocol.transport.session import (
    BackpressureReceived,
    CapabilityDeltaReceived,
    PongReceived,
    PresenceRefreshed,
    PresenceWithdrawn,
)
from tests.unit.protocol.test_transport_session_support import (
    CB2,
    OTHER_RUNNER,
    OTHER_VALIDATOR,
    RUNNER,
    RUNNER_INDEX,
    VALIDATOR,
    Pair,
    closed,
    deliver,
)


def _pair(**kw: object) -> Pair:
    p = Pair(**kw)  # type: ignore[arg-type]
    p.handshake(0.0)
    return p


def _ctx(p: Pair) -> ConnectionContext:
    assert p.v.context is not None
    return p.v.context


def _signed_ping(p: Pair, nonce: int, height: int = 101) -> HeartbeatPing:
    signed = sign_frame(_ctx(p), RUNNER, HeartbeatPing(nonce, height, b""))
    assert isinstance(signed, HeartbeatPing)
    return signed


def test_ping_is_answered_by_a_signed_pong_echoing_the_nonce_and_refreshes_presence() -> None:
    p = _pair()
    p.height[0] = 105
    assert p.r.ping(1.0, 104) == 0
    assert p.r_to_v(1.0) == [PresenceRefreshed(RUNNER_INDEX, True, 105)]  # the validator's own height
    (pong,) = p.v.take_outbound()
    assert isinstance(pong, HeartbeatPong)
    assert (pong.nonce_echo, pong.accepting_new, pong.block_height) == (0, True, 105)
    verify_signature(Role.VALIDATOR, VALIDATOR.pubkey, heartbeat_pong_digest(_ctx(p), 0, True, 105), pong.signature)
    assert deliver(p.r, [pong], 1.25) == [PongReceived(0, 0.25, True, 105)]
    assert p.r.ping(2.0, 105) == 1  # strictly increasing per connection, from 0


def test_ping_nonce_equal_or_lower_than_the_last_is_a_protocol_error() -> None:
    for second in (3, 2):
        p = _pair()
        assert len(deliver(p.v, [_signed_ping(p, 3)], 1.0)) == 1
        p.v.take_outbound()
        events = deliver(p.v, [_signed_ping(p, second)], 2.0)
        assert closed(events).reason is GoodbyeReason.PROTOCOL_ERROR
        assert not any(isinstance(e, PresenceRefreshed) for e in events)


def test_ping_nonces_may_skip_values() -> None:
    p = _pair()
    assert isinstance(deliver(p.v, [_signed_ping(p, 0)], 1.0)[0], PresenceRefreshed)
    assert isinstance(deliver(p.v, [_signed_ping(p, 9)], 2.0)[0], PresenceRefreshed)


def test_ping_with_a_bad_signature_is_auth_failed() -> None:
    p = _pair()
    ctx = _ctx(p)
    wrong_key = HeartbeatPing(0, 101, OTHER_RUNNER.sign(heartbeat_ping_digest(ctx, 0, 101)))
    assert closed(deliver(p.v, [wrong_key], 1.0)).reason is GoodbyeReason.AUTH_FAILED
    p = _pair()
    tampered = replace(_signed_ping(p, 0, 101), block_height=102)
    assert closed(deliver(p.v, [tampered], 1.0)).reason is GoodbyeReason.AUTH_FAILED


def test_ping_signed_for_another_connection_is_auth_failed() -> None:
    p = _pair()
    other_ctx = replace(_ctx(p), channel_binding=CB2)  # same identities, another TLS channel
    replayed = HeartbeatPing(0, 101, RUNNER.sign(heartbeat_ping_digest(other_ctx, 0, 101)))
    assert closed(deliver(p.v, [replayed], 1.0)).reason is GoodbyeReason.AUTH_FAILED


def test_pong_with_a_bad_signature_is_auth_failed() -> None:
    p = _pair()
    p.r.ping(1.0, 101)
    ctx = _ctx(p)
    forged = HeartbeatPong(0, True, 101, OTHER_VALIDATOR.sign(heartbeat_pong_digest(ctx, 0, True, 101)))
    assert closed(deliver(p.r, [forged], 1.1)).reason is GoodbyeReason.AUTH_FAILED
    p = _pair()
    p.r.ping(1.0, 101)
    p.r_to_v(1.0)
    (pong,) = p.v.take_outbound()
    assert isinstance(pong, HeartbeatPong)
    flipped = replace(pong, accepting_new=False)  # the validator signs accepting_new too
    assert closed(deliver(p.r, [flipped], 1.1)).reason is GoodbyeReason.AUTH_FAILED


def _pong(p: Pair, echo: int) -> HeartbeatPong:
    signed = sign_frame(_ctx(p), VALIDATOR, HeartbeatPong(echo, True, 101, b""))
    assert isinstance(signed, HeartbeatPong)
    return signed


@pytest.mark.parametrize(("sent", "echo"), [(0, 0), (1, 5), (2, 2)], ids=["no ping", "never sent", "in future"])
def test_pong_echoing_a_nonce_that_is_not_outstanding_is_a_protocol_error(sent: int, echo: int) -> None:
    p = _pair()
    for i in range(sent):
        p.r.ping(1.0 + i, 101 + i)
    assert closed(deliver(p.r, [_pong(p, echo)], 5.0)).reason is GoodbyeReason.PROTOCOL_ERROR


def test_replayed_pong_is_a_protocol_error() -> None:
    p = _pair()
    p.r.ping(1.0, 101)
    p.r_to_v(1.0)
    (pong,) = p.v.take_outbound()
    assert isinstance(deliver(p.r, [pong], 1.1)[0], PongReceived)
    assert closed(deliver(p.r, [pong], 1.2)).reason is GoodbyeReason.PROTOCOL_ERROR


def test_only_the_most_recent_pings_pong_counts_a_stale_one_is_refused_without_closing() -> None:
    p = _pair()
    p.r.ping(1.0, 101)
    p.r.ping(2.0, 102)
    p.r_to_v(2.0)
    pong0, pong1 = p.v.take_outbound()
    assert deliver(p.r, [pong0], 2.1) == []  # superseded: no liveness credit
    assert not p.r.closed
    assert deliver(p.r, [pong1], 2.5) == [PongReceived(1, 0.5, True, 100)]


def test_pings_above_max_ping_rate_are_rate_limited() -> None:
    p = _pair(validator_kw={"max_ping_rate": 2.0})
    assert isinstance(deliver(p.v, [_signed_ping(p, 0)], 1.0)[0], PresenceRefreshed)
    assert isinstance(deliver(p.v, [_signed_ping(p, 1)], 1.0)[0], PresenceRefreshed)
    assert isinstance(deliver(p.v, [_signed_ping(p, 2)], 1.5)[0], PresenceRefreshed)  # refilled one token
    p.v.take_outbound()
    events = deliver(p.v, [_signed_ping(p, 3)], 1.5)
    assert closed(events).reason is GoodbyeReason.RATE_LIMITED
    (bye,) = p.v.take_outbound()
    assert bye.reason is GoodbyeReason.RATE_LIMITED  # type: ignore[attr-defined]


def test_backpressure_withdraws_presence_until_capacity_is_reasserted() -> None:
    p = _pair()
    p.r.ping(1.0, 101, accepting_new=False)  # queues BackpressureSignal(false) before the ping
    assert p.r_to_v(1.0) == [BackpressureReceived(False, 101), PresenceWithdrawn(RUNNER_INDEX),
                             PresenceRefreshed(RUNNER_INDEX, False, 100)]
    assert not p.v.accepting_new
    assert [type(e) for e in p.v_to_r(1.1)] == [PongReceived]
    assert p.sent_v[-1].accepting_new is False  # type: ignore[attr-defined]  # the pong says so too (§6.4)
    p.r.ping(2.0, 102, accepting_new=False)  # no change, no new signal
    assert p.r_to_v(2.0) == [PresenceRefreshed(RUNNER_INDEX, False, 100)]
    p.v_to_r(2.1)
    p.r.ping(3.0, 103, accepting_new=True)
    assert p.r_to_v(3.0) == [BackpressureReceived(True, 103), PresenceRefreshed(RUNNER_INDEX, True, 100)]


def test_backpressure_and_capability_delta_with_bad_signatures_are_auth_failed() -> None:
    p = _pair()
    forged = BackpressureSignal(False, 101, b"\x01" * 65)
    assert closed(deliver(p.v, [forged], 1.0)).reason is GoodbyeReason.AUTH_FAILED
    assert p.v.accepting_new  # the forged signal changed nothing
    p = _pair()
    p.r.capability_delta(101, add_capabilities=["http"])
    (delta,) = p.r.take_outbound()
    assert isinstance(delta, CapabilityDelta)
    tampered = replace(delta, add_capabilities=("llm",))  # body changed after signing
    assert closed(deliver(p.v, [tampered], 1.0)).reason is GoodbyeReason.AUTH_FAILED


def test_capability_delta_is_verified_and_reported_with_sorted_unique_lists() -> None:
    p = _pair()
    p.r.capability_delta(101, add_capabilities=["llm", "http", "llm"], remove_entitlements=[b"\x02" * 32,
                                                                                              b"\x01" * 32])
    (event,) = p.r_to_v(1.0)
    assert isinstance(event, CapabilityDeltaReceived)
    assert event.frame.add_capabilities == ("http", "llm")
    assert event.frame.remove_entitlements == (b"\x01" * 32, b"\x02" * 32)


def test_control_frames_above_max_control_rate_are_rate_limited() -> None:
    p = _pair(validator_kw={"max_control_rate": 1.0})
    p.r.backpressure(True, 101)
    p.r.backpressure(True, 101)
    events = p.r_to_v(1.0)
    assert isinstance(events[0], BackpressureReceived)
    assert closed(events).reason is GoodbyeReason.RATE_LIMITED
