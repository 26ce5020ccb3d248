"""Guarded operators and builtins: sizes are checked and charged before the work.

Every function takes the call's :class:`Ctx` first.  The hot fast paths (small ints)
live in ``runtime.py``; these are the general cases.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any

from cowboy_node.execution.pvm import canon, costs, text, walk
from cowboy_node.execution.pvm import unicode_str as unistr
from cowboy_node.execution.pvm.ctx import Ctx
from cowboy_node.execution.pvm.walk import DICT_VIEWS, SCALARS, STRLIKE

Op = Callable[[Any, Any], Any]
_CHUNK = 4096
_INTLIKE = (int, bool)
_SIZED = frozenset({list, tuple, str, bytes, bytearray, dict, range}) | DICT_VIEWS
_SMALL_INT = 1 << 200  # str() of smaller ints: conv_cost(<= 62 digits) == 0, as in text._leaf


def _is_int(x: Any) -> bool:
    t = type(x)
    return t is int or t is bool


def _forbid_views(a: Any, b: Any) -> None:
    if type(a) in DICT_VIEWS or type(b) in DICT_VIEWS:
        raise TypeError("PVM: set operations on dict views are not supported (sets are not deterministic)")


# --- materialization ------------------------------------------------------------------
def materialize(ctx: Ctx, iterable: Any, max_items: int | None = None) -> list[Any]:
    """``list(iterable)`` charged per item and halted past ``max_items``."""
    limit = ctx.limits.max_collection_items if max_items is None else max_items
    if type(iterable) in _SIZED:
        n = len(iterable)
        if n > limit:
            ctx.halt("memory_limit", f"{n} items exceed the limit {limit}")
        ctx.charge(costs.items_cost(n))
        return list(iterable)
    out: list[Any] = []
    it = iter(iterable)
    while True:
        chunk = list(islice(it, _CHUNK))
        ctx.charge(costs.items_cost(len(chunk)))
        out += chunk
        if len(out) > limit:
            ctx.halt("memory_limit", f"more than {limit} items")
        if len(chunk) < _CHUNK:
            return out


def seq(ctx: Ctx, value: Any) -> Any:
    """A sized sequence for ``*value``, slice assignment or starred unpacking (charged per item)."""
    t = type(value)
    if t in _SIZED and t is not dict:
        ctx.check_items(len(value))
        return value if t is not range else list(value)
    return materialize(ctx, value)


def mapping(ctx: Ctx, value: Any) -> Any:
    """``**value`` in a dict display or a call: the copy is charged per item."""
    if isinstance(value, dict):
        ctx.check_items(len(value))
    return value


def sized(ctx: Ctx, value: Any) -> Any:
    """Charge a result whose size is bounded by an existing object (slices)."""
    ctx.check_size(value)
    return value


# --- arithmetic -------------------------------------------------------------------------
def _concat_size(ctx: Ctx, a: Any, b: Any) -> None:
    ta = type(a)
    if (ta is str or ta is bytes or ta is bytearray) and type(b) in STRLIKE:
        ctx.check_bytes(len(a) + len(b))
    elif (ta is list or ta is tuple) and type(b) is ta:
        ctx.check_items(len(a) + len(b))


def add(ctx: Ctx, a: Any, b: Any) -> Any:
    if _is_int(a) and _is_int(b):
        return ctx.int_result(a + b)
    _concat_size(ctx, a, b)
    return a + b


def sub(ctx: Ctx, a: Any, b: Any) -> Any:
    if _is_int(a) and _is_int(b):
        return ctx.int_result(a - b)
    _forbid_views(a, b)
    return a - b


def _repeat(ctx: Ctx, s: Any, n: Any) -> Any:
    if not _is_int(n):
        return s * n  # TypeError from CPython
    count = len(s) * n if n > 0 else 0
    if type(s) in STRLIKE:
        ctx.check_bytes(count)
    else:
        ctx.check_items(count)
    return s * n


def mul(ctx: Ctx, a: Any, b: Any) -> Any:
    ia, ib = _is_int(a), _is_int(b)
    if ia and ib:
        if a and b:
            ba, bb = a.bit_length(), b.bit_length()
            if ba + bb - 1 > ctx.limits.max_int_bits:
                ctx.halt("int_too_large", f"product of {ba}- and {bb}-bit integers")
            ctx.charge(costs.mul_cost(ba, bb))
        return ctx.int_result(a * b)
    ta, tb = type(a), type(b)
    if ib and (ta in STRLIKE or ta is list or ta is tuple):
        return _repeat(ctx, a, b)
    if ia and (tb in STRLIKE or tb is list or tb is tuple):
        return _repeat(ctx, b, a)
    return a * b


def _div_cost(ctx: Ctx, a: Any, b: Any) -> None:
    if _is_int(a) and _is_int(b):
        ctx.charge(costs.mul_cost(a.bit_length(), b.bit_length()))


def truediv(ctx: Ctx, a: Any, b: Any) -> Any:
    _div_cost(ctx, a, b)
    return a / b


def floordiv(ctx: Ctx, a: Any, b: Any) -> Any:
    _div_cost(ctx, a, b)
    return a // b


def mod(ctx: Ctx, a: Any, b: Any) -> Any:
    if type(a) in STRLIKE:
        return text.percent_format(ctx, a, b)
    _div_cost(ctx, a, b)
    try:
        return a % b
    except ZeroDivisionError as exc:
        canon.pin(exc, "%")  # 3.13: "float modulo by zero"
        raise


def divmod_(ctx: Ctx, a: Any, b: Any) -> Any:
    _div_cost(ctx, a, b)
    return divmod(a, b)


def power(ctx: Ctx, a: Any, b: Any, m: Any = None) -> Any:
    if not (_is_int(a) and _is_int(b)):
        if m is None and (isinstance(a, int | float) and isinstance(b, int | float)):
            ctx.halt("forbidden", "float exponentiation is not deterministic across platforms")
        return pow(a, b, m)  # TypeError from CPython
    if m is not None:
        if not _is_int(m):
            return pow(a, b, m)
        ctx.charge(costs.modpow_cost(max(m.bit_length(), 1), max(b.bit_length(), 1)))
        return pow(a, b, m)
    if b < 0:
        ctx.halt("forbidden", "float exponentiation is not deterministic across platforms")
    if b == 0 or a in (0, 1, -1):
        return a**b
    ba = a.bit_length()
    if (ba - 1) * b + 1 > ctx.limits.max_int_bits:
        ctx.halt("int_too_large", f"{ba}-bit integer to the power {b}")
    ctx.charge(costs.pow_cost(ba * b, b.bit_length()))
    return ctx.int_result(a**b)


def lshift(ctx: Ctx, a: Any, b: Any) -> Any:
    if _is_int(a) and _is_int(b) and a and b > 0:
        bits = a.bit_length() + b
        if bits > ctx.limits.max_int_bits:
            ctx.halt("int_too_large", f"shift to {bits} bits")
        ctx.charge(costs.words(bits) >> costs.INT_MUL_SHIFT)
    return a << b


def bitor(ctx: Ctx, a: Any, b: Any) -> Any:
    _forbid_views(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        ctx.check_items(len(a) + len(b))
    return a | b


def bitand(ctx: Ctx, a: Any, b: Any) -> Any:
    _forbid_views(a, b)
    return a & b


def bitxor(ctx: Ctx, a: Any, b: Any) -> Any:
    _forbid_views(a, b)
    return a ^ b


def inplace(ctx: Ctx, op: str, a: Any, b: Any) -> Any:
    """Augmented assignment ``a op= b`` (in place for lists, bytearrays and dicts)."""
    ta = type(a)
    if ta is list:
        if op == "+":
            items = seq(ctx, b)  # charges the added items
            ctx.limit_items(len(a) + len(items))
            a += items
            return a
        if op == "*":
            _repeat(ctx, a, b)  # size check only
            a *= b
            return a
    elif ta is bytearray and op in "+*":
        if op == "+":
            ctx.limit_bytes(len(a) + len(b))
            ctx.charge(costs.bytes_cost(len(b)))
            a += b
        else:
            _repeat(ctx, a, b)
            a *= b
        return a
    elif ta is dict and op == "|":
        update_dict(ctx, a, b)
        return a
    return BINOPS[op](ctx, a, b)


BINOPS: dict[str, Callable[[Ctx, Any, Any], Any]] = {
    "+": add, "-": sub, "*": mul, "/": truediv, "//": floordiv, "%": mod, "**": power,
    "<<": lshift, "|": bitor, "&": bitand, "^": bitxor,
}


# --- comparisons ------------------------------------------------------------------------
def compare(ctx: Ctx, op: Op, a: Any, b: Any) -> Any:
    """Slow path of ``==``/``<``... when neither operand is a scalar."""
    ta, tb = type(a), type(b)
    if ta in STRLIKE and tb in STRLIKE:
        ctx.charge(min(len(a), len(b)) >> costs.CMP_SHIFT)
    elif a is b:
        if isinstance(a, list | tuple | dict):
            ctx.charge(costs.items_cost(len(a)))
    elif (isinstance(a, list | tuple | dict) or ta in DICT_VIEWS) and (
        isinstance(b, list | tuple | dict) or tb in DICT_VIEWS
    ):
        walk.charge_compare(ctx, a, b)
    return op(a, b)


def contains(ctx: Ctx, needle: Any, container: Any) -> bool:
    """``needle in container`` with the scan charged (or the key checked)."""
    t = type(container)
    if t is dict or t is walk.DictKeys or (t not in _KNOWN and isinstance(container, dict)):
        return walk.check_key(ctx, needle) in container
    if t is walk.DictItems:
        if type(needle) is not tuple or len(needle) != 2:
            return False
        walk.check_key(ctx, needle[0])
        ctx.charge(walk.weight(ctx, needle[1], ctx.remaining() + 1))
        return needle in container
    if t in STRLIKE or (t not in _KNOWN and isinstance(container, str | bytes | bytearray)):
        ctx.charge(costs.bytes_cost(len(container)))
        return needle in container
    if t is list or t is tuple or t is walk.DictValues or (t not in _KNOWN and isinstance(container, list | tuple)):
        items = container if t is not walk.DictValues else list(container)
        walk.charge_scan(ctx, needle, items)
        return needle in items
    if t is range:
        if _is_int(needle):
            return needle in container
        if type(needle) is float and needle.is_integer():
            return int(needle) in container
        return False
    if hasattr(t, "__contains__"):
        return needle in container  # host object: its own membership test
    # an iterator: consume it item by item, as CPython does
    for item in container:
        ctx.charge(costs.ITEM)
        if item is needle or compare(ctx, operator.eq, item, needle):
            return True
    return False


_KNOWN = _SIZED | {int, float, bool, type(None)}


# --- constructors ---------------------------------------------------------------------
def make_list(ctx: Ctx, iterable: Any = ()) -> list[Any]:
    return materialize(ctx, iterable)


def make_tuple(ctx: Ctx, iterable: Any = ()) -> tuple[Any, ...]:
    if type(iterable) is tuple:
        same: tuple[Any, ...] = iterable
        return same
    return tuple(materialize(ctx, iterable))


def update_dict(ctx: Ctx, target: dict[Any, Any], source: Any = (), **kwargs: Any) -> None:
    """``target.update(source, **kwargs)`` with every new key checked."""
    if isinstance(source, dict):
        ctx.limit_items(len(target) + len(source))
        ctx.charge(costs.items_cost(len(source)))
        for k in source:
            walk.check_key(ctx, k)
        target.update(source)
    elif hasattr(source, "keys"):
        raise TypeError("PVM: dict() accepts a dict or an iterable of pairs")
    else:
        pairs = materialize(ctx, source)  # charges the pairs
        ctx.limit_items(len(target) + len(pairs))
        for pair in pairs:
            k, v = pair
            target[walk.check_key(ctx, k)] = v
    if kwargs:
        ctx.limit_items(len(target) + len(kwargs))
        ctx.charge(costs.items_cost(len(kwargs)))
        target.update(kwargs)


def make_dict(ctx: Ctx, source: Any = (), /, **kwargs: Any) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    update_dict(ctx, out, source, **kwargs)
    return out


def _check_codec(encoding: Any, errors: Any) -> None:
    if not isinstance(encoding, str) or encoding.lower().replace("_", "-") not in _CODECS:
        raise LookupError(f"PVM: encoding {encoding!r} is not supported (utf-8, ascii, latin-1)")
    if errors not in _ERROR_MODES:
        raise LookupError(f"PVM: error handler {errors!r} is not supported")


_CODECS = frozenset({"utf-8", "utf8", "ascii", "latin-1", "latin1", "iso-8859-1"})
_ERROR_MODES = frozenset({"strict", "ignore", "replace"})


def encode(ctx: Ctx, s: str, encoding: Any = "utf-8", errors: Any = "strict") -> bytes:
    _check_codec(encoding, errors)
    ctx.check_bytes(4 * len(s))
    return s.encode(encoding, errors)


def decode(ctx: Ctx, b: Any, encoding: Any = "utf-8", errors: Any = "strict") -> str:
    _check_codec(encoding, errors)
    ctx.check_bytes(len(b))
    return bytes(b).decode(encoding, errors) if type(b) is not bytes else b.decode(encoding, errors)


def _make_bytes(ctx: Ctx, kind: type, source: Any, encoding: Any, errors: Any) -> Any:
    if encoding is not None or errors is not None:
        if not isinstance(source, str):
            raise TypeError("encoding without a string argument")
        return kind(encode(ctx, source, "utf-8" if encoding is None else encoding,
                           "strict" if errors is None else errors))
    if _is_int(source):
        if source < 0:
            raise ValueError("negative count")
        ctx.check_bytes(source)
        return kind(source)
    if isinstance(source, str):
        raise TypeError("string argument without an encoding")
    if type(source) in STRLIKE:
        ctx.check_bytes(len(source))
        return kind(source)
    items = materialize(ctx, source, ctx.limits.max_bytes_object)
    return kind(items)


def make_bytes(ctx: Ctx, source: Any = b"", encoding: Any = None, errors: Any = None) -> bytes:
    return _make_bytes(ctx, bytes, source, encoding, errors)  # type: ignore[no-any-return]


def make_bytearray(ctx: Ctx, source: Any = b"", encoding: Any = None, errors: Any = None) -> bytearray:
    return _make_bytes(ctx, bytearray, source, encoding, errors)  # type: ignore[no-any-return]


def make_str(ctx: Ctx, obj: Any = "", encoding: Any = None, errors: Any = None) -> str:
    t = type(obj)
    if t is str:
        text_value: str = obj
        return text_value
    if t is int and encoding is None and -_SMALL_INT < obj < _SMALL_INT:
        return repr(obj)
    if encoding is not None or errors is not None:
        return decode(ctx, obj, "utf-8" if encoding is None else encoding, "strict" if errors is None else errors)
    return text.safe_str(ctx, obj)


def _int_text_limit(ctx: Ctx) -> int:
    # enough characters for max_int_bits in base 2 plus sign, prefix, underscores and spaces
    return 2 * ctx.limits.max_int_bits + 16


def make_int(ctx: Ctx, x: Any = 0, base: Any = None) -> int:
    if isinstance(x, str | bytes | bytearray):
        n = len(x)
        if n > _int_text_limit(ctx):
            ctx.halt("int_too_large", f"integer text of {n} characters")
        ctx.charge(costs.conv_cost(n))
        if isinstance(x, str) and not x.isascii():
            # non-ASCII digits and blanks are read with the pinned Unicode tables (docs/pvm.md)
            ctx.charge(unistr.cost("int", x))
            value = unistr.parse_int(str.__str__(x), 10 if base is None else base)
        else:
            value = int(x, 10 if base is None else base)
    elif base is not None:
        raise TypeError("int() can't convert non-string with explicit base")
    else:
        value = int(x)
    return ctx.int_result(value)


def make_float(ctx: Ctx, x: Any = 0.0) -> float:
    if isinstance(x, str | bytes | bytearray):
        ctx.check_bytes(len(x))
        if isinstance(x, str) and not x.isascii():
            ctx.charge(unistr.cost("float", x))
            return unistr.parse_float(str.__str__(x))
    return float(x)


# --- consumers ------------------------------------------------------------------------
def wrap_key(ctx: Ctx, key: Any) -> Any:
    """A key function whose results are walked (they are compared in C)."""
    if key is None:
        return None

    def checked(item: Any) -> Any:
        result = key(item)
        if type(result) not in SCALARS:
            ctx.charge(walk.weight(ctx, result, ctx.remaining() + 1))
        return result

    return checked


def walk_items(ctx: Ctx, items: list[Any]) -> None:
    """Walk (and charge) the items about to be compared in C, unless all are scalars."""
    kinds = set(map(type, items))
    if not kinds <= SCALARS:
        walk.charge_items(ctx, items)


def sorted_(ctx: Ctx, iterable: Any, /, *, key: Any = None, reverse: Any = False) -> list[Any]:
    items = materialize(ctx, iterable)
    if key is None:
        walk_items(ctx, items)
    ctx.charge(costs.sort_cost(len(items)))
    items.sort(key=wrap_key(ctx, key), reverse=reverse)
    return items


def _extreme(ctx: Ctx, pick: Callable[..., Any], args: tuple[Any, ...], key: Any, default: Any) -> Any:
    if len(args) == 1:
        items = materialize(ctx, args[0])
    else:
        items = list(args)
        ctx.charge(costs.items_cost(len(items)))
    if key is None:
        walk_items(ctx, items)
    if not items and default is not _MISSING:
        return default
    try:
        return pick(items, key=wrap_key(ctx, key))
    except ValueError as exc:
        canon.pin(exc, pick.__name__)  # 3.12+: "max() iterable argument is empty"
        raise


_MISSING = object()


def min_(ctx: Ctx, *args: Any, key: Any = None, default: Any = _MISSING) -> Any:
    return _extreme(ctx, min, args, key, default)


def max_(ctx: Ctx, *args: Any, key: Any = None, default: Any = _MISSING) -> Any:
    return _extreme(ctx, max, args, key, default)


def sum_(ctx: Ctx, iterable: Any, /, start: Any = 0) -> Any:
    items = materialize(ctx, iterable)
    if isinstance(start, str | bytes | bytearray):
        raise TypeError("sum() can't sum strings/bytes [use ''.join(seq) instead]")
    kinds = set(map(type, items))
    if type(start) in SCALARS and kinds <= SCALARS:
        total = sum(items, start)
        return ctx.int_result(total) if type(total) is int else total
    acc = start
    for item in items:
        acc = add(ctx, acc, item)
    return acc


def filter_(ctx: Ctx, predicate: Any, iterable: Any) -> Iterator[Any]:
    """``filter``: CPython's would loop inside C over rejected items without charging."""
    it = iter(iterable)

    def run() -> Iterator[Any]:
        for item in it:
            ctx.charge(costs.ITEM)
            if (item if predicate is None else predicate(item)):
                yield item

    return run()


def _truth_scan(ctx: Ctx, iterable: Any, want: bool) -> bool:
    it = iter(iterable)
    while True:
        chunk = list(islice(it, _CHUNK))
        ctx.charge(costs.items_cost(len(chunk)))
        if (any(chunk) if want else not all(chunk)):
            return want
        if len(chunk) < _CHUNK:
            return not want


def any_(ctx: Ctx, iterable: Any) -> bool:
    return _truth_scan(ctx, iterable, True)


def all_(ctx: Ctx, iterable: Any) -> bool:
    return _truth_scan(ctx, iterable, False)


def round_(ctx: Ctx, number: Any, ndigits: Any = None) -> Any:
    if ndigits is not None and _is_int(number) and _is_int(ndigits) and ndigits < 0:
        digits = int(number.bit_length() * 0.30103) + 2
        if -ndigits > digits:
            return 0
    if ndigits is not None and _is_int(ndigits) and not -4096 <= ndigits <= 4096:
        ndigits = 4096 if ndigits > 0 else -4096
    return round(number, ndigits)


def _check_type_spec(ctx: Ctx, spec: Any) -> None:
    """isinstance()/issubclass() recurse in C over nested tuples: bound depth and size."""
    if type(spec) is not tuple:
        return
    stack: list[tuple[Any, int]] = [(spec, 0)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if depth > 8 or seen > 256:
            raise TypeError("PVM: isinstance() type tuples may nest 8 levels and hold 256 entries")
        if type(item) is tuple:
            stack.extend((x, depth + 1) for x in item)


def isinstance_(ctx: Ctx, obj: Any, spec: Any) -> bool:
    _check_type_spec(ctx, spec)
    return isinstance(obj, spec)


def issubclass_(ctx: Ctx, cls: Any, spec: Any) -> bool:
    _check_type_spec(ctx, spec)
    return issubclass(cls, spec)


def join(ctx: Ctx, sep: Any, iterable: Any) -> Any:
    """``sep.join(iterable)``: items are consumed in charged chunks and the running length
    is checked before anything is joined."""
    limit = ctx.limits.max_bytes_object
    items: list[Any] = []
    total = 0
    it = iter(iterable) if type(iterable) not in _SIZED else iter(materialize(ctx, iterable))
    while True:
        chunk = list(islice(it, _CHUNK))
        ctx.charge(costs.items_cost(len(chunk)))
        for item in chunk:
            if type(item) in STRLIKE:
                total += len(item)
        items += chunk
        ctx.limit_items(len(items))
        if total + len(sep) * max(len(items) - 1, 0) > limit:
            ctx.halt("memory_limit", f"joined text over {limit} characters")
        if len(chunk) < _CHUNK:
            break
    ctx.charge(costs.bytes_cost(total + len(sep) * max(len(items) - 1, 0)))
    return sep.join(items)


