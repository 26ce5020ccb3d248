"""Importable modules inside the sandbox: read-only views of host modules, and the
curated ``json``, ``math`` and ``typing`` wrappers (no real stdlib module is exposed:
``typing.sys`` or ``json.decoder.re`` would hand out the interpreter).
"""

from __future__ import annotations

import json as _json
import math as _math
import re
import types
from collections.abc import Callable, Mapping
from typing import Any

from cowboy_node.execution.pvm import costs, guards, text
from cowboy_node.execution.pvm.ctx import Ctx
from cowboy_node.execution.validity_errors import TxFailed

_HOST_CALLABLES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.BuiltinMethodType)


class ModuleView:
    """A read-only module namespace: public attributes only, no assignment."""

    __slots__ = ("_pvm_get", "_pvm_name")

    def __init__(self, name: str, get: Callable[[str], Any]) -> None:
        object.__setattr__(self, "_pvm_name", name)
        object.__setattr__(self, "_pvm_get", get)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._pvm_get(name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"module {self._pvm_name!r} is read-only")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"module {self._pvm_name!r} is read-only")

    def __repr__(self) -> str:
        return f"<module '{self._pvm_name}'>"


text.TRUSTED_REPR.add(ModuleView)


def _namespace(name: str, attrs: Mapping[str, Any]) -> ModuleView:
    def get(attr: str) -> Any:
        try:
            return attrs[attr]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    return ModuleView(name, get)


def host_view(ctx: Ctx, name: str, obj: Any) -> ModuleView:
    """View of a host module: its callables halt the actor on ``TxFailed``."""

    def wrap(value: Any, qualname: str) -> Any:
        if isinstance(value, _HOST_CALLABLES):
            fn = value

            def host_call(*args: Any, **kwargs: Any) -> Any:
                try:
                    return fn(*args, **kwargs)
                except TxFailed as exc:
                    ctx.halt(exc.code, str(exc))

            return host_call
        if isinstance(value, types.ModuleType | types.SimpleNamespace) or (
            isinstance(value, Mapping) and not isinstance(value, dict)
        ):
            return host_view(ctx, qualname, value)
        return value

    package = obj.__name__.split(".")[0] if isinstance(obj, types.ModuleType) else None

    def get(attr: str) -> Any:
        try:
            value = obj[attr] if isinstance(obj, Mapping) else getattr(obj, attr)
        except (KeyError, AttributeError):
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None
        if package is not None and not _inside(value, package):
            raise AttributeError(f"module {name!r} does not export {attr!r} to actors")
        return wrap(value, f"{name}.{attr}")

    return ModuleView(name, get)


def _inside(value: Any, package: str) -> bool:
    """For a real module given as a host module: is ``value`` defined in its own package?

    A real package's namespace also holds what it imported (``sys``, ``importlib``,
    ``os.system``...); only modules, functions and classes of the package itself (and
    plain data) are exposed.
    """
    if isinstance(value, types.ModuleType):
        owner: Any = value.__name__
    elif isinstance(value, type | types.FunctionType | types.BuiltinFunctionType | types.MethodType):
        owner = getattr(value, "__module__", None)
    else:
        return True
    return isinstance(owner, str) and (owner == package or owner.startswith(package + "."))


# --- json -------------------------------------------------------------------------------
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_JSON_BRACKETS = re.compile(r"[\[\]{}]")


def _json_size(ctx: Ctx, obj: Any, indent: int, sort_keys: bool) -> None:
    """Upper bound of ``json.dumps(obj)`` length; halts past limits or nesting."""
    limit = ctx.limits.max_bytes_object
    max_depth = ctx.limits.max_nesting_depth
    size = 0
    nodes = 0
    stack: list[tuple[Any, int]] = [(obj, 0)]
    while stack:
        o, d = stack.pop()
        nodes += 1
        if isinstance(o, str):
            size += 12 * len(o) + 2
        elif isinstance(o, bool) or o is None:
            size += 5
        elif isinstance(o, int):
            size += o.bit_length() // 3 + 2
        elif isinstance(o, float):
            size += 24
        elif isinstance(o, list | tuple | dict):
            if d >= max_depth:
                ctx.halt("recursion_limit", f"JSON nested deeper than {max_depth} levels")
            n = len(o)
            size += 2 + n * (4 + indent * (d + 1) + 1)
            if isinstance(o, dict):
                if sort_keys:
                    ctx.charge(costs.sort_cost(n))
                for k, v in o.items():
                    stack.append((str(k) if isinstance(k, str) else k, d + 1))
                    stack.append((v, d + 1))
            else:
                stack.extend((item, d + 1) for item in o)
        if size > limit:
            ctx.halt("memory_limit", f"JSON text over {limit} characters")
    ctx.charge(costs.items_cost(nodes) + costs.bytes_cost(size))


def _make_json(ctx: Ctx) -> ModuleView:
    def dumps(obj: Any, *, sort_keys: bool = False, indent: int | None = None,
              separators: tuple[str, str] | None = None, ensure_ascii: bool = True) -> str:
        if indent is not None and not (type(indent) is int and 0 <= indent <= 16):
            raise ValueError("PVM: json indent must be an int between 0 and 16")
        if separators is not None and not (
            isinstance(separators, tuple) and len(separators) == 2
            and all(isinstance(s, str) and len(s) <= 4 for s in separators)
        ):
            raise ValueError("PVM: json separators must be two strings of at most 4 characters")
        _json_size(ctx, obj, indent or 0, bool(sort_keys))
        return _json.dumps(obj, sort_keys=bool(sort_keys), indent=indent, separators=separators,
                           ensure_ascii=bool(ensure_ascii), allow_nan=True)

    def loads(s: Any) -> Any:
        if isinstance(s, bytes | bytearray):
            s = guards.decode(ctx, s, "utf-8", "strict")
        if not isinstance(s, str):
            raise TypeError(f"the JSON object must be str or bytes, not {type(s).__name__}")
        ctx.charge(costs.bytes_cost(len(s)))
        bare = _JSON_STRING.sub('""', s)
        depth = deepest = brackets = 0
        for m in _JSON_BRACKETS.finditer(bare):
            brackets += 1
            if m.group() in "[{":
                depth += 1
                if depth > deepest:
                    deepest = depth
                    if deepest > ctx.limits.max_nesting_depth:
                        ctx.halt("recursion_limit", "JSON nested too deeply")
            else:
                depth -= 1
        ctx.check_items(bare.count(",") + brackets)
        return _json.loads(s, parse_int=lambda digits: guards.make_int(ctx, digits))

    return _namespace("json", {"dumps": dumps, "loads": loads, "JSONDecodeError": _json.JSONDecodeError})


# --- math -------------------------------------------------------------------------------
def _make_math(ctx: Ctx) -> ModuleView:
    def int_arg(x: Any) -> int:
        if type(x) is int or type(x) is bool:
            return int(x)
        raise TypeError(f"'{type(x).__name__}' object cannot be interpreted as an integer")

    def isqrt(n: Any) -> int:
        n = int_arg(n)
        ctx.charge(costs.mul_cost(n.bit_length(), n.bit_length()))
        return _math.isqrt(n)

    def gcd(*ints: Any) -> int:
        values = [int_arg(i) for i in ints]
        ctx.charge(sum(costs.mul_cost(v.bit_length(), v.bit_length()) for v in values))
        return _math.gcd(*values)

    def lcm(*ints: Any) -> int:
        values = [int_arg(i) for i in ints]
        if sum(v.bit_length() for v in values) > 2 * ctx.limits.max_int_bits:
            ctx.halt("int_too_large", "lcm operands too large")
        ctx.charge(sum(costs.mul_cost(v.bit_length(), v.bit_length()) for v in values))
        return ctx.int_result(_math.lcm(*values))

    def factorial(n: Any) -> int:
        n = int_arg(n)
        lower = 0
        for k in range(2, min(n, ctx.limits.max_int_bits) + 1):
            lower += k.bit_length() - 1
            if lower > ctx.limits.max_int_bits:
                ctx.halt("int_too_large", f"factorial({n})")
        ctx.charge(costs.items_cost(max(n, 0)))
        return ctx.int_result(_math.factorial(n))

    def comb(n: Any, k: Any) -> int:
        n, k = int_arg(n), int_arg(k)
        m = min(k, n - k) if 0 <= k <= n else 0
        if n.bit_length() * m > 2 * ctx.limits.max_int_bits:
            ctx.halt("int_too_large", f"comb({n}, {k}) too large")
        ctx.charge(costs.items_cost(m))
        return ctx.int_result(_math.comb(n, k))

    def perm(n: Any, k: Any = None) -> int:
        n = int_arg(n)
        k = n if k is None else int_arg(k)
        if n >= 0 and k >= 0 and n.bit_length() * min(k, n) > ctx.limits.max_int_bits * 2:
            ctx.halt("int_too_large", f"perm({n}, {k}) too large")
        ctx.charge(costs.items_cost(max(min(k, n), 0)))
        return ctx.int_result(_math.perm(n, k))

    def fsum(iterable: Any) -> float:
        return _math.fsum(guards.materialize(ctx, iterable))

    def to_int(fn: Callable[[Any], int]) -> Callable[[Any], int]:
        return lambda x: ctx.int_result(fn(x))

    attrs: dict[str, Any] = {
        "isqrt": isqrt, "gcd": gcd, "lcm": lcm, "factorial": factorial, "comb": comb, "perm": perm,
        "fsum": fsum, "floor": to_int(_math.floor), "ceil": to_int(_math.ceil), "trunc": to_int(_math.trunc),
        "sqrt": _math.sqrt, "fabs": _math.fabs, "copysign": _math.copysign, "fmod": _math.fmod,
        "modf": _math.modf, "frexp": _math.frexp, "ldexp": _math.ldexp, "isfinite": _math.isfinite,
        "isinf": _math.isinf, "isnan": _math.isnan,
        "pi": _math.pi, "e": _math.e, "tau": _math.tau, "inf": _math.inf, "nan": _math.nan,
    }
    return _namespace("math", attrs)


# --- typing -----------------------------------------------------------------------------
class TypingStub:
    """Stand-in for typing constructs (annotations are stripped before execution)."""

    __slots__ = ("_pvm_name",)

    def __init__(self, name: str) -> None:
        self._pvm_name = name

    def __getitem__(self, item: Any) -> TypingStub:
        return self

    def __repr__(self) -> str:
        return f"typing.{self._pvm_name}"


text.TRUSTED_REPR.add(TypingStub)
_TYPING_NAMES = ("Any", "Optional", "Union", "List", "Dict", "Tuple", "Callable", "Iterable", "Iterator",
                 "Sequence", "Mapping", "MutableMapping", "Final", "Literal", "ClassVar", "TypeAlias",
                 "NamedTuple", "TypedDict", "Protocol")
_TYPING: dict[str, Any] = {name: TypingStub(name) for name in _TYPING_NAMES}
_TYPING["TYPE_CHECKING"] = False
_TYPING["cast"] = lambda typ, value: value
_TYPING_VIEW = _namespace("typing", _TYPING)


def stdlib_module(ctx: Ctx, name: str) -> ModuleView:
    """One of the PVM's own importable modules (``policy.STDLIB_MODULES``) for this call."""
    if name == "json":
        return _make_json(ctx)
    if name == "math":
        return _make_math(ctx)
    if name == "typing":
        return _TYPING_VIEW
    raise ImportError(f"no PVM module {name!r}")


__all__ = ["ModuleView", "host_view", "stdlib_module"]
