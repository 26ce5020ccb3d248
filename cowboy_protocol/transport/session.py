"""Shared pieces of the sans-I/O CIP-11 session state machines (§6, §10–§12).

A session is one QUIC connection seen from one side. It never reads a clock, a socket or
a random source: the caller passes ``now`` (seconds, any monotonic origin) and chain
heights in, feeds decoded frames to ``receive``, and collects what to send with
``take_outbound``. Every remote violation becomes exactly one ``Goodbye{reason}`` frame
plus a :class:`Closed` event; afterwards the session is CLOSED and ignores everything
(DESIGN.md §3 rule 5: a remote protocol error is a close, never a crash).

The QUIC adapter maps frames to streams: Hello/HelloAck/heartbeats/control/Goodbye on the
control stream, and each JobAssignment on a new validator-initiated stream that then also
carries that job's JobAck, JobProgress, JobResultCommit, JobResult and JobCancel (so a
cancel can never overtake its assignment). Frames carry ``job_id``, so the state machines
need no stream ids.

States (both roles)::

    INIT ──start/Hello──► HANDSHAKE ──both HelloAcks verified──► AUTHENTICATED
      │                       │                                      │
      └───────────────────────┴──── fatal error / Goodbye / close ───┴──► CLOSED
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from cowboy_protocol.transport.enums import AckKind, CancelReason, GoodbyeReason, Role
from cowboy_protocol.transport.frames import (
    MAX_TEXT_BYTES,
    PROTOCOL_VERSION,
    AckStatus,
    CapabilityDelta,
    Frame,
    Goodbye,
    Hello,
    JobAssignment,
    PresenceReceiptFrame,
    check_version,
)
from cowboy_protocol.transport.preimages import ConnectionContext, Signer, sign_frame, verify_frame
from cowboy_protocol.transport.protocol_errors import LocalProtocolError, RemoteProtocolError, TransportError
from cowboy_protocol.transport.pubkeys import PubKey

__all__ = [
    "DEFAULT_HELLO_TIMEOUT_S",
    "DEFAULT_IDLE_TIMEOUT_S",
    "DEFAULT_MAX_CONTROL_RATE",
    "DEFAULT_MAX_PING_RATE",
    "AckReceived",
    "AckTimedOut",
    "AssignmentReceived",
    "AssignmentRejected",
    "Authenticated",
    "BackpressureReceived",
    "CancelReceived",
    "CapabilityDeltaReceived",
    "Closed",
    "Event",
    "PongReceived",
    "PresenceReceiptReceived",
    "PresenceRefreshed",
    "PresenceWithdrawn",
    "ProgressReceived",
    "RateBucket",
    "ResultDropped",
    "ResultFrame",
    "SessionBase",
    "SessionState",
]

DEFAULT_IDLE_TIMEOUT_S = 30.0
"""No frame from the peer for this long ⇒ ``Goodbye{IdleTimeout}`` (project choice: two PRESENCE_TIMEOUT_BLOCKS
windows of 15 blocks at the 1 s block target, so a runner dropped from presence gets one more window to recover)."""
DEFAULT_HELLO_TIMEOUT_S = 10.0
"""Handshake not completed this long after the connection opened ⇒ ``Goodbye{IdleTimeout}`` (project choice)."""
DEFAULT_MAX_PING_RATE = 10.0
"""HeartbeatPings per second a validator tolerates (bucket of this many, refilled at this rate; project choice —
HEARTBEAT_BLOCKS = 1 means about one per second)."""
DEFAULT_MAX_CONTROL_RATE = 10.0
"""BackpressureSignal + CapabilityDelta frames per second a validator tolerates (same bucket rule; project choice)."""


class SessionState(Enum):
    """Lifecycle of a session (see the module diagram)."""

    INIT = "init"
    """Runner: before ``start``; validator: waiting for the runner's Hello."""
    HANDSHAKE = "handshake"
    """Hellos exchanged, at least one HelloAck still unverified."""
    AUTHENTICATED = "authenticated"
    """Both HelloAcks verified; every frame kind of the role may flow."""
    CLOSED = "closed"
    """Terminal: nothing is accepted or sent."""


# --- events -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Authenticated:
    """Both proofs verified (§6.2); emitted once per session."""

    peer_pubkey: PubKey
    """The peer's authenticated identity (runner scheme 0x01 / validator scheme 0x02)."""
    address: bytes | None = None
    """Validator side: the runner's 20-byte registry address from :class:`Admission`."""
    runner_index: int | None = None
    """Validator side: the runner's registry index from :class:`Admission`."""


@dataclass(frozen=True, slots=True)
class PresenceRefreshed:
    """Validator side: a valid HeartbeatPing (§6.3). Record/refresh local presence only if ``accepting_new``."""

    runner_index: int | None
    """The runner's registry index."""
    accepting_new: bool
    """False while the runner is backpressured (§6.4): update liveness, but do not add it to local presence."""
    height: int
    """The validator's own height when the ping arrived (the runner's claimed height is not trusted)."""


@dataclass(frozen=True, slots=True)
class PresenceWithdrawn:
    """Validator side: the runner signalled ``accepting_new = false``; remove it from local presence now (§6.4)."""

    runner_index: int | None
    """The runner's registry index."""


@dataclass(frozen=True, slots=True)
class BackpressureReceived:
    """Validator side: a verified BackpressureSignal (§6.4)."""

    accepting_new: bool
    """Whether the runner now accepts new work."""
    block_height: int
    """The runner's claimed height (advisory)."""


@dataclass(frozen=True, slots=True)
class CapabilityDeltaReceived:
    """Validator side: a verified, transport-advisory CapabilityDelta (§6.5); never mutates the registry."""

    frame: CapabilityDelta
    """The verified frame."""


@dataclass(frozen=True, slots=True)
class AckReceived:
    """Validator side: a verified JobAck for an assignment pushed on this session (§10.2)."""

    job_id: bytes
    """The job."""
    status: AckStatus
    """Accepted / Duplicate / Reject(reason, text)."""


@dataclass(frozen=True, slots=True)
class AckTimedOut:
    """Validator side: no JobAck within ``ack_timeout_blocks`` of the push — a HardFailure (§10.6, §11.1)."""

    job_id: bytes
    """The job; the node clears the runner's local presence and closes the job stream."""


@dataclass(frozen=True, slots=True)
class ResultFrame:
    """Validator side: a JobResultCommit / JobResult on the Accepted job; ``tx_bytes`` is NOT decoded here (§10.3)."""

    job_id: bytes
    """The outer frame job_id (the node checks it equals the instruction's)."""
    kind: str
    """``"commit"`` (JobResultCommit) or ``"result"`` (JobResult)."""
    tx_bytes: bytes
    """``u32_be(len) ‖ body`` exactly as received."""


@dataclass(frozen=True, slots=True)
class ResultDropped:
    """Validator side: a result frame for a job this side cancelled, dropped per §10.5 (not an error: it raced)."""

    job_id: bytes
    """The job."""
    kind: str
    """``"commit"`` or ``"result"``."""


@dataclass(frozen=True, slots=True)
class ProgressReceived:
    """Validator side: informational, unsigned JobProgress (§10.4)."""

    job_id: bytes
    """The job."""
    permille: int
    """0..1000."""
    message: str | None
    """Optional text."""


@dataclass(frozen=True, slots=True)
class PongReceived:
    """Runner side: a verified HeartbeatPong echoing the outstanding ping (§6.3)."""

    nonce: int
    """The echoed nonce."""
    rtt: float
    """Seconds between queuing the ping and receiving this pong."""
    accepting_new: bool
    """What the validator believes about our backpressure state."""
    block_height: int
    """The validator's claimed height (advisory)."""


@dataclass(frozen=True, slots=True)
class PresenceReceiptReceived:
    """Runner side: a verified Mode A PresenceReceipt from this connection's validator (CIP-11 §8.3)."""

    receipt: PresenceReceiptFrame
    """The frame; its body is the on-chain PresenceReceipt map."""


@dataclass(frozen=True, slots=True)
class AssignmentReceived:
    """Runner side: a JobAssignment that passed every §10.1 check this session can make; the daemon acks it."""

    frame: JobAssignment
    """The verified assignment."""


@dataclass(frozen=True, slots=True)
class AssignmentRejected:
    """Runner side: an unverifiable JobAssignment; ``JobAck{Reject(UnverifiableAssignment)}`` was queued (§10.1)."""

    job_id: bytes
    """The frame's job_id."""
    code: str
    """The failed check (e.g. ``assignment_hash_mismatch``, ``not_our_assignment``, ``bad_signature``)."""


@dataclass(frozen=True, slots=True)
class CancelReceived:
    """Runner side: a verified JobCancel for an in-flight assignment on this session (§10.5)."""

    job_id: bytes
    """The job whose execution must stop."""
    reason: CancelReason
    """Why."""


@dataclass(frozen=True, slots=True)
class Closed:
    """The session is CLOSED; emitted exactly once."""

    reason: GoodbyeReason | None
    """The Goodbye reason, or None when the transport closed without one (:meth:`SessionBase.connection_lost`)."""
    detail: str | None
    """Optional human text from the Goodbye."""
    by_peer: bool
    """True if the peer sent the Goodbye (or the connection dropped), False if this side closed."""
    advisory: bool = False
    """True for a peer Goodbye that is not authenticated (before mutual auth, or a missing/invalid signature
    after it): §12.5 — it MUST NOT affect reputation, presence or dispatch accounting beyond closing."""


Event = (Authenticated | PresenceRefreshed | PresenceWithdrawn | BackpressureReceived | CapabilityDeltaReceived
         | AckReceived | AckTimedOut | ResultFrame | ResultDropped | ProgressReceived | PongReceived
         | PresenceReceiptReceived | AssignmentReceived | AssignmentRejected | CancelReceived | Closed)
"""Anything a session reports to its owner."""


# --- helpers ------------------------------------------------------------------------------------------------


class RateBucket:
    """Token bucket over caller-supplied time: ``capacity`` tokens, refilled at ``rate`` per second."""

    def __init__(self, rate: float, now: float) -> None:
        """Start full at time ``now``."""
        if rate <= 0:
            raise ValueError("rate must be positive")
        self._rate = rate
        self._capacity = max(1.0, rate)
        self._tokens = self._capacity
        self._at = now

    def take(self, now: float) -> bool:
        """Spend one token; False if none is left. Time going backwards refills nothing."""
        if now > self._at:
            self._tokens = min(self._capacity, self._tokens + (now - self._at) * self._rate)
            self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


def protocol_error(code: str, message: str,
                   reason: GoodbyeReason = GoodbyeReason.PROTOCOL_ERROR) -> RemoteProtocolError:
    """A :class:`RemoteProtocolError` closing with ``reason`` (default ProtocolError)."""
    return RemoteProtocolError(code, message, reason=reason)


def _clip(detail: str | None) -> str | None:
    """Goodbye.detail is bounded by MAX_TEXT_BYTES: cut on a character boundary rather than fail to close."""
    if detail is None or len(detail.encode()) <= MAX_TEXT_BYTES:
        return detail
    return detail.encode()[:MAX_TEXT_BYTES].decode(errors="ignore")


def check_32(value: bytes, name: str) -> bytes:
    """Constructor argument check: exactly 32 bytes."""
    if len(value) != 32:
        raise LocalProtocolError("bad_length", f"{name} must be 32 bytes, got {len(value)}")
    return bytes(value)


def is_terminal_ack(status: AckStatus) -> bool:
    """Duplicate and Reject end the job on this stream; only Accepted continues to result frames."""
    return status.kind is not AckKind.ACCEPTED


class SessionBase:
    """State, outbound queue, idle tracking and the one place errors become ``Goodbye`` + :class:`Closed`."""

    ROLE: Role
    """This side's role (set by the subclass)."""

    def __init__(self, *, key: Signer, channel_binding: bytes, idle_timeout_s: float, hello_timeout_s: float) -> None:
        """Common state; the subclass sets :attr:`_opened_at` / :attr:`_last_rx` when the clock starts."""
        if key.role is not self.ROLE:
            raise LocalProtocolError("wrong_key", f"a {self.ROLE.name} session needs a {self.ROLE.name} key")
        self._key = key
        self._binding = check_32(channel_binding, "channel_binding")
        self._idle_timeout = idle_timeout_s
        self._hello_timeout = hello_timeout_s
        self._state = SessionState.INIT
        self._outbound: list[Frame] = []
        self._ctx: ConnectionContext | None = None
        self._opened_at: float | None = None
        self._last_rx = 0.0

    # --- public surface shared by both roles ---

    @property
    def state(self) -> SessionState:
        """Current lifecycle state."""
        return self._state

    @property
    def context(self) -> ConnectionContext | None:
        """The connection identities once both Hellos are known (None before)."""
        return self._ctx

    @property
    def closed(self) -> bool:
        """True once CLOSED."""
        return self._state is SessionState.CLOSED

    @property
    def has_outbound(self) -> bool:
        """True if frames are queued for the peer (:meth:`take_outbound` would return some)."""
        return bool(self._outbound)

    def take_outbound(self) -> list[Frame]:
        """Frames queued for the peer since the last call, in send order."""
        out, self._outbound = self._outbound, []
        return out

    def receive(self, frame: Frame, now: float) -> list[Event]:
        """Process one decoded frame from the peer. Remote violations close the session; nothing is raised."""
        if self._state is SessionState.CLOSED:
            return []
        self._last_rx = max(self._last_rx, now)
        if isinstance(frame, Goodbye):
            return self._peer_goodbye(frame)
        try:
            return self._dispatch(frame, now)
        except RemoteProtocolError as e:
            return self._fail(e.reason, e.code)

    def receive_error(self, error: RemoteProtocolError, now: float) -> list[Event]:
        """The adapter's :class:`FrameDecoder` rejected the peer's bytes: close with the error's reason (§12.1)."""
        del now  # the close is immediate; kept for a uniform call shape
        if self._state is SessionState.CLOSED:
            return []
        return self._fail(error.reason, error.code)

    def close(self, reason: GoodbyeReason, detail: str | None = None,
              retry_after_blocks: int | None = None) -> list[Event]:
        """Close on this side's initiative (Shutdown, Replaced, OverlapExpired, …); no-op if already CLOSED."""
        if self._state is SessionState.CLOSED:
            return []
        return self._fail(reason, detail, retry_after_blocks)

    def connection_lost(self) -> list[Event]:
        """The transport closed without a Goodbye: emit ``Closed(None, …, by_peer=True)`` and stop."""
        if self._state is SessionState.CLOSED:
            return []
        self._state = SessionState.CLOSED
        return [Closed(None, "connection lost", by_peer=True)]

    # --- for subclasses ---

    def _dispatch(self, frame: Frame, now: float) -> list[Event]:
        raise NotImplementedError

    def _require_auth(self, frame: Frame) -> ConnectionContext:
        """Frames other than the handshake's are accepted only after both proofs verified (§6.2)."""
        if self._state is not SessionState.AUTHENTICATED or self._ctx is None:
            raise protocol_error("not_authenticated", f"{type(frame).__name__} before authentication")
        return self._ctx

    def _require_local_auth(self, what: str) -> ConnectionContext:
        """Local calls that send role frames need an authenticated, open session."""
        if self._state is not SessionState.AUTHENTICATED or self._ctx is None:
            raise LocalProtocolError("not_authenticated", f"{what} needs an authenticated session "
                                     f"(state {self._state.value})")
        return self._ctx

    def _verify(self, frame: Frame, peer: Role) -> None:
        """Verify a connection-bound signed frame from the peer (fatal :class:`SignatureError` on failure)."""
        assert self._ctx is not None
        verify_frame(self._ctx, frame, peer)  # type: ignore[arg-type]

    def _sign(self, frame: Frame) -> Frame:
        """Sign a frame with this side's key under the connection context."""
        assert self._ctx is not None
        signed: Frame = sign_frame(self._ctx, self._key, frame)  # type: ignore[arg-type]
        return signed

    def _timeouts(self, now: float) -> list[Event]:
        """Idle and handshake deadlines, checked by ``tick``."""
        if self._state is SessionState.CLOSED or self._opened_at is None:
            return []
        if self._state is not SessionState.AUTHENTICATED and now - self._opened_at >= self._hello_timeout:
            return self._fail(GoodbyeReason.IDLE_TIMEOUT, "handshake timeout")
        if now - self._last_rx >= self._idle_timeout:
            return self._fail(GoodbyeReason.IDLE_TIMEOUT, "idle timeout")
        return []

    def _fail(self, reason: GoodbyeReason, detail: str | None, retry_after_blocks: int | None = None) -> list[Event]:
        """Queue one Goodbye (signed once mutually authenticated, §12.5), go CLOSED, emit :class:`Closed`."""
        goodbye: Frame = Goodbye(reason, _clip(detail), retry_after_blocks, None)
        if self._state is SessionState.AUTHENTICATED:
            goodbye = self._sign(goodbye)
        self._outbound.append(goodbye)
        self._state = SessionState.CLOSED
        return [Closed(reason, _clip(detail), by_peer=False)]

    def _peer_goodbye(self, frame: Goodbye) -> list[Event]:
        """§12.5: authenticated only if signed and verified after mutual auth; otherwise advisory."""
        advisory = True
        if self._state is SessionState.AUTHENTICATED:
            try:
                self._verify(frame, Role.VALIDATOR if self.ROLE is Role.RUNNER else Role.RUNNER)
                advisory = False
            except TransportError:
                advisory = True
        self._state = SessionState.CLOSED
        return [Closed(frame.reason, frame.detail, by_peer=True, advisory=advisory)]


def check_peer_hello(hello: Hello, *, chain_id: str, subset_epoch: int, vset_hash: bytes, peer_role: Role) -> int:
    """§6.2 / §12.3 Hello checks common to both roles, in order; return the agreed version.

    Version major ⇒ UnsupportedVersion; chain_id ⇒ WrongChain; the offered ``(subset_epoch,
    validator_set_hash)`` pair must select this side's snapshot ⇒ WrongValidatorSet (epoch-paired,
    never mixed, §5.3); ``party_role`` must be the peer's role ⇒ ProtocolError (a key whose scheme
    does not match the role was already rejected as AuthFailed by the frame decoder). The agreed
    version, hashed into HelloAck, is ``min(peer version, ours)`` (project choice: both sides can
    compute it from the two Hellos).
    """
    check_version(hello.version)
    if hello.chain_id != chain_id:
        raise protocol_error("wrong_chain", f"peer chain_id {hello.chain_id!r}", GoodbyeReason.WRONG_CHAIN)
    if hello.subset_epoch != subset_epoch or hello.validator_set_hash != vset_hash:
        raise protocol_error("wrong_validator_set", f"offered subset_epoch {hello.subset_epoch} with a "
                             "validator_set_hash that is not this side's", GoodbyeReason.WRONG_VALIDATOR_SET)
    if hello.party_role is not peer_role:
        raise protocol_error("wrong_role", f"Hello from a {hello.party_role.name}, expected {peer_role.name}")
    return min(hello.version, PROTOCOL_VERSION)
