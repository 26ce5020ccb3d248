"""Compile actors (policy + instrumentation) and call their handlers."""

from __future__ import annotations

import ast
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cowboy_node.execution.meter import Meter
from cowboy_node.execution.pvm import costs, text
from cowboy_node.execution.pvm.ctx import ACTIVE, Ctx
from cowboy_node.execution.pvm.instrument import instrument
from cowboy_node.execution.pvm.limits import Limits
from cowboy_node.execution.pvm.policy import DEFAULT_HOST_MODULES, check_source
from cowboy_node.execution.pvm.pvm_errors import ActorRejected, PvmError, PvmHalt
from cowboy_node.execution.pvm.runtime import Sandbox
from cowboy_node.execution.pvm.where import at_line
from cowboy_protocol.crypto.keccak import keccak256

_DEFAULT_LIMITS = Limits()
_NO_MODULES: Mapping[str, object] = types.MappingProxyType({})
#: Longest exception message carried by a ``handler_error``.
MAX_ERROR_MESSAGE = 1024
#: ``str(int)`` of max_int_bits needs this many digits; CPython must allow them.
_NEEDED_STR_DIGITS = 1240


@dataclass(frozen=True)
class CompiledActor:
    """A deployable actor: ``source_hash`` is keccak256 of the UTF-8 source."""

    source_hash: bytes
    handlers: tuple[str, ...]
    code: types.CodeType = field(compare=False, repr=False)
    #: Modules the source imports (checked against the allow-list at deploy time).
    imports: tuple[str, ...] = field(default=(), compare=False, repr=False)
    #: Name of the module's single ``@actor`` class (cowboy-actor-sdk), if any.
    actor_class: str | None = field(default=None, compare=False, repr=False)
    #: Handlers that are methods of ``actor_class`` (module-level ``def``s take precedence).
    class_handlers: tuple[str, ...] = field(default=(), compare=False, repr=False)


def _check_interpreter() -> None:
    limit = sys.get_int_max_str_digits()
    if 0 < limit < _NEEDED_STR_DIGITS:
        raise RuntimeError(
            f"sys.get_int_max_str_digits() is {limit}; the PVM needs 0 or >= {_NEEDED_STR_DIGITS} "
            "(do not set PYTHONINTMAXSTRDIGITS on a node)"
        )


def compile_actor(source: str, *, limits: Limits = _DEFAULT_LIMITS,
                  allowed_modules: Mapping[str, object] | Iterable[str] | None = None,
                  transform: Callable[[ast.Module, str], ast.Module] | None = None) -> CompiledActor:
    """Check ``source`` against the policy and instrument it.

    ``allowed_modules`` names the host modules the actor may import (a mapping's keys
    are used); ``None`` means the default host modules ``pvm_host`` and ``cowboy_sdk``.
    The PVM's own ``json``, ``math`` and ``typing`` are always importable. ``transform``
    rewrites the parsed tree before the policy runs (``policy.check_source``).
    Raises :class:`ActorRejected` naming the first violation.
    """
    _check_interpreter()
    allowed = DEFAULT_HOST_MODULES if allowed_modules is None else frozenset(allowed_modules)
    checked = check_source(source, limits, allowed, transform)
    tree = instrument(checked.tree)
    try:
        code = compile(tree, "<actor>", "exec", dont_inherit=True, optimize=0)
    except SyntaxError as exc:  # an instrumented construct CPython refuses (e.g. walrus in a class comprehension)
        raise ActorRejected(exc.lineno or 0, "unsupported_construct", exc.msg) from None
    except (RecursionError, MemoryError, ValueError) as exc:
        raise ActorRejected(0, "too_complex", type(exc).__name__) from None
    source_hash = keccak256(source.encode("utf-8", "surrogatepass"))
    return CompiledActor(source_hash, checked.handlers, code, checked.imports, checked.actor_class,
                         checked.class_handlers)


def describe_exception(exc: BaseException, limits: Limits = _DEFAULT_LIMITS) -> str:
    """``"TypeName: message"`` rendered deterministically and truncated (unmetered)."""
    scratch = Ctx(Meter(1 << 40, 0), Limits(max_bytes_object=4 * MAX_ERROR_MESSAGE,
                                             max_nesting_depth=limits.max_nesting_depth))
    try:
        message = text.safe_str(scratch, exc)
    except PvmHalt:
        message = "<message too large>"
    out = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return out[:MAX_ERROR_MESSAGE]


def _actor_method(ctx: Ctx, actor: CompiledActor, env: dict[str, Any], handler: str) -> Any:
    """``handler`` bound to a fresh instance of the module's ``@actor`` class (cowboy-actor-sdk).

    The class must really have been decorated by the SDK (which marks it ``_is_cowboy_actor``);
    the SDK's own wrappers then enforce its permissions and handler modes.
    """
    cls = env.get(actor.actor_class or "")
    if not (isinstance(cls, type) and ctx.actor_classes.get(id(cls)) is cls
            and vars(cls).get("_is_cowboy_actor") is True):
        raise PvmError("no_such_handler", f"{handler!r}: {actor.actor_class!r} is not an @actor class")
    ctx.charge(costs.SDK_CALL)
    instance = cls()
    return getattr(instance, handler, None)


#: Idle sandboxes (``runtime.Sandbox``).  ``list.pop``/``list.append`` are atomic, so a Sandbox is only
#: ever held by one call: a nested call (an actor calling an actor) or a concurrent one (RPC reads on other
#: threads) takes another one, or builds one when the list is empty.
_IDLE: list[Sandbox] = []
#: More idle sandboxes than this are dropped (enough for the deepest nesting on a few threads).
MAX_IDLE_SANDBOXES = 64


def _take_sandbox() -> Sandbox:
    try:
        return _IDLE.pop()
    except IndexError:
        return Sandbox()


def _give_back(box: Sandbox) -> None:
    if len(_IDLE) < MAX_IDLE_SANDBOXES:
        _IDLE.append(box)


def call_handler(actor: CompiledActor, handler: str, payload: bytes, *, meter: Meter,
                 limits: Limits = _DEFAULT_LIMITS, modules: Mapping[str, object] = _NO_MODULES) -> bytes:
    """Run ``handler(payload)`` in a sandbox (fresh module globals, re-armed helpers) and return its bytes.

    A handler returning ``None`` returns ``b""`` (the SDK's "no output"). Every outcome is
    either the returned bytes or a :class:`PvmError` (see
    ``errors.HALT_CODES``).  Cycles are charged to ``meter``; on ``out_of_cycles``
    the meter's usage equals its limit.
    """
    _check_interpreter()
    if type(payload) is not bytes:
        payload = bytes(payload)
    if len(payload) > limits.max_payload_bytes:
        raise PvmError("payload_too_large", f"payload of {len(payload)} bytes, limit {limits.max_payload_bytes}")
    if handler not in actor.handlers:
        raise PvmError("no_such_handler", f"actor has no handler {handler!r}")
    box = _take_sandbox()
    ctx = box.ctx
    env = box.open(meter, limits, modules, actor.imports)
    result: Any = None
    token = ACTIVE.set(ctx)
    try:
        exec(actor.code, env)
        fn = _actor_method(ctx, actor, env, handler) if handler in actor.class_handlers else env.get(handler)
        if not callable(fn):
            raise PvmError("no_such_handler", f"{handler!r} is not callable after module execution")
        result = fn(payload)
    except PvmHalt as halt:
        raise PvmError(halt.code, at_line(halt.message or halt.code, halt.__traceback__)) from None
    except PvmError:
        raise
    except RecursionError:
        raise PvmError("recursion_limit", "interpreter recursion limit reached") from None
    except MemoryError:
        raise PvmError("memory_limit", "interpreter out of memory") from None
    except Exception as exc:
        raise PvmError("handler_error", at_line(describe_exception(exc, limits), exc.__traceback__)) from None
    finally:
        ACTIVE.reset(token)
        env.clear()
        box.close()
        _give_back(box)
    if result is None:
        result = b""  # "no output", as cowboy_sdk's payload codec defines a None return
    if type(result) is not bytes:
        raise PvmError("bad_return_type", f"handler returned {type(result).__name__}, not bytes")
    if len(result) > limits.max_return_bytes:
        raise PvmError("payload_too_large", f"return value of {len(result)} bytes, limit {limits.max_return_bytes}")
    return result
