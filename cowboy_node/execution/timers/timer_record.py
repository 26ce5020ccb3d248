"""The CIP-5 timer record (seeds/003 §3.1), its canonical encoding and the timer id (§3.3).

Canonical encoding (deterministic CBOR map, integer keys)::

    {0: actor_address (bytes 20), 1: height (uint), 2: payload (bytes <= 1 MiB),
     3: timer_id (bytes <= 256), 4: handler (text <= 256 bytes), 5: fee_payer (bytes 20),
     6: gas_limit_per_fire (uint), 7: expires_at (uint), 8: seq (uint)}

``seq`` is not in the CIP-5 struct: it is the timer's position in the global
insertion order, which locates its height-index entry (see ``store.py``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from cowboy_protocol.codec import decode, encode
from cowboy_protocol.codec.fixed import NULL, byte_string, text, uint
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


def encode_item(value: object) -> bytes:
    """``encode(value)``, byte for byte (or its error); bytes, unsigned ints, bools, None and text directly.

    The scalars of the small maps a fire writes go through ``cowboy_protocol.codec.fixed`` instead of the
    generic dispatch; anything those decline (out of range, not UTF-8, another type) goes to ``encode``.
    """
    t = type(value)
    if t is bytes:
        return byte_string(value)  # type: ignore[arg-type]
    if t is int:
        item = uint(value)
        if item is not None:
            return item
    elif value is None:
        return NULL
    elif value is True:
        return b"\xf5"
    elif value is False:
        return b"\xf4"
    elif t is str:
        item = text(value)
        if item is not None:
            return item
    return encode(value)


def encode_indexed(*values: object) -> bytes:
    """``encode({0: values[0], 1: values[1], ...})`` for at most 23 values, byte for byte.

    The keys 0..22 encode as the single bytes 0x00..0x16, so the canonical (key-sorted) order is the
    argument order and each entry is that byte followed by ``encode(value)``; this skips the generic map
    path (key encoding and sorting), which is most of the cost of the small maps a fire writes.
    """
    if len(values) == 2:  # accounts and per-actor counters
        return b"\xa2\x00" + encode_item(values[0]) + b"\x01" + encode_item(values[1])
    parts = [_MAP_HEADS[len(values)]]
    for k, v in enumerate(values):
        parts.append(_KEY_BYTES[k])
        parts.append(encode_item(v))
    return b"".join(parts)


_unpack_H = struct.Struct(">H").unpack_from
_unpack_I = struct.Struct(">I").unpack_from
_unpack_Q = struct.Struct(">Q").unpack_from


def _arg(raw: bytes, pos: int, major_bits: int) -> tuple[int, int]:
    """``(argument, next position)`` of the shortest-form head at ``pos`` whose initial byte is ``major_bits`` (the
    major type, pre-shifted) plus 0..27.

    Raises ``IndexError`` / ``ValueError`` / ``struct.error`` for anything else (the caller falls back to the
    strict decoder).
    """
    ai = raw[pos] - major_bits
    if 0 <= ai < 24:
        return ai, pos + 1
    if ai == 24:
        arg = raw[pos + 1]
        if arg >= 24:
            return arg, pos + 2
    elif ai == 25:
        arg = _unpack_H(raw, pos + 1)[0]
        if arg >= 1 << 8:
            return arg, pos + 3
    elif ai == 26:
        arg = _unpack_I(raw, pos + 1)[0]
        if arg >= 1 << 16:
            return arg, pos + 5
    elif ai == 27:
        arg = _unpack_Q(raw, pos + 1)[0]
        if arg >= 1 << 32:
            return arg, pos + 9
    raise ValueError("not a shortest-form head of that major type")


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
        # a9 (map of 9), 00 54 <actor 20>, 01 <height>
        if raw[0] != 0xA9 or raw[1] != 0x00 or raw[2] != 0x54 or raw[23] != 0x01:
            return None
        height, pos = _arg(raw, 24, 0x00)
        if raw[pos] != 0x02:
            return None
        n, pos = _arg(raw, pos + 1, 0x40)
        end = pos + n
        if n > MAX_PAYLOAD_BYTES or raw[end] != 0x03:  # raw[end] also proves the payload is all there
            return None
        payload = raw[pos:end]
        n, pos = _arg(raw, end + 1, 0x40)
        end = pos + n
        if n > MAX_TIMER_ID_BYTES or raw[end] != 0x04:
            return None
        timer_id = raw[pos:end]
        n, pos = _arg(raw, end + 1, 0x60)
        end = pos + n
        # 05 54 <fee payer 20> 06: raw[end + 22] also proves the 20 bytes are there
        if n > MAX_HANDLER_BYTES or raw[end] != 0x05 or raw[end + 1] != 0x54 or raw[end + 22] != 0x06:
            return None
        handler = raw[pos:end].decode("utf-8")
        gas, pos = _arg(raw, end + 23, 0x00)
        if raw[pos] != 0x07:
            return None
        expires_at, pos = _arg(raw, pos + 1, 0x00)
        if raw[pos] != 0x08:
            return None
        seq, pos = _arg(raw, pos + 1, 0x00)
        fee_payer = raw[end + 2:end + 22]
    except (IndexError, ValueError, struct.error):  # UnicodeDecodeError is a ValueError
        return None
    if pos != len(raw):
        return None
    return _make_timer(raw[3:23], height, payload, timer_id, handler, fee_payer, gas, expires_at, seq)


_new = object.__new__
_SET = tuple(getattr(Timer, name).__set__ for name in Timer.__slots__)  # declaration order (a test pins it)


def _make_timer(actor_address: bytes, height: int, payload: bytes, timer_id: bytes, handler: str, fee_payer: bytes,
                gas_limit_per_fire: int, expires_at: int, seq: int) -> Timer:
    """``Timer(...)`` with the fields in declaration order, filled through the slot descriptors.

    The frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (about twice the cost);
    the instance is the same (same slots, same values; equality, hashing and frozenness are the class's).
    """
    t = _new(Timer)
    s = _SET
    s[0](t, actor_address)
    s[1](t, height)
    s[2](t, payload)
    s[3](t, timer_id)
    s[4](t, handler)
    s[5](t, fee_payer)
    s[6](t, gas_limit_per_fire)
    s[7](t, expires_at)
    s[8](t, seq)
    return t


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
