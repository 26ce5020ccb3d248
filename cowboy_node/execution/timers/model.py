"""The CIP-5 timer record (seeds/003 §3.1), its canonical encoding and the timer id (§3.3).

Canonical encoding (deterministic CBOR map, integer keys)::

    {0: actor_address (bytes 20), 1: height (uint), 2: payload (bytes <= 1 MiB),
     3: timer_id (bytes <= 256), 4: handler (text <= 256 bytes), 5: fee_payer (bytes 20),
     6: gas_limit_per_fire (uint), 7: expires_at (uint), 8: seq (uint)}

``seq`` is not in the CIP-5 struct: it is the timer's position in the global
insertion order, which locates its height-index entry (see ``store.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_protocol.codec import decode, encode
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.fields import ADDRESS_LEN, U64_MAX, expect_bytes, expect_map, expect_text, expect_uint

MAX_PAYLOAD_BYTES = 1_048_576
"""Largest timer payload (§4.2: 1 MiB)."""
MAX_HANDLER_BYTES = 256
"""Longest handler name in UTF-8 bytes (§4.2)."""
MAX_TIMER_ID_BYTES = 256
"""Longest timer id (§3.1)."""
DEFAULT_HANDLER = "handle_timer"
"""Handler invoked when none is named (§3.1, §4.2)."""

_KEYS = frozenset(range(9))


@dataclass(frozen=True, slots=True)
class Timer:
    """A scheduled one-shot timer (CIP-5 §3.1, Model B economics)."""

    actor_address: bytes
    """The actor that owns the timer; also the identity its handler runs as."""
    height: int
    """Block height at which the timer is due."""
    payload: bytes
    """Opaque bytes delivered to the handler (at most 1 MiB)."""
    timer_id: bytes
    """Unique id, ``derive_timer_id(...)`` (32 bytes for every timer this node creates)."""
    handler: str
    """Handler method name (default ``handle_timer``)."""
    fee_payer: bytes
    """Account pre-charged at fire time: the actor itself or the scheduling tx's sender (§4.2)."""
    gas_limit_per_fire: int
    """Cycles limit of the fire (≤ ``TimerConfig.max_cycles_per_fire`` at scheduling time)."""
    expires_at: int
    """Last height at which the timer may still fire; after it the timer self-destructs (§5.4)."""
    seq: int
    """Global insertion sequence number: the timer's FIFO position in the height index."""

    def to_cbor(self) -> dict[int, bytes | int | str]:
        """Canonical map form (see the module docstring)."""
        return {0: self.actor_address, 1: self.height, 2: self.payload, 3: self.timer_id, 4: self.handler,
                5: self.fee_payer, 6: self.gas_limit_per_fire, 7: self.expires_at, 8: self.seq}

    def encode(self) -> bytes:
        """Canonical CBOR bytes of the record."""
        return encode(self.to_cbor())

    @classmethod
    def from_cbor(cls, value: object) -> Timer:
        """Strict decode of the canonical map (exact key set, types and bounds)."""
        m = expect_map(value, _KEYS, "timer")
        return cls(
            actor_address=expect_bytes(m[0], "timer.actor_address", ADDRESS_LEN),
            height=expect_uint(m[1], "timer.height"),
            payload=expect_bytes(m[2], "timer.payload", max_len=MAX_PAYLOAD_BYTES),
            timer_id=expect_bytes(m[3], "timer.timer_id", max_len=MAX_TIMER_ID_BYTES),
            handler=expect_text(m[4], "timer.handler", MAX_HANDLER_BYTES),
            fee_payer=expect_bytes(m[5], "timer.fee_payer", ADDRESS_LEN),
            gas_limit_per_fire=expect_uint(m[6], "timer.gas_limit_per_fire"),
            expires_at=expect_uint(m[7], "timer.expires_at"),
            seq=expect_uint(m[8], "timer.seq"),
        )

    @classmethod
    def decode(cls, raw: bytes) -> Timer:
        """Strict decode of stored bytes (raises ``DecodeError`` / ``CodecError``)."""
        fast = _decode_canonical(raw)
        return fast if fast is not None else cls.from_cbor(decode(raw))


_MAP_HEADS = tuple(bytes([0xA0 | n]) for n in range(24))
_KEY_BYTES = tuple(bytes([k]) for k in range(24))


def encode_indexed(*values: object) -> bytes:
    """``encode({0: values[0], 1: values[1], ...})`` for at most 23 values, byte for byte.

    The keys 0..22 encode as the single bytes 0x00..0x16, so the canonical (key-sorted) order is the
    argument order and each entry is that byte followed by ``encode(value)``; this skips the generic map
    path (key encoding and sorting), which is most of the cost of the small maps a fire writes.
    """
    if len(values) == 2:  # accounts and per-actor counters
        return b"\xa2\x00" + encode(values[0]) + b"\x01" + encode(values[1])
    return _MAP_HEADS[len(values)] + b"".join([_KEY_BYTES[k] + encode(v) for k, v in enumerate(values)])


def _head(raw: bytes, pos: int, major: int) -> tuple[int, int]:
    """``(argument, next position)`` of a shortest-form CBOR head of ``major`` at ``pos``.

    Raises ``IndexError`` / ``ValueError`` for anything else (the caller falls back to the strict decoder).
    """
    ib = raw[pos]
    if ib >> 5 != major:
        raise ValueError("major type")
    ai = ib & 0x1F
    if ai < 24:
        return ai, pos + 1
    if ai > 27:
        raise ValueError("additional info")
    width = 1 << (ai - 24)
    end = pos + 1 + width
    if end > len(raw):
        raise IndexError("truncated head")
    arg = int.from_bytes(raw[pos + 1:end], "big")
    if arg < (24 if width == 1 else 1 << (4 * width)):
        raise ValueError("not shortest form")
    return arg, end


def _bytes_at(raw: bytes, pos: int, major: int, max_len: int) -> tuple[bytes, int]:
    n, pos = _head(raw, pos, major)
    end = pos + n
    if n > max_len or end > len(raw):
        raise ValueError("length")
    return raw[pos:end], end


def _decode_canonical(raw: bytes) -> Timer | None:
    """The record, if ``raw`` is laid out exactly as :meth:`Timer.encode` writes it, else None.

    A fire reads one record, and the generic decoder plus the field checks cost several times this
    field-by-field walk of the one canonical layout (map of 9, keys 0..8 in order, shortest-form
    heads, each field's type and bound as :meth:`Timer.from_cbor` checks it, nothing after the last
    field). Whatever it does not accept goes to the strict decoder, which accepts it or raises the
    usual error, so the result (value or error) is the strict decoder's for every input.
    """
    if type(raw) is not bytes:
        return None
    try:
        if raw[0] != 0xA9 or raw[1] != 0x00 or raw[2] != 0x54:
            return None
        actor, pos = raw[3:23], 23
        if len(actor) != ADDRESS_LEN or raw[pos] != 0x01:
            return None
        height, pos = _head(raw, pos + 1, 0)
        if raw[pos] != 0x02:
            return None
        payload, pos = _bytes_at(raw, pos + 1, 2, MAX_PAYLOAD_BYTES)
        if raw[pos] != 0x03:
            return None
        timer_id, pos = _bytes_at(raw, pos + 1, 2, MAX_TIMER_ID_BYTES)
        if raw[pos] != 0x04:
            return None
        handler_raw, pos = _bytes_at(raw, pos + 1, 3, MAX_HANDLER_BYTES)
        handler = handler_raw.decode("utf-8")
        if raw[pos] != 0x05 or raw[pos + 1] != 0x54:
            return None
        fee_payer, pos = raw[pos + 2:pos + 22], pos + 22
        if len(fee_payer) != ADDRESS_LEN or raw[pos] != 0x06:
            return None
        gas, pos = _head(raw, pos + 1, 0)
        if raw[pos] != 0x07:
            return None
        expires_at, pos = _head(raw, pos + 1, 0)
        if raw[pos] != 0x08:
            return None
        seq, pos = _head(raw, pos + 1, 0)
    except (IndexError, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    if pos != len(raw):
        return None
    return Timer(actor, height, payload, timer_id, handler, fee_payer, gas, expires_at, seq)


def timer_id_preimage(actor_address: bytes, height: int, payload: bytes, nonce: int) -> bytes:
    """``actor_address[20] ‖ height[8 BE] ‖ payload ‖ nonce[8 BE]`` (§3.3)."""
    if len(actor_address) != ADDRESS_LEN:
        raise ValueError("actor_address must be 20 bytes")
    if not 0 <= height <= U64_MAX or not 0 <= nonce <= U64_MAX:
        raise ValueError("height and nonce must fit u64")
    return actor_address + height.to_bytes(8, "big") + payload + nonce.to_bytes(8, "big")


def derive_timer_id(actor_address: bytes, height: int, payload: bytes, nonce: int) -> bytes:
    """``keccak256(timer_id_preimage(...))``; ``nonce`` is the actor's timer nonce (docs/timers.md)."""
    return keccak256(timer_id_preimage(actor_address, height, payload, nonce))
