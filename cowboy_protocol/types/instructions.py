"""Transaction instructions: what a transaction asks the chain to do.

An instruction is encoded as a CBOR map ``{0: kind, 1..: fields}``. ``kind``
is a fixed byte table (append only); see ``docs/protocol.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from cowboy_protocol.codec import encode
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.types.fields import (
    ADDRESS_LEN,
    HASH_LEN,
    decode_u128,
    encode_u128,
    expect_bytes,
    expect_map,
    expect_text,
    expect_uint,
)
from cowboy_protocol.types.governance_instructions import GovernanceSetParam, GovernanceSetPhase
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit, JobSubmit
from cowboy_protocol.types.params import BasefeeConfig, TimerConfig
from cowboy_protocol.types.presence_instructions import SubmitPresenceCertificate
from cowboy_protocol.types.runner_instructions import (
    RunnerDeregister,
    RunnerHeartbeat,
    RunnerRegister,
    RunnerUpdateCapabilities,
    RunnerUpdateRateCard,
)
from cowboy_protocol.types.timer_policy import TimerPolicy
from cowboy_protocol.types.validation_errors import DecodeError
from cowboy_protocol.types.validator_set_instructions import ActivateValidatorSet


@dataclass(frozen=True, slots=True)
class Transfer:
    """Move ``amount`` (u128) of the native token from the sender to ``to``."""

    KIND: ClassVar[int] = 0x00
    NAME: ClassVar[str] = "transfer"
    to: bytes
    """Recipient address (20 bytes)."""
    amount: int
    """Amount in the smallest unit (u128)."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: self.to, 2: encode_u128(self.amount)}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> Transfer:
        """Build from a map already checked to hold exactly keys {0, 1, 2}."""
        return cls(to=expect_bytes(m[1], "instruction.to", ADDRESS_LEN),
                   amount=decode_u128(m[2], "instruction.amount"))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""

        return {"kind": self.NAME, "to": to_checksum_address(self.to), "amount": str(self.amount)}


@dataclass(frozen=True, slots=True)
class UpdateBasefeeConfig:
    """System instruction: replace the governed :class:`BasefeeConfig` (sender ∈ system_deployers)."""

    KIND: ClassVar[int] = 0x40
    NAME: ClassVar[str] = "update_basefee_config"
    config: BasefeeConfig
    """The new configuration; takes effect from the next block's basefee update."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: self.config.to_cbor()}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> UpdateBasefeeConfig:
        """Build from a map already checked to hold exactly keys {0, 1}."""
        return cls(config=BasefeeConfig.from_cbor(m[1]))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {"kind": self.NAME, "config": self.config.to_json()}


MAX_SOURCE_BYTES = 128 * 1024
"""Largest actor source a DeployActor may carry (UTF-8 bytes)."""
MAX_SALT_BYTES = 32
"""Longest deploy salt."""
MAX_HANDLER_NAME_BYTES = 256
"""Longest handler name (UTF-8 bytes), as for timer handlers (seeds/003 §4.2)."""
MAX_CALL_PAYLOAD_BYTES = 1 << 20
"""Largest payload a DeployActor init or a CallActor carries."""


def _handler_name(value: object, name: str, *, allow_empty: bool) -> str:
    text = expect_text(value, name, MAX_HANDLER_NAME_BYTES)
    if not text and not allow_empty:
        raise DecodeError(f"{name}: must not be empty", field=name)
    return text


@dataclass(frozen=True, slots=True)
class DeployActor:
    """Deploy a Python actor at ``keccak256(sender ‖ salt ‖ keccak256(source))[12:]``, optionally running an init."""

    KIND: ClassVar[int] = 0x10
    NAME: ClassVar[str] = "deploy_actor"
    source: str
    """The actor's Python source (UTF-8, at most MAX_SOURCE_BYTES)."""
    salt: bytes
    """0..32 bytes chosen by the deployer (lets one key deploy the same source twice)."""
    init_handler: str
    """Handler run right after deployment, in the same transaction; "" for none."""
    init_payload: bytes
    """Payload passed to ``init_handler`` (must be empty when there is none)."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: self.source, 2: self.salt, 3: self.init_handler, 4: self.init_payload}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> DeployActor:
        """Build from a map already checked to hold exactly keys {0..4}."""
        init = _handler_name(m[3], "instruction.init_handler", allow_empty=True)
        payload = expect_bytes(m[4], "instruction.init_payload", max_len=MAX_CALL_PAYLOAD_BYTES)
        if not init and payload:
            raise DecodeError("instruction.init_payload: must be empty without an init handler",
                              field="instruction.init_payload")
        return cls(source=expect_text(m[1], "instruction.source", MAX_SOURCE_BYTES),
                   salt=expect_bytes(m[2], "instruction.salt", max_len=MAX_SALT_BYTES),
                   init_handler=init, init_payload=payload)

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {"kind": self.NAME, "source": self.source, "salt": self.salt.hex(),
                "init_handler": self.init_handler or None, "init_payload": self.init_payload.hex()}


@dataclass(frozen=True, slots=True)
class CallActor:
    """Call ``handler(payload)`` on a deployed actor."""

    KIND: ClassVar[int] = 0x11
    NAME: ClassVar[str] = "call_actor"
    actor: bytes
    """Address of the actor (20 bytes)."""
    handler: str
    """Name of a module-level handler (or an ``@actor`` class method), 1..256 UTF-8 bytes."""
    payload: bytes
    """Bytes passed to the handler (at most MAX_CALL_PAYLOAD_BYTES)."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: self.actor, 2: self.handler, 3: self.payload}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> CallActor:
        """Build from a map already checked to hold exactly keys {0..3}."""
        return cls(actor=expect_bytes(m[1], "instruction.actor", ADDRESS_LEN),
                   handler=_handler_name(m[2], "instruction.handler", allow_empty=False),
                   payload=expect_bytes(m[3], "instruction.payload", max_len=MAX_CALL_PAYLOAD_BYTES))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""

        return {"kind": self.NAME, "actor": to_checksum_address(self.actor), "handler": self.handler,
                "payload": self.payload.hex()}


@dataclass(frozen=True, slots=True)
class TransferActorOwnership:
    """Make ``new_owner`` the protocol owner of a deployed actor; signed by its current owner (docs/actors.md §8)."""

    KIND: ClassVar[int] = 0x12
    NAME: ClassVar[str] = "transfer_actor_ownership"
    actor: bytes
    """Address of the actor (20 bytes)."""
    new_owner: bytes
    """The new owner (20 bytes, not the zero address): ``pvm_host.actor_owner()`` from then on."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: self.actor, 2: self.new_owner}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> TransferActorOwnership:
        """Build from a map already checked to hold exactly keys {0..2}."""
        return cls(actor=expect_bytes(m[1], "instruction.actor", ADDRESS_LEN),
                   new_owner=expect_bytes(m[2], "instruction.new_owner", ADDRESS_LEN))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {"kind": self.NAME, "actor": to_checksum_address(self.actor),
                "new_owner": to_checksum_address(self.new_owner)}


@dataclass(frozen=True, slots=True)
class UpdateTimerConfig:
    """System instruction: replace the governed :class:`TimerConfig` (sender ∈ system_deployers; seeds/003 §6.4)."""

    KIND: ClassVar[int] = 0x41
    NAME: ClassVar[str] = "update_timer_config"
    config: TimerConfig
    """The new configuration; applies to host calls and deliveries after this transaction."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: self.config.to_cbor()}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> UpdateTimerConfig:
        """Build from a map already checked to hold exactly keys {0, 1}."""
        return cls(config=TimerConfig.from_cbor(m[1]))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {"kind": self.NAME, "config": self.config.to_json()}


@dataclass(frozen=True, slots=True)
class CancelTimer:
    """System instruction: remove a timer whatever its owner (idempotent; seeds/003 §5.4)."""

    KIND: ClassVar[int] = 0x42
    NAME: ClassVar[str] = "cancel_timer"
    timer_id: bytes
    """The 32-byte timer id."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: self.timer_id}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> CancelTimer:
        """Build from a map already checked to hold exactly keys {0, 1}."""
        return cls(timer_id=expect_bytes(m[1], "instruction.timer_id", HASH_LEN))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {"kind": self.NAME, "timer_id": self.timer_id.hex()}


@dataclass(frozen=True, slots=True)
class ExtendTimer:
    """System instruction: raise a timer's ``expires_at``, clamped to current + max_ttl_blocks (seeds/003 §5.4)."""

    KIND: ClassVar[int] = 0x43
    NAME: ClassVar[str] = "extend_timer"
    timer_id: bytes
    """The 32-byte timer id."""
    new_expires_at: int
    """Requested expiry height (must be above the current height; never shortens a TTL)."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: self.timer_id, 2: self.new_expires_at}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> ExtendTimer:
        """Build from a map already checked to hold exactly keys {0, 1, 2}."""
        return cls(timer_id=expect_bytes(m[1], "instruction.timer_id", HASH_LEN),
                   new_expires_at=expect_uint(m[2], "instruction.new_expires_at"))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {"kind": self.NAME, "timer_id": self.timer_id.hex(), "new_expires_at": self.new_expires_at}


@dataclass(frozen=True, slots=True)
class UpdateTimerPolicy:
    """System instruction: replace the governed :class:`TimerPolicy` (FIFO / Globalbox and the draft
    parameters; sender ∈ system_deployers; docs/timers.md §12)."""

    KIND: ClassVar[int] = 0x44
    NAME: ClassVar[str] = "update_timer_policy"
    policy: TimerPolicy
    """The new policy; End of Block uses it from the next block's DeliverTimers on."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: self.policy.to_cbor()}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> UpdateTimerPolicy:
        """Build from a map already checked to hold exactly keys {0, 1}."""
        return cls(policy=TimerPolicy.from_cbor(m[1]))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {"kind": self.NAME, "policy": self.policy.to_json()}


GOVERNED_KINDS = frozenset({0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x48})
"""System instructions that, on a chain with more than one validator, need the approval of the validator set
(:class:`ValidatorApproved`): basefee and timer configuration, timer cancel/extend, timer policy, CIP-11 phase
and parameters, validator-set activation (0x48)."""
MAX_APPROVALS = 64
"""Most approvals a ValidatorApproved may carry (the largest static validator set)."""
APPROVAL_DOMAIN = b"cowboy/governance-approval/v1"
"""Signature domain of a validator's approval."""


def approval_preimage(chain_id: str, nonce: int, inner: Instruction) -> bytes:
    """What a validator signs (Ed25519, its peer key) to approve ``inner``: ``APPROVAL_DOMAIN ‖ u16be(len) ‖
    chain_id ‖ u64be(nonce) ‖ canonical CBOR of the inner instruction map``. ``nonce`` is the chain's governance
    approval nonce (``query governance`` → ``approval_nonce``), raised by every executed approval, so an approval
    is good once, on one chain."""
    cid = chain_id.encode()
    return (APPROVAL_DOMAIN + len(cid).to_bytes(2, "big") + cid + nonce.to_bytes(8, "big")
            + encode(instruction_to_cbor(inner)))


@dataclass(frozen=True, slots=True)
class ValidatorApproved:
    """A governed system instruction (:data:`GOVERNED_KINDS`) approved by the validator set: on a chain with
    ``n > 1`` validators it runs only with valid approvals from at least ``n − ⌊(n − 1)/3⌋`` distinct validators
    of ``ValidatorSetSnapshot(0)`` over :func:`approval_preimage` (CIP-11 governance by the validator set; any
    account may submit it and pays its fee). Checked at execution: ``insufficient_approvals``, ``bad_approval``."""

    KIND: ClassVar[int] = 0x47
    NAME: ClassVar[str] = "validator_approved"
    instruction: Instruction
    """The governed instruction to run."""
    approvals: tuple[tuple[int, bytes], ...]
    """``(validator index in the snapshot, 64-byte Ed25519 signature)``, strictly ascending by index."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: instruction_to_cbor(self.instruction), 2: [[i, sig] for i, sig in self.approvals]}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> ValidatorApproved:
        """Build from a map already checked to hold exactly keys {0, 1, 2}."""
        inner = instruction_from_cbor(m[1])
        if inner.KIND not in GOVERNED_KINDS:
            raise DecodeError(f"instruction.instruction: kind {inner.KIND:#04x} is not a governed instruction",
                              field="instruction.instruction")
        raw = m[2]
        if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_APPROVALS:
            raise DecodeError(f"instruction.approvals: expected 1..{MAX_APPROVALS} approvals",
                              field="instruction.approvals")
        approvals: list[tuple[int, bytes]] = []
        for k, entry in enumerate(raw):
            if not isinstance(entry, list) or len(entry) != 2:
                raise DecodeError(f"instruction.approvals[{k}]: expected [index, signature]",
                                  field="instruction.approvals")
            i = expect_uint(entry[0], f"instruction.approvals[{k}].index", MAX_APPROVALS - 1)
            if approvals and i <= approvals[-1][0]:
                raise DecodeError("instruction.approvals: indices must be strictly ascending",
                                  field="instruction.approvals")
            approvals.append((i, expect_bytes(entry[1], f"instruction.approvals[{k}].signature", 64)))
        return cls(instruction=inner, approvals=tuple(approvals))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {"kind": self.NAME, "instruction": self.instruction.to_json(),
                "approvals": [{"index": i, "signature": "0x" + sig.hex()} for i, sig in self.approvals]}


Instruction = (Transfer | UpdateBasefeeConfig | DeployActor | CallActor | TransferActorOwnership | UpdateTimerConfig
               | CancelTimer | ExtendTimer | SubmitPresenceCertificate
               | UpdateTimerPolicy | RunnerRegister | RunnerHeartbeat | RunnerUpdateCapabilities | RunnerUpdateRateCard
               | RunnerDeregister | JobSubmit | JobResultCommit | JobResultSubmit | GovernanceSetPhase
               | GovernanceSetParam | ValidatorApproved | ActivateValidatorSet)

_Decoder = Callable[[Mapping[int, Any]], Instruction]
# kind -> (number of field keys, decoder). Append only.
_REGISTRY: dict[int, tuple[int, _Decoder]] = {
    Transfer.KIND: (2, Transfer.from_fields),
    UpdateBasefeeConfig.KIND: (1, UpdateBasefeeConfig.from_fields),
    DeployActor.KIND: (4, DeployActor.from_fields),
    CallActor.KIND: (3, CallActor.from_fields),
    TransferActorOwnership.KIND: (2, TransferActorOwnership.from_fields),
    UpdateTimerConfig.KIND: (1, UpdateTimerConfig.from_fields),
    CancelTimer.KIND: (1, CancelTimer.from_fields),
    ExtendTimer.KIND: (2, ExtendTimer.from_fields),
    UpdateTimerPolicy.KIND: (1, UpdateTimerPolicy.from_fields),
    RunnerRegister.KIND: (3, RunnerRegister.from_fields),
    RunnerHeartbeat.KIND: (1, RunnerHeartbeat.from_fields),
    RunnerUpdateCapabilities.KIND: (1, RunnerUpdateCapabilities.from_fields),
    RunnerUpdateRateCard.KIND: (1, RunnerUpdateRateCard.from_fields),
    RunnerDeregister.KIND: (0, RunnerDeregister.from_fields),
    JobSubmit.KIND: (1, JobSubmit.from_fields),
    JobResultCommit.KIND: (2, JobResultCommit.from_fields),
    JobResultSubmit.KIND: (4, JobResultSubmit.from_fields),
    SubmitPresenceCertificate.KIND: (2, SubmitPresenceCertificate.from_fields),
    GovernanceSetPhase.KIND: (2, GovernanceSetPhase.from_fields),
    GovernanceSetParam.KIND: (3, GovernanceSetParam.from_fields),
    ValidatorApproved.KIND: (2, ValidatorApproved.from_fields),
    ActivateValidatorSet.KIND: (2, ActivateValidatorSet.from_fields),
}


def instruction_to_cbor(ins: Instruction) -> dict[int, Any]:
    """Canonical map form of an instruction."""
    m: dict[int, Any] = {0: ins.KIND}
    m.update(ins.fields())
    return m


def instruction_from_cbor(value: object) -> Instruction:
    """Decode an instruction map, rejecting unknown kinds and missing or extra fields."""
    if not isinstance(value, dict) or 0 not in value:
        raise DecodeError("instruction: expected a map with a kind (key 0)", field="instruction")
    kind = expect_uint(value[0], "instruction.kind")
    entry = _REGISTRY.get(kind)
    if entry is None:
        raise DecodeError(f"instruction: unknown kind {kind:#04x}", field="instruction.kind",
                          code="unknown_instruction")
    n_fields, decoder = entry
    m = expect_map(value, frozenset(range(n_fields + 1)), "instruction")
    return decoder(m)
