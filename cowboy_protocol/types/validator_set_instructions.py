"""CIP-11 §5.3/§5.4 reconfiguration by governance: the system instruction :class:`ActivateValidatorSet` (0x48).

It schedules ``ValidatorSetActivated(E+1, activation_height)``: execution writes ``ValidatorSetSnapshot(E+1)``
and the activation record (``cowboy_node/execution/validator_set.py``); from ``activation_height`` the transport
honours both snapshots for OVERLAP_BLOCKS, then only E+1. It is a governed kind (``GOVERNED_KINDS``): on a chain
with more than one validator it runs only inside a ValidatorApproved. What a new list may contain on this node
(a subsequence of the genesis consensus participants, no new identity) is checked at execution, not here:
docs/transport.md "Reconfiguration".

Wire form ``{0: 0x48, 1: [peer_pubkey (bstr 32), ...], 2: activation_height (uint)}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from cowboy_protocol.types.fields import expect_bytes, expect_uint
from cowboy_protocol.types.validation_errors import DecodeError

MAX_SET_VALIDATORS = 64
"""Most peer keys an ActivateValidatorSet may carry (the largest static validator set, as MAX_APPROVALS)."""
PEER_PUBKEY_LEN = 32
"""Raw Ed25519 peer_pubkey length."""


@dataclass(frozen=True, slots=True)
class ActivateValidatorSet:
    """Schedule ``ValidatorSetActivated(E+1, activation_height)`` with the ordered peer identities of E+1.

    Only the ordered ``peer_pubkey`` list is carried: a CIP-11 ValidatorRecord's ``stake`` "is not consumed by
    any CIP-11 rule" (§5.4) and this node keeps no validator stake, so the snapshot stores the keys alone."""

    KIND: ClassVar[int] = 0x48
    NAME: ClassVar[str] = "activate_validator_set"
    peer_pubkeys: tuple[bytes, ...]
    """The new snapshot's ordered raw Ed25519 peer_pubkeys (1..64 distinct keys, 32 bytes each)."""
    activation_height: int
    """First height at which epoch E+1 is valid (the OVERLAP_BLOCKS window starts here); at least
    ``ACTIVATION_MIN_DELAY_BLOCKS`` above the including block (checked at execution)."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: [bytes(k) for k in self.peer_pubkeys], 2: self.activation_height}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> ActivateValidatorSet:
        """Build from a map already checked to hold exactly keys {0, 1, 2}."""
        raw = m[1]
        if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_SET_VALIDATORS:
            raise DecodeError(f"instruction.peer_pubkeys: expected 1..{MAX_SET_VALIDATORS} keys",
                              field="instruction.peer_pubkeys")
        keys = tuple(expect_bytes(k, f"instruction.peer_pubkeys[{i}]", PEER_PUBKEY_LEN) for i, k in enumerate(raw))
        if len(set(keys)) != len(keys):
            raise DecodeError("instruction.peer_pubkeys: a key appears twice", field="instruction.peer_pubkeys")
        return cls(peer_pubkeys=keys, activation_height=expect_uint(m[2], "instruction.activation_height"))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {"kind": self.NAME, "peer_pubkeys": ["0x" + k.hex() for k in self.peer_pubkeys],
                "activation_height": self.activation_height}
