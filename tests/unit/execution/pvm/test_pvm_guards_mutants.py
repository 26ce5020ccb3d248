"""PVM guards (``cowboy_node/execution/pvm/guards.py``): rules found by mutation survivors (issue 31).

Each test states one rule of docs/pvm.md ("Dynamic costs", "Limits", the sandbox rules) that the module's
earlier tests did not hold. Two kinds of test:

- actor programs run through ``call_handler``: what must be refused (halt code and message) or allowed, with
  the value CPython's semantics give;
- the guard called directly with a fresh :class:`Ctx` whose meter starts at 0, so the cycles charged are
  exactly the documented dynamic cost of that one operation (``bytes(n) = n >> 3``, ``items(n) = n``,
  ``words(b) = max(1, ceil(b / 64))``, ``mul(a, b) = words(a) * words(b) >> 4``, ``conv(d) = d * d >> 12``).
"""

from __future__ import annotations

import operator
import textwrap

import pytest

from cowboy_node.execution.meter import Meter
from cowboy_node.execution.pvm import Limits, PvmError, call_handler, compile_actor, guards
from cowboy_node.execution.pvm.ctx import Ctx
from cowboy_node.execution.pvm.pvm_errors import PvmHalt

BIG = 10_000_000


def run(body: str, payload: bytes = b"", limits: Limits | None = None) -> bytes:
    """Run ``def handler(payload):`` + ``body`` (indented by the caller's dedent) and return its bytes."""
    src = "def handler(payload):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    return call_handler(compile_actor(src), "handler", payload, meter=Meter(BIG, 0), limits=limits or Limits())


def value(expr: str, limits: Limits | None = None) -> str:
    """``repr`` of one expression evaluated by an actor."""
    return run(f"return repr({expr}).encode()\n", limits=limits).decode()


def halted(body: str, limits: Limits | None = None) -> PvmError:
    with pytest.raises(PvmError) as info:
        run(body, limits=limits)
    return info.value


def fresh(**limits: int) -> Ctx:
    return Ctx(Meter(BIG, 0), Limits(**limits))


def used(ctx: Ctx) -> int:
    return ctx.meter.cycles_used


def halt_of(fn: object, *args: object) -> PvmHalt:
    with pytest.raises(PvmHalt) as info:
        fn(*args)  # type: ignore[operator]
    return info.value


TOP = "((2 ** 4095 - 1) * 2 + 1)"  # 2**4096 - 1: the largest integer of max_int_bits (4096) bits


# --- integers: the max_int_bits bound and its messages ---------------------------------------------------
def test_int_subtraction_past_max_int_bits_halts() -> None:
    # -(2**4096 - 1) is allowed; one less has 4097 bits (docs/pvm.md: every operation is bounded)
    assert run(f"x = -{TOP}\nreturn str(x.bit_length()).encode()\n") == b"4096"
    err = halted(f"x = -{TOP} - 1\nreturn b''\n")
    assert err.code == "int_too_large"
    assert halt_of(guards.sub, fresh(), -(2**4096 - 1), 1).code == "int_too_large"
    assert guards.sub(fresh(), -(2**4096 - 1), 0) == -(2**4096 - 1)


def test_an_oversized_product_is_refused_before_it_is_computed() -> None:
    # the operands' bit lengths are checked first: (2**4095)**2 has 8191 bits
    err = halted("x = 2 ** 4095\ny = x * x\nreturn b''\n")
    assert err.code == "int_too_large"
    assert "product of 4096- and 4096-bit integers" in err.message
    ctx = fresh()
    halt = halt_of(guards.mul, ctx, 2**4095, 2**4095)
    assert halt.code == "int_too_large" and used(ctx) == 0  # nothing charged for a refused product
    # (2**2047) * (2**2048) = 2**4095 has 4096 bits: allowed, charged mul(2048, 2049) = 32 * 33 >> 4 = 66
    ctx = fresh()
    assert guards.mul(ctx, 2**2047, 2**2048) == 2**4095 and used(ctx) == 66


def test_an_oversized_power_is_refused_before_it_is_computed() -> None:
    err = halted("x = 2 ** 4096\nreturn b''\n")
    assert err.code == "int_too_large" and "2-bit integer to the power 4096" in err.message
    ctx = fresh()
    assert halt_of(guards.power, ctx, 2, 4096).code == "int_too_large" and used(ctx) == 0
    # 2 ** 4095 has exactly 4096 bits: charged bits(e) x mul(2 * 4095, 2 * 4095) = 12 x (128 * 128 >> 4)
    ctx = fresh()
    assert guards.power(ctx, 2, 4095) == 1 << 4095 and used(ctx) == 12 * (128 * 128 >> 4)


def test_power_of_zero_one_and_minus_one_is_free() -> None:
    for a, expect in ((0, 0), (1, 1), (-1, 1)):
        ctx = fresh()
        assert guards.power(ctx, a, 10**1000) == expect and used(ctx) == 0  # 10**1000 is even
    ctx = fresh()
    assert guards.power(ctx, 12345, 0) == 1 and used(ctx) == 0


def test_float_or_negative_exponent_is_forbidden() -> None:
    for expr in ("2 ** 0.5", "2.0 ** 2", "2 ** -1"):
        err = halted(f"x = {expr}\nreturn b''\n")
        assert err.code == "forbidden", expr


def test_modular_power_is_charged_per_exponent_bit() -> None:
    # pow(a, e, m): 2 x max(1, bits e) x mul(bits m, bits m); m of 1000 bits -> words 16 -> 256 >> 4 = 16
    ctx = fresh()
    m = (1 << 999) + 7
    assert guards.power(ctx, 3, 1000, m) == pow(3, 1000, m) and used(ctx) == 2 * 10 * 16
    ctx = fresh()
    assert guards.power(ctx, 3, 0, m) == 1 and used(ctx) == 2 * 1 * 16


def test_left_shift_is_charged_by_the_result_size() -> None:
    # a << n: words(bits(a) + n) >> 4; 1 << 4000 -> words(4001) = 63 -> 3 cycles
    ctx = fresh()
    assert guards.lshift(ctx, 1, 4000) == 1 << 4000 and used(ctx) == 63 >> 4
    ctx = fresh()
    assert guards.lshift(ctx, 3, 4094) == 3 << 4094 and used(ctx) == 64 >> 4
    assert halt_of(guards.lshift, fresh(), 3, 4095).code == "int_too_large"
    ctx = fresh()
    assert guards.lshift(ctx, 0, 10**6) == 0 and used(ctx) == 0


def test_big_integer_division_gives_cpythons_results_and_is_charged() -> None:
    # int * / // % divmod: mul(bits a, bits b); 2**1000 has 1001 bits (16 words), 2**500 501 bits (8 words)
    a, b = (1 << 1000) + 12345, (1 << 500) + 3
    for fn, expect in ((guards.floordiv, a // b), (guards.mod, a % b), (guards.divmod_, divmod(a, b)),
                       (guards.truediv, a / b)):
        ctx = fresh()
        assert fn(ctx, a, b) == expect
        assert used(ctx) == 16 * 8 >> 4
    assert value(f"({1 << 100} + 5) // {1 << 90}") == "1024"
    assert value(f"({1 << 100} + 5) % {1 << 90}") == "5"
    assert value(f"divmod({1 << 100} + 5, {1 << 90})") == "(1024, 5)"


# --- sequences: concatenation and repetition are checked against the limits ------------------------------
def test_list_and_tuple_concatenation_is_checked_and_charged_on_the_total() -> None:
    small = Limits(max_collection_items=10)
    assert halted("x = [0] * 6 + [1] * 6\nreturn b''\n", small).code == "memory_limit"
    assert halted("x = (0,) * 6 + (1,) * 6\nreturn b''\n", small).code == "memory_limit"
    assert value("[0] * 4 + [1] * 6", small) == repr([0] * 4 + [1] * 6)
    for a, b in (([0] * 3, [1] * 4), ((0,) * 3, (1,) * 4)):
        ctx = fresh()
        assert guards.add(ctx, a, b) == a + b and used(ctx) == 7
    ctx = fresh()
    assert guards.add(ctx, "a" * 40, "c" * 24) == "a" * 40 + "c" * 24 and used(ctx) == 64 >> 3


def test_int_times_sequence_is_checked_like_sequence_times_int() -> None:
    small = Limits(max_collection_items=10, max_bytes_object=10)
    for expr in ("11 * [0]", "11 * (0,)", "11 * 'x'", "11 * b'x'", "[0] * 11", "(0,) * 11", "'x' * 11"):
        assert halted(f"x = {expr}\nreturn b''\n", small).code == "memory_limit", expr
    assert run("return str(len(10 * [0]) + len(10 * 'x')).encode()\n", limits=small) == b"20"
    assert value("3 * (1, 2)") == "(1, 2, 1, 2, 1, 2)"
    assert value("-2 * [1]") == "[]"
    # int times float is plain arithmetic, not a repetition
    assert value("3 * 2.5") == "7.5" and value("2.5 * 3") == "7.5"
    ctx = fresh()
    assert guards.mul(ctx, 4, [1, 2]) == [1, 2] * 4 and used(ctx) == 8
    ctx = fresh()
    assert guards.mul(ctx, 40, "ab") == "ab" * 40 and used(ctx) == 80 >> 3


# --- in-place operators ---------------------------------------------------------------------------------
def test_dict_or_assign_updates_the_same_dict_and_other_operators_refuse_dicts() -> None:
    out = run("d = {1: 2}\ne = d\ne |= {3: 4}\nreturn repr(d).encode()\n")
    assert out == b"{1: 2, 3: 4}"
    out = run("d = {1: 2}\ntry:\n    d += {3: 4}\nexcept TypeError:\n    return b'refused'\nreturn repr(d).encode()\n")
    assert out == b"refused"


# --- comparisons ----------------------------------------------------------------------------------------
def test_bytes_comparison_is_charged_per_256_bytes_of_the_shorter() -> None:
    ctx = fresh()
    assert guards.compare(ctx, operator.lt, b"a" * 4096, b"b" * 4096) is True and used(ctx) == 4096 >> 8
    ctx = fresh()
    assert guards.compare(ctx, operator.eq, b"a" * 1024, bytearray(b"a" * 8192)) is False
    assert used(ctx) == 1024 >> 8


# --- membership -----------------------------------------------------------------------------------------
class _NoScan:
    """A needle that fails the test if CPython compares it with anything (a scan in C, unmetered)."""

    def __eq__(self, other: object) -> bool:
        raise AssertionError("membership scanned the container in C")

    __hash__ = object.__hash__


def test_membership_in_a_range_is_answered_without_a_scan() -> None:
    # CPython scans a range item by item for a needle that is not an int (in C, unmetered)
    assert guards.contains(fresh(), _NoScan(), range(10**12)) is False
    assert value("2.0 in range(5)") == "True"
    assert value("2.5 in range(5)") == "False"
    assert value("'a' in range(3)") == "False"
    assert value("True in range(3)") == "True"


def test_membership_in_a_list_is_a_charged_scan_not_a_key_lookup() -> None:
    # x in list: scalar x: items(len); tuples are fine as list items (only dict keys refuse them)
    assert value("(1, 2) in [(1, 2)]") == "True"
    assert value("[1] in [[0], [1]]") == "True"
    ctx = fresh()
    assert guards.contains(ctx, 5, list(range(10))) is True and used(ctx) == 10
    ctx = fresh()
    assert guards.contains(ctx, 5, tuple(range(10))) is True and used(ctx) == 10


def test_membership_in_an_iterator_charges_each_item_consumed() -> None:
    ctx = fresh()
    assert guards.contains(ctx, 3, iter([1, 2, 3, 4])) is True and used(ctx) == 3
    assert value("(1, 2) in iter([(0, 0), (1, 2)])") == "True"
    assert value("5 in iter([1, 2])") == "False"


def test_membership_in_a_dict_checks_the_key_and_is_free() -> None:
    ctx = fresh()
    assert guards.contains(ctx, 1, {1: 2}) is True and used(ctx) == 0
    with pytest.raises(TypeError):
        guards.contains(fresh(), (1, 2), {1: 2})
    assert value("1 in {1: 2}.keys()") == "True"


# --- text -----------------------------------------------------------------------------------------------
def test_str_of_an_int_below_2_to_the_200_is_free() -> None:
    for n in (0, 7, -12345, 2**199, -(2**199) + 1, 2**200 - 1):
        ctx = fresh()
        assert guards.make_str(ctx, n) == repr(n) and used(ctx) == 0


def test_str_of_bytes_with_an_encoding_or_error_handler_decodes() -> None:
    assert value("str(b'abc', 'ascii')") == "'abc'"
    assert value("str(b'abc', errors='strict')") == "'abc'"
    assert value("str(b'abc', encoding='utf-8')") == "'abc'"
    assert value("str(b'abc')") == '"b\'abc\'"'


def test_join_may_produce_exactly_max_bytes_object() -> None:
    limits = Limits(max_bytes_object=100)
    # nine pieces of 10 characters and one of 1, joined by 9 commas: 100 characters
    body = "parts = ['x' * 10] * 9 + ['x' * {n}]\nreturn str(len(','.join(parts))).encode()\n"
    assert run(body.format(n=1), limits=limits) == b"100"
    assert halted(body.format(n=2), limits).code == "memory_limit"


def test_join_of_an_iterator_is_charged_items_then_the_joined_length() -> None:
    # items per chunk consumed (8), then bytes(16 characters + 7 separators) = 23 >> 3 = 2
    ctx = fresh()
    assert guards.join(ctx, ",", iter(["ab"] * 8)) == ",".join(["ab"] * 8) and used(ctx) == 8 + (23 >> 3)
    ctx = fresh()
    assert guards.join(ctx, "--", iter(["abc"] * 5)) == "--".join(["abc"] * 5) and used(ctx) == 5 + (23 >> 3)


# --- builtins -------------------------------------------------------------------------------------------
def test_min_and_max_of_one_iterable_pick_among_its_items() -> None:
    assert value("max([3, 1, 2])") == "3" and value("min((3, 1, 2))") == "1"
    assert value("max(3, 1, 2)") == "3" and value("min(3, 1, 2)") == "1"
    assert value("max([], default=7)") == "7"
    ctx = fresh()
    assert guards.max_(ctx, [3, 1, 2]) == 3 and used(ctx) == 3  # items(3); scalars are not walked


def test_all_and_any_give_cpythons_answers() -> None:
    assert value("all([1, 2])") == "True" and value("all([1, 0])") == "False" and value("all([])") == "True"
    assert value("any([0, 0])") == "False" and value("any([0, 1])") == "True" and value("any([])") == "False"
    ctx = fresh()
    assert guards.all_(ctx, iter([1] * 5000)) is True and used(ctx) == 5000
    ctx = fresh()
    assert guards.any_(ctx, iter([0] * 5000)) is False and used(ctx) == 5000


def test_round_to_negative_digits_rounds_to_tens_hundreds() -> None:
    assert value("round(1234, -1)") == "1230"
    assert value("round(1234, -2)") == "1200"
    assert value("round(-1250, -2)") == "-1200"  # half to even
    assert value("round(5, -1)") == "0"
    assert value("round(15, -1)") == "20"
    assert value("round(7, -100)") == "0"
    assert value(f"round(12345, -{10**20})") == "0"
    assert value(f"round(1.5, {10**20})") == "1.5"  # ndigits clamped to 4096, not an OverflowError


def test_isinstance_type_tuples_hold_up_to_255_entries() -> None:
    # docs/pvm.md: "may nest 8 levels and hold 256 entries in total"; the count includes the outer tuple
    assert value("isinstance(1, (str,) * 254 + (int,))") == "True"
    out = run("try:\n    isinstance(1, (str,) * 300)\nexcept TypeError as e:\n    return str(e).encode()\n")
    assert b"256 entries" in out


def test_isinstance_type_tuples_may_nest_8_levels() -> None:
    nested = "int"
    for _ in range(8):
        nested = f"({nested},)"
    assert value(f"isinstance(1, {nested})") == "True"  # int inside 8 tuples
    out = run(f"try:\n    isinstance(1, ({nested},))\nexcept TypeError as e:\n    return str(e).encode()\n")
    assert b"nest 8 levels" in out


def test_str_of_an_int_from_2_to_the_200_is_rendered_and_charged() -> None:
    # 1 per node + conv(floor(bits x 0.30103) + 2) + bytes(len result)
    for n, charge in ((2**200, 1 + (62 * 62 >> 12) + (61 >> 3)), (2**300, 1 + (92 * 92 >> 12) + (91 >> 3)),
                      (-(2**300), 1 + (92 * 92 >> 12) + (92 >> 3))):
        ctx = fresh()
        assert guards.make_str(ctx, n) == repr(n) and used(ctx) == charge


def test_join_charges_every_separator_and_joins_a_single_piece() -> None:
    # 10 pieces of 8 characters, 9 separators of 4: bytes(80 + 36) = 14, after items(10)
    ctx = fresh()
    assert guards.join(ctx, "----", iter(["a" * 8] * 10)) == "----".join(["a" * 8] * 10) and used(ctx) == 10 + 14
    ctx = fresh()
    assert guards.join(ctx, ",", iter(["a" * 16])) == "a" * 16 and used(ctx) == 1 + (16 >> 3)
    assert value("','.join([])") == "''"


def test_comparing_a_container_with_itself_is_charged_its_length() -> None:
    ctx = fresh()
    items = list(range(7))
    assert guards.compare(ctx, operator.eq, items, items) is True and used(ctx) == 7
    ctx = fresh()
    mapping = {1: 2, 3: 4}
    assert guards.compare(ctx, operator.eq, mapping, mapping) is True and used(ctx) == 2
    assert value("[[1], [2]] == [[1], [2]]") == "True"
    assert run("x = [1, 2]\nreturn repr(x == x).encode()\n") == b"True"


def test_bitwise_operators_on_bools_give_bools() -> None:
    assert value("True ^ True") == "False" and value("True ^ False") == "True"
    assert value("True & False") == "False" and value("False | True") == "True"


def test_in_place_operators_other_than_add_and_mul_refuse_lists() -> None:
    for op in ("-=", "|=", "&=", "/=", "//=", "%=", "^="):
        body = f"x = [1]\ntry:\n    x {op} [1]\nexcept TypeError:\n    return b'refused'\nreturn repr(x).encode()\n"
        assert run(body) == b"refused", op
    assert run("x = [1]\nx += (2,)\nx *= 2\nreturn repr(x).encode()\n") == b"[1, 2, 1, 2]"


def test_dict_keyword_entries_are_limited_on_the_total() -> None:
    small = Limits(max_collection_items=3)
    assert halted("d = dict(a=1, b=2, c=3, d=4)\nreturn b''\n", small).code == "memory_limit"
    assert halted("d = {'x': 0}\nd.update(a=1, b=2, c=3)\nreturn b''\n", small).code == "memory_limit"
    assert run("d = dict({'x': 0}, a=1, b=2)\nreturn str(len(d)).encode()\n", limits=small) == b"3"
    ctx = fresh()
    assert guards.make_dict(ctx, a=1, b=2) == {"a": 1, "b": 2} and used(ctx) == 2


def test_repeating_a_sequence_by_a_non_int_is_cpythons_type_error() -> None:
    body = "try:\n    x = {expr}\nexcept TypeError as e:\n    return str(e).encode()\nreturn b'allowed'\n"
    for expr in ("'ab' * 1.5", "[1] * 1.5", "1.5 * (1,)"):
        assert b"can't multiply sequence by non-int of type 'float'" in run(body.format(expr=expr)), expr


def test_encode_is_checked_at_four_bytes_per_character() -> None:
    small = Limits(max_bytes_object=40)
    assert run("return str(len(('x' * 10).encode())).encode()\n", limits=small) == b"10"
    assert halted("b = ('x' * 11).encode()\nreturn b''\n", small).code == "memory_limit"
    ctx = fresh()
    assert guards.encode(ctx, "x" * 80) == b"x" * 80 and used(ctx) == (4 * 80) >> 3
    ctx = fresh()
    assert guards.decode(ctx, b"x" * 80) == "x" * 80 and used(ctx) == 80 >> 3


def test_float_of_text_and_numbers() -> None:
    assert value("float('1.5')") == "1.5" and value("float(b'2.5')") == "2.5" and value("float(3)") == "3.0"
    assert value("float(bytearray(b'-0.25'))") == "-0.25"
    ctx = fresh()
    assert guards.make_float(ctx, "1" * 80) == float("1" * 80) and used(ctx) == 80 >> 3
    assert halted("x = float('1' * 11)\nreturn b''\n", Limits(max_bytes_object=10)).code == "memory_limit"


def test_membership_in_dict_items_charges_only_real_pairs() -> None:
    # a needle that is not a 2-tuple is never an item: answered without a key check or a walk
    ctx = fresh()
    assert guards.contains(ctx, (1, 2, 3), {1: 2}.items()) is False and used(ctx) == 0
    assert guards.contains(fresh(), ((1, 2), 3, 4), {1: 2}.items()) is False  # no key check of (1, 2)
    ctx = fresh()
    assert guards.contains(ctx, (1, 2), {1: 2}.items()) is True and used(ctx) == 1  # weight(2): one node
    assert value("(1, 2) in {1: 2}.items()") == "True" and value("(1, 3) in {1: 2}.items()") == "False"


def test_dict_union_is_checked_on_the_total() -> None:
    small = Limits(max_collection_items=3)
    assert halted("d = {1: 1, 2: 2} | {3: 3, 4: 4}\nreturn b''\n", small).code == "memory_limit"
    ctx = fresh()
    assert guards.bitor(ctx, {1: 1, 2: 2}, {3: 3}) == {1: 1, 2: 2, 3: 3} and used(ctx) == 3


def test_dict_update_from_pairs_is_limited_on_the_total() -> None:
    small = Limits(max_collection_items=3)
    assert halted("d = {'x': 0}\nd.update([('a', 1), ('b', 2), ('c', 3)])\nreturn b''\n", small).code == "memory_limit"
    assert value("dict([])") == "{}" and value("dict([('a', 1)])") == "{'a': 1}"


def test_list_of_an_iterator_is_consumed_in_charged_chunks_of_4096() -> None:
    ctx = fresh()
    assert guards.make_list(ctx, iter(range(5000))) == list(range(5000)) and used(ctx) == 5000
    assert value("list(iter(range(3)))") == "[0, 1, 2]"
    small = Limits(max_collection_items=5)
    assert run("return str(len(list(iter(range(5))))).encode()\n", limits=small) == b"5"
    assert halted("x = list(iter(range(6)))\nreturn b''\n", small).code == "memory_limit"
    # past the limit the halt comes after the chunk that crossed it: two chunks of 4096 were charged
    ctx = fresh(max_collection_items=5000)
    assert halt_of(guards.make_list, ctx, iter(range(10**6))).code == "memory_limit" and used(ctx) == 2 * 4096


def test_bytes_of_text_with_an_encoding() -> None:
    assert value("bytes('ab', 'utf-8')") == "b'ab'"
    assert value("bytearray('\\xe9', 'latin-1')") == "bytearray(b'\\xe9')"
    assert value("bytes('\\xe9', errors='strict')") == "b'\\xc3\\xa9'"  # utf-8 by default
    out = run("try:\n    bytes(b'ab', 'utf-8')\nexcept TypeError as e:\n    return str(e).encode()\n")
    assert out == b"encoding without a string argument"


def test_only_the_three_codecs_are_accepted() -> None:
    body = "try:\n    x = {expr}\nexcept LookupError as e:\n    return str(e).encode()\nreturn repr(x).encode()\n"
    for expr in ("'x'.encode('cp1252')", "'x'.encode('utf_16')", "b'x'.decode('rot13')", "'x'.encode(5)"):
        assert b"is not supported" in run(body.format(expr=expr)), expr
    assert run(body.format(expr="'x'.encode('UTF_8')")) == b"b'x'"
    assert run(body.format(expr="'x'.encode('latin1', 'ignore')")) == b"b'x'"
    assert b"error handler" in run(body.format(expr="'x'.encode('ascii', 'backslashreplace')"))


def test_int_of_text_is_decimal_by_default_and_limited_in_length() -> None:
    assert value("int('19')") == "19" and value("int(b'19')") == "19" and value("int('\\u0661\\u0669')") == "19"
    assert value("int('ff', 16)") == "255"
    # 2 x max_int_bits + 16 = 8208 characters are read (charged conv(8208)); one more halts first
    ctx = fresh()
    assert guards.make_int(ctx, " " * 8207 + "7") == 7 and used(ctx) == (8208 * 8208) >> 12
    err = halted("x = int(' ' * 8208 + '7')\nreturn b''\n")
    assert err.code == "int_too_large" and "integer text of 8209 characters" in err.message


def test_a_dict_items_membership_walk_over_the_cycles_left_halts() -> None:
    ctx = Ctx(Meter(10, 0), Limits())
    assert halt_of(guards.contains, ctx, (1, [0] * 100), {1: 2}.items()).code == "out_of_cycles"


def test_adding_mismatched_types_is_cpythons_type_error() -> None:
    body = "try:\n    x = {expr}\nexcept TypeError as e:\n    return str(e).encode()\nreturn b'allowed'\n"
    assert b"unsupported operand type(s) for +" in run(body.format(expr="1.5 + 'a'"))
    assert b"can only concatenate list" in run(body.format(expr="[1] + 'a'"))


def test_shifts_and_sums_past_max_int_bits_halt() -> None:
    # safety: neither a shift by 1 nor a sum may produce an integer over 4096 bits
    assert halted("x = (2 ** 4095) << 1\nreturn b''\n").code == "int_too_large"
    assert halted(f"x = sum([{TOP}, 1])\nreturn b''\n").code == "int_too_large"
    assert halted(f"x = sum([{TOP}, {TOP}, [1]])\nreturn b''\n").code == "int_too_large"  # the partial sum
    assert value(f"sum([{TOP}, {TOP}, -{TOP}]) == {TOP}") == "True"  # one sum whose result is in range
    ctx = fresh()
    assert guards.lshift(ctx, 2**4095, 0) == 2**4095 and used(ctx) == 0  # free unless n > 0


def test_float_arithmetic_through_the_guards() -> None:
    assert value("2.5 * 2.0") == "5.0" and value("7 / 2.0") == "3.5" and value("7.5 // 2") == "3.0"
    assert value("True - 1") == "0" and value("3.0 - 1.0") == "2.0"
    assert value("round(1234.5, -2)") == "1200.0" and value("round(2.5)") == "2" and value("round(7)") == "7"
    assert value("round(1.25, 1)") == "1.2"
    assert value(f"round(1234.5, -{10**20})") == "0.0"
    out = run("try:\n    round(2.5, 1.5)\nexcept TypeError:\n    return b'refused'\nreturn b''\n")
    assert out == b"refused"


def test_set_operations_on_dict_views_are_refused_from_either_side() -> None:
    body = "d = {{1: 2}}\ntry:\n    x = {expr}\nexcept TypeError as e:\n    return str(e).encode()\nreturn b''\n"
    for expr in ("1 - d.keys()", "d.keys() - [1]", "[1] & d.keys()", "d.keys() | [1]", "d.items() ^ [1]"):
        assert b"set operations on dict views" in run(body.format(expr=expr)), expr
    out = run("try:\n    x = {1: 2} | 5\nexcept TypeError as e:\n    return str(e).encode()\nreturn b''\n")
    assert b"unsupported operand type(s) for |" in out


def test_str_and_bytes_concatenation_is_checked_on_the_total() -> None:
    small = Limits(max_bytes_object=10)
    for expr in ("'x' * 6 + 'y' * 6", "b'x' * 6 + b'y' * 6", "bytearray(6) + b'y' * 6"):
        assert halted(f"x = {expr}\nreturn b''\n", small).code == "memory_limit", expr
    ctx = fresh()
    assert guards.add(ctx, bytearray(b"a" * 40), b"b" * 24) == bytearray(b"a" * 40 + b"b" * 24)
    assert used(ctx) == 64 >> 3


def test_in_place_operators_on_lists_bytearrays_and_dicts_mutate_the_object() -> None:
    body = "x = {init}\ny = x\ny {op} {arg}\nreturn repr(x).encode()\n"
    assert run(body.format(init="[1]", op="*=", arg="3")) == b"[1, 1, 1]"
    assert run(body.format(init="[1]", op="+=", arg="[2]")) == b"[1, 2]"
    assert run(body.format(init="bytearray(b'a')", op="+=", arg="b'b'")) == b"bytearray(b'ab')"
    assert run(body.format(init="bytearray(b'ab')", op="*=", arg="2")) == b"bytearray(b'abab')"
    for op in ("&=", "^=", "*=", "-="):
        refused = "x = {1: 2}\ntry:\n    x " + op + " {1: 2}\nexcept TypeError:\n    return b'refused'\nreturn b''\n"
        assert run(refused) == b"refused", op
    small = Limits(max_bytes_object=10)
    assert halted("x = bytearray(6)\nx += b'y' * 6\nreturn b''\n", small).code == "memory_limit"
    assert halted("x = bytearray(6)\nx *= 2\nreturn b''\n", small).code == "memory_limit"
    ctx = fresh()
    ba = bytearray(b"a" * 8)
    assert guards.inplace(ctx, "+", ba, b"b" * 16) is ba and used(ctx) == 16 >> 3
    ctx = fresh()
    items = [0]
    assert guards.inplace(ctx, "+", items, iter(range(5))) is items and used(ctx) == 5


def test_dict_from_a_dict_is_limited_and_checks_every_key() -> None:
    small = Limits(max_collection_items=3)
    assert halted("d = {'x': 0}\nd.update({'a': 1, 'b': 2, 'c': 3})\nreturn b''\n", small).code == "memory_limit"
    assert value("dict({1: 2})") == "{1: 2}"
    with pytest.raises(TypeError):
        guards.update_dict(fresh(), {}, {(1, 2): 3})  # a host-made dict with a tuple key
    ctx = fresh()
    assert guards.make_dict(ctx, {1: 2, 3: 4}) == {1: 2, 3: 4} and used(ctx) == 2


def test_tuple_of_a_tuple_is_free_and_the_same_object() -> None:
    t = (1, 2, 3)
    ctx = fresh()
    assert guards.make_tuple(ctx, t) is t and used(ctx) == 0
    assert value("tuple([1, 2])") == "(1, 2)"


def test_membership_details_keys_host_objects_and_items() -> None:
    body = "try:\n    x = {expr}\nexcept TypeError:\n    return b'refused'\nreturn repr(x).encode()\n"
    assert run(body.format(expr="(1, 2) in {1: 2}.keys()")) == b"refused"
    assert run(body.format(expr="((1,), 2) in {1: 2}.items()")) == b"refused"
    assert run(body.format(expr="(1, (2,)) in {1: (2,)}.items()")) == b"True"
    assert run(body.format(expr="(1,) in {1: 2}.items()")) == b"False"

    class Box:
        def __contains__(self, item: object) -> bool:
            return item == 1

    assert guards.contains(fresh(), 1, Box()) is True
    ctx = fresh()
    assert guards.contains(ctx, (1, [0] * 10), {1: [0] * 10}.items()) is True and used(ctx) == 11


def test_bytes_of_a_count() -> None:
    assert value("bytes(0)") == "b''" and value("bytes(3)") == "b'\\x00\\x00\\x00'"
    out = run("try:\n    bytes(-1)\nexcept ValueError as e:\n    return str(e).encode()\n")
    assert out == b"negative count"


def test_str_of_minus_2_to_the_200_is_charged() -> None:
    ctx = fresh()
    assert guards.make_str(ctx, -(2**200)) == repr(-(2**200)) and used(ctx) == 1 + 0 + (62 >> 3)


def test_truth_scans_read_past_a_full_chunk() -> None:
    assert guards.all_(fresh(), iter([1] * 4096 + [0])) is False
    assert guards.any_(fresh(), iter([0] * 4096 + [1])) is True


def test_join_limit_counts_no_separator_for_one_piece_and_charges_each() -> None:
    assert run("return str(len(','.join(['x' * 100]))).encode()\n", limits=Limits(max_bytes_object=100)) == b"100"
    ctx = fresh()
    assert guards.join(ctx, "-" * 8, iter(["a" * 8] * 2)) == "a" * 8 + "-" * 8 + "a" * 8 and used(ctx) == 2 + 3
    ctx = fresh()
    assert guards.join(ctx, "-" * 8, iter(["a" * 16])) == "a" * 16 and used(ctx) == 1 + 2


def test_sorting_and_extremes_walk_what_they_compare() -> None:
    # sorted(x, key): items(n) + n x bit_length(n) + the walk of each non-scalar key result (2 nodes: [x])
    ctx = fresh()
    assert guards.sorted_(ctx, [3, 1, 2], key=lambda x: [x]) == [1, 2, 3] and used(ctx) == 3 + 3 * 2 + 3 * 2
    ctx = fresh()
    assert guards.sorted_(ctx, [3, 1, 2], key=lambda x: -x) == [3, 2, 1] and used(ctx) == 3 + 3 * 2
    # only scalars (all four kinds): no walk; the sort itself then fails on None
    ctx = fresh()
    with pytest.raises(TypeError):
        guards.sorted_(ctx, [1, 2.0, True, None])
    assert used(ctx) == 4 + 4 * 3
    # min/max without a key walk the items: the list node and its two strings
    ctx = fresh()
    assert guards.max_(ctx, ["a", "b"]) == "b" and used(ctx) == 2 + 3
    ctx = fresh()
    assert guards.max_(ctx, ["a", "b"], key=len) == "a" and used(ctx) == 2
    # a key result heavier than the cycles left halts
    ctx = Ctx(Meter(10, 0), Limits())
    assert halt_of(lambda: guards.sorted_(ctx, [1, 2], key=lambda x: [0] * 100)).code == "out_of_cycles"


def test_repeating_in_place_by_a_non_int_is_cpythons_type_error() -> None:
    body = "x = {init}\ntry:\n    x *= 1.5\nexcept TypeError as e:\n    return str(e).encode()\nreturn b'allowed'\n"
    for init in ("[1]", "bytearray(b'a')"):
        assert b"can't multiply sequence by non-int of type 'float'" in run(body.format(init=init)), init


def test_unpacking_an_oversized_range_names_max_collection_items() -> None:
    # docs/pvm.md, halt codes: "memory_limit: N items exceed max_collection_items 1000000"
    small = Limits(max_collection_items=3)
    for body in ("x = []\nx += range(4)\n", "x = [*range(4)]\n", "x = [0]\nx[0:1] = range(4)\n"):
        err = halted(body + "return b''\n", small)
        assert err.code == "memory_limit" and "4 items exceed max_collection_items 3" in err.message, body
    ctx = fresh()
    assert guards.seq(ctx, range(5)) == [0, 1, 2, 3, 4] and used(ctx) == 5
    ctx = fresh()
    t = (1, 2)
    assert guards.seq(ctx, t) is t and used(ctx) == 2


def test_int_and_float_arithmetic_is_not_bounded_like_an_int_result() -> None:
    # the max_int_bits bound is on integers: an int plus an infinite float is the float
    assert value("1 + float('inf')") == "inf" and value("float('inf') + 1") == "inf"
    assert value("1 - float('inf')") == "-inf" and value("float('-inf') - 1") == "-inf"


def test_comparing_text_with_a_container_compares_no_content_and_is_free() -> None:
    # bytes == list is decided by the types alone (CPython compares no item), so there is nothing to charge
    ctx = fresh()
    assert guards.compare(ctx, operator.eq, b"x" * 1024, [0] * 1024) is False and used(ctx) == 0
    ctx = fresh()
    assert guards.compare(ctx, operator.ne, (0,) * 1024, "x" * 1024) is True and used(ctx) == 0


def test_sorting_without_a_key_walks_non_scalar_items() -> None:
    # items(2) + the walk (outer list, [2], 2, [1], 1: 5 nodes) + 2 x bit_length(2)
    ctx = fresh()
    assert guards.sorted_(ctx, [[2], [1]]) == [[1], [2]] and used(ctx) == 2 + 5 + 2 * 2


def test_membership_in_dict_values_is_a_charged_scan() -> None:
    ctx = fresh()
    assert guards.contains(ctx, 5, {i: i for i in range(10)}.values()) is True and used(ctx) == 10


def test_repeating_once_is_charged_for_the_copy() -> None:
    ctx = fresh()
    assert guards.mul(ctx, "a" * 80, 1) == "a" * 80 and used(ctx) == 80 >> 3
    ctx = fresh()
    assert guards.mul(ctx, [0] * 5, 1) == [0] * 5 and used(ctx) == 5


def test_a_product_one_bit_over_is_refused_before_it_is_computed() -> None:
    err = halted("x = 2 ** 2048\ny = x * x\nreturn b''\n")  # 2**4096: 4097 bits
    assert err.code == "int_too_large" and "product of 2049- and 2049-bit integers" in err.message


def test_constructors_without_arguments() -> None:
    assert value("float()") == "0.0" and value("int()") == "0" and value("str()") == "''"
    assert value("list()") == "[]" and value("tuple()") == "()" and value("dict()") == "{}"
    assert value("bytes()") == "b''" and value("bytearray()") == "bytearray(b'')"


def test_in_place_modulo_and_and_by_an_int_refuse_lists() -> None:
    for op in ("%=", "&=", "**=", "<<=", "^="):
        body = f"x = [1]\ntry:\n    x {op} 2\nexcept TypeError:\n    return b'refused'\nreturn repr(x).encode()\n"
        assert run(body) == b"refused", op


# --- fifth pass: the survivors of the first whole session (issue 31) -------------------------------------
def test_a_sized_value_is_materialized_up_to_its_limit_and_refused_past_it_before_any_charge() -> None:
    # docs/pvm.md: sized values are "checked before"; dict views are sized values too
    ctx = fresh()
    assert guards.materialize(ctx, [0] * 5, 5) == [0] * 5 and used(ctx) == 5  # exactly the limit is allowed
    ctx = fresh()
    halt = halt_of(guards.materialize, ctx, {1: 0, 2: 0, 3: 0}.keys(), 2)
    assert halt.code == "memory_limit" and halt.message == "3 items exceed the limit 2" and used(ctx) == 0


def test_adding_a_sequence_of_another_type_is_cpythons_type_error_with_nothing_charged() -> None:
    out = run("try:\n    [1] + 1\nexcept TypeError as e:\n    return str(e).encode()\n")
    assert out == b'can only concatenate list (not "int") to list'
    ctx = fresh()
    with pytest.raises(TypeError, match="can only concatenate list"):
        guards.add(ctx, [1, 2, 3], (4,))
    assert used(ctx) == 0  # no items(4) for a concatenation that never happens


def test_repeating_a_list_zero_or_fewer_times_is_free() -> None:
    for n in (0, -3):
        ctx = fresh()
        assert guards.mul(ctx, [1, 2], n) == [] and used(ctx) == 0


def test_a_product_with_zero_is_free_however_large_the_other_factor() -> None:
    for a, b in ((0, 2**4095), (2**4095, 0)):
        ctx = fresh()
        assert guards.mul(ctx, a, b) == 0 and used(ctx) == 0


def test_a_power_of_one_is_charged_like_any_other_exponent() -> None:
    # only exponent 0 and bases 0, 1, -1 are free; a ** 1 pays bits(1) x mul(4096, 4096) = 1 x (64 x 64 >> 4)
    ctx = fresh()
    assert guards.power(ctx, 2**4095, 1) == 2**4095 and used(ctx) == 256


def test_a_negative_shift_is_cpythons_value_error_with_nothing_charged() -> None:
    ctx = fresh()
    with pytest.raises(ValueError, match="negative shift count"):
        guards.lshift(ctx, 2**4000, -1)
    assert used(ctx) == 0


def test_list_in_place_add_is_limited_on_the_sum_of_both_lengths() -> None:
    ctx = fresh(max_collection_items=10)
    assert guards.inplace(ctx, "+", [0] * 3, [0] * 4) == [0] * 7  # 7 <= 10 (a product, 12, would halt)
    halt = halt_of(guards.inplace, fresh(max_collection_items=10), "+", [0], [0] * 10)
    assert halt.code == "memory_limit" and halt.message == "11 items exceed max_collection_items 10"


def test_bytearray_in_place_add_is_limited_on_the_sum_of_both_lengths() -> None:
    ctx = fresh(max_bytes_object=10)
    assert guards.inplace(ctx, "+", bytearray(3), b"1234") == bytearray(3) + b"1234"  # 7 <= 10
    halt = halt_of(guards.inplace, fresh(max_bytes_object=10), "+", bytearray(1), b"x" * 10)
    assert halt.code == "memory_limit" and halt.message == "11 bytes exceed max_bytes_object 10"


def test_in_place_add_on_a_tuple_or_a_big_int_is_the_plain_operator() -> None:
    # only lists, bytearrays and dicts are changed in place; t += u is t + u, charged items(3)
    ctx = fresh()
    assert guards.inplace(ctx, "+", (1,), (2, 3)) == (1, 2, 3) and used(ctx) == 3
    assert guards.inplace(fresh(), "+", 2**300, 1) == 2**300 + 1
    assert guards.inplace(fresh(), "*", 2**300, 3) == 3 * 2**300
    assert run("x = 2 ** 300\nx += 1\nx *= 2\nreturn str(x % 1000).encode()\n") == str((2**300 + 1) * 2 % 1000).encode()


def test_membership_in_text_is_charged_per_8_bytes_scanned() -> None:
    ctx = fresh()
    assert guards.contains(ctx, "x", "a" * 8000) is False and used(ctx) == 1000
    ctx = fresh()
    assert guards.contains(ctx, b"x", b"a" * 80) is False and used(ctx) == 10


def test_membership_in_an_iterator_compares_equal_items_not_only_the_same_object() -> None:
    assert guards.contains(fresh(), [1, 2], iter([[0], [1, 2]])) is True
    assert value("[1, 2] in iter([[0], [1, 2]])") == "True"


def test_bytes_of_an_iterator_and_of_bytes() -> None:
    assert value("bytes(iter([104, 105]))") == "b'hi'"
    ctx = fresh()
    assert guards.make_bytes(ctx, b"x" * 800) == b"x" * 800 and used(ctx) == 100  # bytes(800), not items(800)


def test_int_and_float_of_non_ascii_bytes_are_cpythons_value_errors() -> None:
    # only non-ASCII *str* is read with the pinned Unicode tables; bytes go to CPython, which refuses them
    body = "try:\n    {}(b'\\xb2')\nexcept ValueError as e:\n    return str(e).encode()\n"
    assert run(body.format("int")) == b"invalid literal for int() with base 10: b'\\xb2'"
    assert run(body.format("float")) == b"could not convert string to float: b'\\xb2'"


def test_str_with_an_encoding_decodes_bytes_bytearrays_and_in_version_1_any_byte_values() -> None:
    # docs/pvm.md (differences from CPython): version 1 decodes bytes(x), so a list of byte values is
    # accepted where CPython raises TypeError
    assert value("str(b'hi', 'ascii')") == "'hi'"
    assert value("str(bytearray(b'hi'), 'ascii')") == "'hi'"
    assert value("str([104, 105], 'ascii')") == "'hi'"


def test_max_and_min_with_a_default_ignore_it_when_there_are_items() -> None:
    assert value("max([1, 2], default=5)") == "2"
    assert value("min([3], default=0)") == "3"


def test_max_and_min_without_arguments_are_version_1s_value_error() -> None:
    # docs/pvm.md (differences from CPython): CPython raises TypeError("max expected at least 1 argument,
    # got 0"); version 1 answers as for an empty iterable
    for name in ("max", "min"):
        out = run(f"try:\n    {name}()\nexcept ValueError as e:\n    return str(e).encode()\n")
        assert out == f"{name}() arg is an empty sequence".encode()


def test_max_of_nothing_gets_version_1s_text_whatever_the_interpreter_says() -> None:
    # CPython 3.12+ says "max() iterable argument is empty"; stand in for it on any interpreter
    def max(items: list[object], key: object = None) -> object:  # named like the builtin: pin() reads the name
        raise ValueError("max() iterable argument is empty")

    with pytest.raises(ValueError) as info:
        guards._extreme(fresh(), max, ([],), None, guards._MISSING)
    assert str(info.value) == "max() arg is an empty sequence"


def test_a_sum_of_scalars_checks_only_its_total_against_max_int_bits() -> None:
    # all-scalar sums run in C and only the result is bounded: the 4097-bit partial sum TOP + TOP is not
    # refused, and the sum fails where CPython's does, at the None
    body = (f"try:\n    sum([{TOP}, {TOP}, -{TOP}, -{TOP}, 1.5, True, None])\n"
            "except TypeError as e:\n    return str(e).encode()\n")
    assert run(body) == b"unsupported operand type(s) for +: 'float' and 'NoneType'"
    assert run(f"return str(sum([{TOP}, {TOP}, -{TOP}]) == {TOP}).encode()\n") == b"True"


def test_isinstance_type_tuples_refuse_256_types_in_one_tuple() -> None:
    # 256 types + the tuple itself = 257 entries (docs/pvm.md: "a flat tuple holds at most 255 types")
    assert value("isinstance(1, (str,) * 255)") == "False"
    out = run("try:\n    isinstance(1, (str,) * 256)\nexcept TypeError as e:\n    return str(e).encode()\n")
    assert b"256 entries" in out


def test_join_reads_every_chunk_of_a_long_sized_value() -> None:
    assert guards.join(fresh(), "", ["a"] * 5000) == "a" * 5000
    assert guards.join(fresh(), "", ["a"] * 4096) == "a" * 4096


def test_join_of_a_sized_value_charges_its_items_twice_in_version_1() -> None:
    # docs/pvm.md: a sized x is materialized first (items(8)), then consumed per chunk (items(8)), then
    # bytes(16 characters + 7 separators) = 23 >> 3 = 2
    ctx = fresh()
    assert guards.join(ctx, ",", ["ab"] * 8) == ",".join(["ab"] * 8) and used(ctx) == 8 + 8 + 2


def test_list_of_a_sized_value_over_the_limit_halts_with_the_sized_paths_text() -> None:
    # docs/pvm.md, limits table: the sized path's own text
    err = halted("x = list(range(3))\nreturn b''\n", Limits(max_collection_items=2))
    assert err.code == "memory_limit" and err.message.startswith("3 items exceed the limit 2")


def test_round_to_three_or_more_negative_digits_keeps_the_leading_digits() -> None:
    # the int shortcut answers 0 only for ndigits past the number's decimal digits (+ 1)
    assert value("round(123456, -3)") == "123000"
    assert value("round(987654321, -8)") == "1000000000"
    assert value(f"round({10**30 + 6 * 10**28}, -29)") == str(11 * 10**29)
    assert value("round(987654321, -10)") == "0"
