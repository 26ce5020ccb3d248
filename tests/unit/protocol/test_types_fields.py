"""Strict field readers shared by every canonical decoder."""

from __future__ import annotations

import pytest

from cowboy_protocol.codec import decode
from cowboy_protocol.types.fields import expect_map
from cowboy_protocol.types.validation_errors import DecodeError


def test_map_with_boolean_keys_is_not_a_map_with_integer_keys() -> None:
    # {false: 1, true: 2} (a2 f4 01 f5 02) would equal {0: 1, 1: 2} under Python's True == 1.
    value = decode(bytes.fromhex("a2f401f502"))
    with pytest.raises(DecodeError):
        expect_map(value, frozenset({0, 1}), "m")
    assert expect_map(decode(bytes.fromhex("a200010102")), frozenset({0, 1}), "m") == {0: 1, 1: 2}
