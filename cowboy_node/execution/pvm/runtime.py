"""The actor's world: the curated builtins and the ``_pvm_*`` helpers the instrumenter calls.

A :class:`Sandbox` holds one :class:`Ctx` and a builtins dict (never the ``builtins``
module) holding only the names listed in ``docs/pvm.md`` plus the helpers, which are
closures over that context.  The helpers are built once per Sandbox and re-armed for
each call (:meth:`Sandbox.open`); :func:`build_globals` builds a fresh set for one call
(the reference the reuse is tested against).  The hot helpers (charge, arithmetic and
comparisons on small ints, dict keys) have inline fast paths; everything else goes to
``guards``/``methods``/``text``.
"""

from __future__ import annotations

import builtins
import functools
import operator
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from cowboy_node.execution.meter import Meter
from cowboy_node.execution.pvm import canon, costs, guards, methods, text, walk
from cowboy_node.execution.pvm.ctx import Ctx
from cowboy_node.execution.pvm.limits import Limits
from cowboy_node.execution.pvm.policy import STDLIB_MODULES
from cowboy_node.execution.pvm.pvm_errors import PvmHalt
from cowboy_node.execution.pvm.stdlib import ModuleView, host_view, stdlib_module
from cowboy_node.execution.validity_errors import TxFailed

EXCEPTIONS: tuple[type[Exception], ...] = (
    Exception, ArithmeticError, AssertionError, AttributeError, ImportError, IndexError, KeyError,
    LookupError, NameError, NotImplementedError, OverflowError, RuntimeError, StopIteration, TypeError,
    UnicodeError, UnicodeDecodeError, UnicodeEncodeError, ValueError, ZeroDivisionError,
)
_FAST = frozenset({int, float, bool, type(None)})
_BUILTIN_RECEIVERS = (str, bytes, bytearray, list, tuple, dict, int, float, range)


class GuardedType:
    """Stands for a builtin type in actor code: calling it runs the guarded constructor.

    ``isinstance``/``issubclass`` work through ``__instancecheck__``; class-level
    constructors (``dict.fromkeys``, ``int.from_bytes``...) and unbound methods
    (``str.upper``) are routed through the runtime; builtin types cannot be subclassed.
    """

    __slots__ = ("_pvm_make", "_pvm_real")

    def __init__(self, real: type, make: Callable[..., Any]) -> None:
        self._pvm_real = real
        self._pvm_make = make

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._pvm_make(*args, **kwargs)

    def __instancecheck__(self, instance: Any) -> bool:
        return isinstance(instance, self._pvm_real)

    def __subclasscheck__(self, cls: Any) -> bool:
        return issubclass(cls, self._pvm_real)

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[Any, ...]:
        raise TypeError(f"PVM: the builtin type {self._pvm_real.__name__} cannot be subclassed")

    def __getattr__(self, name: str) -> Any:
        real = self._pvm_real
        if not name.startswith("_"):
            try:
                return getattr(real, name)
            except AttributeError:
                pass
        # a fresh error: CPython's would carry the real type in its ``obj`` attribute
        raise AttributeError(f"type object '{real.__name__}' has no attribute '{name}'")

    def __repr__(self) -> str:
        return f"<class '{self._pvm_real.__name__}'>"


text.TRUSTED_REPR.add(GuardedType)


_BUILTIN_TYPES = frozenset({str, bytes, bytearray, list, tuple, dict, int, float, bool, range})


def _type_receiver(obj: Any) -> type | None:
    if isinstance(obj, GuardedType):
        return obj._pvm_real
    if isinstance(obj, type) and obj in _BUILTIN_TYPES:
        return obj
    return None


#: Re-arms one step's closure cells for a call, from the (already reset) Ctx and the call's host modules
#: and declared imports.
Binder = Callable[[Mapping[str, object], tuple[str, ...]], None]
_NO_MODULES: Mapping[str, object] = MappingProxyType({})
_IDLE_METER = Meter(0, 0)
_IDLE_LIMITS = Limits()
#: The sticky halt of a context whose call has finished (anything still holding it halts with this).
FINISHED = ("forbidden", "the call has finished")


class Sandbox:
    """A reusable sandbox: one :class:`Ctx` and the builtins whose ``_pvm_*`` helpers close over it.

    Why: building the helpers (some eighty closures) costs about as much as a whole trivial handler
    call, and every timer fire and message pays for a call.  A Sandbox builds them once; :meth:`open`
    re-arms it for a call and :meth:`close` retires it.  What makes a reused Sandbox indistinguishable
    from a fresh build (``tests/unit/execution/pvm/test_pvm_sandbox_reuse.py`` checks each point):

    * One call at a time: from :meth:`open` to :meth:`close` a Sandbox belongs to one running
      ``call_handler``; ``sandbox.py`` hands them out from a free list, so a nested call (an actor
      calling an actor) or a concurrent one (the RPC read pool) gets another.
    * Everything per call is in the Ctx, which :meth:`open` resets (meter, limits, host modules, depth,
      halt, actor classes, integer bound), or in closure cells that the steps' binders re-arm from it
      (the meter and its ``charge_cycles``, the recursion limit, the integer bounds, the declared
      imports, a new import cache).  The hot paths read those cells exactly as a fresh build's
      closures do: the cost per charge is unchanged.
    * Module globals are a new dict per call (:meth:`open`); the builtins dict is shared, but actor code
      can neither name it (``__builtins__``, ``globals``, ``vars`` and dunder attributes are refused at
      deploy time) nor write attributes of anything in it (``_pvm_wobj`` admits only the call's own
      classes; GuardedType and ModuleView have no instance dict).
    * :meth:`close` leaves the Ctx halted like a finished call, then drops the call's meter, host
      modules and import views, so an idle Sandbox keeps no world state alive.

    Nothing an actor creates survives its call (handlers exchange bytes; the module globals are cleared
    at the end), so no object of an earlier call can reach the helpers while a later call runs.
    """

    __slots__ = ("_binders", "builtins", "ctx")

    def __init__(self) -> None:
        self.ctx = Ctx(_IDLE_METER, _IDLE_LIMITS, _NO_MODULES)
        binders: list[Binder] = []
        #: The actor's ``__builtins__``: built once, never changed after construction.
        self.builtins: dict[str, Any] = _make_builtins(self.ctx, binders)
        self._binders = tuple(binders)
        self.ctx.halted = FINISHED

    def open(self, meter: Meter, limits: Limits, modules: Mapping[str, object],
             imports: tuple[str, ...]) -> dict[str, Any]:
        """Arm the Sandbox for one call; returns that call's (new) module globals."""
        self.ctx.reset(meter, limits, modules)
        for bind in self._binders:
            bind(modules, imports)
        return {"__builtins__": self.builtins, "__name__": "actor"}

    def close(self) -> None:
        """Retire the call: the Ctx is halted with ``FINISHED`` until the next :meth:`open` (anything
        still holding it halts, as with a finished call's context); the call's meter, modules and
        imports are dropped."""
        ctx = self.ctx
        ctx.reset(_IDLE_METER, _IDLE_LIMITS, _NO_MODULES)
        for bind in self._binders:
            bind(_NO_MODULES, ())
        ctx.halted = FINISHED


def build_globals(ctx: Ctx, modules: Mapping[str, object], imports: tuple[str, ...]) -> dict[str, Any]:
    """Fresh globals with a fresh set of helpers over ``ctx``, for one execution of an actor module.

    ``call_handler`` reuses :class:`Sandbox` objects instead; this is the build-per-call reference
    that tests and ``bench/pvm_call_setup.py`` compare the reuse with.
    """
    binders: list[Binder] = []
    env = _make_builtins(ctx, binders)
    for bind in binders:
        bind(modules, imports)
    return {"__builtins__": env, "__name__": "actor"}


def _make_builtins(ctx: Ctx, binders: list[Binder]) -> dict[str, Any]:
    """The actor's builtins over ``ctx``: steps with per-call cells append their binder to ``binders``.

    Each step returns the names it contributes: first the ``_pvm_*`` helpers the instrumenter's
    code calls (given here without the prefix), then the builtins actor code may name.  The
    helpers are closures over the context, so the hot paths read only local cells.
    """
    hooks = _metering_hooks(ctx, binders)
    arithmetic = _arithmetic(ctx, binders)
    keys = _key_guards(ctx)
    helpers: dict[str, Any] = {
        **hooks,
        **arithmetic,
        **_comparisons(ctx, hooks["charge"]),
        **keys,
        **_attribute_guards(ctx),
        **_import_hooks(ctx, binders),
        **_sequence_and_text_guards(ctx, hooks["charge"], keys["key"]),
        **_inplace_operators(ctx, arithmetic, binders),
    }
    env: dict[str, Any] = {f"_pvm_{name}": fn for name, fn in helpers.items()}
    env.update(_guarded_builtins(ctx))
    env.update(_type_wrappers(ctx))
    env.update(_exception_types())
    env["__build_class__"] = builtins.__build_class__  # the ``class`` statement; class_ registers the result
    return env


def _metering_hooks(ctx: Ctx, binders: list[Binder]) -> dict[str, Any]:
    """charge, tick, enter/exit, lam_in/lam_out, caught: cycle charging and the call-depth limit."""
    meter = ctx.meter
    charge_cycles = meter.charge_cycles
    max_depth = ctx.limits.max_recursion_depth

    def bind(modules: Mapping[str, object], imports: tuple[str, ...]) -> None:
        nonlocal meter, charge_cycles, max_depth
        meter = ctx.meter
        charge_cycles = meter.charge_cycles
        max_depth = ctx.limits.max_recursion_depth

    binders.append(bind)

    def charge(n: int) -> None:
        # Fast path keeps Meter's arithmetic; on overflow Meter.charge_cycles pins and raises. The bound is
        # read from the meter on every charge (not cached): Meter.interrupt lowers it from another thread.
        if ctx.halted is not None:
            raise PvmHalt(*ctx.halted)
        used = meter.cycles_used + n
        if used <= meter.ceiling:
            meter.cycles_used = used
            return
        try:
            charge_cycles(n)
        except TxFailed as exc:
            ctx.halt(exc.code, str(exc))

    def tick(n: int) -> bool:
        charge(n)
        return True

    def enter(n: int) -> int:
        charge(n)
        d = ctx.depth + 1
        if d > max_depth:
            ctx.halt("recursion_limit", f"call depth over {max_depth}")
        ctx.depth = d
        return d

    def exit_(d: int) -> None:
        ctx.depth = d - 1

    def lam_in(n: int) -> None:
        enter(n)

    def lam_out(_: None, value: Any) -> Any:
        ctx.depth -= 1
        return value

    def caught(d: int, exc: BaseException, n: int) -> None:
        charge(n)
        ctx.depth = d
        if isinstance(exc, AttributeError):
            exc.obj = None  # may reference an object the actor must not hold (a real builtin type)
        if isinstance(exc, RecursionError):
            ctx.halt("recursion_limit", "interpreter recursion limit reached")
        if isinstance(exc, MemoryError):
            ctx.halt("memory_limit", "interpreter out of memory")

    return {"charge": charge, "tick": tick, "enter": enter, "exit": exit_, "lam_in": lam_in, "lam_out": lam_out,
            "caught": caught}


def _arithmetic(ctx: Ctx, binders: list[Binder]) -> dict[str, Any]:
    """add, sub, mul, ..., invert: arithmetic with a small-int fast path, bounding integer size."""
    bound = ctx.int_bound
    small = 1 << min(64, ctx.limits.max_int_bits // 2)

    def bind(modules: Mapping[str, object], imports: tuple[str, ...]) -> None:
        nonlocal bound, small
        bound = ctx.int_bound
        small = 1 << min(64, ctx.limits.max_int_bits // 2)

    binders.append(bind)

    def add(a: Any, b: Any) -> Any:
        if type(a) is int and type(b) is int:
            r = a + b
            if -bound < r < bound:
                return r
        return guards.add(ctx, a, b)

    def sub(a: Any, b: Any) -> Any:
        if type(a) is int and type(b) is int:
            r = a - b
            if -bound < r < bound:
                return r
        return guards.sub(ctx, a, b)

    def mul(a: Any, b: Any) -> Any:
        if type(a) is int and type(b) is int and -small < a < small and -small < b < small:
            return a * b
        return guards.mul(ctx, a, b)

    def floordiv(a: Any, b: Any) -> Any:
        if type(a) is int and type(b) is int and -small < a < small and -small < b < small:
            return a // b
        return guards.floordiv(ctx, a, b)

    def mod(a: Any, b: Any) -> Any:
        if type(a) is int and type(b) is int and -small < a < small and -small < b < small:
            return a % b
        return guards.mod(ctx, a, b)

    def truediv(a: Any, b: Any) -> Any:
        return guards.truediv(ctx, a, b)

    def power(a: Any, b: Any) -> Any:
        return guards.power(ctx, a, b)

    def lshift(a: Any, b: Any) -> Any:
        return guards.lshift(ctx, a, b)

    def invert(a: Any) -> Any:
        return ctx.int_result(~a) if type(a) is int else ~a

    def bitop(op: str) -> Callable[[Any, Any], Any]:
        fast = {"|": operator.or_, "&": operator.and_, "^": operator.xor}[op]
        slow = guards.BINOPS[op]

        def helper(a: Any, b: Any) -> Any:
            if type(a) is int and type(b) is int:
                return fast(a, b)
            return slow(ctx, a, b)

        return helper

    return {"add": add, "sub": sub, "mul": mul, "truediv": truediv, "floordiv": floordiv, "mod": mod,
            "pow": power, "lshift": lshift, "bitor": bitop("|"), "bitand": bitop("&"), "bitxor": bitop("^"),
            "invert": invert}


def _comparisons(ctx: Ctx, charge: Callable[[int], None]) -> dict[str, Any]:
    """eq, ne, lt, lte, gt, gte: comparisons, free on scalars, charged on long strings and containers."""

    def comparison(op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        def helper(a: Any, b: Any) -> Any:
            ta = type(a)
            if ta in _FAST or type(b) in _FAST:
                return op(a, b)
            if ta is str and type(b) is str:
                if len(a) >= 256 and len(b) >= 256:
                    charge(min(len(a), len(b)) >> costs.CMP_SHIFT)
                return op(a, b)
            return guards.compare(ctx, op, a, b)

        return helper

    return {"eq": comparison(operator.eq), "ne": comparison(operator.ne), "lt": comparison(operator.lt),
            "lte": comparison(operator.le), "gt": comparison(operator.gt), "gte": comparison(operator.ge)}


def _key_guards(ctx: Ctx) -> dict[str, Any]:
    """in, notin, key, getitem: membership and subscripts, admitting only deterministic dict keys."""
    key_bound = walk.KEY_INT_BOUND

    def key(k: Any) -> Any:
        t = type(k)
        if t is str or (t is int and -key_bound < k < key_bound):
            return k
        return walk.check_key(ctx, k)

    def contains(x: Any, c: Any) -> bool:
        if type(c) is dict:
            return key(x) in c
        return guards.contains(ctx, x, c)

    def not_contains(x: Any, c: Any) -> bool:
        return not contains(x, c)

    def getitem(obj: Any, k: Any) -> Any:
        t = type(obj)
        if t is dict or (t is not list and t is not tuple and t is not str and t is not bytes
                         and isinstance(obj, dict)):
            return obj[key(k)]
        return obj[k]

    return {"in": contains, "notin": not_contains, "key": key, "getitem": getitem}


def _attribute_guards(ctx: Ctx) -> dict[str, Any]:
    """callm, attr, wobj, class, init: attribute access and method calls, only through the allow-lists."""
    key_bound = walk.KEY_INT_BOUND

    def callm(obj: Any, name: str, /, *args: Any, **kwargs: Any) -> Any:
        if type(obj) is dict and (name == "get" or name == "setdefault") and args and not kwargs:
            k = args[0]
            if not (type(k) is str or (type(k) is int and -key_bound < k < key_bound)):
                walk.check_key(ctx, k)
            return obj.get(*args) if name == "get" else obj.setdefault(*args)
        real = _type_receiver(obj)
        if real is None:
            return methods.call_method(ctx, obj, name, args, kwargs)
        if name in methods.CLASS_METHODS:
            return methods.call_class_method(ctx, real, name, args, kwargs)
        if not args or not isinstance(args[0], real):
            raise TypeError(f"unbound method {real.__name__}.{name}() needs a {real.__name__} argument")
        return methods.call_method(ctx, args[0], name, args[1:], kwargs)

    def attr(obj: Any, name: str) -> Any:
        if name not in methods.GUARDED_METHOD_NAMES:
            ctx.halt("forbidden", f"attribute {name!r} is not routed through the PVM")
        if _type_receiver(obj) is None and not isinstance(obj, _BUILTIN_RECEIVERS) \
                and type(obj) not in walk.DICT_VIEWS:
            return getattr(obj, name)
        getattr(obj, name)  # AttributeError now if there is no such method

        def method(*args: Any, **kwargs: Any) -> Any:
            return callm(obj, name, *args, **kwargs)

        return method

    def wobj(obj: Any) -> Any:
        cls = obj if isinstance(obj, type) else type(obj)
        if ctx.actor_classes.get(id(cls)) is cls:
            return obj
        raise AttributeError(f"PVM: cannot set or delete attributes of {cls.__name__} objects")

    def init(obj: Any) -> Any:
        """``obj.__init__`` for actor classes and exceptions only (builtin constructors are guarded)."""
        cls = obj if isinstance(obj, type) else type(obj)
        if ctx.actor_classes.get(id(cls)) is cls or issubclass(cls, BaseException):
            if obj is not cls:
                return obj.__init__
            unbound = cls.__init__

            def init_of(self: Any, *args: Any, **kwargs: Any) -> Any:
                # ``Base.__init__(x)`` only on instances: a host-installed __init__ (cowboy_sdk's
                # @actor) would otherwise set attributes on any object, e.g. a shared SDK function
                if not isinstance(self, cls):
                    raise TypeError(f"{cls.__name__}.__init__() needs a {cls.__name__} instance")
                return unbound(self, *args, **kwargs)

            # actors see this name in arity errors (``A.__init__()``): keep the one it had when the
            # helpers were all nested in build_globals, so such results stay byte-identical
            init_of.__qualname__ = "build_globals.<locals>.init.<locals>.init_of"
            return init_of
        raise AttributeError(f"PVM: __init__ of {cls.__name__} objects is not accessible")

    def class_(cls: type) -> type:
        ctx.actor_classes[id(cls)] = cls
        return cls

    return {"callm": callm, "attr": attr, "wobj": wobj, "class": class_, "init": init}


def _import_hooks(ctx: Ctx, binders: list[Binder]) -> dict[str, Any]:
    """import, import_from: the modules declared at deploy time, as host/stdlib views cached per call."""
    modules: Mapping[str, object] = ctx.modules
    allowed_imports: frozenset[str] = frozenset()
    imported: dict[str, ModuleView] = {}

    def bind(call_modules: Mapping[str, object], imports: tuple[str, ...]) -> None:
        nonlocal modules, allowed_imports, imported
        modules = call_modules
        allowed_imports = frozenset(imports)
        imported = {}

    binders.append(bind)

    def import_(name: str) -> ModuleView:
        view = imported.get(name)
        if view is not None:
            return view
        if name not in allowed_imports:
            ctx.halt("forbidden", f"import of {name!r} was not declared at deploy time")
        if name in modules:
            view = host_view(ctx, name, modules[name])
        elif name in STDLIB_MODULES:
            view = stdlib_module(ctx, name)
        else:
            raise ImportError(f"module {name!r} is not provided by the host")
        imported[name] = view
        return view

    def import_from(module: str, name: str) -> Any:
        view = import_(module)
        try:
            return getattr(view, name)
        except AttributeError:
            raise ImportError(f"cannot import name {name!r} from {module!r}") from None

    return {"import": import_, "import_from": import_from}


def _sequence_and_text_guards(ctx: Ctx, charge: Callable[[int], None], key: Callable[[Any], Any]) -> dict[str, Any]:
    """seq, mapping, sized, setslice, delitem, slice, fmt, fjoin: unpacking, slices, f-strings, charged by size."""

    def setslice(obj: Any, lo: Any, hi: Any, step: Any, value: Any) -> None:
        if isinstance(obj, bytearray) and isinstance(value, bytes | bytearray):
            charge(costs.bytes_cost(len(obj) + len(value)))
            ctx.limit_bytes(len(obj) + len(value))
        else:
            value = guards.seq(ctx, value)  # charges the new items
            if isinstance(obj, list | bytearray):
                charge(costs.bytes_cost(len(obj)))
                ctx.limit_items(len(obj) + len(value))
        obj[slice(lo, hi, step)] = value

    def delitem(obj: Any, k: Any) -> None:
        if isinstance(obj, list | bytearray):
            charge(costs.bytes_cost(len(obj)))
        elif isinstance(obj, dict):
            key(k)
        del obj[k]

    return {
        "seq": lambda v: guards.seq(ctx, v), "mapping": lambda v: guards.mapping(ctx, v),
        "sized": lambda v: guards.sized(ctx, v),
        "setslice": setslice, "delitem": delitem, "slice": slice,
        "fmt": lambda v, conv, spec: text.fmt(ctx, v, conv, spec),
        "fjoin": lambda parts: text.fjoin(ctx, parts),
    }


_INPLACE_OPS = {"mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**", "lshift": "<<",
                "bitor": "|", "bitand": "&", "bitxor": "^"}


def _inplace_operators(ctx: Ctx, arithmetic: Mapping[str, Callable[[Any, Any], Any]],
                       binders: list[Binder]) -> dict[str, Any]:
    """iadd, isub, imul, ...: augmented assignment; lists, bytearrays and dicts grow in place under the limits."""
    bound = ctx.int_bound

    def bind(modules: Mapping[str, object], imports: tuple[str, ...]) -> None:
        nonlocal bound
        bound = ctx.int_bound

    binders.append(bind)

    def iadd(a: Any, b: Any) -> Any:
        t = type(a)
        if t is int and type(b) is int:
            r = a + b
            if -bound < r < bound:
                return r
        elif t is list or t is bytearray or t is dict:
            return guards.inplace(ctx, "+", a, b)
        return guards.add(ctx, a, b)

    def isub(a: Any, b: Any) -> Any:
        if type(a) is int and type(b) is int:
            r = a - b
            if -bound < r < bound:
                return r
        return guards.sub(ctx, a, b)

    def inplace(op: str, plain: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        def helper(a: Any, b: Any) -> Any:
            t = type(a)
            if t is list or t is bytearray or t is dict:
                return guards.inplace(ctx, op, a, b)
            return plain(a, b)

        return helper

    helpers: dict[str, Any] = {"iadd": iadd, "isub": isub}
    for name, op in _INPLACE_OPS.items():
        helpers[f"i{name}"] = inplace(op, arithmetic[name])
    return helpers


class PinnedBuiltin:
    """A CPython builtin function whose argument handling or error texts :mod:`canon` pins; it renders
    as the builtin did (``repr(chr)`` is part of version 1's results)."""

    __slots__ = ("_pvm_fn",)

    def __init__(self, fn: Callable[..., Any]) -> None:
        self._pvm_fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._pvm_fn(*args, **kwargs)

    def __repr__(self) -> str:
        return "<builtin_function_or_method object>"


text.TRUSTED_REPR.add(PinnedBuiltin)
_PINNED_CHR = PinnedBuiltin(canon.chr_)
_PINNED_ITER = PinnedBuiltin(canon.builtin(iter, "iter"))


class PinnedType(GuardedType):
    """A builtin type actors could always subclass (``zip``) whose calls :mod:`canon` pins: it stays a type for
    ``isinstance``, renders as ``<class 'zip'>`` and may still be subclassed (the subclass is the real type's)."""

    __slots__ = ()

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self._pvm_real,)


text.TRUSTED_REPR.add(PinnedType)
_PINNED_ZIP = PinnedType(zip, canon.builtin(zip, "zip"))


def _guarded_builtins(ctx: Ctx) -> dict[str, Any]:
    """The builtin functions of docs/pvm.md: harmless ones as is, the others bound to the context to charge."""

    def bind(fn: Callable[..., Any]) -> Callable[..., Any]:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            return fn(ctx, *args, **kwargs)

        return guarded

    return {
        "abs": abs, "all": bind(guards.all_), "any": bind(guards.any_), "bin": bin, "bool": bool,
        "callable": callable, "chr": _PINNED_CHR, "divmod": bind(guards.divmod_), "enumerate": enumerate,
        "filter": bind(guards.filter_), "format": bind(text.format_value), "hex": hex,
        "isinstance": bind(guards.isinstance_), "issubclass": bind(guards.issubclass_), "iter": _PINNED_ITER,
        "len": len, "map": map, "max": bind(guards.max_),
        "min": bind(guards.min_), "next": next, "oct": oct, "ord": ord, "pow": bind(guards.power),
        "range": range, "repr": bind(text.safe_repr), "reversed": reversed, "round": bind(guards.round_),
        "sorted": bind(guards.sorted_), "sum": bind(guards.sum_), "zip": _PINNED_ZIP,
    }


def _type_wrappers(ctx: Ctx) -> dict[str, Any]:
    """list, tuple, dict, bytes, bytearray, str, int, float: guarded constructors that still work with isinstance."""

    def make(real: type, fn: Callable[..., Any]) -> GuardedType:
        # the partial stays in a private slot: actors never see its .args (the context)
        return GuardedType(real, functools.partial(fn, ctx))

    return {
        "list": make(list, guards.make_list), "tuple": make(tuple, guards.make_tuple),
        "dict": make(dict, guards.make_dict), "bytes": make(bytes, guards.make_bytes),
        "bytearray": make(bytearray, guards.make_bytearray), "str": make(str, guards.make_str),
        "int": make(int, guards.make_int), "float": make(float, guards.make_float),
    }


_EXCEPTIONS_BY_NAME: Mapping[str, type[Exception]] = {exc.__name__: exc for exc in EXCEPTIONS}


def _exception_types() -> Mapping[str, type[Exception]]:
    """The exception classes actors may raise and catch (the real ones, so ``except`` matches host errors)."""
    return _EXCEPTIONS_BY_NAME  # read-only here: build_globals copies it into the call's builtins
