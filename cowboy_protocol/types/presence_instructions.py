"""CIP-11 Mode A presence evidence (§8.3): the ``PresenceReceipt`` and the ``SubmitPresenceCertificate`` (0x33).

A ``PresenceReceipt`` is a validator's Ed25519 signature, under its snapshotted ``peer_pubkey``, that it saw a
runner at ``block_height``. It signs the channel-binding-free ``cowboy-cip11-presence-receipt-v1`` digest of
:func:`cowboy_protocol.transport.preimages.presence_receipt_digest` (docs/protocol.md §8.3), whose ``chain_id``
is the chain's own id, so execution can verify it with no connection. The runner collects receipts from its
subset and submits them in a ``SubmitPresenceCertificate`` transaction it signs itself.

Map layouts (project choice for the definitions the seed lost; docs/protocol.md §2 and §8.5):

    PresenceReceipt            {0: runner_pubkey bytes (0x01 ‖ 33), 1: validator_pubkey bytes (0x02 ‖ 32),
                                2: subset_epoch u64, 3: validator_set_hash bytes(32), 4: block_height u64,
                                5: nonce_echo u64, 6: accepting_new bool, 7: validator_signed bytes(64)}
    SubmitPresenceCertificate  {0: 0x33, 1: runner bytes(20), 2: [PresenceReceipt, ...] (1..MAX_RECEIPTS)}

Decoding checks only the structure (keys, types, upper bounds on lengths). Scheme tags, exact key and signature
lengths and everything else are receipt *validity* checks that §8.3 puts in execution's metered precheck (one
bad receipt is not counted; it does not make the transaction undecodable).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from cowboy_protocol.transport.preimages import ValidatorKey, presence_receipt_digest
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.types.fields import ADDRESS_LEN, expect_bytes, expect_map, expect_uint
from cowboy_protocol.types.validation_errors import DecodeError

MAX_RECEIPTS = 1_024
"""Most receipt entries one certificate may carry (two epochs' subsets during an overlap at the governed
``MAX_SUBSET`` bound; the transaction size limit binds first, at about 680 receipts)."""
MAX_PUBKEY_WIRE_BYTES = 64
"""Upper bound on a receipt's wire key fields at decode time (the exact 34/33 is checked in execution)."""
MAX_SIGNATURE_BYTES = 128
"""Upper bound on ``validator_signed`` at decode time (the exact 64 is checked in execution)."""
_RECEIPT_KEYS = frozenset(range(8))


@dataclass(frozen=True, slots=True)
class PresenceReceipt:
    """A validator's chain-verifiable statement that a runner was connected and accepting (CIP-11 §8.3)."""

    runner_pubkey: bytes
    """Scheme-tagged runner key as carried (``0x01 ‖ 33-byte compressed secp256k1``)."""
    validator_pubkey: bytes
    """Scheme-tagged validator key as carried (``0x02 ‖ 32-byte Ed25519 peer_pubkey``)."""
    subset_epoch: int
    """Epoch of the snapshot the validator signed under (E, or E+1 during an overlap)."""
    validator_set_hash: bytes
    """``validator_set_hash(subset_epoch)``; with ``subset_epoch`` it selects one snapshot (§5.3)."""
    block_height: int
    """Height at which the validator observed the runner (the anchor the proof TTL counts from)."""
    nonce_echo: int
    """The runner's HeartbeatPing nonce this receipt answers (replay entropy; not checked on chain)."""
    accepting_new: bool
    """False while the runner is backpressured (§6.4): such a receipt never counts."""
    validator_signed: bytes
    """Ed25519 signature over :meth:`digest` by the validator's ``peer_pubkey``."""

    def to_cbor(self) -> dict[int, Any]:
        """Canonical map form."""
        return {0: self.runner_pubkey, 1: self.validator_pubkey, 2: self.subset_epoch, 3: self.validator_set_hash,
                4: self.block_height, 5: self.nonce_echo, 6: self.accepting_new, 7: self.validator_signed}

    @classmethod
    def from_cbor(cls, value: object, name: str = "receipt") -> PresenceReceipt:
        """Structural decode (see the module docstring for what is left to execution)."""
        m = expect_map(value, _RECEIPT_KEYS, name)
        if not isinstance(m[6], bool):
            raise DecodeError(f"{name}.accepting_new: expected a bool", field=f"{name}.accepting_new")
        return cls(runner_pubkey=expect_bytes(m[0], f"{name}.runner_pubkey", max_len=MAX_PUBKEY_WIRE_BYTES),
                   validator_pubkey=expect_bytes(m[1], f"{name}.validator_pubkey", max_len=MAX_PUBKEY_WIRE_BYTES),
                   subset_epoch=expect_uint(m[2], f"{name}.subset_epoch"),
                   validator_set_hash=expect_bytes(m[3], f"{name}.validator_set_hash", max_len=64),
                   block_height=expect_uint(m[4], f"{name}.block_height"),
                   nonce_echo=expect_uint(m[5], f"{name}.nonce_echo"),
                   accepting_new=m[6],
                   validator_signed=expect_bytes(m[7], f"{name}.validator_signed", max_len=MAX_SIGNATURE_BYTES))

    def digest(self, chain_id: str) -> bytes:
        """The signed digest on chain ``chain_id``; raises ``SignatureError`` for a malformed or wrong-scheme key."""
        return presence_receipt_digest(chain_id, PubKey.from_bytes(self.runner_pubkey),
                                       PubKey.from_bytes(self.validator_pubkey), self.subset_epoch,
                                       self.validator_set_hash, self.block_height, self.nonce_echo,
                                       self.accepting_new)

    @classmethod
    def issue(cls, chain_id: str, key: ValidatorKey, runner_pubkey: PubKey, subset_epoch: int,
              validator_set_hash: bytes, block_height: int, nonce_echo: int, accepting_new: bool) -> PresenceReceipt:
        """Sign a receipt with the validator's peer key (inside the validator node: §6.2 key custody)."""
        unsigned = cls(runner_pubkey.to_bytes(), key.pubkey.to_bytes(), subset_epoch, bytes(validator_set_hash),
                       block_height, nonce_echo, accepting_new, b"")
        return cls(unsigned.runner_pubkey, unsigned.validator_pubkey, subset_epoch, unsigned.validator_set_hash,
                   block_height, nonce_echo, accepting_new, key.sign(unsigned.digest(chain_id)))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC (bytes as 0x-hex)."""
        return {"runner_pubkey": "0x" + self.runner_pubkey.hex(),
                "validator_pubkey": "0x" + self.validator_pubkey.hex(),
                "subset_epoch": self.subset_epoch, "validator_set_hash": "0x" + self.validator_set_hash.hex(),
                "block_height": self.block_height, "nonce_echo": self.nonce_echo,
                "accepting_new": self.accepting_new, "validator_signed": "0x" + self.validator_signed.hex()}


@dataclass(frozen=True, slots=True)
class SubmitPresenceCertificate:
    """Mode A presence certificate (CIP-11 §8.3): a runner's receipts from its subset validators. The sender must be
    ``runner`` (the ordinary transaction signature is §8.3's ``runner_signed``). Refused unless
    ``PRESENCE_HARD_EXCLUDE_ENABLED`` is set (docs/selection.md "Mode A")."""

    KIND: ClassVar[int] = 0x33
    NAME: ClassVar[str] = "submit_presence_certificate"
    runner: bytes
    """Address of the runner the certificate proves present (= the sender)."""
    receipts: tuple[PresenceReceipt, ...]
    """1..MAX_RECEIPTS receipts, in any order (order never changes the outcome)."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: self.runner, 2: [r.to_cbor() for r in self.receipts]}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> SubmitPresenceCertificate:
        """Build from a map already checked to hold exactly keys {0, 1, 2}."""
        runner = expect_bytes(m[1], "instruction.runner", ADDRESS_LEN)
        raw = m[2]
        if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_RECEIPTS:
            raise DecodeError(f"instruction.receipts: expected an array of 1..{MAX_RECEIPTS} receipts",
                              field="instruction.receipts")
        return cls(runner=runner, receipts=tuple(PresenceReceipt.from_cbor(r, f"instruction.receipts[{i}]")
                                                 for i, r in enumerate(raw)))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {"kind": self.NAME, "runner": "0x" + self.runner.hex(),
                "receipts": [r.to_json() for r in self.receipts]}
