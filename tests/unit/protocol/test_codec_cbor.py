"""CIP-11 deterministic CBOR profile (``cowboy_protocol.codec``): vectors, rejections, properties.

Golden vectors live in ``tests/vectors/cbor_canonical.json``: a JSON list of
``{"name": str, "hex": str, "value": V}``. Names starting ``rfc8949-a/`` are the
RFC 8949 Appendix A examples that are canonical under the profile (hex copied
from the RFC); ``profile/`` vectors were derived by hand from the profile rules.
Neither was produced by the encoder under test. ``V`` is JSON-typed notation:

* ``{"null": true}``               -> ``None``
* ``{"bool": true|false}``         -> ``True`` / ``False``
* ``{"int": "<decimal>"}``         -> ``int`` (a string, so 64-bit values survive JSON)
* ``{"float": "<python repr>"}``   -> ``float(...)`` (e.g. ``"1.1"``, ``"-0.0"``)
* ``{"bytes": "<hex>"}``           -> ``bytes.fromhex(...)``
* ``{"text": "<string>"}``         -> ``str`` (JSON ``\\uXXXX`` escapes, pairs for astral)
* ``{"array": [V, ...]}``          -> ``list``
* ``{"map": [[K, V], ...]}``       -> ``dict``; entries listed in canonical (encoded) order

The hypothesis properties here (``check_*`` functions and strategies) are also
driven by ``tests/fuzz/fuzz_cbor.py`` with far more examples.
"""

from __future__ import annotations

import json
import math
import pickle
import struct
from enum import IntEnum
from pathlib import Path
from typing import Any

import cbor2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cowboy_protocol.codec import ERROR_CODES, CodecError, decode, encode, encode_uint

VECTORS_PATH = Path(__file__).resolve().parents[2] / "vectors" / "cbor_canonical.json"

# --------------------------------------------------------------------------- helpers


def from_json(node: dict[str, Any]) -> Any:
    """Turn the vector notation described in the module docstring into a Python value."""
    ((kind, arg),) = node.items()
    if kind == "null":
        return None
    if kind == "bool":
        return bool(arg)
    if kind == "int":
        return int(arg)
    if kind == "float":
        return float(arg)
    if kind == "bytes":
        return bytes.fromhex(arg)
    if kind == "text":
        return str(arg)
    if kind == "array":
        return [from_json(x) for x in arg]
    if kind == "map":
        out: dict[Any, Any] = {}
        for k, v in arg:
            key = from_json(k)
            assert key not in out, f"vector file lists key {key!r} twice"
            out[key] = from_json(v)
        return out
    raise AssertionError(f"unknown vector kind {kind!r}")


def _key_tag(k: Any) -> tuple[str, Any]:
    """Exact identity of a scalar key: type plus value (float by bit pattern)."""
    if isinstance(k, float):
        return ("float", struct.pack(">d", k))
    return (type(k).__name__, k)


def same(a: Any, b: Any) -> bool:
    """Type-exact structural equality: 1 != True != 1.0, 0.0 != -0.0, (1,) != [1]."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack(">d", a) == struct.pack(">d", b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        b_keys = {_key_tag(k): k for k in b}
        if len(a) != len(b) or len(b_keys) != len(b):
            return False
        return all(_key_tag(k) in b_keys and same(v, b[b_keys[_key_tag(k)]])
                   for k, v in a.items())
    return bool(a == b)


def normalise(v: Any) -> Any:
    """What decode() returns for a value: tuples become lists (recursively)."""
    if isinstance(v, (list, tuple)):
        return [normalise(x) for x in v]
    if isinstance(v, dict):
        return {k: normalise(x) for k, x in v.items()}
    return v


def code_of(data: bytes, **kw: Any) -> str:
    """The CodecError code decode() raises for ``data`` (fails the test if it accepts it)."""
    with pytest.raises(CodecError) as e:
        decode(data, **kw)
    return e.value.code


def encode_code_of(value: object) -> str:
    with pytest.raises(CodecError) as e:
        encode(value)
    return e.value.code


# --------------------------------------------------------------------------- golden vectors

VECTORS = json.loads(VECTORS_PATH.read_text())


def test_vector_file_covers_the_required_rfc_examples() -> None:
    names = {v["name"] for v in VECTORS}
    hexes = {v["hex"] for v in VECTORS}
    assert len(names) == len(VECTORS), "vector names must be unique"
    for h in ["00", "01", "0a", "17", "1818", "1819", "1864", "1903e8", "1a000f4240",
              "1b000000e8d4a51000", "1bffffffffffffffff", "20", "29", "3863", "3903e7",
              "3bffffffffffffffff", "60", "6161", "6449455446", "62225c", "62c3bc", "63e6b0b4",
              "64f0908591", "40", "4401020304", "80", "83010203", "8301820203820405", "a0",
              "a201020304", "a26161016162820203", "f4", "f5", "f6", "fb3ff199999999999a"]:
        assert h in hexes, h


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_golden_vector_encodes_to_its_bytes(vector: dict[str, Any]) -> None:
    assert encode(from_json(vector["value"])).hex() == vector["hex"]


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_golden_vector_bytes_decode_to_its_value(vector: dict[str, Any]) -> None:
    value = from_json(vector["value"])
    decoded = decode(bytes.fromhex(vector["hex"]))
    assert same(decoded, value)
    if isinstance(value, dict):  # decoded maps keep canonical (encoded-key) order
        assert [_key_tag(k) for k in decoded] == [_key_tag(k) for k in value]  # type: ignore[union-attr]


def test_map_entries_are_sorted_by_encoded_key_bytes_not_by_value() -> None:
    # value order would be -1, 10, 100; RFC 7049 length-first order would put -1 (0x20)
    # before 100 (0x1864); the profile uses plain bytewise order of the encoded keys.
    m = {"a": 5, b"\x00": 4, -1: 3, 100: 2, 10: 1}
    assert encode(m).hex() == "a50a011864022003410004616105"
    assert list(decode(bytes.fromhex("a50a011864022003410004616105"))) == [  # type: ignore[arg-type]
        10, 100, -1, b"\x00", "a"]


def test_text_is_not_unicode_normalised() -> None:
    assert encode("\u00e9") != encode("e\u0301")
    assert decode(encode("e\u0301")) == "e\u0301"


# --------------------------------------------------------------------------- decoder rejections


def test_rejects_truncated_input() -> None:
    assert code_of(b"") == "truncated"
    assert code_of(b"\x18") == "truncated"                   # head missing its 1-byte argument
    assert code_of(b"\x1b\x00\x00\x00\x01") == "truncated"   # 8-byte argument cut short
    assert code_of(b"\x43\x01\x02") == "truncated"           # 3-byte string, 2 bytes present
    assert code_of(b"\x82\x01") == "truncated"               # array missing an item
    assert code_of(b"\xa1\x01") == "truncated"               # map missing a value
    assert code_of(b"\xfb\x3f\xf0") == "truncated"           # float64 cut short


def test_rejects_huge_declared_length_as_truncated_without_allocating() -> None:
    assert code_of(b"\x5a\xff\xff\xff\xff") == "truncated"
    assert code_of(b"\x7b" + b"\xff" * 8) == "truncated"
    assert code_of(b"\x9b" + b"\xff" * 8 + b"\x00") == "truncated"    # 2^64-1 array items
    assert code_of(b"\xbb" + b"\xff" * 8 + b"\x00\x00") == "truncated"  # 2^64-1 map entries
    assert code_of(b"\xa2\x00\x00\x01") == "truncated"  # 2 entries need >= 4 bytes, 3 left


def test_rejects_trailing_bytes() -> None:
    assert code_of(b"\x00\x00") == "trailing_bytes"
    assert code_of(b"\x80\xff") == "trailing_bytes"


def test_rejects_indefinite_length_items() -> None:
    assert code_of(b"\x5f\x41\x00\xff") == "indefinite_length"   # byte string
    assert code_of(b"\x7f\x61\x61\xff") == "indefinite_length"   # text string
    assert code_of(b"\x9f\xff") == "indefinite_length"           # array
    assert code_of(b"\xbf\xff") == "indefinite_length"           # map
    assert code_of(b"\x81\x9f\x01\xff") == "indefinite_length"   # nested
    assert code_of(b"\xff") == "indefinite_length"               # stray break code


def test_rejects_non_shortest_integer_and_length_heads() -> None:
    assert code_of(b"\x18\x05") == "non_shortest"
    assert code_of(b"\x19\x00\xff") == "non_shortest"
    assert code_of(b"\x1a\x00\x00\xff\xff") == "non_shortest"
    assert code_of(b"\x1b\x00\x00\x00\x00\xff\xff\xff\xff") == "non_shortest"
    assert code_of(b"\x38\x00") == "non_shortest"              # -1 as a 2-byte head
    assert code_of(b"\x58\x01\x00") == "non_shortest"          # byte-string length
    assert code_of(b"\x78\x00") == "non_shortest"              # text-string length
    assert code_of(b"\x98\x01\x00") == "non_shortest"          # array count
    assert code_of(b"\xb8\x00") == "non_shortest"              # map count


def test_rejects_unsorted_map_keys() -> None:
    assert code_of(b"\xa2\x02\x00\x01\x00") == "unsorted_map_keys"
    assert code_of(b"\xa2\x20\x00\x18\x64\x00") == "unsorted_map_keys"  # -1 before 100
    assert code_of(b"\xa2\x62\x61\x61\x00\x61\x62\x00") == "unsorted_map_keys"  # "aa" before "b"


def test_rejects_duplicate_map_key() -> None:
    assert code_of(b"\xa2\x01\x00\x01\x00") == "duplicate_map_key"
    assert code_of(b"\xa2\x61\x61\x00\x61\x61\x01") == "duplicate_map_key"


def test_rejects_map_keys_that_collide_as_python_dict_keys() -> None:
    assert code_of(b"\xa2\x01\x00\xf5\x00") == "map_key_collision"  # 1 and true
    assert code_of(b"\xa2\x00\x00\xf4\x00") == "map_key_collision"  # 0 and false
    assert code_of(b"\xa2\x01\x00\xfb\x3f\xf0\x00\x00\x00\x00\x00\x00\x00") == "map_key_collision"
    assert code_of(b"\xa2\xf5\x00\xfb\x3f\xf0\x00\x00\x00\x00\x00\x00\x00") == "map_key_collision"
    # 0.0 and -0.0: distinct encodings, equal (and equally hashed) floats
    zero, neg_zero = b"\xfb" + bytes(8), b"\xfb\x80" + bytes(7)
    assert code_of(b"\xa2" + zero + b"\x00" + neg_zero + b"\x00") == "map_key_collision"


def test_rejects_array_or_map_as_map_key() -> None:
    assert code_of(b"\xa1\x80\x00") == "unhashable_map_key"
    assert code_of(b"\xa1\xa0\x00") == "unhashable_map_key"
    assert code_of(b"\xa1\x81\x00\x00") == "unhashable_map_key"


def test_rejects_nan_and_infinity() -> None:
    assert code_of(b"\xfb\x7f\xf8\x00\x00\x00\x00\x00\x00") == "non_finite_float"  # NaN
    assert code_of(b"\xfb\x7f\xf0\x00\x00\x00\x00\x00\x00") == "non_finite_float"  # +Inf
    assert code_of(b"\xfb\xff\xf0\x00\x00\x00\x00\x00\x00") == "non_finite_float"  # -Inf
    assert code_of(b"\xfb\x7f\xf0\x00\x00\x00\x00\x00\x01") == "non_finite_float"  # sNaN payload


def test_rejects_half_and_single_precision_floats() -> None:
    assert code_of(b"\xf9\x3c\x00") == "float_not_float64"
    assert code_of(b"\xfa\x47\xc3\x50\x00") == "float_not_float64"
    assert code_of(b"\xf9\x7e\x00") == "float_not_float64"  # even a half-precision NaN


def test_rejects_invalid_utf8_text() -> None:
    assert code_of(b"\x62\xc3\x28") == "invalid_utf8"
    assert code_of(b"\x63\xed\xa0\x80") == "invalid_utf8"      # encoded lone surrogate U+D800
    assert code_of(b"\x62\xc0\xaf") == "invalid_utf8"          # overlong '/'
    assert code_of(b"\x64\xf4\x90\x80\x80") == "invalid_utf8"  # beyond U+10FFFF
    assert code_of(b"\x61\xff") == "invalid_utf8"


def test_rejects_tags() -> None:
    assert code_of(b"\xc1\x00") == "tag_not_allowed"
    assert code_of(b"\xc2\x41\x01") == "tag_not_allowed"       # bignum
    assert code_of(b"\xd8\x18\x40") == "tag_not_allowed"
    assert code_of(b"\x81\xc0\x60") == "tag_not_allowed"


def test_rejects_simple_values_other_than_false_true_null() -> None:
    assert code_of(b"\xf7") == "invalid_simple_value"           # undefined
    assert code_of(b"\xe0") == "invalid_simple_value"           # simple(0)
    assert code_of(b"\xf0") == "invalid_simple_value"           # simple(16)
    assert code_of(b"\xf8\x20") == "invalid_simple_value"       # 1-byte simple value
    for ib in (0xFC, 0xFD, 0xFE):                               # reserved additional info 28..30
        assert code_of(bytes([ib])) == "invalid_simple_value"


def test_rejects_nesting_beyond_max_depth() -> None:
    assert code_of(b"\x81" * 65 + b"\x00") == "nesting_too_deep"
    assert decode(b"\x81" * 64 + b"\x00") is not None
    assert code_of(b"\x81\x80", max_depth=1) == "nesting_too_deep"  # empty containers count
    assert code_of(b"\xa1\x00\xa0", max_depth=1) == "nesting_too_deep"
    assert code_of(b"\x80", max_depth=0) == "nesting_too_deep"
    assert decode(b"\x00", max_depth=0) == 0


def test_deep_nesting_attack_raises_codec_error_not_recursion_error() -> None:
    assert code_of(b"\x81" * 100_000 + b"\x00") == "nesting_too_deep"
    assert code_of(b"\xa1\x00" * 100_000 + b"\x00") == "nesting_too_deep"


def test_decoder_is_iterative_even_with_a_huge_max_depth() -> None:
    value = decode(b"\x81" * 100_000 + b"\x00", max_depth=1_000_000)
    depth = 0
    while isinstance(value, list):
        (value,) = value
        depth += 1
    assert (depth, value) == (100_000, 0)


def test_rejects_reserved_additional_info() -> None:
    for major in range(6):
        for ai in (28, 29, 30):
            assert code_of(bytes([major << 5 | ai])) == "reserved_additional_info"
    assert code_of(b"\x1f") == "reserved_additional_info"  # 31 is not "indefinite" for ints
    assert code_of(b"\x3f") == "reserved_additional_info"


def test_decode_rejects_non_bytes_input() -> None:
    assert code_of("00") == "unsupported_type"  # type: ignore[arg-type]
    assert code_of(None) == "unsupported_type"  # type: ignore[arg-type]


def test_decode_accepts_bytearray_and_memoryview() -> None:
    assert decode(bytearray(b"\x82\x01\x41\x02")) == [1, b"\x02"]
    assert decode(memoryview(b"\x00\x82\x01\x41\x02")[1:]) == [1, b"\x02"]


# Non-canonical RFC 8949 Appendix A examples (hex copied from the RFC) and what rejects them.
RFC_NON_CANONICAL = [
    ("c249010000000000000000", "tag_not_allowed"),     # 18446744073709551616 (bignum)
    ("c349010000000000000000", "tag_not_allowed"),     # -18446744073709551617
    ("f90000", "float_not_float64"),                   # 0.0
    ("f98000", "float_not_float64"),                   # -0.0
    ("f93c00", "float_not_float64"),                   # 1.0
    ("f93e00", "float_not_float64"),                   # 1.5
    ("f97bff", "float_not_float64"),                   # 65504.0
    ("fa47c35000", "float_not_float64"),               # 100000.0
    ("fa7f7fffff", "float_not_float64"),               # 3.4028234663852886e+38
    ("f90001", "float_not_float64"),                   # 5.960464477539063e-8
    ("f90400", "float_not_float64"),                   # 0.00006103515625
    ("f9c400", "float_not_float64"),                   # -4.0
    ("f97c00", "float_not_float64"),                   # Infinity
    ("f97e00", "float_not_float64"),                   # NaN
    ("f9fc00", "float_not_float64"),                   # -Infinity
    ("fa7f800000", "float_not_float64"),               # Infinity
    ("fa7fc00000", "float_not_float64"),               # NaN
    ("faff800000", "float_not_float64"),               # -Infinity
    ("fb7ff0000000000000", "non_finite_float"),        # Infinity
    ("fb7ff8000000000000", "non_finite_float"),        # NaN
    ("fbfff0000000000000", "non_finite_float"),        # -Infinity
    ("f7", "invalid_simple_value"),                    # undefined
    ("f0", "invalid_simple_value"),                    # simple(16)
    ("f8ff", "invalid_simple_value"),                  # simple(255)
    ("c074323031332d30332d32315432303a30343a30305a", "tag_not_allowed"),
    ("c11a514b67b0", "tag_not_allowed"),
    ("c1fb41d452d9ec200000", "tag_not_allowed"),
    ("d74401020304", "tag_not_allowed"),
    ("d818456449455446", "tag_not_allowed"),
    ("d82076687474703a2f2f7777772e6578616d706c652e636f6d", "tag_not_allowed"),
    ("5f42010243030405ff", "indefinite_length"),
    ("7f657374726561646d696e67ff", "indefinite_length"),
    ("9fff", "indefinite_length"),
    ("9f018202039f0405ffff", "indefinite_length"),
    ("9f01820203820405ff", "indefinite_length"),
    ("83018202039f0405ff", "indefinite_length"),
    ("83019f0203ff820405", "indefinite_length"),
    ("9f0102030405060708090a0b0c0d0e0f101112131415161718181819ff", "indefinite_length"),
    ("bf61610161629f0203ffff", "indefinite_length"),
    ("826161bf61626163ff", "indefinite_length"),
    ("bf6346756ef563416d7421ff", "indefinite_length"),
]


@pytest.mark.parametrize(("hexstr", "code"), RFC_NON_CANONICAL)
def test_rfc8949_examples_outside_the_profile_are_rejected(hexstr: str, code: str) -> None:
    assert code_of(bytes.fromhex(hexstr)) == code


def test_codec_error_is_a_value_error_with_stable_code_and_offset() -> None:
    with pytest.raises(ValueError) as e:
        decode(b"\x82\x01\x18\x05")
    err = e.value
    assert isinstance(err, CodecError)
    assert (err.code, err.offset) == ("non_shortest", 2)
    assert "non_shortest" in str(err)
    again = pickle.loads(pickle.dumps(err))
    assert (again.code, again.offset, str(again)) == (err.code, err.offset, str(err))


# One input per rejection path of the decoder, with the full error text (code, detail, offset of the
# offending item). Pinned when decode() was split into steps (issue 13): the messages must not change.
REJECTION_MESSAGES = [
    ("", 64, "truncated: unexpected end of input (at byte 0)"),
    ("82011b00000001", 64, "truncated: unexpected end of input (at byte 2)"),
    ("81fb3ff0", 64, "truncated: unexpected end of input (at byte 1)"),
    ("82430102", 64, "truncated: byte string of 3 bytes (at byte 1)"),
    ("81630102", 64, "truncated: text string of 3 bytes (at byte 1)"),
    ("8183", 64, "truncated: array of 3 items (at byte 1)"),
    ("81a200", 64, "truncated: map of 2 entries (at byte 1)"),
    ("0000", 64, "trailing_bytes: 1 bytes after the item (at byte 1)"),
    ("817f", 64, "indefinite_length: indefinite-length items are invalid (at byte 1)"),
    ("81ff", 64, "indefinite_length: break code outside any item (at byte 1)"),
    ("821805", 64, "non_shortest: argument fits in the initial byte (at byte 1)"),
    ("821900ff", 64, "non_shortest: argument fits in 1 byte (at byte 1)"),
    ("821a0000ffff", 64, "non_shortest: argument fits in 2 bytes (at byte 1)"),
    ("821b00000000ffffffff", 64, "non_shortest: argument fits in 4 bytes (at byte 1)"),
    ("a202000100", 64, "unsorted_map_keys: keys must ascend bytewise by encoding (at byte 3)"),
    ("a201000100", 64, "duplicate_map_key: key 01 repeated (at byte 3)"),
    ("a20100f500", 64, "map_key_collision: key True equals an earlier key as a dict key (at byte 3)"),
    ("81a18000", 64, "unhashable_map_key: map keys must not be arrays or maps (at byte 2)"),
    ("8181", 1, "nesting_too_deep: more than 1 nested levels (at byte 1)"),
    ("81fb7ff8000000000000", 64, "non_finite_float: NaN and ±Inf are invalid (at byte 1)"),
    ("81f93c00", 64, "float_not_float64: floats must be float64 (0xfb) (at byte 1)"),
    ("8162c328", 64, "invalid_utf8: invalid continuation byte (at byte 1)"),
    ("81c000", 64, "tag_not_allowed: tags are not allowed (at byte 1)"),
    ("81f7", 64, "invalid_simple_value: simple/reserved value 0xf7 (at byte 1)"),
    ("811c", 64, "reserved_additional_info: additional info 28 (at byte 1)"),
    ("813f", 64, "reserved_additional_info: additional info 31 (at byte 1)"),
]


@pytest.mark.parametrize(("hexstr", "max_depth", "message"), REJECTION_MESSAGES)
def test_every_rejection_path_keeps_its_message_and_offset(hexstr: str, max_depth: int, message: str) -> None:
    with pytest.raises(CodecError) as e:
        decode(bytes.fromhex(hexstr), max_depth=max_depth)
    assert str(e.value) == message


def test_rejection_paths_cover_every_decoder_error_code() -> None:
    decoder_codes = ERROR_CODES - {"int_out_of_range", "unsupported_type"}  # encoder-only / non-bytes input
    assert {m.split(":")[0] for _, _, m in REJECTION_MESSAGES} == decoder_codes
    with pytest.raises(CodecError) as e:
        decode("00")  # type: ignore[arg-type]
    assert (str(e.value), e.value.offset) == ("unsupported_type: cannot decode from str", None)


# --------------------------------------------------------------------------- encoder


def test_encode_rejects_values_outside_the_profile() -> None:
    assert encode_code_of({1, 2}) == "unsupported_type"
    assert encode_code_of(frozenset()) == "unsupported_type"
    assert encode_code_of(object()) == "unsupported_type"
    assert encode_code_of(1j) == "unsupported_type"
    assert encode_code_of([1, {2: object()}]) == "unsupported_type"
    assert encode_code_of(math.nan) == "non_finite_float"
    assert encode_code_of(math.inf) == "non_finite_float"
    assert encode_code_of(-math.inf) == "non_finite_float"
    assert encode_code_of({1.0: [math.nan]}) == "non_finite_float"
    assert encode_code_of(2**64) == "int_out_of_range"
    assert encode_code_of(-(2**64) - 1) == "int_out_of_range"
    assert encode_code_of("\ud800") == "invalid_utf8"
    assert encode_code_of({(1, 2): 3}) == "unhashable_map_key"


def test_encode_of_cyclic_value_raises_codec_error() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    assert encode_code_of(cyclic) == "nesting_too_deep"


def test_encode_integer_range_boundaries() -> None:
    assert encode(2**64 - 1) == b"\x1b" + b"\xff" * 8
    assert encode(-(2**64)) == b"\x3b" + b"\xff" * 8


def test_encode_checks_bool_before_int_and_never_emits_tags() -> None:
    assert encode([False, True, None, 0, 1]) == b"\x85\xf4\xf5\xf6\x00\x01"
    assert encode(1.0) == b"\xfb\x3f\xf0" + bytes(6)


def test_encode_accepts_bytes_like_tuples_and_subclasses() -> None:
    class Kind(IntEnum):
        A = 7

    assert encode(bytearray(b"ab")) == encode(memoryview(b"ab")) == b"\x42ab"
    assert encode((1, (2,))) == encode([1, [2]])
    assert encode({Kind.A: Kind.A}) == b"\xa1\x07\x07"


def test_encode_sorts_and_decode_returns_canonical_key_order() -> None:
    m = {3: 0, 1: 0, 2: 0}
    assert encode(m) == b"\xa3\x01\x00\x02\x00\x03\x00"
    assert list(decode(encode(m))) == [1, 2, 3]  # type: ignore[arg-type]


def test_every_error_code_is_declared() -> None:
    assert {
        "unsupported_type", "int_out_of_range", "non_finite_float", "truncated",
        "trailing_bytes", "indefinite_length", "non_shortest", "unsorted_map_keys",
        "duplicate_map_key", "map_key_collision", "unhashable_map_key", "float_not_float64",
        "invalid_utf8", "tag_not_allowed", "invalid_simple_value", "nesting_too_deep",
        "reserved_additional_info",
    } == ERROR_CODES


# --------------------------------------------------------------------------- reference encoder
# An independent, deliberately naive re-implementation used by the properties below:
# without a mutation it must agree with encode(); with one it yields a specific
# non-canonical variant of the same value.

WIDTH_AI = {1: 24, 2: 25, 4: 26, 8: 27}


def _ref_head(major: int, n: int, widen: bool = False) -> bytes:
    widths = [0, 1, 2, 4, 8]
    w = next(w for w in widths if (n < 24 if w == 0 else n < 1 << (8 * w)))
    if widen:
        w = widths[widths.index(w) + 1]
    if w == 0:
        return bytes([major << 5 | n])
    return bytes([major << 5 | WIDTH_AI[w]]) + n.to_bytes(w, "big")


def _kinds(v: Any) -> list[str]:
    """Mutation kinds applicable to node ``v`` (``KIND_CODE`` maps each to its error code)."""
    out = ["tag"]
    if isinstance(v, bool) or v is None:
        return out
    if isinstance(v, int):
        if (v if v >= 0 else -1 - v) < 1 << 32:
            out.append("widen")
    elif isinstance(v, float):
        if abs(v) <= 3.4028234663852886e38 and struct.unpack(">f", struct.pack(">f", v))[0] == v:
            out.append("narrow")  # exactly representable as float32
    else:
        if len(v) < 1 << 32:
            out.append("widen")
        out.append("indefinite")
        if isinstance(v, dict) and v:
            out.append("duplicate")
            if len(v) >= 2:
                out.append("swap")
    return out


KIND_CODE = {"widen": "non_shortest", "indefinite": "indefinite_length",
             "swap": "unsorted_map_keys", "duplicate": "duplicate_map_key",
             "narrow": "float_not_float64", "tag": "tag_not_allowed"}


def ref_encode(value: Any, target: int = -1, kind: str = "", nodes: list[list[str]] | None = None,
               swap_at: int = 0, replacement: bytes = b"") -> bytes:
    """Naive canonical encoder; node number ``target`` (pre-order) gets mutation ``kind``.

    Kind ``"replace"`` substitutes the raw item ``replacement`` for the node. If ``nodes``
    is given, the applicable mutation kinds of every node are appended to it.
    """
    counter = [0]

    def enc(v: Any) -> bytes:
        idx = counter[0]
        counter[0] += 1
        if nodes is not None:
            nodes.append(_kinds(v))
        here = kind if idx == target else ""
        if here == "replace":
            return replacement
        if here == "tag":
            return b"\xc0" + enc_plain(v, "")
        return enc_plain(v, here)

    def enc_plain(v: Any, here: str) -> bytes:
        widen = here == "widen"
        if v is None:
            return b"\xf6"
        if isinstance(v, bool):
            return b"\xf5" if v else b"\xf4"
        if isinstance(v, int):
            return _ref_head(0, v, widen) if v >= 0 else _ref_head(1, -1 - v, widen)
        if isinstance(v, float):
            if here == "narrow":
                return b"\xfa" + struct.pack(">f", v)
            return b"\xfb" + struct.pack(">d", v)
        if isinstance(v, (bytes, str)):
            raw, major = (v, 2) if isinstance(v, bytes) else (v.encode("utf-8"), 3)
            if here == "indefinite":
                return bytes([major << 5 | 31]) + _ref_head(major, len(raw)) + raw + b"\xff"
            return _ref_head(major, len(raw), widen) + raw
        if isinstance(v, (list, tuple)):
            body = b"".join(enc(x) for x in v)
            if here == "indefinite":
                return b"\x9f" + body + b"\xff"
            return _ref_head(4, len(v), widen) + body
        if isinstance(v, dict):
            pairs = sorted(((enc(k), enc(x)) for k, x in v.items()), key=lambda p: p[0])
            if here == "swap":
                i = swap_at % (len(pairs) - 1)
                pairs[i], pairs[-1] = pairs[-1], pairs[i]
            elif here == "duplicate":
                i = swap_at % len(pairs)
                pairs.insert(i, pairs[i])
            body = b"".join(k + x for k, x in pairs)
            if here == "indefinite":
                return b"\xbf" + body + b"\xff"
            return _ref_head(5, len(pairs), widen) + body
        raise TypeError(type(v))

    return enc(value)


# --------------------------------------------------------------------------- strategies

EDGE_INTS = [0, 1, 23, 24, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 2, 2**64 - 1,
             -1, -24, -25, -256, -257, -65536, -65537, -(2**32), -(2**32) - 1, -(2**64) + 1,
             -(2**64)]

ints = st.integers(min_value=-(2**64), max_value=2**64 - 1) | st.sampled_from(EDGE_INTS)
floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([0.0, -0.0, 5e-324])
scalars = (st.none() | st.booleans() | ints | floats | st.binary(max_size=40)
           | st.text(max_size=24))
values = st.recursive(
    scalars,
    lambda inner: (st.lists(inner, max_size=6) | st.lists(inner, max_size=4).map(tuple)
                   | st.dictionaries(scalars, inner, max_size=6)),
    max_leaves=24,
)
"""Encodable values (tuples included: they decode as lists, see ``normalise``)."""


ITEMS = [bytes.fromhex(h) for h in [
    "fb7ff8000000000000", "fb7ff0000000000000", "fbfff0000000000000", "fb7ff0000000000001",
    "fb8000000000000000", "fb0000000000000000", "fb3ff0000000000000", "f93c00", "fa47c35000",
    "f4", "f5", "f6", "f7", "f8ff", "e0", "fc", "00", "01", "17", "1818", "20", "3bffffffffffffffff",
    "1bffffffffffffffff", "40", "4100", "60", "6161", "62c328", "80", "8100", "a0", "a10000",
    "c000", "5f4100ff", "9fff", "bfff", "ff",
]]
"""Complete (mostly) items to splice in: edge floats, simple values, keys that collide."""
INTERESTING = [0x00, 0x17, 0x18, 0x19, 0x1A, 0x1B, 0x1F, 0x3B, 0x5F, 0x7F, 0x80, 0x9F, 0xA0,
               0xBF, 0xC0, 0xF4, 0xF5, 0xF6, 0xF7, 0xF8, 0xF9, 0xFA, 0xFB, 0xFF]


@st.composite
def near_canonical_bytes(draw: st.DrawFn) -> bytes:
    """A valid encoding with a node swapped for an edge item and/or a few random byte edits."""
    value = draw(values)
    nodes: list[list[str]] = []
    data = bytearray(ref_encode(value, nodes=nodes))
    if draw(st.booleans()):  # structural: replace one node by a raw item
        data = bytearray(ref_encode(value, draw(st.integers(0, len(nodes) - 1)), "replace",
                                    replacement=draw(st.sampled_from(ITEMS))))
    byte = st.sampled_from(INTERESTING) | st.integers(0, 255)
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["set", "insert", "delete", "flip", "copy", "splice"]))
        if op == "splice" or not data:
            data[draw(st.integers(0, len(data))):0] = draw(st.sampled_from(ITEMS))
        elif op == "copy":  # duplicate a slice elsewhere (repeated map entries etc.)
            i = draw(st.integers(0, len(data) - 1))
            chunk = data[i:i + draw(st.integers(1, 12))]
            data[draw(st.integers(0, len(data))):0] = chunk
        elif op == "insert":
            data.insert(draw(st.integers(0, len(data))), draw(byte))
        else:
            i = draw(st.integers(0, len(data) - 1))
            if op == "set":
                data[i] = draw(byte)
            elif op == "delete":
                del data[i]
            else:
                data[i] ^= 1 << draw(st.integers(0, 7))
    return bytes(data)


any_bytes = st.binary(max_size=64) | near_canonical_bytes()

# --------------------------------------------------------------------------- properties
# ``check_*`` hold the assertions so the fuzz script can run them with more examples.


def check_roundtrip(value: Any) -> None:
    data = encode(value)
    back = decode(data)
    assert same(back, normalise(value)), (value, back)
    assert encode(back) == data  # also pins -0.0 vs 0.0, 1 vs True, 1 vs 1.0
    assert ref_encode(value) == data  # agrees with the independent reference encoder


def check_arbitrary_bytes(data: bytes) -> None:
    try:
        value = decode(data)
    except CodecError as e:
        assert e.code in ERROR_CODES
        return
    assert encode(value) == data
    assert cbor2.loads(data) == value  # accepted input means the same thing to cbor2


def check_mutation(value: Any, pick: int, swap_at: int) -> None:
    nodes: list[list[str]] = []
    canonical = ref_encode(value, nodes=nodes)
    assert canonical == encode(value)
    choices = [(i, k) for i, ks in enumerate(nodes) for k in ks]
    target, kind = choices[pick % len(choices)]
    variant = ref_encode(value, target, kind, swap_at=swap_at)
    assert variant != canonical
    assert code_of(variant) == KIND_CODE[kind], (kind, target, variant.hex())
    assert code_of(canonical + bytes([pick % 256])) == "trailing_bytes"
    cut = pick % len(canonical)
    assert code_of(canonical[:cut]) == "truncated"


PROPERTY_SETTINGS = settings(max_examples=300, deadline=None,
                             suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(values)
def test_property_decode_inverts_encode(value: Any) -> None:
    check_roundtrip(value)


@PROPERTY_SETTINGS
@given(any_bytes)
def test_property_decode_accepts_exactly_the_canonical_encodings(data: bytes) -> None:
    check_arbitrary_bytes(data)


@PROPERTY_SETTINGS
@given(values, st.integers(min_value=0, max_value=2**32), st.integers(min_value=0, max_value=64))
def test_property_every_non_canonical_variant_is_rejected(value: Any, pick: int,
                                                          swap_at: int) -> None:
    check_mutation(value, pick, swap_at)


@PROPERTY_SETTINGS
@given(floats)
def test_property_floats_are_always_float64_and_keep_their_bits(x: float) -> None:
    data = encode(x)
    assert data == b"\xfb" + struct.pack(">d", x)
    assert struct.pack(">d", decode(data)) == struct.pack(">d", x)  # type: ignore[arg-type]


@pytest.mark.parametrize(("value", "golden"), [
    (0, "00"), (23, "17"), (24, "1818"), (255, "18ff"), (256, "190100"), (65535, "19ffff"), (65536, "1a00010000"),
    (2**32 - 1, "1affffffff"), (2**32, "1b0000000100000000"), (2**64 - 1, "1bffffffffffffffff"),
])
def test_encode_uint_golden_bytes_match_encode(value: int, golden: str) -> None:
    assert encode_uint(value).hex() == golden
    assert encode_uint(value) == encode(value)


@pytest.mark.parametrize("value", [-1, 2**64])
def test_encode_uint_rejects_out_of_range(value: int) -> None:
    with pytest.raises(CodecError) as e:
        encode_uint(value)
    assert e.value.code == "int_out_of_range"
