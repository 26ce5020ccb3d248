"""Guards for methods of builtin types (``s.replace(...)``, ``l.extend(...)``...).

The instrumenter routes every attribute named in :data:`GUARDED_METHOD_NAMES` through
the runtime, whatever the receiver: at run time a builtin receiver (str, bytes,
bytearray, list, tuple, dict, int, float, range, dict views) gets the guard below,
any other object gets a plain attribute lookup.  Guards charge the work (receiver
scanned, result produced) and refuse results over the limits before computing them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cowboy_node.execution.pvm import canon, costs, guards, text, walk
from cowboy_node.execution.pvm import unicode_str as unistr
from cowboy_node.execution.pvm.ctx import Ctx

Guard = Callable[..., Any]

_STR = (str, bytes, bytearray)
_BUILTIN = (str, bytes, bytearray, list, tuple, dict, int, float, range)
_LINE_BREAKS = ("\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def _plain(obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return getattr(obj, name)(*args, **kwargs)


def _builtin(obj: Any) -> bool:
    return isinstance(obj, _BUILTIN) or type(obj) in walk.DICT_VIEWS


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], i: int, name: str, default: Any) -> Any:
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


def _int_arg(value: Any) -> int:
    if type(value) is int or type(value) is bool:
        return int(value)
    raise TypeError(f"'{type(value).__name__}' object cannot be interpreted as an integer")


# --- generic kinds ----------------------------------------------------------------------
def _scan(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """O(len) str/bytes methods whose result is no larger than a small multiple of the input."""
    if isinstance(obj, _STR):
        ctx.charge(costs.bytes_cost(len(obj)))
        result = getattr(obj, name)(*args, **kwargs)
        ctx.check_size(result)
        return result
    return _plain(obj, name, args, kwargs)


def _eq_scan(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """count/index/remove: substring search on str/bytes, equality scan on lists/tuples."""
    if isinstance(obj, _STR):
        return _scan(ctx, obj, name, args, kwargs)
    if isinstance(obj, list | tuple) and args:
        walk.charge_scan(ctx, args[0], obj)
        if name == "remove":
            ctx.charge(costs.bytes_cost(len(obj)))
        try:
            return getattr(obj, name)(*args, **kwargs)
        except ValueError:
            if isinstance(obj, list) and name == "index":
                # CPython's message is "%R is not in list": an interpreter repr (Unicode tables, addresses)
                raise ValueError(f"{text.safe_repr(ctx, args[0])} is not in list") from None
            raise
    if isinstance(obj, range) and args and name in ("count", "index"):
        x = args[0]
        if type(x) is float and x.is_integer():
            x = int(x)
        if type(x) is int or type(x) is bool:
            return getattr(obj, name)(x)
        if name == "count":
            return 0
        raise ValueError(f"{text.safe_repr(ctx, x)} is not in range" if type(x) in walk.SCALARS
                         else "value is not in range")
    return _plain(obj, name, args, kwargs)


def _copy(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if _builtin(obj):
        ctx.check_size(obj)
    return _plain(obj, name, args, kwargs)


def _move(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """reverse/insert/pop on lists and bytearrays: the moved tail is charged."""
    if isinstance(obj, list | bytearray):
        n = len(obj)
        moved = n
        if name != "reverse" and not kwargs:
            i = _int_arg(args[0]) if args else (-1 if name == "pop" else 0)
            if i < 0:
                i += n
            moved = n - min(max(i, 0), n)
        ctx.charge(costs.bytes_cost(moved))
    elif isinstance(obj, dict) and name == "pop" and args:
        walk.check_key(ctx, args[0])
    return _plain(obj, name, args, kwargs)


def _key(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """dict.get / dict.setdefault: the key is checked before it is hashed."""
    if isinstance(obj, dict) and args:
        walk.check_key(ctx, args[0])
    return _plain(obj, name, args, kwargs)


def _pinned_text(obj: Any, name: str) -> str | None:
    """``obj`` as a plain str when ``obj.name`` must use the pinned Unicode tables, else None.

    Pure-ASCII text behaves the same under every Unicode version, so CPython's own method
    is used for it; a str subclass that overrides the method keeps its override.
    """
    if type(obj) is not str:
        if not isinstance(obj, str) or getattr(type(obj), name) is not getattr(str, name):
            return None
        obj = str.__str__(obj)
    return None if obj.isascii() else obj


def _unicode(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Table-dependent str methods (predicates, case mappings, strip without characters)."""
    s = _pinned_text(obj, name)
    if s is None or kwargs or len(args) > (1 if name in _STRIPS else 0) or (args and args[0] is not None):
        return _scan(ctx, obj, name, args, kwargs)
    ctx.charge(costs.bytes_cost(len(s)) + unistr.cost(name, s))
    if name in unistr.PREDICATES:
        return unistr.predicate(name, s)
    result = unistr.strip(s, name) if name in _STRIPS else unistr.MAPPINGS[name](s)
    ctx.check_size(result)
    return result


# --- specific guards ----------------------------------------------------------------------
def _extend(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if isinstance(obj, list) and len(args) == 1 and not kwargs:
        items = guards.seq(ctx, args[0])  # charges the added items
        ctx.limit_items(len(obj) + len(items))
        obj.extend(items)
        return None
    if isinstance(obj, bytearray) and len(args) == 1 and not kwargs:
        src = args[0]
        data = src if isinstance(src, bytes | bytearray) else guards.materialize(ctx, src, ctx.limits.max_bytes_object)
        ctx.limit_bytes(len(obj) + len(data))
        ctx.charge(costs.bytes_cost(len(data)))
        obj.extend(data)
        return None
    return _plain(obj, name, args, kwargs)


def _sort(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if isinstance(obj, list) and not args:
        key = kwargs.get("key")
        if key is None:
            guards.walk_items(ctx, obj)
        ctx.charge(costs.sort_cost(len(obj)))
        obj.sort(key=guards.wrap_key(ctx, key), reverse=kwargs.get("reverse", False))
        return None
    return _plain(obj, name, args, kwargs)


def _update(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if isinstance(obj, dict):
        guards.update_dict(ctx, obj, *args, **kwargs)
        return None
    return _plain(obj, name, args, kwargs)


def fromkeys(ctx: Ctx, kind: type, iterable: Any, value: Any = None) -> Any:
    out = kind()
    for k in guards.materialize(ctx, iterable):
        out[walk.check_key(ctx, k)] = value
    return out


def _fromkeys(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if isinstance(obj, dict) and not kwargs and 1 <= len(args) <= 2:
        return fromkeys(ctx, dict, *args)
    return _plain(obj, name, args, kwargs)


def _encode(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if isinstance(obj, str):
        return guards.encode(ctx, obj, _arg(args, kwargs, 0, "encoding", "utf-8"),
                             _arg(args, kwargs, 1, "errors", "strict"))
    return _plain(obj, name, args, kwargs)


def _decode(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if isinstance(obj, bytes | bytearray):
        return guards.decode(ctx, obj, _arg(args, kwargs, 0, "encoding", "utf-8"),
                             _arg(args, kwargs, 1, "errors", "strict"))
    return _plain(obj, name, args, kwargs)


def _join(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if isinstance(obj, _STR) and len(args) == 1 and not kwargs:
        return guards.join(ctx, obj, args[0])
    return _plain(obj, name, args, kwargs)


def _replace(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if isinstance(obj, str):
        canon.check_replace(args, kwargs)
    if isinstance(obj, _STR) and 2 <= len(args) <= 3 and not kwargs:
        old: Any = args[0]
        new: Any = args[1]
        count = _int_arg(args[2]) if len(args) == 3 else -1
        if isinstance(old, _STR) and isinstance(new, _STR):
            ctx.charge(costs.bytes_cost(len(obj)))
            subject: Any = obj
            hits = len(obj) + 1 if len(old) == 0 else subject.count(old)
            if count >= 0:
                hits = min(hits, count)
            ctx.check_bytes(len(obj) + hits * max(len(new) - len(old), 0))
    return _plain(obj, name, args, kwargs)


def _pad(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """center/ljust/rjust/zfill: the width is checked first."""
    if isinstance(obj, _STR) and args:
        width = _int_arg(args[0])
        ctx.check_bytes(max(width, len(obj)))
    return _plain(obj, name, args, kwargs)


def _expandtabs(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if isinstance(obj, _STR):
        tabsize = _int_arg(_arg(args, kwargs, 0, "tabsize", 8))
        tab: Any = "\t" if isinstance(obj, str) else b"\t"
        ctx.charge(costs.bytes_cost(len(obj)))
        ctx.check_bytes(len(obj) + obj.count(tab) * max(tabsize, 0))
    return _plain(obj, name, args, kwargs)


def _split(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if not isinstance(obj, _STR):
        return _plain(obj, name, args, kwargs)
    sep = _arg(args, kwargs, 0, "sep", None)
    maxsplit = _int_arg(_arg(args, kwargs, 1, "maxsplit", -1))
    limit = ctx.limits.max_collection_items
    capped = maxsplit < 0 or maxsplit >= limit
    ctx.charge(costs.bytes_cost(len(obj)))
    s = _pinned_text(obj, name) if sep is None else None
    if s is not None:  # whitespace runs by the pinned tables
        ctx.charge(unistr.cost(name, s))
        result = (unistr.split if name == "split" else unistr.rsplit)(s, limit if capped else maxsplit)
    else:
        result = getattr(obj, name)(sep, limit if capped else maxsplit)
    if capped and len(result) > limit:
        ctx.halt("memory_limit", f"split into more than {limit} pieces")
    ctx.check_items(len(result))
    return result


def _splitlines(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if isinstance(obj, _STR):
        canon.check_keepends(args, kwargs)
        ctx.charge(costs.bytes_cost(len(obj)))
        if isinstance(obj, str):
            breaks = sum(obj.count(c) for c in _LINE_BREAKS)
        else:
            breaks = obj.count(b"\n") + obj.count(b"\r")
        ctx.check_items(breaks + 1)
        s = _pinned_text(obj, name)
        keepends = _arg(args, kwargs, 0, "keepends", False)
        if s is not None and len(args) + len(kwargs) <= 1 and set(kwargs) <= {"keepends"} \
                and type(keepends) in (bool, int):
            ctx.charge(unistr.cost(name, s))
            return unistr.splitlines(s, bool(keepends))
    return _plain(obj, name, args, kwargs)


def _translate(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if isinstance(obj, str) and len(args) == 1 and not kwargs:
        table = args[0]
        widest = 1
        if isinstance(table, dict | list | tuple):
            values = list(table.values()) if isinstance(table, dict) else list(table)
            ctx.charge(costs.items_cost(len(values)))
            for v in values:
                if isinstance(v, str):
                    widest = max(widest, len(v))
        elif not isinstance(table, str):
            raise TypeError("PVM: str.translate() needs a dict, list, tuple or str table")
        ctx.check_bytes(len(obj) * widest)
        return obj.translate(table)
    return _scan(ctx, obj, name, args, kwargs)


def _to_bytes(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if isinstance(obj, int):
        ctx.check_bytes(_int_arg(_arg(args, kwargs, 0, "length", 1)))
    return _plain(obj, name, args, kwargs)


def from_bytes(ctx: Ctx, kind: type, *args: Any, **kwargs: Any) -> Any:
    data = _arg(args, kwargs, 0, "bytes", b"")
    if not isinstance(data, bytes | bytearray):
        data = bytes(guards.materialize(ctx, data, ctx.limits.max_bytes_object))
    ctx.check_bytes(len(data))
    rest = args[1:]
    kwargs.pop("bytes", None)
    value = kind.from_bytes(data, *rest, **kwargs)  # type: ignore[attr-defined]
    return ctx.int_result(value) if type(value) is int else value


def _from_bytes(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if isinstance(obj, int):
        return from_bytes(ctx, int, *args, **kwargs)
    return _plain(obj, name, args, kwargs)


def _fromhex(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if isinstance(obj, bytes | bytearray | float) and args and isinstance(args[0], str):
        ctx.check_bytes(len(args[0]))
    return _plain(obj, name, args, kwargs)


def _hex(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if isinstance(obj, bytes | bytearray):
        ctx.check_bytes(3 * len(obj))
    return _plain(obj, name, args, kwargs)


def _isdisjoint(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if type(obj) in walk.DICT_VIEWS and len(args) == 1:
        other = guards.materialize(ctx, args[0])
        if type(obj) is walk.DictKeys:
            for item in other:
                walk.check_key(ctx, item)
        else:
            raise TypeError("PVM: isdisjoint() is only supported on dict keys views")
        view: Any = obj
        return view.isdisjoint(other)
    return _plain(obj, name, args, kwargs)


def _maketrans(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    result = _plain(obj, name, args, kwargs)
    ctx.check_size(result)
    return result


_SCAN_NAMES = (
    "removeprefix", "removesuffix", "isascii", "startswith", "endswith", "find",
    "rfind", "rindex", "partition", "rpartition",
)
_STRIPS = frozenset({"strip", "lstrip", "rstrip"})
#: str methods whose result depends on Unicode data: computed from the pinned tables (unistr)
UNICODE_METHOD_NAMES = frozenset(unistr.PREDICATES | set(unistr.MAPPINGS) | _STRIPS)

_GUARDS: dict[str, Guard] = {name: _scan for name in _SCAN_NAMES}
_GUARDS.update({name: _unicode for name in UNICODE_METHOD_NAMES})
_GUARDS.update({
    "count": _eq_scan, "index": _eq_scan, "remove": _eq_scan,
    "copy": _copy, "reverse": _move, "insert": _move, "pop": _move,
    "get": _key, "setdefault": _key, "update": _update, "fromkeys": _fromkeys,
    "extend": _extend, "sort": _sort, "encode": _encode, "decode": _decode, "join": _join,
    "replace": _replace, "center": _pad, "ljust": _pad, "rjust": _pad, "zfill": _pad,
    "expandtabs": _expandtabs, "split": _split, "rsplit": _split, "splitlines": _splitlines,
    "translate": _translate, "to_bytes": _to_bytes, "from_bytes": _from_bytes, "fromhex": _fromhex,
    "hex": _hex, "isdisjoint": _isdisjoint, "maketrans": _maketrans,
})

#: Attribute names routed through the runtime (part of the protocol: see docs/pvm.md).
GUARDED_METHOD_NAMES: frozenset[str] = frozenset(_GUARDS)
#: Class-level constructors reachable from a type (``dict.fromkeys``, ``int.from_bytes``...).
CLASS_METHODS = frozenset({"fromkeys", "from_bytes", "fromhex", "maketrans"})


def call_method(ctx: Ctx, obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``obj.name(*args, **kwargs)`` through the guard of ``name``."""
    guard = _GUARDS.get(name)
    if guard is None:
        ctx.halt("forbidden", f"method {name!r} is not routed through the PVM")
    try:
        return guard(ctx, obj, name, args, kwargs)
    except (TypeError, ValueError) as exc:
        canon.pin(exc, canon.site(obj, name))  # CPython's wording of this method's argument errors, as 3.11's
        raise


def call_class_method(ctx: Ctx, kind: type, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``kind.name(...)`` for the class-level constructors of builtin types."""
    try:
        return _class_method(ctx, kind, name, args, kwargs)
    except (TypeError, ValueError) as exc:
        canon.pin(exc, canon.site(None, name))
        raise


def _class_method(ctx: Ctx, kind: type, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if name == "fromkeys" and issubclass(kind, dict):
        if kwargs or not 1 <= len(args) <= 2:
            raise TypeError("fromkeys expected 1 or 2 arguments")
        return fromkeys(ctx, kind, *args)
    if name == "from_bytes" and issubclass(kind, int):
        return from_bytes(ctx, kind, *args, **kwargs)
    if name == "fromhex" and args and isinstance(args[0], str):
        ctx.check_bytes(len(args[0]))
    result = getattr(kind, name)(*args, **kwargs)
    ctx.check_size(result)
    return result
