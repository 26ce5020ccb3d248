"""Runner Registry instructions (kinds 0x20..0x24; docs/runners.md §2).

The transaction signer is the runner identity: every instruction acts on the registration of
``tx.sender``. Each is a CBOR map ``{0: kind, 1..: fields}`` like every other instruction
(``cowboy_protocol/types/instructions.py`` holds the kind table and the union).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from cowboy_protocol.types.fields import decode_u128, encode_u128
from cowboy_protocol.types.runner import Capabilities, RateCard
from cowboy_protocol.types.runner_json import capabilities_to_json, rate_card_to_json
from cowboy_protocol.types.validation_errors import DecodeError


@dataclass(frozen=True, slots=True)
class RunnerRegister:
    """Register the sender as a runner, bonding ``stake`` from its balance into the Runner Registry."""

    KIND: ClassVar[int] = 0x20
    NAME: ClassVar[str] = "runner_register"
    stake: int
    """Amount bonded (u128); at least ``RunnerConfig.min_runner_stake``."""
    capabilities: Capabilities
    """What the runner serves."""
    rate_card: RateCard
    """Its prices."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: encode_u128(self.stake), 2: self.capabilities.to_cbor(), 3: self.rate_card.to_cbor()}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> RunnerRegister:
        """Build from a map already checked to hold exactly keys {0..3}."""
        return cls(stake=decode_u128(m[1], "instruction.stake"), capabilities=Capabilities.from_cbor(m[2]),
                   rate_card=RateCard.from_cbor(m[3]))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {"kind": self.NAME, "stake": str(self.stake), "capabilities": capabilities_to_json(self.capabilities),
                "rate_card": rate_card_to_json(self.rate_card)}


@dataclass(frozen=True, slots=True)
class RunnerHeartbeat:
    """The on-chain heartbeat (CIP-11 §7.1 eligibility floor): refreshes ``last_heartbeat``."""

    KIND: ClassVar[int] = 0x21
    NAME: ClassVar[str] = "runner_heartbeat"
    accepting: bool
    """True: HEALTHY (accepting jobs); False: PAUSED."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: self.accepting}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> RunnerHeartbeat:
        """Build from a map already checked to hold exactly keys {0, 1}."""
        if not isinstance(m[1], bool):
            raise DecodeError("instruction.accepting: expected a bool", field="instruction.accepting")
        return cls(accepting=m[1])

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {"kind": self.NAME, "accepting": self.accepting}


@dataclass(frozen=True, slots=True)
class RunnerUpdateCapabilities:
    """Replace the sender's capabilities."""

    KIND: ClassVar[int] = 0x22
    NAME: ClassVar[str] = "runner_update_capabilities"
    capabilities: Capabilities
    """The new capabilities."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: self.capabilities.to_cbor()}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> RunnerUpdateCapabilities:
        """Build from a map already checked to hold exactly keys {0, 1}."""
        return cls(capabilities=Capabilities.from_cbor(m[1]))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {"kind": self.NAME, "capabilities": capabilities_to_json(self.capabilities)}


@dataclass(frozen=True, slots=True)
class RunnerUpdateRateCard:
    """Replace the sender's rate card."""

    KIND: ClassVar[int] = 0x23
    NAME: ClassVar[str] = "runner_update_rate_card"
    rate_card: RateCard
    """The new prices."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: self.rate_card.to_cbor()}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> RunnerUpdateRateCard:
        """Build from a map already checked to hold exactly keys {0, 1}."""
        return cls(rate_card=RateCard.from_cbor(m[1]))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {"kind": self.NAME, "rate_card": rate_card_to_json(self.rate_card)}


@dataclass(frozen=True, slots=True)
class RunnerDeregister:
    """Leave the registry: DEREGISTERED now, stake returned ``unbonding_blocks`` later (index kept)."""

    KIND: ClassVar[int] = 0x24
    NAME: ClassVar[str] = "runner_deregister"

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (none)."""
        return {}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> RunnerDeregister:
        """Build from a map already checked to hold exactly key {0}."""
        return cls()

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {"kind": self.NAME}

