"""CIP-11 attack suite over real loopback QUIC (issue 5, "Bad input").

Every attack runs against a real node producing 200 ms blocks with its TransportService, while an honest runner
(``cowboy_runner.link.Link``) holds a session. Each case asserts (1) the Goodbye reason (or Reject) the attacker
receives, (2) that the node counted it (``cowboy_transport_events_total`` or the QUIC ``ServerStats``), (3) that
block production stayed on time during and after the attack, and (4) where relevant, that the honest runner kept
its first session and its local presence.

Attackers are raw ``transport.quic.connect()`` clients sending hand-built frames or bytes; the ones that need an
authenticated session first complete the handshake with a real ``RunnerSession`` and then deviate. The
runner-side checks (forged or field-mismatched JobAssignment) use a forging validator built on the same QUIC
adapter, pushing to an unmodified ``Link``.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from cowboy_protocol.quic.adapter import ConnectionClosed, FrameConnection, start_server
from cowboy_protocol.quic.certs import generate_self_signed
from cowboy_protocol.quic.limits import ServerLimits
from cowboy_protocol.transport.enums import CancelReason, GoodbyeReason, RejectReason, Role
from cowboy_protocol.transport.frames import (
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    AckStatus,
    Frame,
    Goodbye,
    HeartbeatPing,
    HeartbeatPong,
    Hello,
    HelloAck,
    JobAck,
    JobAssignment,
    JobCancel,
    JobResult,
    JobResultCommit,
)
from cowboy_protocol.transport.preimages import (
    ConnectionContext,
    ValidatorKey,
    make_assignment,
    sign_frame,
    sign_hello_ack,
    validator_set_hash,
)
from cowboy_protocol.transport.preimages import RunnerKey as SessionKey
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.session import AssignmentReceived, Authenticated, PongReceived
from cowboy_protocol.transport.validator_session import Admission, ValidatorSession
from cowboy_protocol.types.job_instructions import JobSubmit
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_runner.keyfile import RunnerKey
from cowboy_runner.link import Link, LinkConfig
from cowboy_runner.txbuild import Fees, build_result_submit
from tests.helpers import ALICE_SK
from tests.integration.transport_harness import ROOMY, WAIT_S, Attacker, NodeHarness, expect_goodbye, until
from tests.unit.node_harness import JOB_EXAMPLE, RUNNER_SKS

ATTACKER_SK = RUNNER_SKS[1]
"""Registered runner key the attackers use when they need an authenticated session."""
DEREGISTERED_SK = RUNNER_SKS[2]
"""Registered, then deregistered on chain."""
UNREGISTERED_SK = (0x3000).to_bytes(32, "big")
"""A valid secp256k1 key with no registration."""
FAKE_RUNNER_SIG = b"\x01" * 65
FAKE_VALIDATOR_SIG = b"\x02" * 64


@pytest.fixture(scope="module")
def h() -> Iterator[NodeHarness]:
    """The node under attack: runners 0 (honest, connected), 1 (attacker key) and 2 (deregistered)."""
    harness = NodeHarness(registered=(0, 1, 2), deregistered=(2,)).start()
    try:
        yield harness
    finally:
        harness.stop()


def attack(h: NodeHarness, coro_fn: object) -> None:
    """Run one attack coroutine, then require on-time blocks and an undisturbed honest runner."""

    async def body() -> None:
        start = h.node.chain.height
        await coro_fn()  # type: ignore[operator]
        await h.blocks_keep_coming(start)
        h.honest_ok()

    h.run(body())


# --- bytes on the wire ------------------------------------------------------------------------------------------


def test_garbage_datagrams_are_dropped_counted_and_never_answered(h: NodeHarness) -> None:
    async def go() -> None:
        before = h.stats.ignored_datagrams
        before_metric = h.metric("quic", "ignored_datagrams")
        datagrams = [b"", b"\x00", b"\xff" * 40, bytes(range(256)) * 4]
        datagrams += [bytes([0x40]) + bytes([i]) * 1250 for i in range(4)]  # short header, unknown connection
        datagrams += [bytes([0xC0]) + b"\x00\x00\x00\x01" + b"\x05" * 20]  # undersized Initial-looking
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setblocking(False)
        try:
            for d in datagrams:
                sock.sendto(d, ("127.0.0.1", h.port))
            # b"" may be swallowed by the kernel as a zero-length datagram; every other one must be counted.
            await until(lambda: h.stats.ignored_datagrams - before >= len(datagrams) - 1, "datagrams counted")
            await until(lambda: h.metric("quic", "ignored_datagrams") - before_metric >= len(datagrams) - 1,
                        "datagrams in the node metrics")
            with pytest.raises(BlockingIOError):  # nothing came back: no reflection, no amplification
                sock.recvfrom(65536)
        finally:
            sock.close()

    attack(h, go)


@pytest.mark.parametrize(("raw", "code"), [
    (b"\x00\x00\x00\x02\x01\xa0", "malformed_body"),  # a Hello whose body is an empty map
    (b"\x00\x00\x00\x03\x01\x1c\x00", "malformed_cbor"),  # reserved CBOR additional info
    ((MAX_FRAME_BYTES + 1).to_bytes(4, "big"), "frame_too_large"),  # only the prefix: refused before any payload
    (b"\xff\xff\xff\xff", "frame_too_large"),
    (b"\x00\x00\x00\x00", "frame_length_zero"),
    (b"\x00\x00\x00\x02\x99\xa0", "unknown_frame_type"),
])
def test_bad_frame_bytes_get_goodbye_protocol_error_and_are_counted(h: NodeHarness, raw: bytes, code: str) -> None:
    async def go() -> None:
        before = h.stats.decode_errors.get(code, 0)
        before_metric = h.metric("quic", f"decode_errors:{code}")
        before_goodbye = h.metric("goodbye", "local:protocol_error")

        async def send(a: Attacker) -> None:
            a.conn.send_raw(raw)

        bye = await expect_goodbye(h, send, GoodbyeReason.PROTOCOL_ERROR)
        assert bye.detail == code
        await until(lambda: h.stats.decode_errors.get(code, 0) == before + 1, f"decode_errors[{code}]")
        await until(lambda: h.metric("quic", f"decode_errors:{code}") == before_metric + 1, "metric counted")
        assert h.metric("goodbye", "local:protocol_error") == before_goodbye + 1  # the node closed, not the peer

    attack(h, go)


# --- frames out of order ----------------------------------------------------------------------------------------

def _runner_pk(sk: bytes = ATTACKER_SK) -> PubKey:
    return SessionKey(sk).pubkey


@pytest.mark.parametrize("frame", [
    HeartbeatPing(0, 1, FAKE_RUNNER_SIG),
    HelloAck(Role.RUNNER, _runner_pk(), 1, FAKE_RUNNER_SIG),
    JobAck(b"\x01" * 32, b"\x02" * 32, AckStatus.accepted(), FAKE_RUNNER_SIG),
    JobCancel(b"\x01" * 32, b"\x02" * 32, CancelReason.RESELECTED, FAKE_VALIDATOR_SIG),
], ids=lambda f: type(f).__name__)
def test_any_frame_before_hello_is_a_protocol_error(h: NodeHarness, frame: Frame) -> None:
    async def go() -> None:
        before = h.metric("goodbye", "local:protocol_error")

        async def send(a: Attacker) -> None:
            a.conn.send(frame)

        bye = await expect_goodbye(h, send, GoodbyeReason.PROTOCOL_ERROR)
        assert bye.detail == "expected_hello"
        await until(lambda: h.metric("goodbye", "local:protocol_error") == before + 1, "goodbye counted")

    attack(h, go)


async def _authenticated(h: NodeHarness, deviate: object, reason: GoodbyeReason, detail: str) -> Goodbye:
    """Handshake honestly as the attacker key, run ``deviate(attacker)``, expect the node's Goodbye."""
    label = f"local:{reason.name.lower()}"
    before = h.metric("goodbye", label)

    async def send(a: Attacker) -> None:
        await a.handshake(ATTACKER_SK)
        await deviate(a)  # type: ignore[operator]

    bye = await expect_goodbye(h, send, reason)
    assert bye.detail == detail
    assert bye.signed is not None  # after mutual authentication the node's Goodbye is signed (§12.5)
    await until(lambda: h.metric("goodbye", label) == before + 1, f"goodbye {label} counted")
    return bye


def _ctx(a: Attacker) -> ConnectionContext:
    assert a.session is not None and a.session.context is not None
    return a.session.context


def test_validator_or_assignment_frames_from_the_runner_are_protocol_errors(h: NodeHarness) -> None:
    vkey = ValidatorKey(b"\x09" * 32)

    async def cancel(a: Attacker) -> None:
        a.conn.send(JobCancel(b"\x01" * 32, b"\x02" * 32, CancelReason.RESELECTED, FAKE_VALIDATOR_SIG))

    async def pong(a: Attacker) -> None:
        a.conn.send(HeartbeatPong(0, True, 1, FAKE_VALIDATOR_SIG))

    async def forged_assignment(a: Attacker) -> None:  # a runner-forged JobAssignment, validly self-signed
        a.conn.send(make_assignment(h.chain_id, vkey, b"\x01" * 32, b"\xa0", 1, 100, _runner_pk()))

    async def go() -> None:
        for deviate in (cancel, pong, forged_assignment):
            await _authenticated(h, deviate, GoodbyeReason.PROTOCOL_ERROR, "unexpected_frame")

    attack(h, go)


def test_job_frames_for_a_job_never_pushed_are_protocol_errors(h: NodeHarness) -> None:
    async def ack(a: Attacker) -> None:
        a.conn.send(sign_frame(_ctx(a), SessionKey(ATTACKER_SK),
                               JobAck(b"\x07" * 32, b"\x08" * 32, AckStatus.accepted(), b"")))

    async def result(a: Attacker) -> None:
        a.conn.send(JobResult(b"\x07" * 32, b"\x00\x00\x00\x01\xa0"))

    async def go() -> None:
        await _authenticated(h, ack, GoodbyeReason.PROTOCOL_ERROR, "unknown_job")
        await _authenticated(h, result, GoodbyeReason.PROTOCOL_ERROR, "job_not_accepted")

    attack(h, go)


# --- handshake ----------------------------------------------------------------------------------------------------

def _hello(h: NodeHarness, sk: bytes, *, chain_id: str | None = None, vsh: bytes | None = None) -> Hello:
    return Hello(PROTOCOL_VERSION, h.chain_id if chain_id is None else chain_id, Role.RUNNER, _runner_pk(sk), 0,
                 h.vsh if vsh is None else vsh, b"\x33" * 32, 1)


@pytest.mark.parametrize(("case", "reason", "handshake_label"), [
    ("wrong_chain", GoodbyeReason.WRONG_CHAIN, None),
    ("wrong_validator_set", GoodbyeReason.WRONG_VALIDATOR_SET, None),
    ("unregistered", GoodbyeReason.NOT_REGISTERED, "not_registered"),
    ("deregistered", GoodbyeReason.DEREGISTERED, "deregistered"),
    ("version", GoodbyeReason.UNSUPPORTED_VERSION, None),
])
def test_hello_refused_with_the_admission_reason(h: NodeHarness, case: str, reason: GoodbyeReason,
                                                  handshake_label: str | None) -> None:
    hello = {
        "wrong_chain": _hello(h, ATTACKER_SK, chain_id="another-chain"),
        "wrong_validator_set": _hello(h, ATTACKER_SK, vsh=b"\x44" * 32),
        "unregistered": _hello(h, UNREGISTERED_SK),
        "deregistered": _hello(h, DEREGISTERED_SK),
        "version": replace(_hello(h, ATTACKER_SK), version=0x0200),
    }[case]

    async def go() -> None:
        label = f"local:{reason.name.lower()}"
        before = h.metric("goodbye", label)
        before_hs = h.metric("handshake", handshake_label) if handshake_label else 0.0

        async def send(a: Attacker) -> None:
            a.conn.send(hello)

        bye = await expect_goodbye(h, send, reason)
        assert bye.signed is None  # nothing is signed for an unauthenticated peer
        await until(lambda: h.metric("goodbye", label) == before + 1, "goodbye counted")
        if handshake_label:
            assert h.metric("handshake", handshake_label) == before_hs + 1

    attack(h, go)


def test_unadmitted_runner_gets_no_hello_or_proof_from_the_validator(h: NodeHarness) -> None:
    async def go() -> None:
        a = await Attacker.open(h)
        try:
            a.conn.send(_hello(h, UNREGISTERED_SK))
            bye = await a.goodbye()
        finally:
            a.abort()
        assert bye.reason is GoodbyeReason.NOT_REGISTERED
        assert not any(isinstance(f, Hello | HelloAck) for f in a.received)

    attack(h, go)


def test_bad_hello_ack_signature_is_auth_failed(h: NodeHarness) -> None:
    async def go() -> None:
        before = h.metric("goodbye", "local:auth_failed")

        async def send(a: Attacker) -> None:
            s = a.new_session(ATTACKER_SK)
            s.start(time.monotonic(), 1)
            a.flush()
            v_hello = await a.recv()
            assert isinstance(v_hello, Hello) and isinstance(await a.recv(), HelloAck)
            s.receive(v_hello, time.monotonic())  # learn the context only; do not answer
            assert s.context is not None
            good = sign_hello_ack(s.context, SessionKey(ATTACKER_SK), v_hello.challenge_nonce, 1)
            bad = bytes([good.signed_challenge[0] ^ 1]) + good.signed_challenge[1:]
            a.conn.send(replace(good, signed_challenge=bad))

        await expect_goodbye(h, send, GoodbyeReason.AUTH_FAILED)
        await until(lambda: h.metric("goodbye", "local:auth_failed") == before + 1, "goodbye counted")

    attack(h, go)


def test_hello_ack_replayed_from_another_connection_is_auth_failed(h: NodeHarness) -> None:
    async def go() -> None:
        before = h.metric("goodbye", "local:auth_failed")
        first = await Attacker.open(h)
        try:
            session = first.new_session(ATTACKER_SK)
            session.start(time.monotonic(), 1)
            first.flush()
            v_hello = await first.recv()
            session.receive(v_hello, time.monotonic())
            session.receive(await first.recv(), time.monotonic())
            sent = first.flush()
            ack = next(f for f in sent if isinstance(f, HelloAck))  # the genuine proof on connection 1

            async def replay(a: Attacker) -> None:
                a.conn.send(_hello(h, ATTACKER_SK))
                assert isinstance(await a.recv(), Hello) and isinstance(await a.recv(), HelloAck)
                a.conn.send(ack)

            await expect_goodbye(h, replay, GoodbyeReason.AUTH_FAILED)
            await until(lambda: h.metric("goodbye", "local:auth_failed") == before + 1, "goodbye counted")
            # The connection the proof came from is unaffected: a ping is still answered there.
            session.ping(time.monotonic(), h.node.chain.height)
            first.flush()
            await first.feed_until(lambda e: isinstance(e, PongReceived))
        finally:
            first.abort()

    attack(h, go)


# --- heartbeats ---------------------------------------------------------------------------------------------------

def test_non_increasing_ping_nonce_and_bad_ping_signature(h: NodeHarness) -> None:
    async def replayed_nonce(a: Attacker) -> None:
        assert a.session is not None
        a.session.ping(time.monotonic(), h.node.chain.height)
        a.flush()
        await a.feed_until(lambda e: isinstance(e, PongReceived))
        a.conn.send(sign_frame(_ctx(a), SessionKey(ATTACKER_SK),
                               HeartbeatPing(0, h.node.chain.height, b"")))

    async def bad_signature(a: Attacker) -> None:
        a.conn.send(HeartbeatPing(0, h.node.chain.height, FAKE_RUNNER_SIG))

    async def go() -> None:
        await _authenticated(h, replayed_nonce, GoodbyeReason.PROTOCOL_ERROR, "ping_nonce")
        await _authenticated(h, bad_signature, GoodbyeReason.AUTH_FAILED, "bad_signature")

    attack(h, go)


# --- listener limits ----------------------------------------------------------------------------------------------

def test_per_peer_hello_rate_limit(h: NodeHarness) -> None:
    limits = replace(ROOMY, hello_rate_per_peer=0.001, hello_burst_per_peer=2)

    async def go() -> None:
        service = await h.new_service(limits)
        assert service._server is not None
        stats = service._server.stats
        conns: list[Attacker] = []
        before_metric = h.metric("quic", "refused:rate_limited")
        try:
            for _ in range(2):
                conns.append(await Attacker.open(h, service.port))
            limited = await Attacker.open(h, service.port)  # TLS completes, its first byte is answered
            conns.append(limited)
            limited.conn.send(_hello(h, ATTACKER_SK))
            bye = await limited.goodbye()
            assert bye.reason is GoodbyeReason.RATE_LIMITED
            assert stats.refused.get("rate_limited") == 1
            assert stats.opened_total == 2  # the limited connection never reached a session
        finally:
            for c in conns:
                c.abort()
            await service.stop()
        assert h.metric("quic", "refused:rate_limited") == before_metric + 1

    attack(h, go)


def test_connection_cap_and_half_open_cap(h: NodeHarness) -> None:
    async def refused(limits: ServerLimits, why: str, *, authenticate_first: bool) -> None:
        service = await h.new_service(limits)
        assert service._server is not None
        stats = service._server.stats
        first = await Attacker.open(h, service.port)
        before_metric = h.metric("quic", f"refused:{why}")
        try:
            if authenticate_first:
                await first.handshake(ATTACKER_SK)
            with pytest.raises(ConnectionClosed) as e:
                await Attacker.open(h, service.port)
            assert f"TOO_MANY_CONNECTIONS:{why}" in e.value.reason
            assert stats.refused.get(why) == 1
            if not authenticate_first:
                # Once the half-open connection authenticates, its slot is free for a newcomer.
                await first.handshake(ATTACKER_SK)
                await until(lambda: stats.half_open == 0, "half-open count drops")
                second = await Attacker.open(h, service.port)
                second.abort()
        finally:
            first.abort()
            await service.stop()
        assert h.metric("quic", f"refused:{why}") == before_metric + 1

    async def go() -> None:
        await refused(replace(ROOMY, max_connections=1), "max_connections", authenticate_first=True)
        await refused(replace(ROOMY, max_half_open=1), "max_half_open", authenticate_first=False)

    attack(h, go)


# --- jobs: an attacker that gets a real push, then deviates -------------------------------------------------------

@pytest.fixture(scope="module")
def jobs() -> Iterator[NodeHarness]:
    """A node where the attacker key is the only registered runner, so every job is pushed to it."""
    harness = NodeHarness(registered=(1,), honest=False).start()
    try:
        yield harness
    finally:
        harness.stop()


async def _pushed(h: NodeHarness, a: Attacker) -> JobAssignment:
    """Handshake, keep pinging until present, submit a job, return the verified JobAssignment it pushed."""
    session = await a.handshake(ATTACKER_SK)

    async def pinger() -> None:
        while not session.closed:
            session.ping(time.monotonic(), h.node.chain.height)
            a.flush()
            await asyncio.sleep(0.2)

    task = asyncio.get_running_loop().create_task(pinger())
    try:
        await a.feed_until(lambda e: isinstance(e, PongReceived))
        await until(lambda: 0 in h.node.api.local_presence(), "attacker present")
        submit = h.nonces.tx(ALICE_SK, JobSubmit(parse_job_request_json(json.loads(JOB_EXAMPLE.read_text()))))
        h.node.api.submit_transaction(submit.to_bytes())
        job_id = derive_job_id(submit.tx_hash(), 0)
        events = await a.feed_until(lambda e: isinstance(e, AssignmentReceived) and e.frame.job_id == job_id)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return next(e.frame for e in events if isinstance(e, AssignmentReceived))


@pytest.mark.parametrize("case", ["result_tx_wrong_signer", "result_tx_wrong_job", "result_tx_wrong_kind"])
def test_result_frame_with_a_foreign_transaction_is_refused_and_never_forwarded(jobs: NodeHarness,
                                                                                case: str) -> None:
    h = jobs

    async def go() -> None:
        start = h.node.chain.height
        pushed_before = h.metric("dispatch", "pushed")
        counted_before = h.metric("result", case)
        a = await Attacker.open(h)
        try:
            assignment = await _pushed(h, a)
            assert h.metric("dispatch", "pushed") == pushed_before + 1
            assert a.session is not None
            a.session.ack(assignment.job_id, AckStatus.accepted())
            a.flush()
            signer = RUNNER_SKS[2] if case == "result_tx_wrong_signer" else ATTACKER_SK
            named = b"\x5a" * 32 if case == "result_tx_wrong_job" else assignment.job_id
            tx = build_result_submit(RunnerKey.from_private_key(signer), h.chain_id, job_id=named, result=b"{}",
                                     salt=b"", units=0, nonce=0, fees=Fees(10**6, 0, 10**6, 0))
            frame: Frame = (JobResultCommit(assignment.job_id, tx.to_bytes()) if case == "result_tx_wrong_kind"
                            else JobResult(assignment.job_id, tx.to_bytes()))
            a.conn.send(frame)
            bye = await a.goodbye()
            assert bye.reason is GoodbyeReason.PROTOCOL_ERROR and bye.detail == case
            await until(lambda: h.metric("result", case) == counted_before + 1, f"result {case} counted")
            assert tx.tx_hash() not in h.node.mempool  # never forwarded
            assert h.node.api.receipt(tx.tx_hash()) is None
        finally:
            a.abort()
        await h.blocks_keep_coming(start)

    h.run(go())


# --- runner side: a forging validator pushes to an honest runner ---------------------------------------------------

class _Forger:
    """A validator built on the QUIC adapter that authenticates honestly, then pushes ``forged`` frames verbatim
    (bypassing ``ValidatorSession.push``) and records the runner's JobAcks without judging them."""

    def __init__(self, key: ValidatorKey, chain_id: str, vsh: bytes, runner_address: bytes,
                 forged: list[JobAssignment]) -> None:
        self.key, self.chain_id, self.vsh = key, chain_id, vsh
        self.admission = Admission(True, None, 0, runner_address)
        self.forged = forged
        self.acks: list[JobAck] = []
        self.conn: FrameConnection | None = None
        self.session: ValidatorSession | None = None

    def __call__(self, conn: FrameConnection) -> _Forger:
        self.conn = conn
        return self

    def on_open(self, conn: FrameConnection) -> None:
        self.session = ValidatorSession(chain_id=self.chain_id, key=self.key, validator_set_hash=self.vsh,
                                        subset_epoch=0, channel_binding=conn.channel_binding,
                                        challenge_nonce=b"\x42" * 32, admit=lambda _pk: self.admission,
                                        height=lambda: 10, now=time.monotonic())

    def on_frame(self, frame: Frame) -> None:
        assert self.session is not None and self.conn is not None
        if isinstance(frame, JobAck):
            self.acks.append(frame)
            return
        events = self.session.receive(frame, time.monotonic())
        for f in self.session.take_outbound():
            self.conn.send(f)
        if any(isinstance(e, Authenticated) for e in events):
            for forged in self.forged:
                self.conn.send(forged)

    def on_close(self, reason: str) -> None:
        del reason


def test_forged_or_field_mismatched_assignment_is_rejected_unverifiable_by_an_honest_runner() -> None:
    validator = ValidatorKey(b"\x21" * 32)
    outsider = ValidatorKey(b"\x22" * 32)
    runner = SessionKey(RUNNER_SKS[0])
    other_runner = SessionKey(RUNNER_SKS[1])
    chain_id = "cowboy-attack"
    vset = (validator.pubkey.key,)
    vsh = validator_set_hash(vset)

    def job(i: int) -> bytes:
        return bytes([i]) * 32

    good = make_assignment(chain_id, validator, job(1), b"\xa1\x00\x01", 50, 80, runner.pubkey)
    forged = {
        "bad_signature": replace(make_assignment(chain_id, validator, job(2), b"\xa0", 50, 80, runner.pubkey),
                                 validator_signed=outsider.sign(good.assignment_hash)),
        "assignment_hash_mismatch": replace(make_assignment(chain_id, validator, job(3), b"\xa0", 50, 80,
                                                            runner.pubkey), deadline_block=500),
        "job_spec_hash_mismatch": replace(make_assignment(chain_id, validator, job(4), b"\xa0", 50, 80,
                                                          runner.pubkey), job_spec=b"\xa1\x00\x02"),
        "not_our_assignment": make_assignment(chain_id, validator, job(5), b"\xa0", 50, 80, other_runner.pubkey),
        "unknown_validator": make_assignment(chain_id, outsider, job(6), b"\xa0", 50, 80, runner.pubkey),
        "wrong_chain": make_assignment("another-chain", validator, job(7), b"\xa0", 50, 80, runner.pubkey),
    }
    forger = _Forger(validator, chain_id, vsh, runner.pubkey.address(), [*forged.values(), good])
    accepted: list[JobAssignment] = []

    async def on_assignment(link: Link, a: JobAssignment) -> None:
        accepted.append(a)
        link.ack(a.job_id, AckStatus.accepted())

    async def go() -> None:
        cert, key = generate_self_signed("forger")
        server = await start_server("127.0.0.1", 0, handler_factory=forger, limits=ROOMY, certificate_pem=cert,
                                    private_key_pem=key)
        link = Link(runner, LinkConfig(host="127.0.0.1", port=server.port, chain_id=chain_id, validator_set=vset,
                                       expected_validator=validator.pubkey.key, ping_interval_s=0.2),
                    height=lambda: 60, on_assignment=on_assignment)
        task = asyncio.get_running_loop().create_task(link.run())
        try:
            await until(lambda: len(forger.acks) == len(forged) + 1, "every push acknowledged")
        finally:
            link.stop()
            await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), WAIT_S)
            server.close()
        by_job = {ack.job_id: ack.status for ack in forger.acks}
        for i, name in enumerate(forged, start=2):
            assert by_job[job(i)] == AckStatus.reject(RejectReason.UNVERIFIABLE_ASSIGNMENT), name
        assert by_job[job(1)] == AckStatus.accepted()  # the genuine push on the same connection still works
        assert [a.job_id for a in accepted] == [job(1)]  # nothing forged reached the executor
        assert link.connects == 1  # an unverifiable push is answered, not a reason to drop the session

    asyncio.run(asyncio.wait_for(go(), 60))
