"""The HTTP extraction path subset and timestamp reader (cowboy_runner/executors/extract.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cowboy_runner.executors import ExecutorError
from cowboy_runner.executors.base import canonical_json
from cowboy_runner.executors.extract import extract, parse_path, parse_timestamp

DOC = {"a": {"b": [{"c": 1}, {"c": [10, 20]}], "x.y": "dotted", "0": "zero-key"}, "list": ["p", "q", "r"]}


@pytest.mark.parametrize(("path", "segments"), [
    ("", ()),
    ("$", ()),
    ("$.a.b[0].c", ("a", "b", 0, "c")),
    ("a.b.1.c", ("a", "b", "1", "c")),
    ("$['x.y']", (("x.y",),)),
    ('$["q\\"uote"]', (('q"uote',),)),
    ("$.list[-1]", ("list", -1)),
    ("$.ünï", ("ünï",)),
])
def test_path_grammar(path: str, segments: tuple[object, ...]) -> None:
    assert parse_path(path) == segments


@pytest.mark.parametrize("path", ["$.", "$..a", "$a", "a..b", "$[01]", "$[-0]", "$[x]", "$['open", "$[1",
                                  "$.a]", "." * 3, "$[" + "9" * 19 + "]"])
def test_path_outside_subset_is_bad_extraction(path: str) -> None:
    with pytest.raises(ExecutorError) as info:
        parse_path(path)
    assert info.value.code == "bad_extraction"


@pytest.mark.parametrize(("path", "value"), [
    ("$", DOC),
    ("$.a.b[1].c[0]", 10),
    ("a.b.1.c.1", 20),          # the verifier's dotted form: a decimal name indexes an array
    ("$.a['x.y']", "dotted"),
    ("$.a.0", "zero-key"),      # on an object a decimal name is a member name
    ("$.list[-1]", "r"),
    ("$.list[-3]", "p"),
])
def test_extract_selects_one_value(path: str, value: object) -> None:
    assert extract(DOC, path) == value


@pytest.mark.parametrize("path", ["$.missing", "$.list[3]", "$.list[-4]", "$.a[0]", "$.list.x", "$['list'][0].y",
                                  "$.a['0'][0]"])
def test_extract_absent_is_bad_extraction(path: str) -> None:
    with pytest.raises(ExecutorError) as info:
        extract(DOC, path)
    assert info.value.code == "bad_extraction"


def test_canonical_json_is_sorted_compact_utf8() -> None:
    assert canonical_json({"b": [1, 2.5, None], "a": "é", "A": True}) == '{"A":true,"a":"é","b":[1,2.5,null]}'.encode()
    with pytest.raises(ExecutorError):
        canonical_json(float("nan"))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 5), st.text(st.characters(blacklist_characters=".[]\"'"), min_size=1,
                                                        max_size=5)), max_size=6))
def test_bracket_paths_reach_the_leaf_of_nested_values(keys: list[object]) -> None:
    # Build {k1: {k2: … "leaf"}} (arrays for int keys) and check the bracket form (backslash-escaped) reaches it.
    leaf: object = "leaf"
    for k in reversed(keys):
        leaf = [None] * int(k) + [leaf] if isinstance(k, int) else {k: leaf}
    path = "$" + "".join(f"[{k}]" if isinstance(k, int) else "['" + k.replace("\\", "\\\\") + "']"
                         for k in keys)
    assert extract(leaf, path) == "leaf"


@pytest.mark.parametrize(("value", "seconds"), [
    (1_700_000_000, 1_700_000_000.0),
    (1_700_000_000.5, 1_700_000_000.5),
    ("1700000000", 1_700_000_000.0),
    (1_700_000_000_000, 1_700_000_000.0),        # milliseconds
    ("2023-11-14T22:13:20Z", 1_700_000_000.0),
    ("2023-11-14T23:13:20+01:00", 1_700_000_000.0),
    ("2023-11-14T22:13:20", 1_700_000_000.0),     # no offset: UTC
])
def test_timestamp_forms(value: object, seconds: float) -> None:
    assert parse_timestamp(value) == seconds


@pytest.mark.parametrize("value", [True, None, "soon", [1], {"t": 1}, float("inf")])
def test_timestamp_refusals(value: object) -> None:
    with pytest.raises(ValueError):
        parse_timestamp(value)
