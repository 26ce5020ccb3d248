"""Fast encoders and decoders for the fixed-shape records a transfer touches: account, transfer event, receipt.

Every function here gives exactly the bytes (or the value, or the error) of the canonical path it stands in
for — :meth:`Account.encode` / :meth:`Account.decode`, ``encode({0: to, 1: encode_u128(amount)})``,
:meth:`Receipt.encode` — and falls back to that path for anything outside its fixed shape (so bad input gets the
canonical path's own error). They exist because the generic codec was about half of a full block's execution
(type dispatch, a dict per map, a key sort, the decoder's container bookkeeping), not to define a format:
``tests/unit/execution/test_records_fast.py`` checks them against the canonical path on random corpora and on
every one-byte mutation of stored accounts.
"""

from __future__ import annotations

from cowboy_node.state.world import WorldState
from cowboy_node.types.account import Account, account_key
from cowboy_node.types.receipt import Event, Receipt
from cowboy_protocol.codec import encode
from cowboy_protocol.codec.fixed import NULL, array_head, byte_string, read_uint, text, uint
from cowboy_protocol.types.fields import U128_MAX, encode_u128

_ACCOUNT_HEAD = b"\xa2\x00\x50"
"""Map of 2 entries, key 0, byte string of 16 bytes (the balance): an account's first 3 bytes."""
_ACCOUNT_NONCE_AT = 19
"""Offset of key 1 (the nonce follows it)."""
_EVENT_DATA_HEAD = b"\xa2\x00"
_EVENT_AMOUNT_KEY = b"\x01\x50"
_EVENT_HEAD = b"\xa3\x00"


def encode_account(balance: int, nonce: int) -> bytes:
    """``Account(balance, nonce).encode()``: ``a2 00 50 <balance, 16 bytes> 01 <nonce>``."""
    if type(balance) is int and 0 <= balance <= U128_MAX:
        n = uint(nonce)
        if n is not None:
            return _ACCOUNT_HEAD + balance.to_bytes(16, "big") + b"\x01" + n
    return Account(balance, nonce).encode()


def decode_account(raw: bytes) -> Account:
    """``Account.decode(raw)`` (the same account, or the same error)."""
    if (type(raw) is bytes and len(raw) > _ACCOUNT_NONCE_AT + 1 and raw[:3] == _ACCOUNT_HEAD
            and raw[_ACCOUNT_NONCE_AT] == 1):
        item = read_uint(raw, _ACCOUNT_NONCE_AT + 1)
        if item is not None and item[1] == len(raw):
            return Account(int.from_bytes(raw[3:_ACCOUNT_NONCE_AT], "big"), item[0])
    return Account.decode(raw)


def put_account_fields(world: WorldState, address: bytes, balance: int, nonce: int) -> int:
    """Store ``Account(balance, nonce)`` without building it (a transfer's hot path; :func:`~cowboy_node.execution.
    system_state.put_account` stores an ``Account`` through this); returns the bytes written (for cell metering)."""
    key = account_key(address)
    raw = encode_account(balance, nonce)
    world.set(key, raw)
    return len(key) + len(raw)


def transfer_event_data(to: bytes, amount: int) -> bytes:
    """``encode({0: to, 1: encode_u128(amount)})``: the data of a ``transfer`` event."""
    if type(to) is bytes and type(amount) is int and 0 <= amount <= U128_MAX:
        return _EVENT_DATA_HEAD + byte_string(to) + _EVENT_AMOUNT_KEY + amount.to_bytes(16, "big")
    return encode({0: to, 1: encode_u128(amount)})


def _event(e: object) -> bytes | None:
    """``encode(e.to_cbor())`` for a plain :class:`Event` of bytes/str/bytes fields, else None."""
    if type(e) is not Event:
        return None
    emitter, data = e.emitter, e.data
    topic = text(e.topic)
    if topic is None or type(emitter) is not bytes or type(data) is not bytes:
        return None
    return _EVENT_HEAD + byte_string(emitter) + b"\x01" + topic + b"\x02" + byte_string(data)


def _optional_text(s: object) -> bytes | None:
    return NULL if s is None else text(s)


def _receipt(r: Receipt) -> bytes | None:
    """The fast path of :func:`encode_receipt`, or None for anything it does not cover."""
    status, cycles, cells = uint(r.status), uint(r.cycles_used), uint(r.cells_used)
    fee = r.fee_paid
    error, message = _optional_text(r.error_code), _optional_text(r.error_message)
    if (status is None or cycles is None or cells is None or error is None or message is None
            or type(fee) is not int or not 0 <= fee <= U128_MAX or type(r.events) is not tuple):
        return None
    events = r.events
    n = len(events)
    if n == 0:
        evs = b"\x80"
    elif n == 1:
        one = _event(events[0])
        if one is None:
            return None
        evs = b"\x81" + one
    else:
        parts = [_event(e) for e in events]
        if None in parts:
            return None
        evs = array_head(n) + b"".join(parts)  # type: ignore[arg-type]
    return b"".join((b"\xa7\x00", status, b"\x01", cycles, b"\x02", cells, b"\x03\x50", fee.to_bytes(16, "big"),
                     b"\x04", error, b"\x05", evs, b"\x06", message))


def encode_receipt(r: Receipt) -> bytes:
    """``r.encode()``: the receipt's canonical bytes (its hash is their keccak256)."""
    fast = _receipt(r)
    return r.encode() if fast is None else fast
