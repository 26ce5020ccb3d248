"""Fixed discriminant-byte tables of CIP-11 (§12.2 frame types, §12.6 enum discriminant bytes).

Every value here is a wire/consensus byte: it is hashed into signature preimages and
written into frame bodies. The tables are **append-only** — a new variant takes the next
free byte; existing bytes never change (``tests/unit/protocol/test_transport_enums.py`` pins them).
CIP-11 fixes :class:`Role` and :class:`FrameType`; the byte values of the other tables
were lost from the seed text and are a project choice (documented in ``docs/protocol.md``
§8). Byte 0x00 is never used by an enum, so an all-zero field cannot be a valid variant.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "AckKind",
    "CancelReason",
    "FrameType",
    "GoodbyeReason",
    "RejectReason",
    "Role",
    "Scheme",
]


class Role(IntEnum):
    """``signer_role`` / ``party_role`` (CIP-11 §12.6, normative)."""

    RUNNER = 0x01
    """A runner; signs with secp256k1."""
    VALIDATOR = 0x02
    """A validator; signs with its Ed25519 peer key."""


class Scheme(IntEnum):
    """``scheme_id`` of a scheme-tagged wire PubKey (CIP-11 §12.6, normative)."""

    SECP256K1 = 0x01
    """33-byte compressed key, 65-byte recoverable signature ``r ‖ s ‖ v``."""
    ED25519 = 0x02
    """32-byte key, 64-byte signature."""

    @property
    def key_length(self) -> int:
        """Raw key length in bytes (without the scheme tag)."""
        return 33 if self is Scheme.SECP256K1 else 32

    @property
    def signature_length(self) -> int:
        """Signature length in bytes."""
        return 65 if self is Scheme.SECP256K1 else 64

    @staticmethod
    def for_role(role: Role) -> Scheme:
        """The only scheme a ``role`` may sign with: runners secp256k1, validators Ed25519."""
        return Scheme.SECP256K1 if role is Role.RUNNER else Scheme.ED25519


class FrameType(IntEnum):
    """The type byte after the length prefix (CIP-11 §12.2, normative)."""

    HELLO = 0x01
    """Both directions: the unsigned challenge half of the handshake."""
    HELLO_ACK = 0x02
    """Both directions: the signed response to the peer's challenge."""
    HEARTBEAT_PING = 0x10
    """Runner → validator liveness ping."""
    HEARTBEAT_PONG = 0x11
    """Validator → runner signed pong."""
    BACKPRESSURE_SIGNAL = 0x12
    """Runner → validator: accepting new work or not."""
    CAPABILITY_DELTA = 0x13
    """Runner → validator advisory capability / entitlement change."""
    PRESENCE_RECEIPT_REQUEST = 0x14
    """Runner → validator (project extension for CIP-11 §8.3, Mode A): send PresenceReceipts with the pongs."""
    PRESENCE_RECEIPT = 0x15
    """Validator → runner (project extension for CIP-11 §8.3, Mode A): a signed, chain-verifiable PresenceReceipt."""
    JOB_ASSIGNMENT = 0x20
    """Validator → runner on a new stream: the signed push."""
    JOB_ACK = 0x21
    """Runner → validator: Accepted / Duplicate / Reject."""
    JOB_PROGRESS = 0x22
    """Runner → validator, informational and unsigned."""
    JOB_RESULT = 0x23
    """Runner → validator: a runner-signed JobResultSubmit transaction."""
    JOB_CANCEL = 0x24
    """Validator → runner: stop an in-flight assignment."""
    JOB_RESULT_COMMIT = 0x25
    """Runner → validator: a runner-signed JobResultCommit transaction."""
    GOODBYE = 0xF0
    """Both directions: closing with a reason."""


class AckKind(IntEnum):
    """Discriminant of ``AckStatus`` in a JobAck (project choice)."""

    ACCEPTED = 0x01
    """The runner accepted this assignment and will execute it on this stream."""
    DUPLICATE = 0x02
    """A valid assignment for a job_id already accepted from another stream."""
    REJECT = 0x03
    """Alive but cannot serve; carries a :class:`RejectReason` and optional text."""


class RejectReason(IntEnum):
    """Why a runner rejects an assignment (``AckStatus::Reject``; project choice)."""

    UNVERIFIABLE_ASSIGNMENT = 0x01
    """Hash, signature, identity or finality check failed (§10.1)."""
    AT_CAPACITY = 0x02
    """No free execution slot."""
    UNSUPPORTED_JOB_TYPE = 0x03
    """The runner does not serve this job kind."""
    DRAINING = 0x04
    """The runner is shutting down or leaving."""
    INTERNAL = 0x05
    """Any other local failure."""


class CancelReason(IntEnum):
    """Why a validator cancels an assignment (JobCancel; project choice)."""

    RESELECTED = 0x01
    """Timeout re-selection moved the job to other runners."""
    JOB_SETTLED = 0x02
    """The job already settled on chain."""
    JOB_FAILED = 0x03
    """The job reached a terminal failure."""
    EXPIRED = 0x04
    """The assignment's deadline passed."""


class GoodbyeReason(IntEnum):
    """Reason carried by Goodbye (§12.5; project choice for the byte values)."""

    PROTOCOL_ERROR = 0x01
    """Malformed frame, bad length, unknown type, wrong state (§12.1)."""
    UNSUPPORTED_VERSION = 0x02
    """Version major differs (§12.3)."""
    WRONG_CHAIN = 0x03
    """chain_id mismatch (§6.2)."""
    WRONG_VALIDATOR_SET = 0x04
    """(subset_epoch, validator_set_hash) selects no active snapshot (§5.3, §6.2)."""
    NOT_REGISTERED = 0x05
    """The runner key resolves to no RunnerRegistration."""
    DEREGISTERED = 0x06
    """The runner's registration is Deregistered."""
    NOT_IN_SUBSET = 0x07
    """This validator is not in Sub(runner) (§5.2 DoS gate)."""
    AUTH_FAILED = 0x08
    """A signature, role/scheme or key check failed (§12.6)."""
    RATE_LIMITED = 0x09
    """Too many unauthenticated Hellos from this peer (§6.2)."""
    TOO_MANY_CONNECTIONS = 0x0A
    """Connection or half-open cap reached (§6.6)."""
    IDLE_TIMEOUT = 0x0B
    """No heartbeat for too long."""
    SHUTDOWN = 0x0C
    """Orderly shutdown."""
    REPLACED = 0x0D
    """A newer connection for the same identity replaced this one."""
    OVERLAP_EXPIRED = 0x0E
    """Epoch-E-only connection closed after the OVERLAP_BLOCKS window (§5.3)."""
