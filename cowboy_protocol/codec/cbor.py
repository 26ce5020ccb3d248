"""CIP-11 deterministic CBOR profile: canonical encoder and strict decoder.

Every byte string this node hashes, signs, stores or sends is *canonical CBOR*:
deterministic CBOR per RFC 8949 §4.2.1, restricted further to

* definite-length byte strings, text strings, arrays and maps only
  (indefinite-length items are invalid);
* shortest-form heads for integers, lengths and counts;
* integers in ``[-2**64, 2**64 - 1]`` (major types 0/1; there are no bignum tags);
* maps sorted by the bytes of the encoded keys (bytewise lexicographic order),
  no duplicate keys; keys are scalars (an array or map key is invalid);
* text strings are UTF-8 exactly as supplied (no Unicode normalisation),
  byte strings are raw bytes;
* floats are always IEEE-754 binary64 (``0xfb`` + 8 bytes big-endian); NaN and
  ±Inf are invalid, and so are half/single-precision encodings;
* no tags (major type 6); the only simple values are ``false``, ``true``, ``null``.

:func:`encode` produces the unique canonical encoding of a value. :func:`decode`
is strict: it accepts ``data`` iff ``encode(decode(data)) == data``, so any
byte string it accepts is the one and only encoding of its value. Everything
else raises :class:`CodecError` with a stable machine-readable ``code`` (see
:data:`ERROR_CODES`); no other exception type escapes either function for
any input. The decoder is iterative (bounded by ``max_depth``), checks every
declared length against the remaining input before slicing, and never
allocates more than the input size justifies.

Python mapping: ``None`` ↔ null, ``bool`` ↔ false/true, ``int`` ↔ major 0/1,
``bytes`` (also ``bytearray``/``memoryview`` when encoding) ↔ major 2, ``str``
↔ major 3, ``list`` (also ``tuple`` when encoding) ↔ major 4, ``dict`` ↔ major
5, ``float`` ↔ float64. Decoding returns ``list`` for arrays and ``dict`` (in
canonical key order) for maps. Two distinct encoded keys that are equal as
Python dict keys (``1``/``True``/``1.0``, ``0.0``/``-0.0``) cannot be
represented by a ``dict`` and are rejected rather than merged.
"""

from __future__ import annotations

import struct
from math import isfinite
from typing import Any, Final, TypeAlias

__all__ = [
    "ERROR_CODES",
    "CborValue",
    "CodecError",
    "decode",
    "encode",
    "encode_uint",
]

CborValue: TypeAlias = (
    bool
    | int
    | float
    | bytes
    | str
    | list["CborValue"]
    | tuple["CborValue", ...]
    | dict["CborValue", "CborValue"]
    | None
)
"""A value representable in the profile (tuples encode as arrays but decode as lists)."""

ERROR_CODES: Final[frozenset[str]] = frozenset({
    # encoder
    "unsupported_type",      # value (or decode input) of a type the profile cannot represent
    "int_out_of_range",      # integer outside [-2**64, 2**64 - 1]
    "non_finite_float",      # NaN / +Inf / -Inf (encoder and decoder)
    "invalid_utf8",          # str with lone surrogates / text string not valid UTF-8
    "unhashable_map_key",    # array or map used as a map key (encoder and decoder)
    "duplicate_map_key",     # same encoded key twice (encoder and decoder)
    "nesting_too_deep",      # decoder: beyond max_depth; encoder: cyclic / absurdly deep value
    # decoder only
    "truncated",             # input ends inside an item, or a declared length exceeds the input
    "trailing_bytes",        # bytes left over after the top-level item
    "indefinite_length",     # additional info 31 on a string/array/map, or a stray break (0xff)
    "non_shortest",          # integer, length or count head not in shortest form
    "unsorted_map_keys",     # map keys not in ascending bytewise order of their encodings
    "map_key_collision",     # distinct encoded keys that are equal as Python dict keys
    "float_not_float64",     # half (0xf9) or single (0xfa) precision float
    "tag_not_allowed",       # any major type 6 item
    "invalid_simple_value",  # 0xe0..0xf3, 0xf7 (undefined), 0xf8, 0xfc..0xfe
    "reserved_additional_info",  # additional info 28..30, or 31 on an integer
})
"""Every ``CodecError.code`` this module raises."""


class CodecError(ValueError):
    """Typed encode/decode error.

    ``code`` is a stable machine-readable identifier (one of :data:`ERROR_CODES`);
    ``offset`` is the byte offset of the offending item in the decoder input
    (``None`` for encoder errors). ``str(error)`` is a human-readable message.
    """

    code: str
    detail: str
    offset: int | None

    def __init__(self, code: str, detail: str = "", offset: int | None = None) -> None:
        self.code = code
        self.detail = detail
        self.offset = offset
        text = f"{code}: {detail}" if detail else code
        if offset is not None:
            text += f" (at byte {offset})"
        super().__init__(text)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.detail, self.offset))


# --------------------------------------------------------------------------- encoder

_U64_MAX: Final = (1 << 64) - 1
_NEG_MIN: Final = -(1 << 64)
_BYTE: Final = tuple(bytes((i,)) for i in range(256))
_pack_BB = struct.Struct(">BB").pack
_pack_BH = struct.Struct(">BH").pack
_pack_BI = struct.Struct(">BI").pack
_pack_BQ = struct.Struct(">BQ").pack
_pack_Bd = struct.Struct(">Bd").pack


MAX_DEPTH = 64
"""Most nested arrays/maps: ``decode`` admits this many by default and ``encode`` never produces more."""


def _head(mt: int, n: int) -> bytes:
    """Shortest head for major-type bits ``mt`` (pre-shifted) and argument ``0 <= n < 2**64``."""
    if n < 24:
        return _BYTE[mt | n]
    if n < 0x100:
        return _pack_BB(mt | 24, n)
    if n < 0x10000:
        return _pack_BH(mt | 25, n)
    if n < 0x100000000:
        return _pack_BI(mt | 26, n)
    return _pack_BQ(mt | 27, n)


def _enc_int(v: int) -> bytes:
    if v >= 0:
        if v < 24:
            return _BYTE[v]
        if v > _U64_MAX:
            raise CodecError("int_out_of_range", f"{v} > 2**64-1 (no bignums in the profile)")
        return _head(0x00, v)
    if v < _NEG_MIN:
        raise CodecError("int_out_of_range", f"{v} < -2**64 (no bignums in the profile)")
    return _head(0x20, -1 - v)


def _enc_str(v: str) -> bytes:
    try:
        b = v.encode("utf-8")
    except UnicodeEncodeError as e:
        raise CodecError("invalid_utf8", f"text is not encodable as UTF-8: {e.reason}") from None
    return _head(0x60, len(b)) + b


def _enc_float(v: float) -> bytes:
    if not isfinite(v):
        raise CodecError("non_finite_float", f"{v!r} is not a finite float")
    return _pack_Bd(0xFB, v)


def _enc_map(m: dict[Any, Any], depth: int) -> bytes:
    if depth >= MAX_DEPTH:
        raise _too_deep()
    items: list[tuple[bytes, bytes]] = []
    append = items.append
    inner = depth + 1
    for k, val in m.items():
        if type(k) is int and 0 <= k < 24:  # the usual protocol-map key
            kb = _BYTE[k]
        else:
            kb = _enc(k, inner)
            if 0x80 <= kb[0] < 0xC0:
                raise CodecError("unhashable_map_key", "map keys must not be arrays or maps")
        append((kb, _enc(val, inner)))
    items.sort()
    parts = [_head(0xA0, len(items))]
    prev = b""
    for kb, vb in items:
        if kb == prev:  # only reachable with exotic key types whose == / hash disagree
            raise CodecError("duplicate_map_key", f"two keys encode to {kb.hex()}")
        prev = kb
        parts.append(kb)
        parts.append(vb)
    return b"".join(parts)


def _too_deep() -> CodecError:
    return CodecError("nesting_too_deep", f"more than {MAX_DEPTH} nested arrays/maps (what decode accepts)")


def _enc_array(v: list[Any] | tuple[Any, ...], depth: int) -> bytes:
    if depth >= MAX_DEPTH:
        raise _too_deep()
    inner = depth + 1
    return _head(0x80, len(v)) + b"".join([_enc(x, inner) for x in v])


def _enc(v: object, depth: int = 0) -> bytes:
    """``depth``: arrays/maps around ``v`` (the encoder refuses what ``decode``'s default ``max_depth`` would)."""
    t = type(v)
    if t is int:
        return _enc_int(v)  # type: ignore[arg-type]
    if t is bytes:
        ln = len(v)  # type: ignore[arg-type]
        if ln < 24:
            return _BYTE[0x40 | ln] + v  # type: ignore[operator]
        if ln < 0x100:
            return _pack_BB(0x58, ln) + v  # type: ignore[operator]
        return _head(0x40, ln) + v  # type: ignore[operator]
    if t is str:
        return _enc_str(v)  # type: ignore[arg-type]
    if t is dict:
        return _enc_map(v, depth)  # type: ignore[arg-type]
    if t is list or t is tuple:
        return _enc_array(v, depth)  # type: ignore[arg-type]
    if v is None:
        return b"\xf6"
    if v is True:
        return b"\xf5"
    if v is False:
        return b"\xf4"
    if t is float:
        return _enc_float(v)  # type: ignore[arg-type]
    return _enc_other(v, depth)


def _enc_other(v: object, depth: int) -> bytes:
    """Subclasses of the supported types and the other bytes-like types."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        b = bytes(v)
        return _head(0x40, len(b)) + b
    if isinstance(v, int):  # bool already handled; IntEnum & co. encode as their int value
        return _enc_int(int.__index__(v))
    if isinstance(v, float):
        return _enc_float(float.__float__(v))
    if isinstance(v, str):
        return _enc_str(str.__str__(v))
    if isinstance(v, (list, tuple)):
        return _enc_array(v, depth)
    if isinstance(v, dict):
        return _enc_map(v, depth)
    raise CodecError("unsupported_type", f"cannot encode {type(v).__name__} in canonical CBOR")


def encode_uint(v: int) -> bytes:
    """``encode(v)`` for an unsigned integer ``0 <= v < 2**64`` without the generic dispatch (hot frame paths)."""
    if not 0 <= v <= _U64_MAX:
        raise CodecError("int_out_of_range", f"{v} is not an unsigned 64-bit integer")
    return _head(0x00, v)


def encode(value: object) -> bytes:
    """Return the canonical (CIP-11 deterministic) CBOR encoding of ``value``.

    Supported: ``None``, ``bool``, ``int`` in ``[-2**64, 2**64-1]``, finite
    ``float`` (always float64), ``bytes``/``bytearray``/``memoryview``, ``str``,
    ``list``/``tuple`` and ``dict`` with scalar keys (entries emitted in
    bytewise order of the encoded keys). No tags are ever produced.

    Raises :class:`CodecError` with ``code`` ``"unsupported_type"``,
    ``"int_out_of_range"``, ``"non_finite_float"``, ``"invalid_utf8"``,
    ``"unhashable_map_key"``, ``"duplicate_map_key"`` or ``"nesting_too_deep"``
    (more than :data:`MAX_DEPTH` nested arrays/maps — what :func:`decode` refuses by default — or cyclic).
    """
    try:
        return _enc(value)
    except RecursionError:
        raise CodecError("nesting_too_deep", "value is cyclic or nested too deeply") from None


# --------------------------------------------------------------------------- decoder

_unpack_H = struct.Struct(">H").unpack_from
_unpack_I = struct.Struct(">I").unpack_from
_unpack_Q = struct.Struct(">Q").unpack_from
_unpack_d = struct.Struct(">d").unpack_from


def decode(data: bytes, *, max_depth: int = MAX_DEPTH) -> CborValue:
    """Strictly decode one canonical CBOR item that spans all of ``data``.

    Accepts ``bytes``, ``bytearray`` or ``memoryview``. Succeeds iff
    ``encode(result) == data``; arrays decode to ``list``, maps to ``dict``.
    ``max_depth`` bounds the number of nested arrays/maps (``0`` allows only
    scalars; the default admits 64 levels). Decoding is iterative, so hostile
    input cannot exhaust the Python stack.

    Raises :class:`CodecError` (and nothing else) for any input that is not
    canonical; ``code`` is one of :data:`ERROR_CODES`.
    """
    if type(data) is not bytes:
        data = _input_bytes(data)
    n = len(data)
    pos = start = 0
    # State of the innermost open container; parents are saved on ``stack``.
    stack: list[tuple[Any, int, bool, bool, Any, bytes]] = []
    cur: Any = None        # the list/dict being filled, None at top level
    left = 0               # items (array) or entries (map) still to read
    is_map = False
    want_key = False       # map: next item is a key
    key: Any = None        # map: pending key awaiting its value
    last_kb = b""          # map: encoding of the previous key
    value: Any

    # Performance: this loop runs once per item and is the decoder's hot path, so its
    # three steps stay inline, marked by numbered comments: 1. read the head,
    # 2. decode the item (or open an array/map), 3. deliver the value to its container.
    # Moving the head and string steps into functions alone costs ~20 % on transactions
    # and blocks (a Python call per item). Only cold paths are functions of their own:
    # non-bytes input (_input_bytes), additional info 28..31 (_unusable_additional_info),
    # floats, tags and the other major-7 bytes (_float_or_reject), misordered map keys
    # (_misordered_key).
    #
    # Running off the end of ``data`` inside a head (``data[pos]`` / ``unpack_from``)
    # raises IndexError / struct.error, turned into "truncated" below; string, array
    # and map lengths are checked explicitly before anything is sliced or allocated.
    try:
        while True:
            # 1. Read the head: the initial byte and, for major types 0..5, the
            #    argument in shortest form.
            start = pos
            ib = data[pos]
            pos += 1
            if ib < 0x18:  # small unsigned integer: the most common item
                value = ib
            elif ib < 0xC0:  # major types 0..5 with an argument
                major = ib >> 5
                ai = ib & 0x1F
                if ai < 24:
                    arg = ai
                elif ai == 24:
                    arg = data[pos]
                    pos += 1
                    if arg < 24:
                        raise CodecError("non_shortest", "argument fits in the initial byte", start)
                elif ai == 25:
                    arg = _unpack_H(data, pos)[0]
                    pos += 2
                    if arg < 0x100:
                        raise CodecError("non_shortest", "argument fits in 1 byte", start)
                elif ai == 26:
                    arg = _unpack_I(data, pos)[0]
                    pos += 4
                    if arg < 0x10000:
                        raise CodecError("non_shortest", "argument fits in 2 bytes", start)
                elif ai == 27:
                    arg = _unpack_Q(data, pos)[0]
                    pos += 8
                    if arg < 0x100000000:
                        raise CodecError("non_shortest", "argument fits in 4 bytes", start)
                else:
                    raise _unusable_additional_info(ai, major, start)

                # 2. Decode the string or integer, or open the array/map and go on
                #    with its first item.
                if major == 2:
                    if arg > n - pos:
                        raise CodecError("truncated", f"byte string of {arg} bytes", start)
                    value = data[pos:pos + arg]
                    pos += arg
                elif major == 0:
                    value = arg
                elif major == 3:
                    if arg > n - pos:
                        raise CodecError("truncated", f"text string of {arg} bytes", start)
                    try:
                        value = data[pos:pos + arg].decode("utf-8")
                    except UnicodeDecodeError as e:
                        raise CodecError("invalid_utf8", e.reason, start) from None
                    pos += arg
                elif major == 1:
                    value = -1 - arg
                else:  # 4 (array) or 5 (map)
                    if is_map and want_key:
                        raise CodecError("unhashable_map_key",
                                         "map keys must not be arrays or maps", start)
                    if len(stack) >= max_depth:
                        raise CodecError("nesting_too_deep",
                                         f"more than {max_depth} nested levels", start)
                    if major == 4:
                        if arg:
                            if arg > n - pos:  # every item takes at least one byte
                                raise CodecError("truncated", f"array of {arg} items", start)
                            stack.append((cur, left, is_map, want_key, key, last_kb))
                            cur, left, is_map = [], arg, False
                            continue
                        value = []
                    else:
                        if arg:
                            if arg > (n - pos) >> 1:  # every entry takes at least two bytes
                                raise CodecError("truncated", f"map of {arg} entries", start)
                            stack.append((cur, left, is_map, want_key, key, last_kb))
                            cur, left, is_map, want_key, last_kb = {}, arg, True, True, b""
                            continue
                        value = {}
            elif ib == 0xF6:
                value = None
            elif ib == 0xF5:
                value = True
            elif ib == 0xF4:
                value = False
            else:
                value = _float_or_reject(data, pos, ib, start)
                pos += 8

            # 3. Deliver ``value`` (which started at ``start``) to the enclosing container,
            #    closing every container it completes.
            while True:
                if is_map:
                    if want_key:
                        kb = data[start:pos]
                        if kb <= last_kb:
                            raise _misordered_key(kb, last_kb, start)
                        # Keys ascend by encoding, so ints (0x00..0x3b) come before
                        # false/true (0xf4/0xf5) and floats (0xfb): only a bool or float
                        # key can equal (as a dict key) an earlier key, e.g. 1/True/1.0 or
                        # 0.0/-0.0. Distinct ints, bytes or texts are never equal.
                        if ib >= 0xF4 and value in cur:
                            raise CodecError("map_key_collision",
                                             f"key {value!r} equals an earlier key as a dict key",
                                             start)
                        last_kb = kb
                        key = value
                        want_key = False
                        break
                    cur[key] = value
                    want_key = True
                elif cur is None:
                    if pos != n:
                        raise CodecError("trailing_bytes", f"{n - pos} bytes after the item", pos)
                    return value  # type: ignore[no-any-return]
                else:
                    cur.append(value)
                left -= 1
                if left:
                    break
                value = cur
                cur, left, is_map, want_key, key, last_kb = stack.pop()
    except (IndexError, struct.error):
        raise CodecError("truncated", "unexpected end of input", start) from None


def _input_bytes(data: object) -> bytes:
    """Copy a bytearray/memoryview input to ``bytes``, which the loop indexes and slices; reject any other type."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CodecError("unsupported_type", f"cannot decode from {type(data).__name__}")
    return bytes(data)


def _unusable_additional_info(ai: int, major: int, start: int) -> CodecError:
    """The error for additional info 28..31 on major types 0..5: indefinite length (31 on 2..5) or reserved."""
    if ai == 31 and major >= 2:
        return CodecError("indefinite_length", "indefinite-length items are invalid", start)
    return CodecError("reserved_additional_info", f"additional info {ai}", start)


def _float_or_reject(data: bytes, pos: int, ib: int, start: int) -> float:
    """Decode the finite float64 whose 8 bytes start at ``pos``, or reject any other tag/major-7 initial byte ``ib``."""
    # false/true/null (0xf4..0xf6) never get here: decode handles them inline.
    if ib == 0xFB:
        value: float = _unpack_d(data, pos)[0]  # struct.error on short input: decode reports "truncated"
        if not isfinite(value):
            raise CodecError("non_finite_float", "NaN and ±Inf are invalid", start)
        return value
    if ib < 0xE0:
        raise CodecError("tag_not_allowed", "tags are not allowed", start)
    if ib == 0xF9 or ib == 0xFA:
        raise CodecError("float_not_float64", "floats must be float64 (0xfb)", start)
    if ib == 0xFF:
        raise CodecError("indefinite_length", "break code outside any item", start)
    raise CodecError("invalid_simple_value", f"simple/reserved value 0x{ib:02x}", start)


def _misordered_key(kb: bytes, last_kb: bytes, start: int) -> CodecError:
    """The error for a map key encoding ``kb`` not above the previous one: a repeated key or an unsorted one."""
    if kb == last_kb:
        return CodecError("duplicate_map_key", f"key {kb.hex()} repeated", start)
    return CodecError("unsorted_map_keys", "keys must ascend bytewise by encoding", start)
