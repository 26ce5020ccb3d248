"""Transaction receipts and events.

Receipt map: {0: status (0 success, 1 failed), 1: cycles_used, 2: cells_used,
3: fee_paid (u128 bytes), 4: error_code (null | text), 5: events (array)}.
Event map: {0: emitter (20 bytes), 1: topic (text), 2: data (bytes)}.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cowboy_protocol.codec import encode
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.errors import DecodeError
from cowboy_protocol.types.fields import (
    ADDRESS_LEN,
    decode_u128,
    encode_u128,
    expect_bytes,
    expect_map,
    expect_text,
    expect_uint,
)

STATUS_SUCCESS = 0
STATUS_FAILED = 1


@dataclass(frozen=True, slots=True)
class Event:
    """A log entry emitted during execution."""

    emitter: bytes
    """Address of the account or actor that emitted it."""
    topic: str
    """Event name, e.g. ``transfer``."""
    data: bytes
    """Canonical-CBOR payload."""

    def to_cbor(self) -> dict[int, Any]:
        """Canonical map form."""
        return {0: self.emitter, 1: self.topic, 2: self.data}

    @classmethod
    def from_cbor(cls, value: object) -> Event:
        """Strict decode."""
        m = expect_map(value, frozenset({0, 1, 2}), "event")
        return cls(expect_bytes(m[0], "event.emitter", ADDRESS_LEN), expect_text(m[1], "event.topic"),
                   expect_bytes(m[2], "event.data"))

    def to_json(self) -> dict[str, Any]:
        """JSON view."""
        return {"emitter": "0x" + self.emitter.hex(), "topic": self.topic, "data": "0x" + self.data.hex()}


@dataclass(frozen=True, slots=True)
class Receipt:
    """Outcome of one transaction."""

    status: int
    """STATUS_SUCCESS or STATUS_FAILED (failed transactions still pay for what they used)."""
    cycles_used: int
    """Compute cycles charged."""
    cells_used: int
    """Cells (bytes written or carried) charged."""
    fee_paid: int
    """Total fee debited from the sender (basefee burned + tip)."""
    error_code: str | None
    """Stable error code when ``status`` is failed."""
    events: tuple[Event, ...]
    """Events emitted (empty when failed)."""

    def to_cbor(self) -> dict[int, Any]:
        """Canonical map form."""
        return {0: self.status, 1: self.cycles_used, 2: self.cells_used, 3: encode_u128(self.fee_paid),
                4: self.error_code, 5: [e.to_cbor() for e in self.events]}

    def encode(self) -> bytes:
        """Canonical CBOR bytes."""
        return encode(self.to_cbor())

    def hash(self) -> bytes:
        """keccak256 of the canonical bytes (leaf of the receipts root)."""
        return keccak256(self.encode())

    @classmethod
    def from_cbor(cls, value: object) -> Receipt:
        """Strict decode."""
        m = expect_map(value, frozenset(range(6)), "receipt")
        status = expect_uint(m[0], "receipt.status", 1)
        err = None if m[4] is None else expect_text(m[4], "receipt.error_code")
        if not isinstance(m[5], list):
            raise DecodeError("receipt.events: expected an array", field="receipt.events")
        return cls(status, expect_uint(m[1], "receipt.cycles_used"), expect_uint(m[2], "receipt.cells_used"),
                   decode_u128(m[3], "receipt.fee_paid"), err, tuple(Event.from_cbor(e) for e in m[5]))

    def to_json(self) -> dict[str, Any]:
        """JSON view."""
        return {
            "status": "success" if self.status == STATUS_SUCCESS else "failed",
            "cycles_used": self.cycles_used,
            "cells_used": self.cells_used,
            "fee_paid": str(self.fee_paid),
            "error_code": self.error_code,
            "events": [e.to_json() for e in self.events],
        }
