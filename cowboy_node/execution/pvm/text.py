"""Deterministic, bounded text conversion: ``str``/``repr``/``format``/f-strings/``%``.

CPython's own ``repr`` of a container is unmetered, unbounded in size (a list holding
the same 16 MB string a million times) and, for many objects, contains a memory address
(``<Foo object at 0x7f...>``), which differs between nodes.  The PVM renders text
itself: containers and exceptions are assembled here with a size budget, scalars use
CPython's deterministic ``repr``, and any other object renders as ``<TypeName object>``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from cowboy_node.execution.pvm import costs
from cowboy_node.execution.pvm import unicode_str as unistr
from cowboy_node.execution.pvm.walk import DICT_VIEWS, DictItems, DictKeys, NoneType

if TYPE_CHECKING:
    from cowboy_node.execution.pvm.ctx import Ctx

_UNICODE_ERRORS = (UnicodeEncodeError, UnicodeDecodeError, UnicodeTranslateError)
#: Sandbox-owned types whose own ``__repr__`` is deterministic (registered by their modules).
TRUSTED_REPR: set[type] = set()
_DIGITS_PER_BIT = 0.30103


class _Budget:
    __slots__ = ("active", "ctx", "left")

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx
        self.left = ctx.limits.max_bytes_object
        self.active: set[int] = set()

    def take(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            self.ctx.halt("memory_limit", f"text longer than {self.ctx.limits.max_bytes_object}")


def _str_repr_bound(s: str) -> int:
    if s.isprintable() if s.isascii() else unistr.predicate("isprintable", s):
        return len(s) + 2 + s.count("\\") + s.count("'")
    return (4 if s.isascii() else 10) * len(s) + 2


def repr_text(s: str) -> str:
    """``repr`` of a str: which characters are escaped is fixed by the pinned Unicode tables."""
    return repr(s) if s.isascii() else unistr.repr_str(s)


def _leaf(ctx: Ctx, o: Any, budget: _Budget) -> str | None:
    t = type(o)
    if t is str:
        budget.take(_str_repr_bound(o))
        if not o.isascii():
            ctx.charge(unistr.cost("repr", o))
        return repr_text(o)
    if t is int:
        digits = int(o.bit_length() * _DIGITS_PER_BIT) + 2
        ctx.charge(costs.conv_cost(digits))
        return repr(o)
    if t is float or t is bool or t is NoneType or t is range:
        return repr(o)
    if t is bytes or t is bytearray:
        budget.take(4 * len(o) + 14)
        return repr(o)
    return None


def _render(ctx: Ctx, o: Any, budget: _Budget, depth: int, out: list[str]) -> None:
    ctx.charge(costs.ITEM)
    leaf = _leaf(ctx, o, budget)
    if leaf is not None:
        budget.take(len(leaf))
        out.append(leaf)
        return
    if depth > ctx.limits.max_nesting_depth:
        ctx.halt("recursion_limit", "data nested too deeply to render")
    t = type(o)
    if isinstance(o, list | tuple | dict) or t in DICT_VIEWS:
        if id(o) in budget.active:
            out.append("[...]" if isinstance(o, list) else "{...}" if isinstance(o, dict) else "(...)")
            return
        budget.active.add(id(o))
        try:
            _render_container(ctx, o, budget, depth, out)
        finally:
            budget.active.discard(id(o))
    elif isinstance(o, BaseException):
        out.append(type(o).__name__)
        args = o.args
        if len(args) == 1:
            out.append("(")
            _render(ctx, args[0], budget, depth + 1, out)
            out.append(")")
        else:
            _render(ctx, args, budget, depth + 1, out)
    elif isinstance(o, type) or t in TRUSTED_REPR:
        out.append(repr(o))
    else:
        out.append(f"<{t.__name__} object>")


def _render_container(ctx: Ctx, o: Any, budget: _Budget, depth: int, out: list[str]) -> None:
    t = type(o)
    if isinstance(o, dict):
        out.append("{")
        for i, (k, v) in enumerate(o.items()):
            if i:
                out.append(", ")
            _render(ctx, k, budget, depth + 1, out)
            out.append(": ")
            _render(ctx, v, budget, depth + 1, out)
        out.append("}")
        return
    if t in DICT_VIEWS:
        out.append("dict_keys(" if t is DictKeys else "dict_items(" if t is DictItems else "dict_values(")
        _render(ctx, list(o), budget, depth + 1, out)
        out.append(")")
        return
    is_list = isinstance(o, list)
    out.append("[" if is_list else "(")
    for i, item in enumerate(o):
        if i:
            out.append(", ")
        _render(ctx, item, budget, depth + 1, out)
    if not is_list and len(o) == 1:
        out.append(",")
    out.append("]" if is_list else ")")
    budget.take(2 * len(o) + 2)


def safe_repr(ctx: Ctx, obj: Any) -> str:
    """Deterministic ``repr`` with the size budget ``max_bytes_object``."""
    out: list[str] = []
    _render(ctx, obj, _Budget(ctx), 0, out)
    text = "".join(out)
    ctx.charge(costs.bytes_cost(len(text)))
    return text


def safe_str(ctx: Ctx, obj: Any) -> str:
    """Deterministic ``str``."""
    t = type(obj)
    if t is str:
        return obj  # type: ignore[no-any-return]
    if t is int or t is float or t is bool or t is NoneType:
        return safe_repr(ctx, obj)
    if isinstance(obj, BaseException):
        args = obj.args
        if isinstance(obj, _UNICODE_ERRORS):
            return str(obj)
        if len(args) == 0:
            return ""
        if len(args) == 1:
            return safe_repr(ctx, args[0]) if isinstance(obj, KeyError) else safe_str(ctx, args[0])
        return safe_repr(ctx, args)
    return safe_repr(ctx, obj)


def safe_ascii(ctx: Ctx, obj: Any) -> str:
    return safe_repr(ctx, obj).encode("ascii", "backslashreplace").decode("ascii")


# --- format specs ------------------------------------------------------------------
_SPEC_ALIGN = re.compile(r"(?s:(.)([<>=^]))?(.*)")


def _spec_sizes(spec: str) -> tuple[int, int, str]:
    """(width, precision, type) of a format spec; ValueError if it is not one we allow."""
    m = _SPEC_ALIGN.fullmatch(spec)
    rest = m.group(3) if m and m.group(2) else spec
    # [0-9], not \d: CPython reads any Unicode decimal digit as a width (by the interpreter's tables)
    m2 = re.fullmatch(r"[<>=^]?[+\- ]?z?#?0?([0-9]*)[_,]?(?:\.([0-9]+))?([bcdeEfFgGosxX%]?)", rest)
    if m2 is None:
        raise ValueError(f"PVM: unsupported format specifier {spec!r}")
    width = int(m2.group(1)) if m2.group(1) else 0
    precision = int(m2.group(2)) if m2.group(2) else 0
    return width, precision, m2.group(3)


def format_value(ctx: Ctx, value: Any, spec: str) -> str:
    """``format(value, spec)`` for scalars/str with the size checked before formatting."""
    if spec == "":
        return safe_str(ctx, value)
    t = type(value)
    if not (t is int or t is float or t is bool or t is str):
        raise TypeError(f"unsupported format string passed to {t.__name__}.__format__")
    if len(spec) > 64:
        raise ValueError("PVM: format specifier too long")
    width, precision, _kind = _spec_sizes(spec)
    if t is str:
        base = min(len(value), precision) if precision else len(value)
    elif t is float:
        base = precision + 330
    else:
        base = 2 * (int(value.bit_length() * _DIGITS_PER_BIT) + 2) + value.bit_length() + 8
    size = max(width, base)
    if size > ctx.limits.max_bytes_object:
        ctx.halt("memory_limit", f"formatted text of {size} characters")
    ctx.charge(costs.bytes_cost(size))
    return format(value, spec)


def fmt(ctx: Ctx, value: Any, conversion: int, spec: str | None) -> str:
    """One f-string replacement field: ``{value!conversion:spec}``."""
    if conversion == ord("r"):
        value = safe_repr(ctx, value)
    elif conversion == ord("s"):
        value = safe_str(ctx, value)
    elif conversion == ord("a"):
        value = safe_ascii(ctx, value)
    return format_value(ctx, value, spec or "")


def fjoin(ctx: Ctx, parts: tuple[str, ...]) -> str:
    """Concatenate f-string pieces, checking the total size first."""
    total = 0
    for p in parts:
        total += len(p)
    if total > ctx.limits.max_bytes_object:
        ctx.halt("memory_limit", f"f-string of {total} characters")
    ctx.charge(costs.bytes_cost(total))
    return "".join(parts)


# --- % formatting -------------------------------------------------------------------
_PERCENT = re.compile(r"%(?:\(([^)]*)\))?[#0\- +]*(\*|[0-9]+)?(?:\.(\*|[0-9]+))?[hlL]?(.)", re.S)
_PERCENT_ARG_TYPES = (str, bytes, bytearray, int, float, bool, NoneType)


def percent_format(ctx: Ctx, fmt_obj: str | bytes | bytearray, args: Any) -> Any:
    """``fmt % args`` for str/bytes with the result size bounded before formatting.

    Arguments must be scalars or str/bytes (a tuple or a dict of them): other objects
    would render through CPython's ``repr``.  ``*`` widths are refused.
    """
    text = fmt_obj.decode("latin-1") if not isinstance(fmt_obj, str) else fmt_obj
    if isinstance(args, dict):
        values = list(args.values())
    elif isinstance(args, tuple):
        values = list(args)
    else:
        values = [args]
    longest = 0
    for v in values:
        if not isinstance(v, _PERCENT_ARG_TYPES):
            raise TypeError(f"PVM: %-format arguments must be scalars, str or bytes, not {type(v).__name__}")
        if isinstance(v, str | bytes | bytearray):
            longest = max(longest, 10 * len(v) + 3)
        elif isinstance(v, int):
            longest = max(longest, int(v.bit_length() * _DIGITS_PER_BIT) + v.bit_length() // 3 + 8)
        else:
            longest = max(longest, 330)
    size = len(text)
    for m in _PERCENT.finditer(text):
        if m.group(4) == "%":
            continue
        if m.group(2) == "*" or m.group(3) == "*":
            raise ValueError("PVM: '*' width/precision is not supported in %-formatting")
        size += longest + int(m.group(2) or 0) + int(m.group(3) or 0)
    if size > ctx.limits.max_bytes_object:
        ctx.halt("memory_limit", f"%-formatted text of up to {size} characters")
    ctx.charge(costs.bytes_cost(size))
    if isinstance(fmt_obj, str) and "r" in text:
        fmt_obj, args = _pin_percent_r(ctx, text, args)
    return fmt_obj % args


def _pin_percent_r(ctx: Ctx, text: str, args: Any) -> tuple[str, Any]:
    """Rewrite each ``%r`` of a non-ASCII str into ``%s`` of its pinned ``repr`` (see :func:`repr_text`).

    The i-th conversion takes the i-th value of a tuple (``*`` widths are refused above); with a
    dict every conversion must name its key: a key-less one would print the dict itself through
    CPython's ``repr``.
    """
    fields = [m for m in _PERCENT.finditer(text) if m.group(4) != "%"]
    if isinstance(args, dict):
        if any(m.group(1) is None for m in fields):
            raise TypeError("PVM: %-formatting with a dict needs a %(key) in every conversion")
        new_args: Any = dict(args)
    else:
        values = list(args) if isinstance(args, tuple) else [args]
        if len(values) != len(fields):
            return text, args  # CPython reports the mismatch
    out: list[str] = []
    pos = 0
    for i, m in enumerate(fields):
        key = m.group(1)
        value = (args.get(key) if isinstance(args, dict) else values[i])
        if m.group(4) != "r" or type(value) is not str or value.isascii():
            continue
        ctx.charge(unistr.cost("repr", value))
        spec = m.group(0)[:-1] + "s"
        if key is not None:
            fresh = f"\x00r{i}"
            while fresh in new_args:
                fresh += "\x00"
            new_args[fresh] = repr_text(value)
            spec = "%(" + fresh + ")" + spec[len(key) + 3:]
        else:
            values[i] = repr_text(value)
        out.append(text[pos:m.start()])
        out.append(spec)
        pos = m.end()
    if not out:
        return text, args
    out.append(text[pos:])
    if isinstance(args, dict):
        return "".join(out), new_args
    return "".join(out), (tuple(values) if isinstance(args, tuple) else values[0])
