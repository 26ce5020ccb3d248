"""CIP-11 governance system instructions (CIP-11 §13–§14): scheduled rollout-phase and parameter changes.

Both are system instructions (sender ∈ ``system_deployers``, the authority of UpdateTimerConfig). A change is
not applied when its transaction executes: it is stored pending and takes effect from ``activation_height``
(``cowboy_node/execution/governance.py``; docs/operations.md "Governance").

Wire form ``{0: kind, 1..: fields}`` like every instruction; kinds 0x45 and 0x46 are appended to the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from cowboy_protocol.types.fields import expect_text, expect_uint
from cowboy_protocol.types.validation_errors import DecodeError

MAX_PARAM_NAME_BYTES = 64
"""Longest parameter name a GovernanceSetParam may carry."""


@dataclass(frozen=True, slots=True)
class GovernanceSetPhase:
    """Schedule a CIP-11 rollout-phase change (§14): the phase flags become those of ``phase`` from
    ``activation_height`` on. The phase range and the §14 ordering are checked at execution (failed receipt)."""

    KIND: ClassVar[int] = 0x45
    NAME: ClassVar[str] = "governance_set_phase"
    phase: int
    """Target phase 0..3 (a value above 3 decodes, and fails at execution with ``invalid_phase``)."""
    activation_height: int
    """First height that runs with the new phase; must be above the height of the including block."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: self.phase, 2: self.activation_height}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> GovernanceSetPhase:
        """Build from a map already checked to hold exactly keys {0, 1, 2}."""
        return cls(phase=expect_uint(m[1], "instruction.phase"),
                   activation_height=expect_uint(m[2], "instruction.activation_height"))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {"kind": self.NAME, "phase": self.phase, "activation_height": self.activation_height}


@dataclass(frozen=True, slots=True)
class GovernanceSetParam:
    """Schedule a change of one governed CIP-11 parameter (§13 constant name such as ``OVERLAP_BLOCKS``, the
    Mode A / shadow flags as 0/1, or ``runner.<field>`` of RunnerConfig). Unknown names and out-of-range
    values fail at execution (``unknown_param``, ``param_out_of_range``)."""

    KIND: ClassVar[int] = 0x46
    NAME: ClassVar[str] = "governance_set_param"
    name: str
    """Parameter name (1..64 UTF-8 bytes)."""
    value: int
    """New value (u64)."""
    activation_height: int
    """First height that runs with the new value; must be above the height of the including block."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: self.name, 2: self.value, 3: self.activation_height}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> GovernanceSetParam:
        """Build from a map already checked to hold exactly keys {0, 1, 2, 3}."""
        name = expect_text(m[1], "instruction.name", MAX_PARAM_NAME_BYTES)
        if not name:
            raise DecodeError("instruction.name: must not be empty", field="instruction.name")
        return cls(name=name, value=expect_uint(m[2], "instruction.value"),
                   activation_height=expect_uint(m[3], "instruction.activation_height"))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {"kind": self.NAME, "name": self.name, "value": self.value,
                "activation_height": self.activation_height}
