"""Transaction instructions: what a transaction asks the chain to do.

An instruction is encoded as a CBOR map ``{0: kind, 1..: fields}``. ``kind``
is a fixed byte table (append only); see ``docs/protocol.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from cowboy_node.types.errors import DecodeError
from cowboy_node.types.fields import (
    ADDRESS_LEN,
    decode_u128,
    encode_u128,
    expect_bytes,
    expect_map,
    expect_uint,
)
from cowboy_node.types.params import BasefeeConfig


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
        from cowboy_node.crypto.address import to_checksum_address

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


Instruction = Transfer | UpdateBasefeeConfig

_Decoder = Callable[[Mapping[int, Any]], Instruction]
# kind -> (number of field keys, decoder). Append only.
_REGISTRY: dict[int, tuple[int, _Decoder]] = {
    Transfer.KIND: (2, Transfer.from_fields),
    UpdateBasefeeConfig.KIND: (1, UpdateBasefeeConfig.from_fields),
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
