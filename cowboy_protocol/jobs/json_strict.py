"""Strict JSON for job results and check schemas (docs/verification.md §2).

Results are compared inside consensus, so every node must read the same bytes
as the same value or reject them with the same code. The grammar is RFC 8259
with these refusals: NaN/Infinity, numbers that overflow float64, duplicate
object keys, unpaired UTF-16 surrogates (RFC 7493 I-JSON), a byte-order mark,
invalid UTF-8, nesting deeper than :data:`MAX_JSON_DEPTH`, documents larger than
:data:`MAX_JSON_BYTES`, integer literals longer than :data:`MAX_INT_DIGITS`.
Integers stay ``int``; numbers with a fraction or exponent become ``float``.
Objects are ``dict`` in document order; nothing here depends on hash order.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any, TypeAlias, TypeGuard

from cowboy_protocol.types.validation_errors import ValidationError

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
"""A parsed strict-JSON value."""

JsonKey: TypeAlias = tuple[Any, ...]
"""Canonical, hashable form of a :data:`JsonValue` (see :func:`json_key`)."""

MAX_JSON_BYTES = 1 << 20
"""Largest accepted document, in UTF-8 bytes (1 MiB)."""
MAX_JSON_DEPTH = 64
"""Deepest accepted nesting of arrays/objects (a scalar has depth 0, ``[]`` depth 1)."""
MAX_INT_DIGITS = 512
"""Longest accepted integer literal, sign included. Below CPython's smallest settable
``int_max_str_digits`` (640), so the process-wide setting can never change the outcome."""

CODE_JSON_INVALID = "json_invalid"
"""ValidationError code of every refusal here."""


class _Refused(Exception):
    """Raised inside json hooks; turned into a ValidationError by :func:`parse_json`."""


def _parse_int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS:
        raise _Refused(f"integer literal longer than {MAX_INT_DIGITS} characters")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"number {text[:32]!r} overflows float64")
    return value


def _parse_constant(text: str) -> Any:
    raise _Refused(f"{text} is not JSON")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Refused("duplicate object key")
    return out


def _has_surrogate(text: str) -> bool:
    # The json module joins escaped surrogate pairs into one code point, so what is left is unpaired.
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def _check_tree(value: Any, depth: int) -> None:
    """Enforce the depth limit and refuse unpaired surrogates, in one walk."""
    if isinstance(value, str):
        if _has_surrogate(value):
            raise _Refused("unpaired UTF-16 surrogate in a string")
    elif isinstance(value, list):
        if depth + 1 > MAX_JSON_DEPTH:
            raise _Refused(f"nesting deeper than {MAX_JSON_DEPTH}")
        for item in value:
            _check_tree(item, depth + 1)
    elif isinstance(value, dict):
        if depth + 1 > MAX_JSON_DEPTH:
            raise _Refused(f"nesting deeper than {MAX_JSON_DEPTH}")
        for key, item in value.items():
            if _has_surrogate(key):
                raise _Refused("unpaired UTF-16 surrogate in an object key")
            _check_tree(item, depth + 1)


def _max_depth(raw: bytes) -> int:
    """Deepest ``[``/``{`` nesting outside string literals (a linear scan; no recursion)."""
    depth = deepest = 0
    in_string = escaped = False
    for b in raw:
        if in_string:
            if escaped:
                escaped = False
            elif b == 0x5C:  # backslash
                escaped = True
            elif b == 0x22:  # quote
                in_string = False
        elif b == 0x22:
            in_string = True
        elif b in (0x5B, 0x7B):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_JSON_DEPTH:
                    return deepest
        elif b in (0x5D, 0x7D):
            depth -= 1
    return deepest


def parse_json(data: bytes | str) -> JsonValue:
    """Parse one strict JSON document; raise ``ValidationError("json_invalid")`` on any refusal."""
    if isinstance(data, str):
        try:
            raw = data.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValidationError(CODE_JSON_INVALID, "text is not valid Unicode") from exc
    else:
        raw = data
    if len(raw) > MAX_JSON_BYTES:
        raise ValidationError(CODE_JSON_INVALID, f"document larger than {MAX_JSON_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(CODE_JSON_INVALID, "document is not valid UTF-8") from exc
    if text.startswith("\ufeff"):
        raise ValidationError(CODE_JSON_INVALID, "byte-order mark is not allowed")
    # Bound the nesting before the recursive C parser sees it: with the interpreter's recursion limit raised
    # (the PVM raises it), a deep document would overflow the C stack and kill the process.
    if _max_depth(raw) > MAX_JSON_DEPTH:
        raise ValidationError(CODE_JSON_INVALID, f"nesting deeper than {MAX_JSON_DEPTH}")
    try:
        value = json.loads(text, parse_int=_parse_int, parse_float=_parse_float,
                           parse_constant=_parse_constant, object_pairs_hook=_pairs)
        _check_tree(value, 0)
    except _Refused as exc:
        raise ValidationError(CODE_JSON_INVALID, str(exc)) from None
    except RecursionError:
        # Far deeper than MAX_JSON_DEPTH: refused whatever the interpreter's recursion limit is.
        raise ValidationError(CODE_JSON_INVALID, f"nesting deeper than {MAX_JSON_DEPTH}") from None
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        raise ValidationError(CODE_JSON_INVALID, f"not JSON: {exc}") from None
    result: JsonValue = value
    return result


def is_number(value: object) -> TypeGuard[int | float]:
    """True for JSON numbers (``int``/``float``); ``bool`` is not a number."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def exact(value: int | float) -> Fraction:
    """The exact rational value of a JSON number (floats are exact binary fractions)."""
    return Fraction(value)


def json_key(value: JsonValue) -> JsonKey:
    """Canonical hashable key: two values have equal keys iff they are equal JSON values.

    Equality follows JSON Schema: numbers compare by mathematical value (``1 == 1.0``, ``-0.0 == 0``),
    ``true`` is not ``1``, arrays are ordered, objects are unordered (keys sorted by code point).
    """
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("num", value)
    if isinstance(value, float):
        # Integral floats become ints so that 1.0 and 1 share a key; others keep their exact float value.
        return ("num", int(value)) if value.is_integer() else ("num", value)
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, list):
        return ("arr", tuple(json_key(v) for v in value))
    return ("obj", tuple((k, json_key(value[k])) for k in sorted(value)))


MAX_PATH_SEGMENTS = MAX_JSON_DEPTH
"""Most ``.``-separated segments in a field path."""


def split_path(field: str) -> tuple[str, ...]:
    """Split a field path (``a.b.0``) into segments; ``""`` is the whole document.

    Raises ``ValidationError("job_check_invalid")`` for an empty segment or too many segments.
    """
    if field == "":
        return ()
    parts = tuple(field.split("."))
    if any(p == "" for p in parts) or len(parts) > MAX_PATH_SEGMENTS:
        raise ValidationError("job_check_invalid", f"invalid field path {field[:64]!r}", field="field")
    return parts


_MISSING = object()


def _is_index(seg: str) -> bool:
    # Canonical decimal only ("0", "17"; not "01", "+1", "١"), short enough that int() is trivially safe.
    return seg.isascii() and seg.isdigit() and len(seg) <= 18 and (seg == "0" or seg[0] != "0")


def lookup(value: JsonValue, path: tuple[str, ...]) -> tuple[bool, JsonValue]:
    """Follow ``path``: object segments by key, array segments by canonical decimal index.

    Returns ``(found, value)``; ``(False, None)`` when a segment does not resolve.
    """
    current: Any = value
    for seg in path:
        if isinstance(current, dict):
            current = current.get(seg, _MISSING)
            if current is _MISSING:
                return False, None
        elif isinstance(current, list) and _is_index(seg):
            index = int(seg)
            if index >= len(current):
                return False, None
            current = current[index]
        else:
            return False, None
    return True, current
