"""CIP-11 §12.6 signature domains, preimages, and role-scheme sign/verify helpers.

Every application signature is over ``keccak256(domain ‖ signer_role ‖ scheme_id ‖
canonical_fields)``; ``domain`` is ASCII ending ``-v1``, scalars are big-endian, text is
its deterministic-CBOR encoding. The per-frame field lists were lost from the seed text:
the layouts below are a project choice (``docs/protocol.md`` §8) pinned by golden digests
in ``tests/unit/protocol/test_transport_preimages.py``. Fields that are connection identities
(chain_id, runner_pubkey, validator_pubkey, channel_binding) come from the authenticated
:class:`ConnectionContext`, never from the frame (§12.6 "Preimage field origins").

Runners sign with recoverable secp256k1 (65 bytes, verified by public-key recovery),
validators with Ed25519 (64 bytes). :func:`verify_signature` rejects every
role/scheme/key-length/signature-length mismatch with :class:`SignatureError` (fatal).

Per-heartbeat cost: a :class:`ConnectionContext` is immutable, so its connection_id and the
constant heartbeat-preimage prefixes are computed once when it is built (they cannot go stale:
a different connection is a different context); a :class:`ValidatorKey` prepares its Ed25519
signing key and public key once, on first use. None of this changes a preimage byte.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from cowboy_protocol.codec import encode
from cowboy_protocol.crypto import ed25519, secp256k1
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.transport.enums import AckKind, CancelReason, FrameType, GoodbyeReason, Role, Scheme
from cowboy_protocol.transport.fast_crypto import ed25519_signer, recovers_to
from cowboy_protocol.transport.frames import (
    AckStatus,
    BackpressureSignal,
    CapabilityDelta,
    Frame,
    Goodbye,
    HeartbeatPing,
    HeartbeatPong,
    HelloAck,
    JobAck,
    JobAssignment,
    JobCancel,
)
from cowboy_protocol.transport.protocol_errors import LocalProtocolError, SignatureError
from cowboy_protocol.transport.pubkeys import PubKey

__all__ = [
    "DOMAIN_ACK",
    "DOMAIN_ASSIGNMENT",
    "DOMAIN_CANCEL",
    "DOMAIN_CONNECTION",
    "DOMAIN_CONTROL",
    "DOMAIN_GOODBYE",
    "DOMAIN_HEARTBEAT",
    "DOMAIN_HELLO",
    "DOMAIN_PRESENCE_RECEIPT",
    "ConnectionContext",
    "RunnerKey",
    "Signer",
    "ValidatorKey",
    "ack_digest",
    "assignment_hash",
    "cancel_digest",
    "canonical_frame_body",
    "connection_id",
    "control_digest",
    "frame_digest",
    "goodbye_digest",
    "heartbeat_ping_digest",
    "heartbeat_pong_digest",
    "hello_ack_digest",
    "job_spec_hash",
    "make_assignment",
    "presence_receipt_digest",
    "reason_or_empty",
    "retry_after_blocks_or_zero",
    "sign_frame",
    "sign_heartbeat_pong",
    "sign_hello_ack",
    "signed_digest",
    "validator_set_hash",
    "verify_assignment",
    "verify_frame",
    "verify_heartbeat_ping",
    "verify_hello_ack",
    "verify_signature",
]

DOMAIN_HELLO = b"cowboy-cip11-hello-v1"
"""HelloAck.signed_challenge (project choice)."""
DOMAIN_HEARTBEAT = b"cowboy-cip11-heartbeat-v1"
"""HeartbeatPing / HeartbeatPong (project choice)."""
DOMAIN_CONTROL = b"cowboy-cip11-control-v1"
"""BackpressureSignal / CapabilityDelta over canonical_frame_body (named by CIP-11)."""
DOMAIN_ASSIGNMENT = b"cowboy-cip11-assignment-v1"
"""JobAssignment.assignment_hash (project choice)."""
DOMAIN_ACK = b"cowboy-cip11-ack-v1"
"""JobAck (project choice)."""
DOMAIN_CANCEL = b"cowboy-cip11-cancel-v1"
"""JobCancel (project choice)."""
DOMAIN_GOODBYE = b"cowboy-cip11-goodbye-v1"
"""Authenticated Goodbye (project choice)."""
DOMAIN_PRESENCE_RECEIPT = b"cowboy-cip11-presence-receipt-v1"
"""Mode-A PresenceReceipt (named by CIP-11; field order a project choice)."""
DOMAIN_CONNECTION = b"cowboy-cip11-connection-v1"
"""connection_id derivation (project choice); not a signature domain."""


def _u64(v: int) -> bytes:
    return v.to_bytes(8, "big")


def _hash32(v: bytes, name: str) -> bytes:
    if len(v) != 32:
        raise LocalProtocolError("bad_length", f"{name} must be 32 bytes, got {len(v)}")
    return bytes(v)


def _signed_prefix(domain: bytes, role: Role) -> bytes:
    return domain + bytes([role, Scheme.for_role(role)])


def signed_digest(domain: bytes, role: Role, fields: bytes) -> bytes:
    """``keccak256(domain ‖ signer_role ‖ scheme_id ‖ fields)``; the scheme is the one ``role`` signs with."""
    return keccak256(_signed_prefix(domain, role) + fields)


def reason_or_empty(text: str | None) -> bytes:
    """``canonical_reason_or_empty`` / ``detail_or_empty``: None collapses to "" (CBOR ``0x60``)."""
    return encode("" if text is None else text)


def retry_after_blocks_or_zero(value: int | None) -> bytes:
    """8-byte big-endian; None collapses to 0 (the deliberate ``None ≡ Some(0)``)."""
    return _u64(0 if value is None else value)


def validator_set_hash(peer_pubkeys: Sequence[bytes]) -> bytes:
    """``keccak256`` over the snapshot's ordered raw 32-byte Ed25519 peer_pubkeys (§5.1, §5.4)."""
    for k in peer_pubkeys:
        _hash32(k, "peer_pubkey")
    return keccak256(b"".join(bytes(k) for k in peer_pubkeys))


def job_spec_hash(canonical_job_spec: bytes) -> bytes:
    """``keccak256(canonical_job_spec)``: hashes exactly the JobSpecV1 bytes carried in the frame."""
    return keccak256(bytes(canonical_job_spec))


def connection_id(channel_binding: bytes, runner_pubkey: PubKey, validator_pubkey: PubKey,
                  subset_epoch: int, vset_hash: bytes) -> bytes:
    """``keccak256(DOMAIN_CONNECTION ‖ channel_binding ‖ runner_pubkey ‖ validator_pubkey ‖ u64 epoch ‖ vsh)``."""
    return keccak256(DOMAIN_CONNECTION + _hash32(channel_binding, "channel_binding") + runner_pubkey.to_bytes()
                     + validator_pubkey.to_bytes() + _u64(subset_epoch) + _hash32(vset_hash, "validator_set_hash"))


@dataclass(frozen=True, slots=True)
class ConnectionContext:
    """The identities one authenticated connection binds (§6.2); the source of connection-bound preimage fields.

    Derived constants (connection_id, the heartbeat preimage prefixes) are computed once in ``__post_init__``:
    the context is frozen, so they always match its fields.
    """

    chain_id: str
    """Chain id agreed in Hello."""
    version: int
    """Protocol version agreed in Hello."""
    runner_pubkey: PubKey
    """The runner party's scheme-0x01 key."""
    validator_pubkey: PubKey
    """The validator party's scheme-0x02 key."""
    subset_epoch: int
    """Subset epoch offered in Hello."""
    validator_set_hash: bytes
    """validator_set_hash offered in Hello."""
    channel_binding: bytes
    """32-byte TLS exporter value of this connection (:func:`exporter.channel_binding`)."""
    _connection_id: bytes = field(init=False, repr=False, compare=False)
    _ping_prefix: bytes = field(init=False, repr=False, compare=False)
    _pong_prefix: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.runner_pubkey.expect_role(Role.RUNNER)
        self.validator_pubkey.expect_role(Role.VALIDATOR)
        cid = connection_id(self.channel_binding, self.runner_pubkey, self.validator_pubkey,
                            self.subset_epoch, self.validator_set_hash)
        object.__setattr__(self, "_connection_id", cid)
        # domain ‖ signer_role ‖ scheme_id ‖ connection_id ‖ frame type: everything before the per-frame scalars.
        object.__setattr__(self, "_ping_prefix", _signed_prefix(DOMAIN_HEARTBEAT, Role.RUNNER)
                           + cid + bytes([FrameType.HEARTBEAT_PING]))
        object.__setattr__(self, "_pong_prefix", _signed_prefix(DOMAIN_HEARTBEAT, Role.VALIDATOR)
                           + cid + bytes([FrameType.HEARTBEAT_PONG]))

    @property
    def connection_id(self) -> bytes:
        """See :func:`connection_id` (computed once, when the context was built)."""
        return self._connection_id

    def pubkey_of(self, role: Role) -> PubKey:
        """This connection's key for ``role``."""
        return self.runner_pubkey if role is Role.RUNNER else self.validator_pubkey


def hello_ack_digest(ctx: ConnectionContext, signer: Role, peer_challenge_nonce: bytes) -> bytes:
    """hello domain: cbor(chain_id) ‖ u16 version ‖ 0x01 ‖ runner_pk ‖ 0x02 ‖ validator_pk ‖ u64 epoch ‖ vsh
    ‖ peer challenge_nonce ‖ channel_binding. Roles/keys in fixed runner-then-validator order;
    block_height is deliberately absent (§6.2)."""
    fields = (encode(ctx.chain_id) + ctx.version.to_bytes(2, "big")
              + bytes([Role.RUNNER]) + ctx.runner_pubkey.to_bytes()
              + bytes([Role.VALIDATOR]) + ctx.validator_pubkey.to_bytes()
              + _u64(ctx.subset_epoch) + _hash32(ctx.validator_set_hash, "validator_set_hash")
              + _hash32(peer_challenge_nonce, "challenge_nonce") + _hash32(ctx.channel_binding, "channel_binding"))
    return signed_digest(DOMAIN_HELLO, signer, fields)


def heartbeat_ping_digest(ctx: ConnectionContext, nonce: int, block_height: int) -> bytes:
    """heartbeat domain, runner: connection_id ‖ 0x10 ‖ u64 nonce ‖ u64 block_height."""
    return keccak256(ctx._ping_prefix + _u64(nonce) + _u64(block_height))


def heartbeat_pong_digest(ctx: ConnectionContext, nonce_echo: int, accepting_new: bool, block_height: int) -> bytes:
    """heartbeat domain, validator: connection_id ‖ 0x11 ‖ u64 nonce_echo ‖ u8 accepting_new ‖ u64 block_height."""
    return keccak256(ctx._pong_prefix + _u64(nonce_echo) + (b"\x01" if accepting_new else b"\x00")
                     + _u64(block_height))


def canonical_frame_body(frame: Frame) -> bytes:
    """§12.6: deterministic CBOR of the frame body with the signature key omitted entirely."""
    return encode(frame.body(include_signature=False))


def control_digest(ctx: ConnectionContext, frame: BackpressureSignal | CapabilityDelta) -> bytes:
    """control domain, runner: connection_id ‖ frame type ‖ canonical_frame_body."""
    return signed_digest(DOMAIN_CONTROL, Role.RUNNER, ctx.connection_id + bytes([frame.FRAME_TYPE])
                         + canonical_frame_body(frame))


def assignment_hash(chain_id: str, job_id: bytes, spec_hash: bytes, assignment_height: int,
                    deadline_block: int, runner_pubkey: PubKey) -> bytes:
    """assignment domain, validator: cbor(chain_id) ‖ job_id ‖ job_spec_hash ‖ u64 assignment_height
    ‖ u64 deadline_block ‖ runner_pubkey.

    ``validator_pubkey`` is not hashed: §10.1 requires every validator pushing a job to send a
    byte-identical ``assignment_hash``; the validator is bound by ``validator_signed`` itself.
    """
    fields = (encode(chain_id) + _hash32(job_id, "job_id") + _hash32(spec_hash, "job_spec_hash")
              + _u64(assignment_height) + _u64(deadline_block) + runner_pubkey.expect_role(Role.RUNNER).to_bytes())
    return signed_digest(DOMAIN_ASSIGNMENT, Role.VALIDATOR, fields)


def ack_digest(ctx: ConnectionContext, job_id: bytes, assignment_hash_: bytes, status: AckStatus) -> bytes:
    """ack domain, runner: runner_pk ‖ validator_pk ‖ job_id ‖ assignment_hash ‖ u8 kind ‖ u8 reject_reason (0 if none)
    ‖ canonical_reason_or_empty."""
    reject = int(status.reject_reason) if status.kind is AckKind.REJECT and status.reject_reason else 0
    fields = (ctx.runner_pubkey.to_bytes() + ctx.validator_pubkey.to_bytes() + _hash32(job_id, "job_id")
              + _hash32(assignment_hash_, "assignment_hash") + bytes([status.kind, reject])
              + reason_or_empty(status.text))
    return signed_digest(DOMAIN_ACK, Role.RUNNER, fields)


def cancel_digest(ctx: ConnectionContext, job_id: bytes, assignment_hash_: bytes, reason: CancelReason) -> bytes:
    """cancel domain, validator: runner_pk ‖ validator_pk ‖ job_id ‖ assignment_hash ‖ u8 reason."""
    fields = (ctx.runner_pubkey.to_bytes() + ctx.validator_pubkey.to_bytes() + _hash32(job_id, "job_id")
              + _hash32(assignment_hash_, "assignment_hash") + bytes([reason]))
    return signed_digest(DOMAIN_CANCEL, Role.VALIDATOR, fields)


def goodbye_digest(ctx: ConnectionContext, signer: Role, reason: GoodbyeReason, detail: str | None,
                   retry_after_blocks: int | None) -> bytes:
    """goodbye domain: connection_id ‖ u8 reason ‖ detail_or_empty ‖ retry_after_blocks_or_zero."""
    fields = (ctx.connection_id + bytes([reason]) + reason_or_empty(detail)
              + retry_after_blocks_or_zero(retry_after_blocks))
    return signed_digest(DOMAIN_GOODBYE, signer, fields)


def presence_receipt_digest(chain_id: str, runner_pubkey: PubKey, validator_pubkey: PubKey, subset_epoch: int,
                            vset_hash: bytes, block_height: int, nonce_echo: int, accepting_new: bool) -> bytes:
    """presence-receipt domain, validator (Mode A, §8.3; channel-binding free, chain_id from the chain):
    cbor(chain_id) ‖ runner_pk ‖ validator_pk ‖ u64 epoch ‖ vsh ‖ u64 block_height ‖ u64 nonce_echo
    ‖ u8 accepting_new."""
    fields = (encode(chain_id) + runner_pubkey.expect_role(Role.RUNNER).to_bytes()
              + validator_pubkey.expect_role(Role.VALIDATOR).to_bytes() + _u64(subset_epoch)
              + _hash32(vset_hash, "validator_set_hash") + _u64(block_height) + _u64(nonce_echo)
              + bytes([1 if accepting_new else 0]))
    return signed_digest(DOMAIN_PRESENCE_RECEIPT, Role.VALIDATOR, fields)


# --- keys ---------------------------------------------------------------------------------------------------


class Signer(Protocol):
    """A role key that signs 32-byte digests."""

    @property
    def role(self) -> Role:
        """The role this key signs as."""
        ...

    @property
    def pubkey(self) -> PubKey:
        """The scheme-tagged public key."""
        ...

    def sign(self, digest: bytes) -> bytes:
        """Role-scheme signature of ``digest``."""
        ...


@dataclass(frozen=True, slots=True)
class RunnerKey:
    """A runner's secp256k1 key (32-byte secret)."""

    secret: bytes
    """32-byte private scalar."""

    @property
    def role(self) -> Role:
        """Always :attr:`Role.RUNNER`."""
        return Role.RUNNER

    @property
    def pubkey(self) -> PubKey:
        """Scheme 0x01 compressed public key."""
        return PubKey.runner(secp256k1.private_key_to_public_key(self.secret, compressed=True))

    def sign(self, digest: bytes) -> bytes:
        """65-byte recoverable signature ``r ‖ s ‖ v`` (low-s)."""
        return secp256k1.sign_recoverable(self.secret, digest)


@dataclass(frozen=True, slots=True)
class ValidatorKey:
    """A validator's Ed25519 peer key (32-byte seed).

    The RFC 8032 key expansion (a SHA-512 and a scalar multiplication, about as costly as a signature) is done
    once, on first use, instead of on every signature and every ``pubkey`` read; signatures are byte-identical
    to :func:`cowboy_protocol.crypto.ed25519.sign` (Ed25519 is deterministic, same libsodium).
    """

    seed: bytes
    """RFC 8032 seed."""
    _prepared: tuple[Callable[[bytes], bytes], PubKey] | None = field(default=None, init=False, repr=False,
                                                                     compare=False)

    def _keys(self) -> tuple[Callable[[bytes], bytes], PubKey]:
        prepared = self._prepared
        if prepared is None:
            public = ed25519.public_key_from_seed(self.seed)
            prepared = (ed25519_signer(self.seed), PubKey.validator(public))  # the signer validates the seed
            object.__setattr__(self, "_prepared", prepared)
        return prepared

    @property
    def role(self) -> Role:
        """Always :attr:`Role.VALIDATOR`."""
        return Role.VALIDATOR

    @property
    def pubkey(self) -> PubKey:
        """Scheme 0x02 peer_pubkey."""
        return self._keys()[1]

    def sign(self, digest: bytes) -> bytes:
        """64-byte Ed25519 signature over the digest bytes."""
        return self._keys()[0](digest)


def verify_signature(role: Role, pubkey: PubKey, digest: bytes, signature: bytes | None) -> None:
    """Check ``signature`` over ``digest`` by ``pubkey`` acting as ``role``; raise :class:`SignatureError`.

    Rejects: key scheme not the role's scheme, wrong signature length, and signatures that
    do not verify. secp256k1: the key recovered from ``r ‖ s ‖ v`` (with the low-s and range checks of
    :func:`secp256k1.recover_public_key`) must be ``pubkey`` itself. Comparing the points, rather than the
    addresses both derive (the registry's authority), is at least as strict and saves two Keccak hashes and a
    point decompression per signature. Recovery, not a plain ECDSA verify, is what checks ``v``: a verify
    against the known key would also accept the same ``r ‖ s`` with the other ``v``.
    """
    pubkey.expect_role(role)
    if signature is None:
        raise SignatureError("signature_missing", "signature required")
    if len(signature) != pubkey.scheme.signature_length:
        raise SignatureError("signature_length", f"{pubkey.scheme.name} signature must be "
                             f"{pubkey.scheme.signature_length} bytes, got {len(signature)}")
    if pubkey.scheme is Scheme.SECP256K1:
        ok = recovers_to(digest, signature, pubkey.key)  # recover_public_key's checks, then compare the points
    else:
        ok = ed25519.verify(pubkey.key, digest, signature)
    if not ok:
        raise SignatureError("bad_signature", "signature does not verify")


# --- frame-level helpers ------------------------------------------------------------------------------------

_SignedFrame = HeartbeatPing | HeartbeatPong | BackpressureSignal | CapabilityDelta | JobAck | JobCancel | Goodbye
_SIGNER_ROLE: dict[type[Frame], Role] = {
    HeartbeatPing: Role.RUNNER, HeartbeatPong: Role.VALIDATOR, BackpressureSignal: Role.RUNNER,
    CapabilityDelta: Role.RUNNER, JobAck: Role.RUNNER, JobCancel: Role.VALIDATOR,
}


def frame_digest(ctx: ConnectionContext, frame: _SignedFrame, signer: Role) -> bytes:
    """The digest a connection-bound frame's signature covers."""
    if isinstance(frame, HeartbeatPing):
        return heartbeat_ping_digest(ctx, frame.nonce, frame.block_height)
    if isinstance(frame, HeartbeatPong):
        return heartbeat_pong_digest(ctx, frame.nonce_echo, frame.accepting_new, frame.block_height)
    if isinstance(frame, (BackpressureSignal, CapabilityDelta)):
        return control_digest(ctx, frame)
    if isinstance(frame, JobAck):
        return ack_digest(ctx, frame.job_id, frame.assignment_hash, frame.status)
    if isinstance(frame, JobCancel):
        return cancel_digest(ctx, frame.job_id, frame.assignment_hash, frame.reason)
    return goodbye_digest(ctx, signer, frame.reason, frame.detail, frame.retry_after_blocks)


def sign_frame(ctx: ConnectionContext, key: Signer, frame: _SignedFrame) -> _SignedFrame:
    """Return ``frame`` with its signature field set by ``key`` (which must be this connection's key for its role)."""
    expected = _SIGNER_ROLE.get(type(frame), key.role)
    if key.role is not expected or key.pubkey != ctx.pubkey_of(key.role):
        raise LocalProtocolError("wrong_signer", f"{type(frame).__name__} must be signed by this connection's "
                                 f"{expected.name} key")
    assert frame.SIGNATURE_FIELD is not None
    signed: _SignedFrame = replace(frame, **{frame.SIGNATURE_FIELD: key.sign(frame_digest(ctx, frame, key.role))})  # type: ignore[arg-type]
    return signed


def verify_frame(ctx: ConnectionContext, frame: _SignedFrame, signer: Role) -> None:
    """Verify a received frame's signature against the connection's key for ``signer`` (the peer's role)."""
    expected = _SIGNER_ROLE.get(type(frame), signer)
    if signer is not expected:
        raise SignatureError("role_mismatch", f"{type(frame).__name__} is signed by a {expected.name}")
    assert frame.SIGNATURE_FIELD is not None
    verify_signature(signer, ctx.pubkey_of(signer), frame_digest(ctx, frame, signer),
                     getattr(frame, frame.SIGNATURE_FIELD))


def verify_heartbeat_ping(ctx: ConnectionContext, ping: HeartbeatPing) -> None:
    """:func:`verify_frame` of a HeartbeatPing from the runner, without the generic per-type dispatch."""
    verify_signature(Role.RUNNER, ctx.runner_pubkey, heartbeat_ping_digest(ctx, ping.nonce, ping.block_height),
                     ping.signature)


def sign_heartbeat_pong(ctx: ConnectionContext, key: Signer, nonce_echo: int, accepting_new: bool,
                        block_height: int) -> HeartbeatPong:
    """The HeartbeatPong :func:`sign_frame` would return for these fields, built once instead of signed-then-copied."""
    if key.role is not Role.VALIDATOR or key.pubkey != ctx.validator_pubkey:
        raise LocalProtocolError("wrong_signer", "HeartbeatPong must be signed by this connection's VALIDATOR key")
    return HeartbeatPong(nonce_echo, accepting_new, block_height,
                         key.sign(heartbeat_pong_digest(ctx, nonce_echo, accepting_new, block_height)))


def sign_hello_ack(ctx: ConnectionContext, key: Signer, peer_challenge_nonce: bytes, block_height: int) -> HelloAck:
    """Our HelloAck answering the peer's ``challenge_nonce``."""
    if key.pubkey != ctx.pubkey_of(key.role):
        raise LocalProtocolError("wrong_signer", "HelloAck must be signed by this connection's own key")
    sig = key.sign(hello_ack_digest(ctx, key.role, peer_challenge_nonce))
    return HelloAck(key.role, key.pubkey, block_height, sig)


def verify_hello_ack(ctx: ConnectionContext, ack: HelloAck, peer_role: Role, our_challenge_nonce: bytes) -> None:
    """The peer's HelloAck must come from the connection's key for ``peer_role`` and sign our challenge."""
    if ack.party_role is not peer_role or ack.party_pubkey != ctx.pubkey_of(peer_role):
        raise SignatureError("identity_mismatch", "HelloAck identity differs from the peer's Hello")
    verify_signature(peer_role, ack.party_pubkey, hello_ack_digest(ctx, peer_role, our_challenge_nonce),
                     ack.signed_challenge)


def make_assignment(chain_id: str, key: ValidatorKey, job_id: bytes, job_spec: bytes, assignment_height: int,
                    deadline_block: int, runner_pubkey: PubKey) -> JobAssignment:
    """Build and sign a JobAssignment (validator_signed = Ed25519 over assignment_hash)."""
    spec_hash = job_spec_hash(job_spec)
    a_hash = assignment_hash(chain_id, job_id, spec_hash, assignment_height, deadline_block, runner_pubkey)
    return JobAssignment(job_id, bytes(job_spec), spec_hash, assignment_height, a_hash, deadline_block,
                         runner_pubkey, key.pubkey, key.sign(a_hash))


def verify_assignment(ctx: ConnectionContext, frame: JobAssignment, snapshot_peer_pubkeys: Sequence[bytes]) -> None:
    """§10.1 runner-side checks, using the connection's chain_id and identities (§12.6 field origins).

    job_spec_hash = keccak256(job_spec); assignment_hash recomputed; runner_pubkey is ours;
    validator_pubkey is this connection's validator and, tag-stripped, a snapshot peer_pubkey;
    validator_signed verifies. Any failure → :class:`SignatureError` (answer Reject(UnverifiableAssignment)).
    """
    if job_spec_hash(frame.job_spec) != frame.job_spec_hash:
        raise SignatureError("job_spec_hash_mismatch", "job_spec_hash != keccak256(job_spec)")
    expected = assignment_hash(ctx.chain_id, frame.job_id, frame.job_spec_hash, frame.assignment_height,
                               frame.deadline_block, frame.runner_pubkey)
    if expected != frame.assignment_hash:
        raise SignatureError("assignment_hash_mismatch", "assignment_hash does not match its preimage")
    if frame.runner_pubkey != ctx.runner_pubkey:
        raise SignatureError("not_our_assignment", "runner_pubkey is not this runner")
    if frame.validator_pubkey != ctx.validator_pubkey or frame.validator_pubkey.key not in snapshot_peer_pubkeys:
        raise SignatureError("unknown_validator", "validator_pubkey is not this connection's snapshot validator")
    verify_signature(Role.VALIDATOR, frame.validator_pubkey, frame.assignment_hash, frame.validator_signed)
