"""Property: any sequence of frames, garbage bytes and ticks fed to either session kind, in any state, raises
nothing; the only way out is one Closed event (with one Goodbye queued when this side closes), then silence."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cowboy_protocol.transport.enums import CancelReason, GoodbyeReason, RejectReason
from cowboy_protocol.transport.frames import (
    AckStatus,
    BackpressureSignal,
    CapabilityDelta,
    Frame,
    Goodbye,
    HeartbeatPing,
    HeartbeatPong,
    JobAck,
    JobCancel,
    JobProgress,
    JobResult,
    JobResultCommit,
)
from cowboy_protocol.transport.preimages import ack_digest, make_assignment, sign_frame
from cowboy_protocol.transport.session import Closed, SessionBase, SessionState
from tests.unit.protocol.test_transport_session_support import (
    CB2,
    CHAIN,
    JOB_SPEC,
    OTHER_RUNNER,
    RUNNER,
    TX,
    VALIDATOR,
    Pair,
    deliver,
    deliver_bytes,
)

JOB = b"\xab" * 32
JOB2 = b"\xac" * 32


def _pools() -> tuple[list[Frame], list[Frame]]:
    """(frames for a validator, frames for a runner): mostly what the peer could validly send on a fresh Pair()'s
    connection, plus frames from another connection, wrong-direction frames and junk."""
    p = Pair()
    p.handshake(0.0)
    other = Pair(binding=CB2)
    other.handshake(0.0)
    assert p.r.context is not None and other.r.context is not None
    ctx, octx = p.r.context, other.r.context
    a = make_assignment(CHAIN, VALIDATOR, JOB, JOB_SPEC, 100, 160, RUNNER.pubkey)
    a2 = make_assignment(CHAIN, VALIDATOR, JOB2, JOB_SPEC, 100, 160, RUNNER.pubkey)
    runner_frames: list[Frame] = [
        *[sign_frame(ctx, RUNNER, HeartbeatPing(n, 101, b"")) for n in (0, 1, 5)],
        sign_frame(octx, RUNNER, HeartbeatPing(0, 101, b"")),
        sign_frame(ctx, RUNNER, BackpressureSignal(False, 101, b"")),
        sign_frame(ctx, RUNNER, BackpressureSignal(True, 101, b"")),
        sign_frame(ctx, RUNNER, CapabilityDelta(("http",), (), (), (), 101, b"")),
        sign_frame(ctx, RUNNER, JobAck(JOB, a.assignment_hash, AckStatus.accepted(), b"")),
        sign_frame(ctx, RUNNER, JobAck(JOB, a.assignment_hash, AckStatus.duplicate(), b"")),
        sign_frame(ctx, RUNNER, JobAck(JOB2, a2.assignment_hash, AckStatus.reject(RejectReason.AT_CAPACITY), b"")),
        JobAck(JOB, a.assignment_hash, AckStatus.accepted(),  # signed by a key that is not the connection's
               OTHER_RUNNER.sign(ack_digest(ctx, JOB, a.assignment_hash, AckStatus.accepted()))),
        JobProgress(JOB, 10, None), JobResultCommit(JOB, TX), JobResult(JOB, TX), JobResult(JOB2, TX),
        sign_frame(ctx, RUNNER, Goodbye(GoodbyeReason.SHUTDOWN, None, None, None)),
    ]
    validator_frames: list[Frame] = [
        *[sign_frame(ctx, VALIDATOR, HeartbeatPong(n, True, 101, b"")) for n in (0, 1, 2)],
        sign_frame(octx, VALIDATOR, HeartbeatPong(0, True, 101, b"")),
        a, a2, replace(a, deadline_block=1),
        sign_frame(ctx, VALIDATOR, JobCancel(JOB, a.assignment_hash, CancelReason.RESELECTED, b"")),
        sign_frame(ctx, VALIDATOR, JobCancel(JOB2, b"\x01" * 32, CancelReason.EXPIRED, b"")),
        sign_frame(ctx, VALIDATOR, Goodbye(GoodbyeReason.REPLACED, "x", 3, None)),
    ]
    junk: list[Frame] = [Goodbye(GoodbyeReason.PROTOCOL_ERROR, None, None, None),
                         HeartbeatPing(7, 1, b"\x01" * 65), HeartbeatPong(0, False, 1, b"\x02" * 64)]
    to_validator = [*p.sent_r, *other.sent_r, *runner_frames, *junk, a, p.sent_v[0]]
    to_runner = [*p.sent_v, *other.sent_v, *validator_frames, *junk, runner_frames[0], p.sent_r[0]]
    return to_validator, to_runner


TO_VALIDATOR, TO_RUNNER = _pools()
GARBAGE = [b"\x00\x00\x00\x00", b"\x00\x00\x00\x02\x99\x00", b"\x00\x00\x00\x02\x10\xa0", b"\xff\xff\xff\xff"]

action = st.one_of(
    st.tuples(st.just("frame"), st.integers(0, max(len(TO_VALIDATOR), len(TO_RUNNER)) - 1)),
    st.tuples(st.just("bytes"), st.integers(0, len(GARBAGE) - 1)),
    st.tuples(st.just("tick"), st.integers(0, 40)),
    st.tuples(st.just("ping"), st.integers(0, 1)),
    st.tuples(st.just("push"), st.integers(0, 1)),
)


def _session(kind: str) -> tuple[Pair, SessionBase]:
    p = Pair()
    if kind.endswith("_authenticated"):
        p.handshake(0.0)
        if kind.startswith("validator"):
            p.v.push(make_assignment(CHAIN, VALIDATOR, JOB, JOB_SPEC, 100, 160, RUNNER.pubkey))
    elif kind == "runner_fresh":
        p.r.start(0.0, 100)
        p.r.take_outbound()
    return p, (p.v if kind.startswith("validator") else p.r)


# Explicit examples walk through a full handshake first (pool items 0, 1 are the peer's Hello and HelloAck).
@example(kind="validator_fresh", actions=[("frame", 0), ("frame", 1), ("frame", 4), ("frame", 8), ("push", 1),
                                          ("frame", 11), ("frame", 14), ("tick", 40)])
@example(kind="runner_fresh", actions=[("frame", 0), ("frame", 1), ("ping", 0), ("frame", 4), ("frame", 8),
                                       ("frame", 10), ("frame", 12), ("frame", 0)])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["validator_fresh", "validator_authenticated", "runner_fresh", "runner_authenticated"]),
       actions=st.lists(action, max_size=14))
def test_random_input_never_raises_and_only_ends_in_one_goodbye_and_closed(kind: str,
                                                                          actions: list[tuple[str, int]]) -> None:
    p, s = _session(kind)
    s.take_outbound()
    now = 0.0
    seen_closed = False
    for what, arg in actions:
        now += 0.5
        if what == "frame":
            pool = TO_VALIDATOR if s is p.v else TO_RUNNER
            events = deliver(s, [pool[arg % len(pool)]], now)
        elif what == "bytes":
            events = deliver_bytes(s, GARBAGE[arg], now)
        elif what == "tick":
            now += arg
            events = s.tick(now, 100 + int(now))  # type: ignore[attr-defined]
        elif s.state is not SessionState.AUTHENTICATED:
            continue
        elif what == "ping" and s is p.r:
            p.r.ping(now, 101 + arg)
            events = []
        elif what == "push" and s is p.v:
            job = JOB if arg == 0 else JOB2
            try:
                p.v.push(make_assignment(CHAIN, VALIDATOR, job, JOB_SPEC, 100, 160, RUNNER.pubkey))
            except Exception as e:  # only the documented local refusal (job already in flight)
                assert type(e).__name__ == "LocalProtocolError"
            events = []
        else:
            continue
        out = s.take_outbound()
        closes = [e for e in events if isinstance(e, Closed)]
        if seen_closed:
            assert events == [] and out == []
            continue
        assert len(closes) <= 1
        if closes:
            seen_closed = True
            assert events[-1] is closes[0] and s.state is SessionState.CLOSED
            goodbyes = [f for f in out if isinstance(f, Goodbye)]
            if closes[0].by_peer:
                assert goodbyes == []
            else:
                assert len(goodbyes) == 1 and out[-1] is goodbyes[0] and goodbyes[0].reason is closes[0].reason
        else:
            assert s.state is not SessionState.CLOSED
            assert not any(isinstance(f, Goodbye) for f in out)
