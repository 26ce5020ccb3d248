"""The canonical-CBOR ``{"_handler", "_payload"}`` envelope, tried before the JSON form."""

from __future__ import annotations

import pytest

from cowboy_node.execution.timers.deliver import parse_cbor_envelope, route
from cowboy_node.execution.timers.timer_record import Timer

# {"_handler": "on_tick", "_payload": h'7879'} as the SDK writes it (RFC 8949 canonical order)
ENVELOPE = bytes.fromhex("a2 68 5f68616e646c6572 67 6f6e5f7469636b 68 5f7061796c6f6164 42 7879")


def _timer(payload: bytes, handler: str = "handle_timer") -> Timer:
    return Timer(actor_address=bytes(20), height=1, payload=payload, timer_id=bytes(32), handler=handler,
                 fee_payer=bytes(20), gas_limit_per_fire=1, expires_at=2, seq=0)


def test_sdk_envelope_routes_to_the_named_handler_with_raw_bytes() -> None:
    assert parse_cbor_envelope(ENVELOPE) == ("on_tick", b"xy")
    t = route(_timer(ENVELOPE))
    assert (t.handler, t.payload) == ("on_tick", b"xy")


def test_envelope_only_applies_to_the_default_handler() -> None:
    assert route(_timer(ENVELOPE, "other")).payload == ENVELOPE


def test_long_payload_uses_a_shortest_length_head() -> None:
    inner = b"z" * 300
    env = ENVELOPE[:-3] + bytes.fromhex("59012c") + inner
    assert parse_cbor_envelope(env) == ("on_tick", inner)


@pytest.mark.parametrize("raw", [
    ENVELOPE + b"\x00",                                          # trailing byte
    ENVELOPE[:-3] + bytes.fromhex("5802") + b"xy",               # non-shortest length head
    bytes.fromhex("a2 68 5f7061796c6f6164 42 7879 68 5f68616e646c6572 67") + b"on_tick",  # key order
    bytes.fromhex("a3") + ENVELOPE[1:],                          # three-entry map head
    bytes.fromhex("a2 68 5f68616e646c6572 60 68 5f7061796c6f6164 40"),                    # empty handler
    ENVELOPE[:-3] + bytes.fromhex("62 7879"),                    # _payload is text, not bytes
    bytes.fromhex("a2 68 5f68616e646c6572 62 c328 68 5f7061796c6f6164 40"),               # bad UTF-8
])
def test_anything_else_is_not_an_envelope(raw: bytes) -> None:
    assert parse_cbor_envelope(raw) is None
    assert route(_timer(raw)).handler == "handle_timer"


def test_handler_of_257_bytes_is_refused_256_accepted() -> None:
    def env(name: bytes) -> bytes:
        return bytes.fromhex("a2 68 5f68616e646c6572 79") + len(name).to_bytes(2, "big") + name + bytes.fromhex(
            "68 5f7061796c6f6164 40")
    assert parse_cbor_envelope(env(b"h" * 256)) == ("h" * 256, b"")
    assert parse_cbor_envelope(env(b"h" * 257)) is None


def test_json_form_still_routes() -> None:
    t = route(_timer(b'{"_handler": "on_tick", "_payload": "eHk="}'))
    assert (t.handler, t.payload) == ("on_tick", b"xy")
