"""Runner side of a CIP-11 connection, sans-I/O (§6.2–§6.5, §10.1–§10.5, §12.5).

The runner is the QUIC client: :meth:`RunnerSession.start` queues its Hello. It checks the
validator's Hello (version, chain_id, the epoch-paired ``(subset_epoch, validator_set_hash)``,
role, identity = ``expected_validator`` when given and a member of the snapshot), verifies the
validator's HelloAck over its own challenge and the channel binding, then answers with its own
HelloAck and emits :class:`Authenticated`.

Assignments are verified with :func:`preimages.verify_assignment`; an unverifiable one is
answered ``JobAck{Reject(UnverifiableAssignment)}`` without closing the connection. The
session does not decide Accepted/Duplicate/Reject for valid pushes (the daemon owns the
once-per-job_id dedup across validators and the finalized-height check); it only enforces
that result frames go out on a stream this session acked Accepted, and the §10.5 cancel rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from cowboy_protocol.transport.enums import GoodbyeReason, RejectReason, Role
from cowboy_protocol.transport.frames import (
    PROTOCOL_VERSION,
    AckStatus,
    BackpressureSignal,
    CapabilityDelta,
    Frame,
    HeartbeatPing,
    HeartbeatPong,
    Hello,
    HelloAck,
    JobAck,
    JobAssignment,
    JobCancel,
    JobProgress,
    JobResult,
    JobResultCommit,
    PresenceReceiptFrame,
    PresenceReceiptRequest,
)
from cowboy_protocol.transport.preimages import (
    ConnectionContext,
    RunnerKey,
    presence_receipt_digest,
    sign_hello_ack,
    validator_set_hash,
    verify_assignment,
    verify_hello_ack,
    verify_signature,
)
from cowboy_protocol.transport.protocol_errors import LocalProtocolError, TransportError
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.session import (
    DEFAULT_HELLO_TIMEOUT_S,
    DEFAULT_IDLE_TIMEOUT_S,
    AssignmentReceived,
    AssignmentRejected,
    Authenticated,
    CancelReceived,
    Event,
    PongReceived,
    PresenceReceiptReceived,
    SessionBase,
    SessionState,
    check_32,
    check_peer_hello,
    is_terminal_ack,
    protocol_error,
)

__all__ = ["RunnerSession"]


class _Ack(Enum):
    PENDING = "pending"  # verified, waiting for the daemon's decision
    ACCEPTED = "accepted"
    ENDED = "ended"  # acked Duplicate/Reject, or unverifiable


@dataclass(slots=True)
class _Job:
    assignment: JobAssignment
    ack: _Ack = _Ack.PENDING
    cancelled: bool = False
    commit_sent: bool = False


class RunnerSession(SessionBase):
    """One validator connection as seen by the runner."""

    ROLE = Role.RUNNER

    def __init__(self, *, chain_id: str, key: RunnerKey, expected_validator: PubKey | None,
                 validator_set: Sequence[bytes], subset_epoch: int, channel_binding: bytes, challenge_nonce: bytes,
                 idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
                 hello_timeout_s: float = DEFAULT_HELLO_TIMEOUT_S) -> None:
        """``validator_set`` is the snapshot's ordered raw 32-byte peer_pubkeys (for validator_set_hash and
        membership); ``challenge_nonce`` is 32 fresh random bytes from the caller."""
        super().__init__(key=key, channel_binding=channel_binding, idle_timeout_s=idle_timeout_s,
                         hello_timeout_s=hello_timeout_s)
        self._chain_id = chain_id
        self._expected = expected_validator
        self._vset = tuple(bytes(k) for k in validator_set)
        self._vsh = validator_set_hash(self._vset)
        self._epoch = subset_epoch
        self._nonce = check_32(challenge_nonce, "challenge_nonce")
        self._height = 0
        self._peer_hello: Hello | None = None
        self._next_nonce = 0  # per-connection ping counter, restarts at 0 (§6.3)
        self._outstanding: tuple[int, float] | None = None  # (nonce, sent at) of the newest unanswered ping
        self._last_answered = -1  # highest nonce a pong was accepted (or skipped as stale) for
        self._accepting_sent = True  # a fresh handshake means accepting (§6.4)
        self._jobs: dict[bytes, _Job] = {}

    @property
    def validator_set_hash(self) -> bytes:
        """keccak256 over the snapshot's ordered raw peer_pubkeys, offered in Hello."""
        return self._vsh

    # --- local calls ---

    def start(self, now: float, height: int) -> None:
        """Queue the runner's Hello; the handshake and idle deadlines count from ``now``."""
        if self._state is not SessionState.INIT:
            raise LocalProtocolError("already_started", "start() called twice")
        self._height = height
        self._opened_at = now
        self._last_rx = now
        self._outbound.append(Hello(PROTOCOL_VERSION, self._chain_id, Role.RUNNER, self._key.pubkey, self._epoch,
                                    self._vsh, self._nonce, height))
        self._state = SessionState.HANDSHAKE

    def tick(self, now: float, height: int) -> list[Event]:
        """Handshake and idle deadlines (Goodbye IdleTimeout)."""
        self._height = max(self._height, height)
        return self._timeouts(now)

    def ping(self, now: float, height: int, accepting_new: bool = True) -> int:
        """Queue a signed HeartbeatPing with the next nonce and return it.

        If ``accepting_new`` differs from the state last signalled, a signed BackpressureSignal is
        queued first (§6.4), so the validator's pong already reflects it.
        """
        self._require_local_auth("ping")
        self._height = max(self._height, height)
        if accepting_new != self._accepting_sent:
            self.backpressure(accepting_new, height)
        nonce = self._next_nonce
        self._next_nonce += 1
        self._outbound.append(self._sign(HeartbeatPing(nonce, height, b"")))
        self._outstanding = (nonce, now)
        return nonce

    def request_presence_receipts(self, enabled: bool = True) -> None:
        """Queue a PresenceReceiptRequest (Mode A, CIP-11 §8.3): the validator then sends a PresenceReceipt with
        every pong until asked to stop."""
        self._require_local_auth("request_presence_receipts")
        self._outbound.append(PresenceReceiptRequest(enabled))

    def backpressure(self, accepting_new: bool, height: int) -> None:
        """Queue a signed BackpressureSignal (§6.4)."""
        self._require_local_auth("backpressure")
        self._accepting_sent = accepting_new
        self._outbound.append(self._sign(BackpressureSignal(accepting_new, height, b"")))

    def capability_delta(self, height: int, *, add_capabilities: Iterable[str] = (),
                         remove_capabilities: Iterable[str] = (), add_entitlements: Iterable[bytes] = (),
                         remove_entitlements: Iterable[bytes] = ()) -> None:
        """Queue a signed, advisory CapabilityDelta (§6.5); lists are de-duplicated and sorted bytewise."""
        self._require_local_auth("capability_delta")

        def texts(items: Iterable[str]) -> tuple[str, ...]:
            return tuple(sorted(set(items), key=lambda t: t.encode()))

        def hashes(items: Iterable[bytes]) -> tuple[bytes, ...]:
            return tuple(sorted({bytes(x) for x in items}))

        self._outbound.append(self._sign(CapabilityDelta(texts(add_capabilities), texts(remove_capabilities),
                                                         hashes(add_entitlements), hashes(remove_entitlements),
                                                         height, b"")))

    def ack(self, job_id: bytes, status: AckStatus) -> None:
        """Queue the signed JobAck for a verified assignment awaiting the daemon's decision (§10.2)."""
        self._require_local_auth("ack")
        job = self._jobs.get(job_id)
        if job is None or job.ack is not _Ack.PENDING:
            raise LocalProtocolError("no_pending_assignment", "no verified assignment awaiting an ack for job_id")
        job.ack = _Ack.ENDED if is_terminal_ack(status) else _Ack.ACCEPTED
        self._outbound.append(self._sign(JobAck(job_id, job.assignment.assignment_hash, status, b"")))

    def send_progress(self, job_id: bytes, permille: int, message: str | None = None) -> None:
        """Queue an informational JobProgress for an Accepted, not cancelled job (§10.4)."""
        job = self._accepted(job_id, "JobProgress")
        if job.cancelled:
            raise LocalProtocolError("job_cancelled", "job was cancelled")
        self._outbound.append(JobProgress(job_id, permille, message))

    def send_commit(self, job_id: bytes, tx_bytes: bytes) -> None:
        """Queue a JobResultCommit (signed transaction) on the Accepted job; not after a cancel (§10.5)."""
        job = self._accepted(job_id, "JobResultCommit")
        if job.cancelled:
            raise LocalProtocolError("job_cancelled", "no new commitment after JobCancel (§10.5)")
        _check_tx(tx_bytes)
        job.commit_sent = True
        self._outbound.append(JobResultCommit(job_id, bytes(tx_bytes)))

    def send_result(self, job_id: bytes, tx_bytes: bytes) -> None:
        """Queue a JobResult on the Accepted job; after a cancel only if a commitment was already sent (§10.5)."""
        job = self._accepted(job_id, "JobResult")
        if job.cancelled and not job.commit_sent:
            raise LocalProtocolError("job_cancelled", "no result frames after JobCancel without a prior commit")
        _check_tx(tx_bytes)
        self._outbound.append(JobResult(job_id, bytes(tx_bytes)))

    def forget(self, job_id: bytes) -> None:
        """Drop a job's tracking once it is terminal (bounds memory); later frames for it are errors."""
        self._jobs.pop(job_id, None)

    def _accepted(self, job_id: bytes, what: str) -> _Job:
        self._require_local_auth(what)
        job = self._jobs.get(job_id)
        if job is None or job.ack is not _Ack.ACCEPTED:
            raise LocalProtocolError("job_not_accepted", f"{what} only for a job this session acked Accepted")
        return job

    # --- frame handling ---

    def _dispatch(self, frame: Frame, now: float) -> list[Event]:
        if self._state is SessionState.INIT:
            raise protocol_error("not_started", f"{type(frame).__name__} before the runner's Hello")
        if self._state is SessionState.HANDSHAKE:
            if self._peer_hello is None:
                if not isinstance(frame, Hello):
                    raise protocol_error("expected_hello", f"{type(frame).__name__} before the validator's Hello")
                return self._on_hello(frame)
            if not isinstance(frame, HelloAck):
                raise protocol_error("expected_hello_ack", f"{type(frame).__name__} before the validator's HelloAck")
            return self._on_hello_ack(frame)
        ctx = self._require_auth(frame)
        if isinstance(frame, HeartbeatPong):
            return self._on_pong(frame, now)
        if isinstance(frame, JobAssignment):
            return self._on_assignment(ctx, frame)
        if isinstance(frame, JobCancel):
            return self._on_cancel(frame)
        if isinstance(frame, PresenceReceiptFrame):
            return self._on_receipt(ctx, frame)
        raise protocol_error("unexpected_frame", f"{type(frame).__name__} is not sent to a runner")

    def _on_hello(self, hello: Hello) -> list[Event]:
        version = check_peer_hello(hello, chain_id=self._chain_id, subset_epoch=self._epoch, vset_hash=self._vsh,
                                   peer_role=Role.VALIDATOR)
        if self._expected is not None and hello.party_pubkey != self._expected:
            raise protocol_error("unexpected_validator", "validator key differs from the one dialled",
                                 GoodbyeReason.AUTH_FAILED)
        if hello.party_pubkey.key not in self._vset:
            raise protocol_error("validator_not_in_snapshot", "validator key is not in the snapshot",
                                 GoodbyeReason.AUTH_FAILED)
        self._peer_hello = hello
        self._ctx = ConnectionContext(self._chain_id, version, self._key.pubkey, hello.party_pubkey, self._epoch,
                                      self._vsh, self._binding)
        return []

    def _on_hello_ack(self, ack: HelloAck) -> list[Event]:
        assert self._ctx is not None and self._peer_hello is not None
        verify_hello_ack(self._ctx, ack, Role.VALIDATOR, self._nonce)
        self._outbound.append(sign_hello_ack(self._ctx, self._key, self._peer_hello.challenge_nonce, self._height))
        self._state = SessionState.AUTHENTICATED
        return [Authenticated(self._ctx.validator_pubkey)]

    def _on_pong(self, pong: HeartbeatPong, now: float) -> list[Event]:
        echo = pong.nonce_echo
        newest = self._next_nonce - 1
        if echo <= self._last_answered or echo > newest:
            raise protocol_error("pong_echo", f"pong echoes nonce {echo}, not an unanswered ping")
        self._verify(pong, Role.VALIDATOR)
        self._last_answered = echo
        if self._outstanding is None or echo != self._outstanding[0]:
            # §6.3: only the most recent outstanding ping's pong counts; an older one that crossed a newer
            # ping in flight is refused as liveness evidence, without closing the connection (project choice).
            return []
        sent_at = self._outstanding[1]
        self._outstanding = None
        return [PongReceived(echo, now - sent_at, pong.accepting_new, pong.block_height)]

    def _on_receipt(self, ctx: ConnectionContext, frame: PresenceReceiptFrame) -> list[Event]:
        # Only a receipt the chain would accept from this validator for us is worth keeping: the connection's keys
        # and epoch pair, signed for this chain (a validator sending anything else is misbehaving: AuthFailed).
        if (frame.runner_pubkey != ctx.runner_pubkey or frame.validator_pubkey != ctx.validator_pubkey
                or frame.subset_epoch != ctx.subset_epoch or frame.validator_set_hash != ctx.validator_set_hash):
            raise protocol_error("receipt_binding", "PresenceReceipt not bound to this connection",
                                 GoodbyeReason.AUTH_FAILED)
        digest = presence_receipt_digest(ctx.chain_id, frame.runner_pubkey, frame.validator_pubkey, frame.subset_epoch,
                                         frame.validator_set_hash, frame.block_height, frame.nonce_echo,
                                         frame.accepting_new)
        try:
            verify_signature(Role.VALIDATOR, ctx.validator_pubkey, digest, frame.validator_signed)
        except TransportError:
            raise protocol_error("receipt_signature", "PresenceReceipt signature does not verify",
                                 GoodbyeReason.AUTH_FAILED) from None
        return [PresenceReceiptReceived(frame)]

    def _on_assignment(self, ctx: ConnectionContext, frame: JobAssignment) -> list[Event]:
        try:
            verify_assignment(ctx, frame, self._vset)
        except TransportError as e:
            status = AckStatus.reject(RejectReason.UNVERIFIABLE_ASSIGNMENT)
            self._outbound.append(self._sign(JobAck(frame.job_id, frame.assignment_hash, status, b"")))
            prior = self._jobs.get(frame.job_id)
            if prior is None or prior.ack is _Ack.ENDED:
                # Remembered only so a JobCancel crossing our Reject is not taken for an unknown job.
                self._jobs[frame.job_id] = _Job(frame, _Ack.ENDED)
            return [AssignmentRejected(frame.job_id, e.code)]
        prior = self._jobs.get(frame.job_id)
        if prior is not None and prior.ack is not _Ack.ENDED and not prior.cancelled:
            raise protocol_error("job_in_flight", "second assignment for a job_id still in flight on this session")
        self._jobs[frame.job_id] = _Job(frame)
        return [AssignmentReceived(frame)]

    def _on_cancel(self, cancel: JobCancel) -> list[Event]:
        job = self._jobs.get(cancel.job_id)
        if job is None:
            raise protocol_error("unknown_job", "JobCancel for a job never assigned on this session")
        self._verify(cancel, Role.VALIDATOR)
        if cancel.assignment_hash != job.assignment.assignment_hash:
            raise protocol_error("cancel_hash_mismatch", "JobCancel assignment_hash differs from the assignment")
        if job.ack is _Ack.ENDED or job.cancelled:
            return []  # nothing in flight here: the cancel crossed our Duplicate/Reject
        job.cancelled = True
        return [CancelReceived(cancel.job_id, cancel.reason)]


def _check_tx(tx_bytes: bytes) -> None:
    """``u32_be(len(body)) ‖ body`` with a non-empty body, checked before queuing (the codec re-checks on encode)."""
    if len(tx_bytes) < 5 or int.from_bytes(tx_bytes[:4], "big") != len(tx_bytes) - 4:
        raise LocalProtocolError("bad_tx_bytes", "tx_bytes must be u32_be(len(body)) ‖ body")
