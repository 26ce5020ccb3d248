"""A deterministic, bounded subset of JSON Schema for ``json_schema_valid`` checks (docs/verification.md §3).

A third-party validator is not used inside consensus: ``pattern`` means a
backtracking regex engine, ``$ref`` may fetch remote documents, ``format``
differs between libraries. This subset has none of these. Semantics follow JSON
Schema draft 2020-12 for the keywords it keeps; every other keyword is refused
by :func:`check_schema` at submission, so a schema accepted there always
evaluates the same way on every node. Evaluation is metered (:class:`Meter`):
the cost of checking one result is bounded whatever the schema and result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cowboy_protocol.jobs.json_strict import JsonKey, JsonValue, is_number, parse_json
from cowboy_protocol.types.validation_errors import ValidationError

MAX_SCHEMA_BYTES = 64 * 1024
"""Largest schema text, in UTF-8 bytes."""
MAX_SCHEMA_DEPTH = 32
"""Deepest nesting of subschemas (the root schema is at depth 0)."""
MAX_SCHEMA_NODES = 256
"""Most schemas (root and subschemas, boolean ones included) in one schema document."""
SCHEMA_STEP_BUDGET = 200_000
"""Evaluation steps allowed per result (shared by all json_schema_valid checks on that result)."""

TYPE_NAMES = frozenset({"null", "boolean", "integer", "number", "string", "array", "object"})
"""Values of the ``type`` keyword."""
_SCHEMA_LIST = ("allOf", "anyOf", "oneOf")
_UINT = ("minItems", "maxItems", "minLength", "maxLength")
_NUMBER = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum", "const",
                      *_SCHEMA_LIST, *_UINT, *_NUMBER})
"""Keywords that constrain a value."""
ANNOTATIONS = frozenset({"title", "description", "$comment", "default", "examples"})
"""Keywords accepted and ignored: they never affect validation (JSON Schema annotations)."""

CODE = "job_check_invalid"
"""ValidationError code for a schema this node cannot evaluate."""


def _refuse(message: str) -> ValidationError:
    return ValidationError(CODE, message, field="schema")


class BudgetExceeded(Exception):
    """Evaluation ran out of :data:`SCHEMA_STEP_BUDGET` steps."""


class Meter:
    """Counts evaluation steps; one step per (schema, value) visit and per value node hashed for enum/const."""

    __slots__ = ("remaining",)

    def __init__(self, budget: int = SCHEMA_STEP_BUDGET) -> None:
        self.remaining = budget
        """Steps left."""

    def charge(self, steps: int = 1) -> None:
        """Spend ``steps``; raise :class:`BudgetExceeded` once the budget is gone."""
        self.remaining -= steps
        if self.remaining < 0:
            raise BudgetExceeded


# ----------------------------------------------------------------------------- submission-time check

def _uint(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _refuse(f"{name} must be a non-negative integer")


def _check_node(schema: JsonValue, depth: int, count: list[int]) -> None:
    count[0] += 1
    if count[0] > MAX_SCHEMA_NODES:
        raise _refuse(f"schema has more than {MAX_SCHEMA_NODES} subschemas")
    if depth > MAX_SCHEMA_DEPTH:
        raise _refuse(f"schema nested deeper than {MAX_SCHEMA_DEPTH}")
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise _refuse("a schema must be an object or a boolean")
    for key in sorted(schema):
        if key not in KEYWORDS and key not in ANNOTATIONS:
            raise _refuse(f"unsupported schema keyword {key[:64]!r}")
    sub = depth + 1
    if "type" in schema:
        t = schema["type"]
        names = t if isinstance(t, list) else [t]
        if not names or any(not isinstance(n, str) or n not in TYPE_NAMES for n in names) \
                or len(set(names)) != len(names):
            raise _refuse("type must be a type name or a non-empty array of distinct type names")
    if "properties" in schema:
        props = schema["properties"]
        if not isinstance(props, dict):
            raise _refuse("properties must be an object")
        for name in props:
            _check_node(props[name], sub, count)
    if "required" in schema:
        req = schema["required"]
        if not isinstance(req, list) or any(not isinstance(r, str) for r in req) \
                or len(set(req)) != len(req):
            raise _refuse("required must be an array of distinct strings")
    if "additionalProperties" in schema:
        _check_node(schema["additionalProperties"], sub, count)
    if "items" in schema:
        if isinstance(schema["items"], list):
            raise _refuse("items must be a single schema (the array form is not supported)")
        _check_node(schema["items"], sub, count)
    if "enum" in schema and not isinstance(schema["enum"], list):
        raise _refuse("enum must be an array")
    for name in _UINT:
        if name in schema:
            _uint(schema[name], name)
    for name in _NUMBER:
        if name in schema and not is_number(schema[name]):
            raise _refuse(f"{name} must be a number")
    for name in _SCHEMA_LIST:
        if name in schema:
            branches = schema[name]
            if not isinstance(branches, list) or not branches:
                raise _refuse(f"{name} must be a non-empty array of schemas")
            for branch in branches:
                _check_node(branch, sub, count)


def load_schema(schema_text: str) -> JsonValue:
    """Parse and check a schema; raise ``ValidationError("job_check_invalid")`` if this node cannot evaluate it."""
    if not isinstance(schema_text, str):
        raise _refuse("schema must be text")
    if len(schema_text.encode("utf-8", "surrogatepass")) > MAX_SCHEMA_BYTES:
        raise _refuse(f"schema larger than {MAX_SCHEMA_BYTES} bytes")
    try:
        schema = parse_json(schema_text)
    except ValidationError as exc:
        raise _refuse(f"schema is not strict JSON: {exc.message}") from None
    _check_node(schema, 0, [0])
    return schema


def check_schema(schema_text: str) -> None:
    """Refuse (``ValidationError("job_check_invalid")``) a schema outside the supported subset. Call at submission."""
    load_schema(schema_text)


# ----------------------------------------------------------------------------- evaluation

def metered_key(value: JsonValue, meter: Meter) -> JsonKey:
    """:func:`json_strict.json_key`, charging one step per value node."""
    meter.charge()
    if isinstance(value, list):
        return ("arr", tuple(metered_key(v, meter) for v in value))
    if isinstance(value, dict):
        return ("obj", tuple((k, metered_key(value[k], meter)) for k in sorted(value)))
    if isinstance(value, float) and value.is_integer():
        return ("num", int(value))
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("num", value)
    return ("str", value)


def _is_type(value: JsonValue, name: str) -> bool:
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "number":
        return is_number(value)
    if name == "integer":  # JSON Schema: a number with a zero fractional part is an integer (1.0 included)
        if isinstance(value, float):
            return value.is_integer()
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "string":
        return isinstance(value, str)
    if name == "array":
        return isinstance(value, list)
    return isinstance(value, dict)


_CMP: dict[str, Callable[[Any, Any], bool]] = {
    # Python compares int with float exactly (no rounding), as JSON Schema's mathematical comparison requires.
    "minimum": lambda v, b: v >= b, "maximum": lambda v, b: v <= b,
    "exclusiveMinimum": lambda v, b: v > b, "exclusiveMaximum": lambda v, b: v < b,
}


def schema_accepts(schema: JsonValue, value: JsonValue, meter: Meter) -> bool:
    """True iff ``value`` is valid against a schema returned by :func:`load_schema`.

    Keywords are evaluated in a fixed order and stop at the first failure, so the steps
    charged (and thus whether :class:`BudgetExceeded` is raised) are the same on every node.
    """
    meter.charge()
    if isinstance(schema, bool):
        return schema
    assert isinstance(schema, dict)
    if "type" in schema:
        t = schema["type"]
        names = t if isinstance(t, list) else [t]
        if not any(_is_type(value, str(n)) for n in names):
            return False
    if "const" in schema and metered_key(value, meter) != metered_key(schema["const"], meter):
        return False
    if "enum" in schema:
        options = schema["enum"]
        assert isinstance(options, list)
        key = metered_key(value, meter)
        if not any(key == metered_key(o, meter) for o in options):
            return False
    if is_number(value):
        for name, cmp in _CMP.items():
            if name in schema and not cmp(value, schema[name]):
                return False
    elif isinstance(value, str):
        if "minLength" in schema and len(value) < int(schema["minLength"]):  # type: ignore[arg-type]
            return False
        if "maxLength" in schema and len(value) > int(schema["maxLength"]):  # type: ignore[arg-type]
            return False
    elif isinstance(value, list):
        if not _array_ok(schema, value, meter):
            return False
    elif isinstance(value, dict) and not _object_ok(schema, value, meter):
        return False
    return _combinators_ok(schema, value, meter)


def _array_ok(schema: dict[str, JsonValue], value: list[JsonValue], meter: Meter) -> bool:
    if "minItems" in schema and len(value) < int(schema["minItems"]):  # type: ignore[arg-type]
        return False
    if "maxItems" in schema and len(value) > int(schema["maxItems"]):  # type: ignore[arg-type]
        return False
    if "items" in schema:
        items = schema["items"]
        return all(schema_accepts(items, v, meter) for v in value)
    return True


def _object_ok(schema: dict[str, JsonValue], value: dict[str, JsonValue], meter: Meter) -> bool:
    props = schema.get("properties", {})
    assert isinstance(props, dict)
    required = schema.get("required", [])
    assert isinstance(required, list)
    if any(r not in value for r in required):
        return False
    for name, sub in props.items():
        if name in value and not schema_accepts(sub, value[name], meter):
            return False
    if "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        for name, item in value.items():
            if name not in props and not schema_accepts(extra, item, meter):
                return False
    return True


def _combinators_ok(schema: dict[str, JsonValue], value: JsonValue, meter: Meter) -> bool:
    if "allOf" in schema and not all(schema_accepts(s, value, meter) for s in _branches(schema, "allOf")):
        return False
    if "anyOf" in schema and not any(schema_accepts(s, value, meter) for s in _branches(schema, "anyOf")):
        return False
    if "oneOf" in schema:
        passed = 0
        for s in _branches(schema, "oneOf"):
            if schema_accepts(s, value, meter):
                passed += 1
                if passed > 1:  # a second match already decides; stop (fixed order, so still deterministic)
                    return False
        return passed == 1
    return True


def _branches(schema: dict[str, JsonValue], name: str) -> list[JsonValue]:
    branches = schema[name]
    assert isinstance(branches, list)
    return branches
