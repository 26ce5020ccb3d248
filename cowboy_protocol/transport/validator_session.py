"""Validator side of a CIP-11 connection, sans-I/O (§6.2–§6.5, §10, §11.1, §12.5).

The runner is the QUIC client and speaks first. Handshake::

    runner                         validator (this class)
      Hello(challenge r) ───────►  checks: version, chain_id, (epoch, validator_set_hash), role, admit(pubkey)
                         ◄───────  Hello(challenge v), HelloAck(sign r)
      HelloAck(sign v)   ───────►  verify ⇒ AUTHENTICATED, emit Authenticated (once)

Both signatures cover the TLS ``channel_binding``, so a HelloAck replayed from another
connection fails (AuthFailed). Before AUTHENTICATED no frame other than Hello, HelloAck or
Goodbye is accepted (ProtocolError); no presence is recorded and nothing can be pushed.
``admit`` is a side-effect-free lookup supplied by the node (registered / not Deregistered /
this validator in Sub(runner)); it is called once, on the Hello, before this side signs anything.
Per-peer Hello rate limiting and connection caps (§6.2, §6.6) belong to the listener, not here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from cowboy_protocol.transport.enums import CancelReason, GoodbyeReason, Role
from cowboy_protocol.transport.frames import (
    PROTOCOL_VERSION,
    BackpressureSignal,
    CapabilityDelta,
    Frame,
    HeartbeatPing,
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
    ValidatorKey,
    presence_receipt_digest,
    sign_heartbeat_pong,
    sign_hello_ack,
    verify_heartbeat_ping,
    verify_hello_ack,
)
from cowboy_protocol.transport.protocol_errors import LocalProtocolError
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.session import (
    DEFAULT_HELLO_TIMEOUT_S,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_CONTROL_RATE,
    DEFAULT_MAX_PING_RATE,
    AckReceived,
    AckTimedOut,
    Authenticated,
    BackpressureReceived,
    CapabilityDeltaReceived,
    Event,
    PresenceRefreshed,
    PresenceWithdrawn,
    ProgressReceived,
    RateBucket,
    ResultDropped,
    ResultFrame,
    SessionBase,
    SessionState,
    check_32,
    check_peer_hello,
    is_terminal_ack,
    protocol_error,
)

__all__ = ["DEFAULT_ACK_TIMEOUT_BLOCKS", "Admission", "ValidatorSession"]

DEFAULT_ACK_TIMEOUT_BLOCKS = 15
"""§13 ACK_TIMEOUT_BLOCKS: no JobAck this many blocks after the push ⇒ HardFailure (§10.6)."""

_ADMISSION_REASONS = frozenset({GoodbyeReason.NOT_REGISTERED, GoodbyeReason.DEREGISTERED, GoodbyeReason.NOT_IN_SUBSET,
                                GoodbyeReason.WRONG_VALIDATOR_SET, GoodbyeReason.TOO_MANY_CONNECTIONS,
                                GoodbyeReason.RATE_LIMITED, GoodbyeReason.SHUTDOWN})


@dataclass(frozen=True, slots=True)
class Admission:
    """The node's verdict on a runner key offered in Hello (§5.2, §6.2); the session only obeys it."""

    ok: bool
    """True to continue the handshake."""
    reason: GoodbyeReason | None = None
    """When not ok: NotRegistered, Deregistered, NotInSubset (or a listener-level reason); None ⇒ NotRegistered."""
    runner_index: int | None = None
    """When ok: the runner's registry index (reported in Authenticated / presence events)."""
    address: bytes | None = None
    """When ok: the runner's 20-byte registry address."""

    def __post_init__(self) -> None:
        if not self.ok and self.reason is not None and self.reason not in _ADMISSION_REASONS:
            raise ValueError(f"{self.reason.name} is not an admission reason")


class _Ack(Enum):
    AWAITING = "awaiting"
    ACCEPTED = "accepted"
    ENDED = "ended"  # Duplicate or Reject: nothing more may flow for it on this session


@dataclass(slots=True)
class _Job:
    assignment: JobAssignment
    pushed_height: int
    ack: _Ack = _Ack.AWAITING
    cancelled: bool = False
    commit_seen: bool = False  # a JobResultCommit was forwarded before any cancel
    ack_timed_out: bool = False


class ValidatorSession(SessionBase):
    """One runner connection as seen by the validator."""

    ROLE = Role.VALIDATOR

    def __init__(self, *, chain_id: str, key: ValidatorKey, validator_set_hash: bytes, subset_epoch: int,
                 channel_binding: bytes, challenge_nonce: bytes, admit: Callable[[PubKey], Admission],
                 height: Callable[[], int], now: float, max_ping_rate: float = DEFAULT_MAX_PING_RATE,
                 max_control_rate: float = DEFAULT_MAX_CONTROL_RATE, idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
                 hello_timeout_s: float = DEFAULT_HELLO_TIMEOUT_S,
                 ack_timeout_blocks: int = DEFAULT_ACK_TIMEOUT_BLOCKS,
                 admit_paired: Callable[[PubKey, int, bytes], Admission] | None = None) -> None:
        """``now`` is when the connection was accepted (the handshake deadline counts from it);
        ``challenge_nonce`` is 32 fresh random bytes from the caller (the session draws no randomness).

        ``admit_paired`` (§5.3 reconfiguration overlap): when given, the Hello's ``(subset_epoch,
        validator_set_hash)`` is not compared with ``subset_epoch``/``validator_set_hash`` here; instead the node's
        ``admit_paired(runner, offered_epoch, offered_hash)`` selects the one valid snapshot the pair names and
        checks membership in it (``Goodbye{WrongValidatorSet}`` / ``{NotInSubset}``), and the connection is then
        bound to the offered pair (HelloAck, pongs). ``admit`` is unused then."""
        super().__init__(key=key, channel_binding=channel_binding, idle_timeout_s=idle_timeout_s,
                         hello_timeout_s=hello_timeout_s)
        self._chain_id = chain_id
        self._vsh = check_32(validator_set_hash, "validator_set_hash")
        self._epoch = subset_epoch
        self._nonce = check_32(challenge_nonce, "challenge_nonce")
        self._admit = admit
        self._height = height
        self._ack_timeout_blocks = ack_timeout_blocks
        self._admit_paired = admit_paired
        self._ping_bucket = RateBucket(max_ping_rate, now)
        self._control_bucket = RateBucket(max_control_rate, now)
        self._opened_at = now
        self._last_rx = now
        self._admission: Admission | None = None
        self._last_ping_nonce: int | None = None
        self._accepting_new = True  # a fresh handshake restores capacity (§6.4)
        self._receipts_requested = False  # Mode A: the runner asked for PresenceReceipts (CIP-11 §8.3)
        self._jobs: dict[bytes, _Job] = {}

    # --- public API ---

    @property
    def admission(self) -> Admission | None:
        """The admission verdict obtained on the Hello (None before)."""
        return self._admission

    @property
    def subset_epoch(self) -> int:
        """The ``subset_epoch`` this connection is bound to (the offered one once a Hello was admitted)."""
        return self._epoch

    @property
    def validator_set_hash(self) -> bytes:
        """The ``validator_set_hash`` this connection is bound to."""
        return self._vsh

    @property
    def ack_timeout_blocks(self) -> int:
        """ACK_TIMEOUT_BLOCKS applied to this session's pushes (the governed value, updated per block)."""
        return self._ack_timeout_blocks

    @ack_timeout_blocks.setter
    def ack_timeout_blocks(self, value: int) -> None:
        if value < 1:
            raise ValueError("ACK_TIMEOUT_BLOCKS must be at least 1")
        self._ack_timeout_blocks = value

    @property
    def accepting_new(self) -> bool:
        """The runner's last signalled backpressure state (True until a BackpressureSignal says otherwise)."""
        return self._accepting_new

    def tick(self, now: float, height: int) -> list[Event]:
        """Deadlines: handshake and idle timeouts (Goodbye IdleTimeout), then per-job ACK_TIMEOUT_BLOCKS."""
        if self._state is SessionState.AUTHENTICATED and not self._jobs and now - self._last_rx < self._idle_timeout:
            return []  # the usual tick (five a second per session): what the checks below would find
        events = self._timeouts(now)
        if self._state is not SessionState.AUTHENTICATED:
            return events
        for job_id, job in self._jobs.items():
            if (job.ack is _Ack.AWAITING and not job.ack_timed_out
                    and height >= job.pushed_height + self._ack_timeout_blocks):
                job.ack_timed_out = True
                events.append(AckTimedOut(job_id))
        return events

    def push(self, assignment: JobAssignment) -> None:
        """Queue a JobAssignment built by :func:`preimages.make_assignment`; it then awaits its JobAck.

        Raises :class:`LocalProtocolError` before authentication, if the assignment is not for this
        connection's runner or not signed as this validator, or if the job is still in flight here.
        """
        ctx = self._require_local_auth("push")
        if assignment.runner_pubkey != ctx.runner_pubkey or assignment.validator_pubkey != ctx.validator_pubkey:
            raise LocalProtocolError("wrong_connection", "assignment is not for this runner/validator pair")
        prior = self._jobs.get(assignment.job_id)
        if prior is not None and not prior.cancelled and prior.ack is not _Ack.ENDED:
            raise LocalProtocolError("job_in_flight", "job_id already in flight on this session")
        self._jobs[assignment.job_id] = _Job(assignment, self._height())
        self._outbound.append(assignment)

    def cancel(self, job_id: bytes, reason: CancelReason) -> bool:
        """Queue a signed JobCancel (§10.5); False (nothing sent) if the runner already ended the job here."""
        self._require_local_auth("cancel")
        job = self._jobs.get(job_id)
        if job is None:
            raise LocalProtocolError("unknown_job", "job_id was not pushed on this session")
        if job.ack is _Ack.ENDED or job.cancelled:
            return False
        job.cancelled = True
        self._outbound.append(self._sign(JobCancel(job_id, job.assignment.assignment_hash, reason, b"")))
        return True

    def forget(self, job_id: bytes) -> None:
        """Drop a job's tracking once it is terminal on chain (bounds memory); later frames for it are errors."""
        self._jobs.pop(job_id, None)

    # --- frame handling ---

    def _dispatch(self, frame: Frame, now: float) -> list[Event]:
        if self._state is SessionState.INIT:
            if not isinstance(frame, Hello):
                raise protocol_error("expected_hello", f"{type(frame).__name__} before Hello")
            return self._on_hello(frame)
        if self._state is SessionState.HANDSHAKE:
            if not isinstance(frame, HelloAck):
                raise protocol_error("expected_hello_ack", f"{type(frame).__name__} before the runner's HelloAck")
            return self._on_hello_ack(frame)
        self._require_auth(frame)
        if isinstance(frame, HeartbeatPing):
            return self._on_ping(frame, now)
        if isinstance(frame, BackpressureSignal):
            return self._on_backpressure(frame, now)
        if isinstance(frame, PresenceReceiptRequest):
            self._take_control(now)
            self._receipts_requested = frame.enabled
            return []
        if isinstance(frame, CapabilityDelta):
            self._take_control(now)
            self._verify(frame, Role.RUNNER)
            return [CapabilityDeltaReceived(frame)]
        if isinstance(frame, JobAck):
            return self._on_ack(frame)
        if isinstance(frame, JobProgress):
            job = self._accepted_job(frame.job_id, "JobProgress")
            return [] if job.cancelled else [ProgressReceived(frame.job_id, frame.permille, frame.message)]
        if isinstance(frame, (JobResultCommit, JobResult)):
            return self._on_result(frame)
        raise protocol_error("unexpected_frame", f"{type(frame).__name__} is not sent to a validator")

    def _on_hello(self, hello: Hello) -> list[Event]:
        if self._admit_paired is None:
            version = check_peer_hello(hello, chain_id=self._chain_id, subset_epoch=self._epoch,
                                       vset_hash=self._vsh, peer_role=Role.RUNNER)
            admission = self._admit(hello.party_pubkey)
        else:
            # §5.3/§6.2: the offered pair selects the snapshot; the node checks it is one valid at the head.
            version = check_peer_hello(hello, chain_id=self._chain_id, subset_epoch=hello.subset_epoch,
                                       vset_hash=hello.validator_set_hash, peer_role=Role.RUNNER)
            admission = self._admit_paired(hello.party_pubkey, hello.subset_epoch, hello.validator_set_hash)
            if admission.ok:
                self._epoch, self._vsh = hello.subset_epoch, check_32(hello.validator_set_hash, "validator_set_hash")
        if not admission.ok:
            reason = admission.reason or GoodbyeReason.NOT_REGISTERED
            raise protocol_error("not_admitted", f"runner not admitted: {reason.name}", reason)
        self._admission = admission
        self._ctx = ConnectionContext(self._chain_id, version, hello.party_pubkey, self._key.pubkey, self._epoch,
                                      self._vsh, self._binding)
        height = self._height()
        self._outbound.append(Hello(PROTOCOL_VERSION, self._chain_id, Role.VALIDATOR, self._key.pubkey, self._epoch,
                                    self._vsh, self._nonce, height))
        self._outbound.append(sign_hello_ack(self._ctx, self._key, hello.challenge_nonce, height))
        self._state = SessionState.HANDSHAKE
        return []

    def _on_hello_ack(self, ack: HelloAck) -> list[Event]:
        assert self._ctx is not None and self._admission is not None
        verify_hello_ack(self._ctx, ack, Role.RUNNER, self._nonce)
        self._state = SessionState.AUTHENTICATED
        return [Authenticated(self._ctx.runner_pubkey, self._admission.address, self._admission.runner_index)]

    def _runner_index(self) -> int | None:
        return None if self._admission is None else self._admission.runner_index

    def _on_ping(self, ping: HeartbeatPing, now: float) -> list[Event]:
        # Rate limit before the signature check: an over-eager peer should not buy our CPU.
        if not self._ping_bucket.take(now):
            raise protocol_error("ping_rate", "HeartbeatPing rate above limit", GoodbyeReason.RATE_LIMITED)
        if self._last_ping_nonce is not None and ping.nonce <= self._last_ping_nonce:
            raise protocol_error("ping_nonce", f"ping nonce {ping.nonce} not above {self._last_ping_nonce}")
        ctx = self._ctx
        assert ctx is not None  # AUTHENTICATED (checked by _dispatch)
        verify_heartbeat_ping(ctx, ping)
        self._last_ping_nonce = ping.nonce
        height = self._height()
        self._outbound.append(sign_heartbeat_pong(ctx, self._key, ping.nonce, self._accepting_new, height))
        if self._receipts_requested:  # §8.3: the receipt goes alongside the pong, at this validator's head height
            digest = presence_receipt_digest(ctx.chain_id, ctx.runner_pubkey, ctx.validator_pubkey, ctx.subset_epoch,
                                             ctx.validator_set_hash, height, ping.nonce, self._accepting_new)
            self._outbound.append(PresenceReceiptFrame(ctx.runner_pubkey, ctx.validator_pubkey, ctx.subset_epoch,
                                                       ctx.validator_set_hash, height, ping.nonce,
                                                       self._accepting_new, self._key.sign(digest)))
        return [PresenceRefreshed(self._runner_index(), self._accepting_new, height)]

    def _take_control(self, now: float) -> None:
        if not self._control_bucket.take(now):
            raise protocol_error("control_rate", "control frame rate above limit", GoodbyeReason.RATE_LIMITED)

    def _on_backpressure(self, frame: BackpressureSignal, now: float) -> list[Event]:
        self._take_control(now)
        self._verify(frame, Role.RUNNER)
        self._accepting_new = frame.accepting_new
        events: list[Event] = [BackpressureReceived(frame.accepting_new, frame.block_height)]
        if not frame.accepting_new:
            events.append(PresenceWithdrawn(self._runner_index()))
        return events

    def _on_ack(self, ack: JobAck) -> list[Event]:
        job = self._jobs.get(ack.job_id)
        if job is None:
            raise protocol_error("unknown_job", "JobAck for a job not pushed on this session")
        self._verify(ack, Role.RUNNER)
        if ack.assignment_hash != job.assignment.assignment_hash:
            raise protocol_error("ack_hash_mismatch", "JobAck assignment_hash differs from the pushed assignment")
        if job.ack is not _Ack.AWAITING:
            raise protocol_error("duplicate_ack", "second JobAck for the same assignment")
        job.ack = _Ack.ENDED if is_terminal_ack(ack.status) else _Ack.ACCEPTED
        return [AckReceived(ack.job_id, ack.status)]

    def _accepted_job(self, job_id: bytes, what: str) -> _Job:
        job = self._jobs.get(job_id)
        if job is None or job.ack is not _Ack.ACCEPTED:
            raise protocol_error("job_not_accepted", f"{what} for a job not acked Accepted on this session")
        return job

    def _on_result(self, frame: JobResultCommit | JobResult) -> list[Event]:
        kind = "commit" if isinstance(frame, JobResultCommit) else "result"
        job = self._accepted_job(frame.job_id, type(frame).__name__)
        # §10.5: after a cancel, new result frames are dropped — except the reveal of a commitment already
        # received, which the runner is still obliged to publish (CIP-2 non-reveal slashing has no carve-out).
        if job.cancelled and (kind == "commit" or not job.commit_seen):
            return [ResultDropped(frame.job_id, kind)]
        if kind == "commit":
            job.commit_seen = True
        return [ResultFrame(frame.job_id, kind, frame.tx_bytes)]
