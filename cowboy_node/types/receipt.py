"""Transaction receipts and events.

Receipt map: {0: status (0 success, 1 failed), 1: cycles_used, 2: cells_used,
3: fee_paid (u128 bytes), 4: error_code (null | text), 5: events (array),
6: error_message (null | text of at most ``MAX_ERROR_MESSAGE_BYTES`` UTF-8 bytes)}.
Event map: {0: emitter (20 bytes), 1: topic (text), 2: data (bytes)}.

The error message is consensus data (it is hashed into the receipts root), so
it is built only from deterministic text: the execution layer's own messages and
the PVM's deterministic rendering of actor exceptions, never a host path, an
object address or an unexpected exception's text (see ``bounded_message``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cowboy_protocol.codec import encode
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.fields import (
    ADDRESS_LEN,
    decode_u128,
    encode_u128,
    expect_bytes,
    expect_map,
    expect_text,
    expect_uint,
)
from cowboy_protocol.types.validation_errors import DecodeError

STATUS_SUCCESS = 0
STATUS_FAILED = 1
MAX_ERROR_MESSAGE_BYTES = 256
"""Longest ``error_message`` (UTF-8 bytes): long enough for ``Type: message at line N``, short enough
that a block full of failed receipts stays small (the message is charged nowhere, so it must be bounded)."""
_ELLIPSIS = "..."


def bounded_message(text: str) -> str:
    """``text`` made storable in a receipt: at most :data:`MAX_ERROR_MESSAGE_BYTES` UTF-8 bytes.

    Lone surrogates (an actor may raise ``ValueError("\\ud800")``) are not UTF-8: they become their
    ``\\uXXXX`` escape. A longer text is cut at a character boundary and ends with ``...``. Pure
    function of ``text``: every node produces the same bytes.
    """
    raw = text.encode("utf-8", "backslashreplace")
    if len(raw) <= MAX_ERROR_MESSAGE_BYTES:
        return raw.decode("utf-8")
    cut = raw[:MAX_ERROR_MESSAGE_BYTES - len(_ELLIPSIS)].decode("utf-8", "ignore")  # drops a split character
    return cut + _ELLIPSIS


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
    error_message: str | None = None
    """Why it failed, for people (``NameError: name 'foo' is not defined at line 3``): deterministic, at
    most :data:`MAX_ERROR_MESSAGE_BYTES` UTF-8 bytes (build it with :func:`bounded_message`); None when
    ``error_code`` is None."""

    def __post_init__(self) -> None:
        if self.error_message is not None:
            if self.error_code is None:
                raise ValueError("error_message without error_code")
            if len(self.error_message.encode("utf-8")) > MAX_ERROR_MESSAGE_BYTES:
                raise ValueError(f"error_message exceeds {MAX_ERROR_MESSAGE_BYTES} UTF-8 bytes")

    def to_cbor(self) -> dict[int, Any]:
        """Canonical map form."""
        return {0: self.status, 1: self.cycles_used, 2: self.cells_used, 3: encode_u128(self.fee_paid),
                4: self.error_code, 5: [e.to_cbor() for e in self.events], 6: self.error_message}

    def encode(self) -> bytes:
        """Canonical CBOR bytes."""
        return encode(self.to_cbor())

    def hash(self) -> bytes:
        """keccak256 of the canonical bytes (leaf of the receipts root)."""
        return keccak256(self.encode())

    @classmethod
    def from_cbor(cls, value: object) -> Receipt:
        """Strict decode."""
        m = expect_map(value, frozenset(range(7)), "receipt")
        status = expect_uint(m[0], "receipt.status", 1)
        err = None if m[4] is None else expect_text(m[4], "receipt.error_code")
        if not isinstance(m[5], list):
            raise DecodeError("receipt.events: expected an array", field="receipt.events")
        message = None if m[6] is None else expect_text(m[6], "receipt.error_message", MAX_ERROR_MESSAGE_BYTES)
        if message is not None and err is None:
            raise DecodeError("receipt.error_message: set without an error_code", field="receipt.error_message")
        return cls(status, expect_uint(m[1], "receipt.cycles_used"), expect_uint(m[2], "receipt.cells_used"),
                   decode_u128(m[3], "receipt.fee_paid"), err, tuple(Event.from_cbor(e) for e in m[5]), message)

    def to_json(self) -> dict[str, Any]:
        """JSON view."""
        return {
            "status": "success" if self.status == STATUS_SUCCESS else "failed",
            "cycles_used": self.cycles_used,
            "cells_used": self.cells_used,
            "fee_paid": str(self.fee_paid),
            "error_code": self.error_code,
            "error_message": self.error_message,
            "events": [e.to_json() for e in self.events],
        }
