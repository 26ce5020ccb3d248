"""MRU record (CIP-11 §9.3–§9.4): key, canonical value, TTL lookup with saturating age."""

from __future__ import annotations

import pytest

from cowboy_node.execution.jobs.mru import decode_mru, encode_mru, lookup_mru, mru_key
from cowboy_protocol.codec import CodecError
from cowboy_protocol.types.validation_errors import DecodeError

SUBMITTER = bytes([0x55]) * 20
RUNNER = bytes([0x66]) * 20
TTL = 1_280
VALUE_GOLDEN = "a2" "0054" + "66" * 20 + "011904d2"  # {0: runner bytes(20), 1: 1234}


def test_mru_key_golden() -> None:
    ns = b"actor/".hex() + "00" * 19 + "02" + b"/kv/system:".hex()
    assert mru_key(SUBMITTER, 0x01).hex() == ns + b"mru/".hex() + "55" * 20 + "01"
    assert mru_key(SUBMITTER, 0x00) != mru_key(SUBMITTER, 0x05)
    with pytest.raises(ValueError):
        mru_key(SUBMITTER, 0x06)
    with pytest.raises(ValueError):
        mru_key(SUBMITTER[:19], 0x01)


def test_mru_value_golden_and_round_trip() -> None:
    assert encode_mru(RUNNER, 1234).hex() == VALUE_GOLDEN
    assert decode_mru(bytes.fromhex(VALUE_GOLDEN)) == (RUNNER, 1234)


def test_mru_value_decode_is_strict() -> None:
    with pytest.raises(DecodeError):
        decode_mru(bytes.fromhex("a2" "0053" + "66" * 19 + "011904d2"))  # 19-byte address
    with pytest.raises(DecodeError):
        decode_mru(bytes.fromhex("a1" "0054" + "66" * 20))  # missing set_at_block
    with pytest.raises(CodecError):
        decode_mru(bytes.fromhex("a2" "0054" + "66" * 20 + "011a000004d2"))  # non-shortest integer


def test_lookup_mru_applies_within_the_ttl_and_expires_after_it() -> None:
    raw = encode_mru(RUNNER, 1_000)
    assert lookup_mru(raw, 1_000, TTL) == RUNNER
    assert lookup_mru(raw, 1_000 + TTL, TTL) == RUNNER       # H − set_at == TTL still applies
    assert lookup_mru(raw, 1_000 + TTL + 1, TTL) is None      # one block later it has expired
    assert lookup_mru(None, 1_000, TTL) is None


def test_lookup_mru_age_saturates_below_the_set_height() -> None:
    # a record set above the read height (genesis-range heights) has age 0, not a negative/huge age
    assert lookup_mru(encode_mru(RUNNER, 50), 10, 0) == RUNNER
