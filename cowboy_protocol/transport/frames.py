"""CIP-11 frames (§12.1, §12.2): dataclasses, canonical bodies, and the one-frame codec.

A frame on the wire is ``u32_be(length) ‖ type_u8 ‖ payload`` with ``length = 1 +
len(payload)`` and ``payload`` the deterministic CBOR (``cowboy_protocol.codec``) of the
frame body: a map with small unsigned-integer keys ``0..n-1`` in declaration order,
exactly those keys, no extensions (wire version 1). The bodies were lost from the seed
text; their layout is a project choice documented in ``docs/protocol.md`` §8 and pinned
by golden bytes in ``tests/unit/protocol/test_transport_frames.py``.

Heartbeats (one HeartbeatPing and one HeartbeatPong per runner per block) take a shortcut
on both sides that changes no byte and no verdict: a payload in exactly the canonical
shape is parsed directly, anything else goes through the strict generic decoder; a
heartbeat whose fields are all in range is serialized directly, anything else through
the generic encoder and its self-check (equivalence is a property test).

Decoding is strict: any missing/extra key, wrong type, out-of-range value, bad scheme
tag or non-canonical CBOR raises :class:`RemoteProtocolError` (Goodbye reason
``ProtocolError``, or ``AuthFailed`` for key/scheme mismatches). Encoding re-checks the
body through the same decoder, so this node never sends a frame it would reject.
The streaming decoder lives in :mod:`cowboy_protocol.transport.framing`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from itertools import pairwise
from typing import Any, ClassVar, TypeAlias

from cowboy_protocol.codec import CborValue, CodecError, decode, encode, encode_uint
from cowboy_protocol.transport.enums import AckKind, CancelReason, FrameType, GoodbyeReason, RejectReason, Role
from cowboy_protocol.transport.protocol_errors import LocalProtocolError, RemoteProtocolError
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.types.fields import U16_MAX, expect_bytes, expect_map, expect_text, expect_uint
from cowboy_protocol.types.validation_errors import DecodeError

__all__ = [
    "FRAME_CLASSES",
    "HEADER_LEN",
    "MAX_FRAME_BYTES",
    "MAX_TEXT_BYTES",
    "PROTOCOL_VERSION",
    "AckStatus",
    "BackpressureSignal",
    "CapabilityDelta",
    "Frame",
    "Goodbye",
    "HeartbeatPing",
    "HeartbeatPong",
    "Hello",
    "HelloAck",
    "JobAck",
    "JobAssignment",
    "JobCancel",
    "JobProgress",
    "JobResult",
    "JobResultCommit",
    "PresenceReceiptFrame",
    "PresenceReceiptRequest",
    "check_version",
    "decode_payload",
    "encode_frame",
]

MAX_FRAME_BYTES = 2 * 1024 * 1024
"""§13: largest ``length`` (type byte + payload); checked before the payload is buffered."""
HEADER_LEN = 4
"""Bytes of the ``u32_be(length)`` prefix."""
PROTOCOL_VERSION = 0x0100
"""§12.3: ``(major << 8) | minor``; this implementation speaks 1.0."""
MAX_TEXT_BYTES = 256
"""Bound on free-form text fields (chain_id, detail, reason text, capability keys) (project choice)."""
MAX_LIST_ITEMS = 256
"""Bound on each CapabilityDelta list (project choice)."""
_HASH = 32


def check_version(version: int) -> None:
    """§12.3: a peer whose major differs is closed with ``Goodbye{UnsupportedVersion}``; any minor is accepted."""
    if version >> 8 != PROTOCOL_VERSION >> 8:
        raise RemoteProtocolError(
            "unsupported_version",
            f"peer version 0x{version:04x}, major {version >> 8} != {PROTOCOL_VERSION >> 8}",
            reason=GoodbyeReason.UNSUPPORTED_VERSION,
        )


# --- field decoders: (value, field name) -> python value; raise DecodeError / RemoteProtocolError ---

Dec: TypeAlias = Callable[[object, str], Any]


def _u64(v: object, n: str) -> int:
    return expect_uint(v, n)


def _u16(v: object, n: str) -> int:
    return expect_uint(v, n, U16_MAX)


def _hash32(v: object, n: str) -> bytes:
    return expect_bytes(v, n, length=_HASH)


def _text(v: object, n: str) -> str:
    return expect_text(v, n, MAX_TEXT_BYTES)


def _opt_text(v: object, n: str) -> str | None:
    return None if v is None else _text(v, n)


def _opt_u64(v: object, n: str) -> int | None:
    return None if v is None else _u64(v, n)


def _bool(v: object, n: str) -> bool:
    if not isinstance(v, bool):
        raise DecodeError(f"{n}: expected a boolean", field=n)
    return v


def _enum(e: Any) -> Dec:
    def dec(v: object, n: str) -> Any:
        raw = expect_uint(v, n, 0xFF)
        try:
            return e(raw)
        except ValueError:
            raise DecodeError(f"{n}: unknown discriminant 0x{raw:02x}", field=n) from None

    return dec


def _pubkey(role: Role | None) -> Dec:
    def dec(v: object, n: str) -> PubKey:
        key = PubKey.from_bytes(expect_bytes(v, n, max_len=34))
        return key if role is None else key.expect_role(role)

    return dec


def _sig(role: Role) -> Dec:
    length = 65 if role is Role.RUNNER else 64

    def dec(v: object, n: str) -> bytes:
        return expect_bytes(v, n, length=length)

    return dec


def _any_sig(v: object, n: str) -> bytes:
    raw = expect_bytes(v, n, max_len=65)
    if len(raw) not in (64, 65):
        raise DecodeError(f"{n}: signature must be 64 or 65 bytes", field=n)
    return raw


def _opt_sig(v: object, n: str) -> bytes | None:
    return None if v is None else _any_sig(v, n)


def _exact_map(value: object, keys: frozenset[int], name: str) -> Mapping[int, Any]:
    """``expect_map`` plus: every key is a genuine integer (CBOR ``false``/``true`` would compare equal to 0/1)."""
    if isinstance(value, dict) and any(type(k) is not int for k in value):
        raise DecodeError(f"{name}: map keys must be unsigned integers", field=name)
    return expect_map(value, keys, name)


def _tx_bytes(v: object, n: str) -> bytes:
    """``u32_be(len(body)) ‖ body`` (docs/protocol.md §2); the prefix must match exactly."""
    raw = expect_bytes(v, n)
    if len(raw) < 5 or int.from_bytes(raw[:4], "big") != len(raw) - 4:
        raise DecodeError(f"{n}: length prefix does not match the body", field=n)
    return raw


def _sorted_unique(items: list[Any], n: str) -> None:
    # One canonical order per set of values: callers may not choose the order (project choice).
    if len(items) > MAX_LIST_ITEMS:
        raise DecodeError(f"{n}: more than {MAX_LIST_ITEMS} items", field=n)
    if any(a >= b for a, b in pairwise(items)):
        raise DecodeError(f"{n}: items must be strictly ascending", field=n)


def _text_set(v: object, n: str) -> tuple[str, ...]:
    if not isinstance(v, list):
        raise DecodeError(f"{n}: expected an array", field=n)
    items = [_text(x, n) for x in v]
    _sorted_unique([x.encode() for x in items], n)
    return tuple(items)


def _hash_set(v: object, n: str) -> tuple[bytes, ...]:
    if not isinstance(v, list):
        raise DecodeError(f"{n}: expected an array", field=n)
    items = [_hash32(x, n) for x in v]
    _sorted_unique(items, n)
    return tuple(items)


def _enc_value(v: object) -> CborValue:
    """Python field value → CBOR value (enums → their byte, keys → tagged bytes, tuples → arrays)."""
    if isinstance(v, PubKey):
        return v.to_bytes()
    if isinstance(v, AckStatus):
        return v.to_cbor()
    if isinstance(v, bool) or v is None or isinstance(v, (bytes, str)):
        return v
    if isinstance(v, int):
        return int(v)  # IntEnum → plain int
    if isinstance(v, tuple):
        return [_enc_value(x) for x in v]
    raise LocalProtocolError("unsupported_field", f"cannot encode {type(v).__name__}")


@dataclass(frozen=True, slots=True)
class AckStatus:
    """``AckStatus``: ``{0: kind}`` for Accepted/Duplicate, ``{0: 3, 1: reject_reason, 2: null|text}`` for Reject."""

    kind: AckKind
    """Accepted, Duplicate or Reject."""
    reject_reason: RejectReason | None = None
    """Required iff ``kind`` is Reject."""
    text: str | None = None
    """Optional human text, only with Reject (``JobAck.reason`` of §12.6)."""

    def to_cbor(self) -> dict[CborValue, CborValue]:
        """The canonical CBOR map."""
        if self.kind is AckKind.REJECT:
            return {0: int(self.kind), 1: int(self.reject_reason or 0), 2: self.text}
        return {0: int(self.kind)}

    @classmethod
    def from_cbor(cls, v: object, n: str) -> AckStatus:
        """Strict inverse of :meth:`to_cbor`."""
        if not isinstance(v, dict) or 0 not in v:
            raise DecodeError(f"{n}: expected an AckStatus map", field=n)
        kind = _enum(AckKind)(v[0], f"{n}.kind")
        if kind is AckKind.REJECT:
            m = _exact_map(v, frozenset({0, 1, 2}), n)
            return cls(kind, _enum(RejectReason)(m[1], f"{n}.reject_reason"), _opt_text(m[2], f"{n}.text"))
        _exact_map(v, frozenset({0}), n)
        return cls(kind)

    @classmethod
    def accepted(cls) -> AckStatus:
        """``Accepted``."""
        return cls(AckKind.ACCEPTED)

    @classmethod
    def duplicate(cls) -> AckStatus:
        """``Duplicate``."""
        return cls(AckKind.DUPLICATE)

    @classmethod
    def reject(cls, reason: RejectReason, text: str | None = None) -> AckStatus:
        """``Reject(reason)`` with optional text."""
        return cls(AckKind.REJECT, reason, text)


class Frame:
    """Base of all frames: a frozen dataclass whose fields, in order, are body keys ``0..n-1``."""

    FRAME_TYPE: ClassVar[FrameType]
    """The §12.2 type byte."""
    SIGNATURE_FIELD: ClassVar[str | None] = None
    """Name of the signature field, omitted from ``canonical_frame_body``; None if unsigned."""
    DECODERS: ClassVar[tuple[Dec, ...]]
    """One decoder per field, in field order."""

    def body(self, *, include_signature: bool = True) -> dict[CborValue, CborValue]:
        """The body map; without the signature key it is the §12.6 ``canonical_frame_body``."""
        out: dict[CborValue, CborValue] = {}
        for i, f in enumerate(fields(self)):  # type: ignore[arg-type]
            if include_signature or f.name != self.SIGNATURE_FIELD:
                out[i] = _enc_value(getattr(self, f.name))
        return out

    def validate(self) -> None:
        """Cross-field checks run after decoding; raise :class:`DecodeError` if violated."""

    @classmethod
    def from_body(cls, value: object) -> Frame:
        """Decode a body map (exact key set, typed fields)."""
        names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
        m = _exact_map(value, frozenset(range(len(names))), cls.__name__)
        frame = cls(**{name: dec(m[i], f"{cls.__name__}.{name}") for i, (name, dec) in enumerate(
            zip(names, cls.DECODERS, strict=True))})
        frame.validate()
        return frame


@dataclass(frozen=True, slots=True)
class Hello(Frame):
    """0x01, both directions, unsigned: the challenge half of the handshake (§6.2)."""

    FRAME_TYPE = FrameType.HELLO
    DECODERS = (_u16, _text, _enum(Role), _pubkey(None), _u64, _hash32, _hash32, _u64)
    version: int
    """u16 ``(major << 8) | minor`` (§12.3)."""
    chain_id: str
    """The sender's chain id."""
    party_role: Role
    """The sender's role."""
    party_pubkey: PubKey
    """The sender's scheme-tagged identity key; its scheme must match ``party_role``."""
    subset_epoch: int
    """Offered subset epoch (§5.3)."""
    validator_set_hash: bytes
    """Offered validator_set_hash for that epoch."""
    challenge_nonce: bytes
    """32 fresh random bytes the peer must sign in its HelloAck."""
    block_height: int
    """Advisory telemetry only (§6.2): never an admission criterion."""

    def validate(self) -> None:
        """party_pubkey's scheme must be the one party_role signs with (fatal mismatch)."""
        self.party_pubkey.expect_role(self.party_role)


@dataclass(frozen=True, slots=True)
class HelloAck(Frame):
    """0x02, both directions: signs the peer's challenge bound to the channel (§6.2, §12.6 hello domain)."""

    FRAME_TYPE = FrameType.HELLO_ACK
    SIGNATURE_FIELD = "signed_challenge"
    DECODERS = (_enum(Role), _pubkey(None), _u64, _any_sig)
    party_role: Role
    """The signer's role (must equal its Hello's)."""
    party_pubkey: PubKey
    """The signer's key (must equal its Hello's)."""
    block_height: int
    """Advisory telemetry only; not in the signed preimage."""
    signed_challenge: bytes
    """Role-scheme signature over the hello preimage (65 bytes runner, 64 validator)."""

    def validate(self) -> None:
        """Key scheme and signature length must both match the role."""
        self.party_pubkey.expect_role(self.party_role)
        if len(self.signed_challenge) != self.party_pubkey.scheme.signature_length:
            raise DecodeError("HelloAck.signed_challenge: wrong length for the role's scheme", field="signed_challenge")


@dataclass(frozen=True, slots=True)
class HeartbeatPing(Frame):
    """0x10, runner → validator (§6.3); nonce strictly increasing per connection, from 0."""

    FRAME_TYPE = FrameType.HEARTBEAT_PING
    SIGNATURE_FIELD = "signature"
    DECODERS = (_u64, _u64, _sig(Role.RUNNER))
    nonce: int
    """Per-connection counter."""
    block_height: int
    """The runner's current height (the ping is sent on a new height)."""
    signature: bytes
    """Runner secp256k1 signature over the heartbeat preimage (bound to connection_id)."""


@dataclass(frozen=True, slots=True)
class HeartbeatPong(Frame):
    """0x11, validator → runner (§6.3); ``nonce_echo`` must equal the outstanding ping's nonce."""

    FRAME_TYPE = FrameType.HEARTBEAT_PONG
    SIGNATURE_FIELD = "signature"
    DECODERS = (_u64, _bool, _u64, _sig(Role.VALIDATOR))
    nonce_echo: int
    """The nonce of the ping being answered."""
    accepting_new: bool
    """False while the runner is backpressured (§6.4)."""
    block_height: int
    """The validator's current height."""
    signature: bytes
    """Validator Ed25519 signature over the heartbeat preimage."""


@dataclass(frozen=True, slots=True)
class BackpressureSignal(Frame):
    """0x12, runner → validator (§6.4), signed in the control domain over canonical_frame_body."""

    FRAME_TYPE = FrameType.BACKPRESSURE_SIGNAL
    SIGNATURE_FIELD = "signed"
    DECODERS = (_bool, _u64, _sig(Role.RUNNER))
    accepting_new: bool
    """Whether the runner accepts new work."""
    block_height: int
    """The runner's current height."""
    signed: bytes
    """Runner signature over the control preimage."""


@dataclass(frozen=True, slots=True)
class CapabilityDelta(Frame):
    """0x13, runner → validator (§6.5): advisory only, never mutates the registry. Lists strictly ascending."""

    FRAME_TYPE = FrameType.CAPABILITY_DELTA
    SIGNATURE_FIELD = "signed"
    DECODERS = (_text_set, _text_set, _hash_set, _hash_set, _u64, _sig(Role.RUNNER))
    add_capabilities: tuple[str, ...]
    """CapabilityKeys now served (UTF-8, ascending by bytes)."""
    remove_capabilities: tuple[str, ...]
    """CapabilityKeys no longer served."""
    add_entitlements: tuple[bytes, ...]
    """32-byte EntitlementIds added (ascending)."""
    remove_entitlements: tuple[bytes, ...]
    """32-byte EntitlementIds removed."""
    block_height: int
    """The runner's current height."""
    signed: bytes
    """Runner signature over the control preimage."""


@dataclass(frozen=True, slots=True)
class PresenceReceiptRequest(Frame):
    """0x14, runner → validator (project extension; CIP-11 §8.3: the validator issues a PresenceReceipt "alongside
    its HeartbeatPong when a runner indicates it will seek a Mode-A certificate"). Unsigned like JobProgress: it
    rides the authenticated connection, and its only effect is that the validator signs receipts for this runner."""

    FRAME_TYPE = FrameType.PRESENCE_RECEIPT_REQUEST
    DECODERS = (_bool,)
    enabled: bool
    """True: answer every following valid HeartbeatPing with a PresenceReceipt too; False: stop."""


@dataclass(frozen=True, slots=True)
class PresenceReceiptFrame(Frame):
    """0x15, validator → runner, after the HeartbeatPong it accompanies: one Mode A PresenceReceipt (CIP-11 §8.3).

    The body is exactly the on-chain ``PresenceReceipt`` map (docs/protocol.md §8.5), so the runner can put it in
    a SubmitPresenceCertificate unchanged. Keys, epoch and hash are the connection's; ``block_height`` is the
    validator's head; ``nonce_echo`` the ping's nonce; the signature is the chain-id-bound receipt digest."""

    FRAME_TYPE = FrameType.PRESENCE_RECEIPT
    SIGNATURE_FIELD = "validator_signed"
    DECODERS = (_pubkey(Role.RUNNER), _pubkey(Role.VALIDATOR), _u64, _hash32, _u64, _u64, _bool,
                _sig(Role.VALIDATOR))
    runner_pubkey: PubKey
    """The connection's runner key."""
    validator_pubkey: PubKey
    """The signing validator's peer key."""
    subset_epoch: int
    """The connection's subset_epoch."""
    validator_set_hash: bytes
    """The connection's validator_set_hash."""
    block_height: int
    """The validator's head height when it answered the ping."""
    nonce_echo: int
    """The nonce of the ping answered."""
    accepting_new: bool
    """False while the runner is backpressured (such a receipt never counts on chain)."""
    validator_signed: bytes
    """Ed25519 signature over the presence-receipt digest (docs/protocol.md §8.3)."""


@dataclass(frozen=True, slots=True)
class JobAssignment(Frame):
    """0x20, validator → runner on a new stream (§10.1).

    ``job_spec`` is the canonical JobSpecV1 CBOR carried as a byte string, so the runner
    hashes exactly the bytes that were sent (project choice).
    """

    FRAME_TYPE = FrameType.JOB_ASSIGNMENT
    SIGNATURE_FIELD = "validator_signed"
    DECODERS = (_hash32, lambda v, n: expect_bytes(v, n), _hash32, _u64, _hash32, _u64,
                _pubkey(Role.RUNNER), _pubkey(Role.VALIDATOR), _sig(Role.VALIDATOR))
    job_id: bytes
    """32-byte job id."""
    job_spec: bytes
    """Canonical JobSpecV1 CBOR bytes."""
    job_spec_hash: bytes
    """keccak256(job_spec)."""
    assignment_height: int
    """Block whose application produced the assignment."""
    assignment_hash: bytes
    """keccak256 of the assignment preimage (§12.6)."""
    deadline_block: int
    """Chain-derived timeout-index block (§10.1)."""
    runner_pubkey: PubKey
    """Scheme 0x01 runner key."""
    validator_pubkey: PubKey
    """Scheme 0x02 key of the pushing validator."""
    validator_signed: bytes
    """Ed25519 signature over ``assignment_hash``."""


@dataclass(frozen=True, slots=True)
class JobAck(Frame):
    """0x21, runner → validator (§10.2)."""

    FRAME_TYPE = FrameType.JOB_ACK
    SIGNATURE_FIELD = "signed"
    DECODERS = (_hash32, _hash32, AckStatus.from_cbor, _sig(Role.RUNNER))
    job_id: bytes
    """The assignment's job id."""
    assignment_hash: bytes
    """The acknowledged assignment's hash."""
    status: AckStatus
    """Accepted / Duplicate / Reject(reason, text)."""
    signed: bytes
    """Runner signature over the ack preimage."""


@dataclass(frozen=True, slots=True)
class JobProgress(Frame):
    """0x22, runner → validator, informational and unsigned (§10.4)."""

    FRAME_TYPE = FrameType.JOB_PROGRESS
    DECODERS = (_hash32, lambda v, n: expect_uint(v, n, 1000), _opt_text)
    job_id: bytes
    """The job."""
    permille: int
    """Progress 0..1000."""
    message: str | None
    """Optional status text."""


@dataclass(frozen=True, slots=True)
class JobResult(Frame):
    """0x23, runner → validator: a runner-signed JobResultSubmit transaction (§10.3); no CIP-11 signature."""

    FRAME_TYPE = FrameType.JOB_RESULT
    DECODERS = (_hash32, _tx_bytes)
    job_id: bytes
    """Must equal the job id inside the decoded instruction."""
    tx_bytes: bytes
    """``u32_be(len(body)) ‖ body`` exactly as /submit accepts it."""


@dataclass(frozen=True, slots=True)
class JobCancel(Frame):
    """0x24, validator → runner (§10.5)."""

    FRAME_TYPE = FrameType.JOB_CANCEL
    SIGNATURE_FIELD = "signed"
    DECODERS = (_hash32, _hash32, _enum(CancelReason), _sig(Role.VALIDATOR))
    job_id: bytes
    """The job."""
    assignment_hash: bytes
    """Must match an in-flight assignment on this connection."""
    reason: CancelReason
    """Why."""
    signed: bytes
    """Validator signature over the cancel preimage."""


@dataclass(frozen=True, slots=True)
class JobResultCommit(Frame):
    """0x25, runner → validator: a runner-signed JobResultCommit transaction (§10.3); no CIP-11 signature."""

    FRAME_TYPE = FrameType.JOB_RESULT_COMMIT
    DECODERS = (_hash32, _tx_bytes)
    job_id: bytes
    """Must equal the job id inside the decoded instruction."""
    tx_bytes: bytes
    """``u32_be(len(body)) ‖ body``."""


@dataclass(frozen=True, slots=True)
class Goodbye(Frame):
    """0xF0, both directions (§12.5): signed after mutual auth, may be unsigned (advisory) before."""

    FRAME_TYPE = FrameType.GOODBYE
    SIGNATURE_FIELD = "signed"
    DECODERS = (_enum(GoodbyeReason), _opt_text, _opt_u64, _opt_sig)
    reason: GoodbyeReason
    """Why the connection closes."""
    detail: str | None
    """Optional human text."""
    retry_after_blocks: int | None
    """Optional reconnect hint."""
    signed: bytes | None
    """Sender's role-scheme signature over the goodbye preimage, or null before auth."""


FRAME_CLASSES: dict[FrameType, type[Frame]] = {
    cls.FRAME_TYPE: cls
    for cls in (Hello, HelloAck, HeartbeatPing, HeartbeatPong, BackpressureSignal, CapabilityDelta,
                PresenceReceiptRequest, PresenceReceiptFrame, JobAssignment, JobAck, JobProgress, JobResult, JobCancel,
                JobResultCommit, Goodbye)
}
"""Type byte → frame class, one entry per §12.2 row."""


def decode_payload(type_byte: int, payload: bytes) -> Frame:
    """Decode one frame body given its type byte; every failure is a :class:`RemoteProtocolError`."""
    if type_byte == FrameType.HEARTBEAT_PING:
        ping = _fast_ping(payload)
        if ping is not None:
            return ping
    elif type_byte == FrameType.HEARTBEAT_PONG:
        pong = _fast_pong(payload)
        if pong is not None:
            return pong
    try:
        cls = FRAME_CLASSES[FrameType(type_byte)]
    except ValueError:
        raise RemoteProtocolError("unknown_frame_type", f"unknown frame type 0x{type_byte:02x}") from None
    try:
        return cls.from_body(decode(payload, max_depth=3))
    except CodecError as e:
        raise RemoteProtocolError("malformed_cbor", f"{cls.__name__}: {e.code}: {e}") from None
    except DecodeError as e:
        raise RemoteProtocolError("malformed_body", e.message) from None


def encode_frame(frame: Frame) -> bytes:
    """``u32_be(1 + len(payload)) ‖ type ‖ payload``; raises :class:`LocalProtocolError` if invalid or too large."""
    fast = _fast_heartbeat(frame)
    if fast is not None:  # fields checked in range: what the self-check below would accept
        return fast
    try:
        payload = encode(frame.body())
        decode_payload(frame.FRAME_TYPE, payload)  # never send what we would reject
    except (CodecError, RemoteProtocolError) as e:
        raise LocalProtocolError("invalid_frame", f"{type(frame).__name__}: {e}") from None
    length = 1 + len(payload)
    if length > MAX_FRAME_BYTES:
        raise LocalProtocolError("frame_too_large", f"frame length {length} > {MAX_FRAME_BYTES}")
    return length.to_bytes(HEADER_LEN, "big") + bytes([frame.FRAME_TYPE]) + payload


# --- heartbeat fast paths (same bytes, same verdicts; see the module docstring) -------------------------------

_U64_LIMIT = 1 << 64


_UINT_SIZES = {0x18: (1, 24), 0x19: (2, 0x100), 0x1A: (4, 0x10000), 0x1B: (8, 0x100000000)}
"""Head byte → (argument bytes, smallest value that needs them): a smaller value there is non-canonical."""


def _read_uint(p: bytes, i: int) -> tuple[int, int] | None:
    """A canonically encoded unsigned integer at ``p[i]`` and the offset after it; None if it is anything else."""
    if i >= len(p):
        return None
    head = p[i]
    if head < 24:
        return head, i + 1
    size_floor = _UINT_SIZES.get(head)
    if size_floor is None:
        return None
    end = i + 1 + size_floor[0]
    if end > len(p):
        return None
    v = int.from_bytes(p[i + 1:end], "big")
    return (v, end) if v >= size_floor[1] else None


def _fast_ping(p: bytes) -> HeartbeatPing | None:
    """``{0: nonce, 1: block_height, 2: bytes(65)}`` in canonical form, else None (generic decoder decides)."""
    if p[:2] != b"\xa3\x00":
        return None
    r = _read_uint(p, 2)
    if r is None or p[r[1]:r[1] + 1] != b"\x01":
        return None
    h = _read_uint(p, r[1] + 1)
    if h is None or p[h[1]:h[1] + 3] != b"\x02\x58\x41" or len(p) != h[1] + 3 + 65:
        return None
    return HeartbeatPing(r[0], h[0], bytes(p[h[1] + 3:]))


def _fast_pong(p: bytes) -> HeartbeatPong | None:
    """``{0: nonce_echo, 1: bool, 2: block_height, 3: bytes(64)}`` in canonical form, else None."""
    if p[:2] != b"\xa4\x00":
        return None
    r = _read_uint(p, 2)
    if r is None:
        return None
    flag = p[r[1]:r[1] + 3]
    if flag not in (b"\x01\xf5\x02", b"\x01\xf4\x02"):
        return None
    h = _read_uint(p, r[1] + 3)
    if h is None or p[h[1]:h[1] + 3] != b"\x03\x58\x40" or len(p) != h[1] + 3 + 64:
        return None
    return HeartbeatPong(r[0], flag[1] == 0xF5, h[0], bytes(p[h[1] + 3:]))


def _u64_ok(v: object) -> bool:
    return type(v) is int and 0 <= v < _U64_LIMIT


def _fast_heartbeat(frame: Frame) -> bytes | None:
    """The wire bytes of a HeartbeatPing/Pong whose fields are all valid, else None (generic path)."""
    if type(frame) is HeartbeatPong:
        n, acc, h, sig = frame.nonce_echo, frame.accepting_new, frame.block_height, frame.signature
        if not (_u64_ok(n) and _u64_ok(h) and type(acc) is bool and type(sig) is bytes and len(sig) == 64):
            return None
        payload = (b"\xa4\x00" + encode_uint(n) + (b"\x01\xf5\x02" if acc else b"\x01\xf4\x02") + encode_uint(h)
                   + b"\x03\x58\x40" + sig)
    elif type(frame) is HeartbeatPing:
        n, h, sig = frame.nonce, frame.block_height, frame.signature
        if not (_u64_ok(n) and _u64_ok(h) and type(sig) is bytes and len(sig) == 65):
            return None
        payload = b"\xa3\x00" + encode_uint(n) + b"\x01" + encode_uint(h) + b"\x02\x58\x41" + sig
    else:
        return None
    return (1 + len(payload)).to_bytes(HEADER_LEN, "big") + bytes((frame.FRAME_TYPE,)) + payload
