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
