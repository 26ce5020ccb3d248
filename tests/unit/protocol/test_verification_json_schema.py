"""The JSON Schema subset of json_schema_valid checks (docs/verification.md §3)."""

from __future__ import annotations

import json

import pytest

from cowboy_protocol.jobs.json_schema import (
    MAX_SCHEMA_BYTES,
    MAX_SCHEMA_DEPTH,
    MAX_SCHEMA_NODES,
    BudgetExceeded,
    Meter,
    check_schema,
    load_schema,
    schema_accepts,
)
from cowboy_protocol.jobs.json_strict import parse_json
from cowboy_protocol.types.validation_errors import ValidationError


def _ok(schema: object, instance: str) -> bool:
    return schema_accepts(load_schema(json.dumps(schema)), parse_json(instance), Meter())


# (schema, accepted instance, rejected instance) for every supported keyword
KEYWORD_CASES = [
    ({"type": "null"}, "null", "0"),
    ({"type": "boolean"}, "true", "1"),
    ({"type": "integer"}, "3", "3.5"),
    ({"type": "integer"}, "3.0", "true"),
    ({"type": "number"}, "3.5", "true"),
    ({"type": "number"}, "-7", '"7"'),
    ({"type": "string"}, '"s"', "null"),
    ({"type": "array"}, "[]", "{}"),
    ({"type": "object"}, "{}", "[]"),
    ({"type": ["string", "null"]}, "null", "1"),
    ({"properties": {"a": {"type": "string"}}}, '{"a": "x", "b": 1}', '{"a": 1}'),
    ({"properties": {"a": {"type": "string"}}}, '{"b": 1}', '{"a": null}'),
    ({"required": ["a", "b"]}, '{"a": 1, "b": 2}', '{"a": 1}'),
    ({"properties": {"a": {}}, "additionalProperties": False}, '{"a": 1}', '{"a": 1, "b": 2}'),
    ({"properties": {"a": {}}, "additionalProperties": {"type": "integer"}}, '{"a": "x", "b": 2}',
     '{"a": 1, "b": "x"}'),
    ({"items": {"type": "integer"}}, "[1, 2, 3]", "[1, 2.5]"),
    ({"items": False}, "[]", "[1]"),
    ({"minItems": 2}, "[1, 2]", "[1]"),
    ({"maxItems": 2}, "[1, 2]", "[1, 2, 3]"),
    ({"enum": ["a", 1, None, {"k": [1]}]}, '{"k": [1.0]}', '"b"'),
    ({"enum": [1]}, "1.0", "true"),
    ({"const": {"a": [1, "x"]}}, '{"a": [1, "x"]}', '{"a": ["x", 1]}'),
    ({"const": False}, "false", "0"),
    ({"minimum": 2}, "2", "1.9999999999999998"),
    ({"maximum": 2}, "2.0", "2.0000000000000004"),
    ({"exclusiveMinimum": 2}, "2.0000000000000004", "2"),
    ({"exclusiveMaximum": 2}, "1", "2"),
    ({"maximum": 9007199254740992}, "9007199254740992", "9007199254740993"),  # exact int/float comparison
    ({"minLength": 2}, '"\u00e9\U0001F600"', '"\U0001F600"'),  # code points, not bytes or UTF-16 units
    ({"maxLength": 2}, '"\u00e9\U0001F600"', '"abc"'),
    ({"allOf": [{"type": "integer"}, {"minimum": 0}]}, "1", "-1"),
    ({"anyOf": [{"type": "string"}, {"minimum": 10}]}, "11", "9"),
    ({"oneOf": [{"type": "integer"}, {"minimum": 10}]}, "5", "11"),  # 11 matches both branches
    ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, '"x"', "null"),  # null matches none
    (True, "[1]", None),
    (False, None, "[1]"),
    ({"title": "t", "description": "d", "$comment": "c", "default": 1, "examples": [1], "type": "integer"},
     "1", '"x"'),
]


@pytest.mark.parametrize(("schema", "good", "bad"), KEYWORD_CASES)
def test_schema_keyword_accepts_and_rejects(schema: object, good: str | None, bad: str | None) -> None:
    if good is not None:
        assert _ok(schema, good)
    if bad is not None:
        assert not _ok(schema, bad)


def test_schema_keywords_ignore_values_of_other_types() -> None:
    assert _ok({"minimum": 5}, '"xy"')
    assert _ok({"minLength": 5}, "1")
    assert _ok({"minItems": 5}, "{}")
    assert _ok({"required": ["a"]}, "[1]")
    assert _ok({"items": False}, '{"a": 1}')
    assert _ok({"properties": {"a": False}}, "[1]")


def test_schema_nested_object_example() -> None:
    schema = {"type": "object", "required": ["price", "symbol"], "additionalProperties": False,
              "properties": {"price": {"type": "number", "exclusiveMinimum": 0},
                             "symbol": {"type": "string", "minLength": 1, "maxLength": 8},
                             "tags": {"type": "array", "items": {"enum": ["spot", "perp"]}, "maxItems": 2}}}
    assert _ok(schema, '{"price": 101.5, "symbol": "ETH", "tags": ["spot"]}')
    assert not _ok(schema, '{"price": 0, "symbol": "ETH"}')
    assert not _ok(schema, '{"price": 1, "symbol": ""}')
    assert not _ok(schema, '{"price": 1, "symbol": "ETH", "tags": ["fut"]}')
    assert not _ok(schema, '{"price": 1, "symbol": "ETH", "extra": 1}')
    assert not _ok(schema, '{"symbol": "ETH"}')


UNSUPPORTED = ["pattern", "format", "$ref", "$defs", "definitions", "$id", "$schema", "$anchor", "$dynamicRef",
               "patternProperties", "propertyNames", "dependentRequired", "dependentSchemas", "dependencies",
               "minProperties", "maxProperties", "prefixItems", "contains", "minContains", "maxContains",
               "uniqueItems", "unevaluatedItems", "unevaluatedProperties", "additionalItems", "multipleOf",
               "not", "if", "then", "else", "contentEncoding", "contentMediaType", "readOnly", "nullable"]


@pytest.mark.parametrize("keyword", UNSUPPORTED)
def test_check_schema_refuses_unsupported_keyword(keyword: str) -> None:
    with pytest.raises(ValidationError) as info:
        check_schema(json.dumps({"type": "object", keyword: {}}))
    assert info.value.code == "job_check_invalid"
    # also when nested inside a subschema
    with pytest.raises(ValidationError):
        check_schema(json.dumps({"properties": {"a": {"anyOf": [{keyword: "x"}]}}}))


@pytest.mark.parametrize("schema", [
    '{"items": [{"type": "integer"}]}',            # tuple form of items
    '{"exclusiveMinimum": true, "minimum": 1}',    # draft-04 boolean form
    '{"type": "int"}', '{"type": []}', '{"type": ["string", "string"]}', '{"type": 1}',
    '{"properties": []}', '{"properties": {"a": 1}}',
    '{"required": "a"}', '{"required": ["a", "a"]}', '{"required": [1]}',
    '{"additionalProperties": "no"}', '{"enum": 1}',
    '{"minItems": -1}', '{"maxLength": 1.0}', '{"minLength": true}', '{"minimum": "1"}', '{"maximum": null}',
    '{"anyOf": []}', '{"allOf": {}}', '{"oneOf": [1]}',
    "1", '"schema"', "null", "[]", "{", '{"a": 1, "a": 2}', '{"minimum": NaN}',
])
def test_check_schema_refuses_malformed_schemas(schema: str) -> None:
    with pytest.raises(ValidationError) as info:
        check_schema(schema)
    assert info.value.code == "job_check_invalid"


def _accepted(schema_text: str) -> object:
    """check_schema returns None (docs/verification.md §1: it only raises); the accepted value is the parsed schema
    that load_schema hands to the evaluator."""
    check_schema(schema_text)
    return load_schema(schema_text)


def test_check_schema_accepts_boolean_and_supported_schemas() -> None:
    # §3: true and false are schemas, accepting every value / none
    assert _accepted("true") is True
    assert _accepted("false") is False
    assert schema_accepts(True, parse_json('{"x": [1]}'), Meter())
    assert not schema_accepts(False, parse_json("null"), Meter())
    text = '{"type": "object", "properties": {"a": {"type": ["integer", "null"]}}, "required": ["a"]}'
    schema = _accepted(text)
    assert schema == {"type": "object", "properties": {"a": {"type": ["integer", "null"]}}, "required": ["a"]}
    assert _ok(schema, '{"a": null}')
    assert _ok(schema, '{"a": 2.0, "b": "x"}')  # 2.0 is an integer (zero fractional part, §3)
    assert not _ok(schema, '{"a": "2"}')
    assert not _ok(schema, "{}")  # required
    assert not _ok(schema, "[]")


def test_check_schema_depth_limit() -> None:
    assert MAX_SCHEMA_DEPTH == 32
    deep = "{}"
    for _ in range(32):
        deep = '{"items": ' + deep + "}"
    parsed = _accepted(deep)  # the innermost schema is at depth 32
    for _ in range(32):
        assert isinstance(parsed, dict)
        assert list(parsed) == ["items"]
        parsed = parsed["items"]
    assert parsed == {}
    # 32 nested "items" over the empty schema: any array nested 32 deep passes
    assert _ok(json.loads(deep), "[" * 32 + '"leaf"' + "]" * 32)
    with pytest.raises(ValidationError):
        check_schema('{"items": ' + deep + "}")


def test_check_schema_node_and_size_limits() -> None:
    assert MAX_SCHEMA_NODES == 256
    assert _accepted(json.dumps({"anyOf": [{}] * 255})) == {"anyOf": [{}] * 255}  # root + 255 = 256 schemas
    with pytest.raises(ValidationError):
        check_schema(json.dumps({"anyOf": [{}] * 256}))
    padding = "x" * (MAX_SCHEMA_BYTES - len('{"title": ""}'))
    assert _accepted('{"title": "' + padding + '"}') == {"title": padding}
    assert _ok({"title": padding}, "1")  # an annotation only: accepted and ignored (§3)
    with pytest.raises(ValidationError):
        check_schema('{"title": "' + padding + 'x"}')


def test_schema_evaluation_is_metered() -> None:
    schema = load_schema('{"items": {"anyOf": [{"type": "string"}, {"type": "null"}, {"type": "integer"}]}}')
    big = parse_json("[" + ",".join(["1"] * 1000) + "]")
    # 1 (root) + 1000 elements × (1 anyOf owner + 3 branches) = 4001 steps
    meter = Meter(4001)
    assert schema_accepts(schema, big, meter) is True
    assert meter.remaining == 0  # exactly the 4001 steps counted above were spent
    with pytest.raises(BudgetExceeded):
        schema_accepts(schema, big, Meter(4000))
