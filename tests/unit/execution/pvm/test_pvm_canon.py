"""PVM version 1 handles builtin arguments and words their errors as CPython 3.11 does, on 3.11, 3.12 and 3.13.

The actor-level tests pass on CPython 3.11 whatever the PVM does (there CPython's own answer is the pinned
one): they test the pins when run on 3.12 and 3.13, which ``make test-pythons`` does.  The rule tests feed
:func:`canon.canonical` the texts CPython 3.12.1 and 3.13.0 really raise (recorded with
``scripts/pvm_interpreter_audit.py``), so they test every rule on any interpreter.
"""

from __future__ import annotations

import pytest

from cowboy_node.execution.meter import Meter
from cowboy_node.execution.pvm import PvmError, call_handler, canon, compile_actor

SOURCE = '''
def _cases():
    return {
        "splitlines_none": lambda: "a\\nb".splitlines(None),
        "splitlines_float": lambda: b"a\\nb".splitlines(1.5),
        "splitlines_huge": lambda: "a".splitlines(1 << 40),
        "splitlines_kw_none": lambda: bytearray(b"a").splitlines(keepends=None),
        "replace_count_keyword": lambda: "aaa".replace("a", "b", count=1),
        "replace_one_argument": lambda: "aaa".replace("a"),
        "find_keyword": lambda: "abc".find("a", x=1),
        "find_none": lambda: "abc".find(None),
        "bytes_count_no_argument": lambda: b"abc".count(),
        "startswith_too_many": lambda: "abc".startswith(1, 2, 3, 4),
        "hex_keyword": lambda: b"ab".hex(x=1),
        "from_bytes_keyword": lambda: int.from_bytes(b"a", "big", x=1),
        "zip_keyword": lambda: zip([1], x=1),
        "max_empty": lambda: max([]),
        "min_empty_key": lambda: min([], key=abs),
        "float_modulo": lambda: 1.5 % 0,
        "iter_sentinel": lambda: iter(1, 2),
        "chr_huge": lambda: chr(1 << 40),
        "list_index_no_argument": lambda: [].index(),
        "own_message": lambda: max(["x"], key=_raise_own),
    }


def _raise_own(x):
    raise ValueError("max() iterable argument is empty")


def run(payload):
    try:
        result = _cases()[payload.decode()]()
    except Exception as e:
        return repr(e).encode()
    return ("returned " + repr(result)).encode()


def bare(payload):
    return max([])
'''

#: CPython 3.11's outcome of each case: what version 1 gives on every interpreter.
EXPECTED = {
    "splitlines_none": "TypeError(\"'NoneType' object cannot be interpreted as an integer\")",
    "splitlines_float": "TypeError(\"'float' object cannot be interpreted as an integer\")",
    "splitlines_huge": "OverflowError('Python int too large to convert to C int')",
    "splitlines_kw_none": "TypeError(\"'NoneType' object cannot be interpreted as an integer\")",
    "replace_count_keyword": "TypeError('str.replace() takes no keyword arguments')",
    "replace_one_argument": "TypeError('replace expected at least 2 arguments, got 1')",
    "find_keyword": "TypeError('find() takes no keyword arguments')",
    "find_none": "TypeError('must be str, not NoneType')",
    "bytes_count_no_argument": "TypeError('count() takes at least 1 argument (0 given)')",
    "startswith_too_many": "TypeError('startswith() takes at most 3 arguments (4 given)')",
    "hex_keyword": "TypeError(\"'x' is an invalid keyword argument for hex()\")",
    "from_bytes_keyword": "TypeError(\"'x' is an invalid keyword argument for from_bytes()\")",
    "zip_keyword": "TypeError(\"'x' is an invalid keyword argument for zip()\")",
    "max_empty": "ValueError('max() arg is an empty sequence')",
    "min_empty_key": "ValueError('min() arg is an empty sequence')",
    "float_modulo": "ZeroDivisionError('float modulo')",
    "iter_sentinel": "TypeError('iter(v, w): v must be callable')",
    "chr_huge": "OverflowError('Python int too large to convert to C int')",
    # 3.11's own wording for list.index (the str methods' rewording is not applied to lists)
    "list_index_no_argument": "TypeError('index expected at least 1 argument, got 0')",
    # an actor's own message is never rewritten, even when it reads like a newer CPython's
    "own_message": "ValueError('max() iterable argument is empty')",
}


@pytest.fixture(scope="module")
def actor():  # type: ignore[no-untyped-def]
    return compile_actor(SOURCE, allowed_modules={})


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_builtin_outcome_is_cpython_3_11s(actor, case: str) -> None:  # type: ignore[no-untyped-def]
    out = call_handler(actor, "run", case.encode(), meter=Meter(10**7, 0)).decode()
    assert out == EXPECTED[case]


def test_uncaught_builtin_error_reaches_the_receipt_in_3_11s_words(actor) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PvmError) as e:
        call_handler(actor, "bare", b"", meter=Meter(10**7, 0))
    assert e.value.code == "handler_error"
    assert e.value.message.startswith("ValueError: max() arg is an empty sequence")


# --- the rules, fed the texts 3.12.1 / 3.13.0 raise -------------------------------------------------------

@pytest.mark.parametrize(("newer", "site", "v311"), [
    ("str.find() takes no keyword arguments", "text.find", "find() takes no keyword arguments"),
    ("bytearray.rindex() takes no keyword arguments", "text.rindex", "rindex() takes no keyword arguments"),
    ("count expected at least 1 argument, got 0", "text.count", "count() takes at least 1 argument (0 given)"),
    ("endswith expected at most 3 arguments, got 5", "text.endswith",
     "endswith() takes at most 3 arguments (5 given)"),
    ("index() argument 1 must be str, not None", "text.index", "must be str, not NoneType"),
    ("rfind() argument 1 must be str, not list", "text.rfind", "must be str, not list"),
    ("hex() got an unexpected keyword argument 'x'", "text.hex", "'x' is an invalid keyword argument for hex()"),
    ("to_bytes() got an unexpected keyword argument 'sep'", "other.to_bytes",
     "'sep' is an invalid keyword argument for to_bytes()"),
    ("zip() got an unexpected keyword argument 'key'", "zip", "'key' is an invalid keyword argument for zip()"),
    ("max() iterable argument is empty", "max", "max() arg is an empty sequence"),
    ("min() iterable argument is empty", "min", "min() arg is an empty sequence"),
    ("float modulo by zero", "%", "float modulo"),
    ("iter(object, sentinel): object must be callable", "iter", "iter(v, w): v must be callable"),
])
def test_newer_wording_is_rewritten_to_3_11s(newer: str, site: str, v311: str) -> None:
    assert canon.canonical(newer, site) == v311


@pytest.mark.parametrize(("text", "site"), [
    ("index expected at least 1 argument, got 0", "other.index"),  # list.index: 3.11 words it so itself
    ("find() takes no keyword arguments", "text.find"),  # already 3.11's
    ("make_int() got an unexpected keyword argument 'x'", "int"),  # a Python-level function: same everywhere
    ("max() iterable argument is empty", "sorted"),  # another builtin's site
    ("float modulo by zero", "max"),
])
def test_other_texts_are_left_alone(text: str, site: str) -> None:
    assert canon.canonical(text, site) == text


def test_the_pinned_builtins_still_look_and_subclass_as_before() -> None:
    # chr, iter and zip are wrapped to pin them; what actors could do with them before is unchanged (values as
    # CPython 3.11.7 gave them before the wrapping): the reprs, isinstance, and subclassing zip
    source = (
        "class Z(zip):\n    pass\n\n"
        "def run(payload):\n"
        "    return repr([repr(zip), repr(chr), repr(iter), isinstance(zip([1]), zip), list(Z([1, 2], 'ab')),\n"
        "                 callable(chr), isinstance(Z([1]), zip)]).encode()\n")
    out = call_handler(compile_actor(source, allowed_modules={}), "run", b"", meter=Meter(10**7, 0)).decode()
    assert out == ("[\"<class 'zip'>\", '<builtin_function_or_method object>', '<builtin_function_or_method object>', "
                   "True, [(1, 'a'), (2, 'b')], True, True]")
