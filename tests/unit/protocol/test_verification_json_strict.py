"""Strict JSON for job results (docs/verification.md §2): RFC 8259 with the refusals consensus needs."""

from __future__ import annotations

import pytest

from cowboy_protocol.jobs.json_strict import (
    MAX_INT_DIGITS,
    MAX_JSON_BYTES,
    MAX_JSON_DEPTH,
    json_key,
    lookup,
    parse_json,
    split_path,
)
from cowboy_protocol.types.validation_errors import ValidationError


def _refused(data: bytes | str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_json(data)
    assert info.value.code == "json_invalid"


def test_json_integers_stay_int_and_fractions_become_float() -> None:
    value = parse_json(b'{"a": 1, "b": -0, "c": 1.5, "d": 1e2, "e": 12345678901234567890123}')
    assert value == {"a": 1, "b": 0, "c": 1.5, "d": 100.0, "e": 12345678901234567890123}
    assert isinstance(value, dict)
    assert type(value["a"]) is int and type(value["e"]) is int
    assert type(value["c"]) is float and type(value["d"]) is float


def test_json_accepts_any_top_level_value_and_rfc_whitespace() -> None:
    assert parse_json(b' \t\r\n[true, false, null, "x"] \n') == [True, False, None, "x"]
    assert parse_json(b"7") == 7
    assert parse_json('"caf\u00e9"') == "caf\u00e9"


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", '{"a": NaN}', "[Infinity]"])
def test_json_rejects_nan_and_infinity(text: str) -> None:
    _refused(text)


def test_json_rejects_numbers_overflowing_float64() -> None:
    _refused("1e400")
    _refused("-1e400")
    assert parse_json("1e308") == 1e308


@pytest.mark.parametrize("text", ['{"a": 1, "a": 2}', '{"x": {"k": 1, "k": 1}}', '[{"a": 0, "b": 0, "a": 0}]'])
def test_json_rejects_duplicate_keys(text: str) -> None:
    _refused(text)


def test_json_nesting_64_accepted_65_rejected() -> None:
    assert MAX_JSON_DEPTH == 64
    parse_json("[" * 64 + "]" * 64)
    _refused("[" * 65 + "]" * 65)
    parse_json('{"a":' * 64 + "1" + "}" * 64)
    _refused('{"a":' * 65 + "1" + "}" * 65)
    _refused('[{"a":' * 33 + "1" + "}]" * 33)  # 66 levels, mixed


def test_json_rejects_very_deep_nesting_without_crashing() -> None:
    _refused("[" * 200_000 + "]" * 200_000)


@pytest.mark.parametrize("text", ["{} x", "{}{}", "1 2", "[1]]", '"a" "b"', "[1,]", '{"a":1,}', "01", "'a'",
                                  "", "   ", "[1", '{"a"}', "+1", ".5", "1.", "0x10", "true false"])
def test_json_rejects_trailing_garbage_and_non_rfc_syntax(text: str) -> None:
    _refused(text)


def test_json_size_limit_is_one_mebibyte() -> None:
    assert MAX_JSON_BYTES == 1 << 20
    body = b'"' + b"a" * (MAX_JSON_BYTES - 2) + b'"'
    assert parse_json(body) == "a" * (MAX_JSON_BYTES - 2)
    _refused(b'"' + b"a" * (MAX_JSON_BYTES - 1) + b'"')


def test_json_rejects_invalid_utf8_bom_and_unpaired_surrogates() -> None:
    _refused(b'"\xff"')
    _refused(b'"\xc0\xaf"')  # overlong encoding
    _refused(b'\xef\xbb\xbf{}')  # byte-order mark
    _refused(b'"\\ud800"')
    _refused(b'{"\\udc00": 1}')
    assert parse_json(b'"\\ud83d\\ude00"') == "\U0001F600"  # a paired surrogate escape is one code point


def test_json_rejects_raw_control_characters_in_strings() -> None:
    _refused(b'"a\nb"')
    assert parse_json(b'"a\\nb"') == "a\nb"


def test_json_integer_literal_length_limit() -> None:
    assert MAX_INT_DIGITS == 512
    assert parse_json("9" * 512) == int("9" * 512)
    assert parse_json("-" + "9" * 511) == -int("9" * 511)
    _refused("9" * 513)
    _refused("-" + "9" * 512)


def test_json_key_equality_follows_json_schema() -> None:
    assert json_key(1) == json_key(1.0)
    assert json_key(0) == json_key(-0.0)
    assert json_key(True) != json_key(1)
    assert json_key(False) != json_key(0)
    assert json_key(None) != json_key(False)
    assert json_key(1.5) != json_key(1)
    assert json_key(2**53 + 1) != json_key(float(2**53))
    assert json_key({"a": 1, "b": [1, 2]}) == json_key({"b": [1.0, 2], "a": 1})
    assert json_key([1, 2]) != json_key([2, 1])
    assert json_key("1") != json_key(1)


def test_field_paths_follow_object_keys_and_canonical_array_indexes() -> None:
    doc = parse_json(b'{"a": {"b": [10, {"c": "x"}]}, "": 1}')
    assert lookup(doc, split_path("a.b.1.c")) == (True, "x")
    assert lookup(doc, split_path("a.b.0")) == (True, 10)
    assert lookup(doc, split_path("")) == (True, doc)
    assert lookup(doc, split_path("a.b.01")) == (False, None)
    assert lookup(doc, split_path("a.b.2")) == (False, None)
    assert lookup(doc, split_path("a.x")) == (False, None)
    assert lookup(doc, split_path("a.b.0.c")) == (False, None)
    with pytest.raises(ValidationError):
        split_path("a..b")
    with pytest.raises(ValidationError):
        split_path(".a")


def test_deep_nesting_is_refused_even_with_a_raised_recursion_limit() -> None:
    # The PVM raises the interpreter's recursion limit; the recursive C parser must never see a deep document,
    # or it overflows the C stack and the whole node dies (seen as a segfault before this check).
    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1_000_000)
    try:
        _refused("[" * 200_000 + "]" * 200_000)
        _refused('{"a":' * 100_000 + "1" + "}" * 100_000)
        parse_json('["[[[[", "{{{{"]')  # brackets inside strings do not nest
    finally:
        sys.setrecursionlimit(old)
