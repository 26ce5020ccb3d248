"""Run actors written with the public ``cowboy-actor-sdk`` (``cowboy_sdk``) in the PVM.

The SDK is trusted host code: it uses ``sys``, ``getattr``, ``object.__setattr__``... and
cannot pass the actor policy, so actors never see the real package. They import a
*curated view* (:data:`PUBLIC_NAMES`, docs/pvm.md §"Actors written with cowboy-actor-sdk")
whose entry points charge :data:`costs.SDK_CALL` cycles each and refuse to decorate
anything but the calling actor's own functions and classes (the SDK's decorators set
attributes on their argument; a shared SDK object must never be changed by an actor).

The SDK reaches the host through ``sys.modules["pvm_host"]``. :func:`install` puts one
process-wide proxy module there whose attributes resolve to the host of the *current*
frame: the host given to :func:`host_scope` (a ``ContextVar``, so nested ``call_actor``
frames push/pop and RPC threads running read-only calls never see each other's host),
or else the ``pvm_host`` module of the innermost running sandbox call. A ``TxFailed`` a
host function raises inside SDK code halts the actor (sticky), so SDK ``except
Exception`` blocks can never swallow ``out_of_cycles`` and similar halts.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any

import cowboy_sdk
from cowboy_sdk import codec as _sdk_codec
from cowboy_sdk import continuation as _sdk_cont
from cowboy_sdk import errors as _sdk_errors
from cowboy_sdk import runner as _sdk_runner
from cowboy_sdk import runtime as _sdk_runtime
from cowboy_sdk import sorted_map as _sdk_sorted_map
from cowboy_sdk import taskgroup as _sdk_taskgroup
from cowboy_sdk import types as _sdk_types
from cowboy_sdk.bounded_loop import BoundedRange, bounded_loop, check_iteration
from cowboy_sdk.events import emit as _untyped_emit
from cowboy_sdk.events import on_event as _untyped_on_event

from cowboy_node.execution.actors import fsm_loop_locals as fsm_carry
from cowboy_node.execution.pvm import costs
from cowboy_node.execution.pvm import ctx as pvm_ctx
from cowboy_node.execution.validity_errors import TxFailed

_SDK_TIMER: Any = cowboy_sdk.timer  # untyped in the SDK
_SDK_RUNNER: Any = _sdk_runner  # its stub (runner.pyi) omits the private helpers the lowered legs use
_TG_STATE: Any = _sdk_taskgroup._TaskGroupState  # the SDK's TaskGroup barrier (__taskgroup_barrier:<cid>)
_MAX_GROUP_TASKS = 8
_sdk_emit: Any = _untyped_emit  # untyped in the SDK
_sdk_on_event: Any = _untyped_on_event
_CURRENT: ContextVar[object | None] = ContextVar("cowboy_sdk_host", default=None)
_ACTOR_FILENAME = "<actor>"  # co_filename of code compiled by pvm.compile_actor


class _HostProxy(types.ModuleType):
    """``sys.modules["pvm_host"]``: attribute lookups go to the current frame's host."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(current_host(), name)
        if isinstance(value, types.FunctionType | types.MethodType | types.BuiltinFunctionType):
            return _halting(value)
        return value


def _halting(fn: Callable[..., Any]) -> Callable[..., Any]:
    def host_function(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TxFailed as exc:
            ctx = pvm_ctx.active()
            if ctx is None:
                raise
            ctx.halt(exc.code, str(exc))

    return host_function


_PROXY = _HostProxy("pvm_host", "The running actor frame's host (installed by cowboy_node sdk_bridge).")


def install() -> None:
    """Make ``sys.modules["pvm_host"]`` the proxy (idempotent; importing the SDK installs its mock)."""
    if sys.modules.get("pvm_host") is not _PROXY:
        sys.modules["pvm_host"] = _PROXY


def current_host() -> object:
    """The host of the running frame: :func:`host_scope`'s, else the innermost sandbox call's ``pvm_host``."""
    host = _CURRENT.get()
    if host is not None:
        return host
    ctx = pvm_ctx.active()
    host = ctx.modules.get("pvm_host") if ctx is not None else None
    if host is None:
        raise RuntimeError("pvm_host is only available while an actor handler runs")
    return host


@contextmanager
def host_scope(host: object) -> Iterator[None]:
    """Make ``host`` the SDK's ``pvm_host`` for the enclosed handler run (nests; per thread/context)."""
    token = enter_host(host)
    try:
        yield
    finally:
        leave_host(token)


def enter_host(host: object) -> Token[object | None]:
    """:func:`host_scope` without the generator: make ``host`` current; pass the token to :func:`leave_host`.

    For the invoker's per-run path (a generator-based context manager costs about a microsecond per run).
    """
    install()
    return _CURRENT.set(host)


def leave_host(token: Token[object | None]) -> None:
    """End what :func:`enter_host` began (restores the previous host)."""
    _CURRENT.reset(token)


# --- the curated view --------------------------------------------------------------------
def _charge(extra: int = 0) -> None:
    ctx = pvm_ctx.active()
    if ctx is not None:
        ctx.charge(costs.SDK_CALL + extra)


def _sdk_wrapper_codes() -> frozenset[types.CodeType]:
    """Code of the wrappers SDK decorators (``@emit``, ``@bounded_loop``) put around a function.

    Such a wrapper is created fresh around the actor's own function each time the actor's module runs
    (never shared between calls), so the next decorator may set attributes on it like on the function.
    """
    def probe() -> None:
        return None

    made: list[Any] = [_sdk_emit("probe")(probe), bounded_loop(1)(probe), _sdk_on_event(bytes(20), "t", 0)(probe)]
    return frozenset(w.__code__ for w in made)


def _own_function(fn: Any, what: str) -> None:
    """Decorators mutate their argument: only the running actor's own functions qualify (or an SDK
    decorator's fresh wrapper around one)."""
    for _ in range(8):
        if not isinstance(fn, types.FunctionType):
            break
        if fn.__code__.co_filename == _ACTOR_FILENAME:
            return
        if fn.__code__ not in _WRAPPER_CODES:
            break
        fn = vars(fn).get("__wrapped__")
    raise TypeError(f"{what} can only decorate functions defined by the actor")


_WRAPPER_CODES = _sdk_wrapper_codes()


def _own_class(cls: Any) -> None:
    ctx = pvm_ctx.active()
    if not (isinstance(cls, type) and ctx is not None and ctx.actor_classes.get(id(cls)) is cls):
        raise TypeError("@actor can only decorate a class defined by the actor")


def _entry(fn: Callable[..., Any]) -> Callable[..., Any]:
    def sdk_entry(*args: Any, **kwargs: Any) -> Any:
        _charge()
        return fn(*args, **kwargs)

    return sdk_entry


def _decoding_entry(fn: Callable[..., Any]) -> Callable[..., Any]:
    """An SDK entry point whose first argument it may CBOR-decode (a runner reply): charged by its size too,
    as ``codec.decode`` is."""
    def sdk_entry(*args: Any, **kwargs: Any) -> Any:
        data = args[0] if args else None
        _charge(costs.bytes_cost(len(data)) if isinstance(data, bytes | bytearray) else 0)
        return fn(*args, **kwargs)

    return sdk_entry


def _function_decorator(fn: Callable[..., Any], what: str) -> Callable[..., Any]:
    """``@deco`` / ``@deco(**options)`` forms of an SDK function decorator, checked."""

    def decorator(func: Any = None, **options: Any) -> Any:
        _charge()
        if func is not None:
            _own_function(func, what)
            return fn(func, **options)
        inner = fn(**options)

        def apply(f: Any) -> Any:
            _own_function(f, what)
            return inner(f)

        return apply

    return decorator


def _actor(cls: Any) -> Any:
    _charge()
    _own_class(cls)
    return cowboy_sdk.actor(cls)


def _callable_by(*principals: Any, decode: Any = None) -> Callable[[Any], Any]:
    _charge()
    inner: Any = cowboy_sdk.callable_by(*principals, decode=decode)

    def apply(f: Any) -> Any:
        _own_function(f, "@callable_by")
        return inner(f)

    return apply


class TimerView:
    """``cowboy_sdk.timer`` as actors see it: ``@timer`` / ``@timer(...)`` and ``timer.schedule``."""

    __slots__ = ()

    def __call__(self, func: Any = None, *, deferred: bool = True, name: Any = None) -> Any:
        _charge()
        if func is not None:
            _own_function(func, "@timer")
            return _SDK_TIMER(func, deferred=deferred, name=name)
        inner = _SDK_TIMER(deferred=deferred, name=name)

        def apply(f: Any) -> Any:
            _own_function(f, "@timer")
            return inner(f)

        return apply

    def schedule(self, height: Any, payload: Any = b"", **options: Any) -> Any:
        """``timer.schedule(height, payload, *, handler=..., ...)``: the SDK's, charged."""
        _charge()
        return _SDK_TIMER.schedule(height, payload, **options)


def _encode(value: Any) -> bytes:
    _charge()
    out = _sdk_codec.encode(value)
    ctx = pvm_ctx.active()
    if ctx is not None:
        ctx.check_bytes(len(out))  # the work was proportional to the output; charge it after
    return out


def _decode(data: Any) -> Any:
    _charge(costs.bytes_cost(len(data)) if isinstance(data, bytes | bytearray) else 0)
    return _sdk_codec.decode(data)


# --- continuations (runner jobs): what the lowered legs (actors/fsm.py) and actors call ------------
class _Capture(_sdk_cont.Capture):
    """The SDK's ``Capture`` (``save_cont`` accepts it as one) whose attributes actor code may set.

    The PVM lets actor code set attributes only on objects of classes registered in the call's
    ``Ctx.actor_classes``; :func:`_capture` registers this class for the running call only.
    """

    __slots__ = ()


def _capture() -> Any:
    _charge()
    ctx = pvm_ctx.active()
    if ctx is not None:
        ctx.actor_classes[id(_Capture)] = _Capture
    make: Any = _Capture  # the SDK class is untyped
    return make()


def _mark_leg(what: str, **tags: Any) -> Callable[[Any], Any]:
    """A decorator stamping the SDK's continuation tags (the lowering's stand-in for ``runner.continuation``)."""

    def apply(fn: Any) -> Any:
        _charge()
        _own_function(fn, what)
        for name, value in tags.items():
            setattr(fn, name, value)
        return fn

    return apply


def _initial_leg(timeout_blocks: int = 0, guard_keys: Any = None) -> Callable[[Any], Any]:
    return _mark_leg("initial_leg", _is_continuation=True, _timeout_blocks=timeout_blocks,
                     _guard_keys=list(guard_keys or []))


def _resume_leg(origin: str) -> Callable[[Any], Any]:
    return _mark_leg("resume_leg", _is_continuation_resume=True, _original_name=origin)


def _not_lowered(func: Any = None, **options: Any) -> Any:
    """``runner.continuation`` reached at run time: the decorator was aliased or used indirectly, so the
    deploy-time lowering could not see it (the SDK's activated environment refuses the same)."""
    _charge()
    raise SyntaxError("aliased/indirect continuation decorators are not supported on this node; apply "
                      "@runner.continuation directly so the deploy-time lowering can verify and lower it")


def _runner_result(raw: Any) -> Any:
    _charge()
    return _sdk_runner.RunnerResult(raw)


def _structured_result(raw: Any, model: Any) -> Any:
    _charge()
    return _SDK_RUNNER._structured_result(raw, model)


def _send_group(awaitables: Any, cid: Any, handler: Any) -> None:
    """Send every task of a lowered TaskGroup: the SDK's barrier record, then ``TaskGroup._submit_all``'s
    messages (``task_index``/``total_tasks`` set), byte for byte."""
    _charge()
    if not (type(awaitables) is list and 1 <= len(awaitables) <= _MAX_GROUP_TASKS
            and all(isinstance(a, _SDK_RUNNER._RunnerAwaitable) for a in awaitables)):
        raise _sdk_errors.ContinuationLimitError(
            f"a TaskGroup takes 1..{_MAX_GROUP_TASKS} runner.<job>(...) tasks")
    group: Any = _sdk_taskgroup.TaskGroup()
    for awaitable in awaitables:
        group.create_task(awaitable)
    _TG_STATE.save(cid, len(awaitables), handler)
    group._submit_all(cid, handler)


def _collect_group(cid: Any, msg: Any) -> Any:
    """Record one task's reply in the barrier; the results in creation order once every task replied, else None."""
    _charge(costs.bytes_cost(len(msg)) if isinstance(msg, bytes | bytearray) else 0)
    reply = _sdk_codec.decode(msg) if isinstance(msg, bytes | bytearray) else msg
    index = reply.get("task_index") if isinstance(reply, dict) else None
    if type(index) is not int:
        raise _sdk_errors.CodecError("a TaskGroup reply carries no task_index")
    _, result = _SDK_RUNNER._extract_result(reply)
    if not _TG_STATE.receive_result(cid, index, result):
        return None
    return _TG_STATE.get_results(cid)


def _task_group(*args: Any, **kwargs: Any) -> Any:
    """``TaskGroup()`` reached at run time: only ``async with TaskGroup() as tg:`` at the top level of a
    ``@runner.continuation`` is meaningful, and the deploy-time lowering removes that."""
    _charge()
    raise _sdk_errors.ContinuationLimitError("TaskGroup works only as 'async with TaskGroup() as tg:' at the top "
                                             "level of a @runner.continuation (lowered at deploy)")


def _task_handle(results: Any, index: int) -> Any:
    """The ``TaskHandle`` of task ``index`` whose ``.result()`` is its ``RunnerResult``."""
    _charge()
    handle: Any = _sdk_taskgroup.TaskHandle(f"__taskgroup_task_{index}", index)
    handle._set_result(_sdk_runner.RunnerResult(results[index]))
    return handle


FSM_VIEW: Mapping[str, object] = types.MappingProxyType({
    "capture": _capture,
    "new_cid": _entry(_sdk_cont.new_cid),
    "save_cont": _entry(_sdk_cont.save_cont),
    "load_cont": _entry(_sdk_cont.load_cont),
    "delete_cont": _entry(_sdk_cont.delete_cont),
    "encode": _encode,
    "job_payload": _entry(_SDK_RUNNER._job_payload),
    "extract_result": _decoding_entry(_SDK_RUNNER._extract_result),
    "chain_failure_ends": _entry(_SDK_RUNNER._chain_failure_ends),
    "RunnerResult": _runner_result,
    "structured_result": _structured_result,
    "RUNNER_ADDRESS": bytes(_sdk_runner.RUNNER_ADDRESS),
    "initial_leg": _initial_leg,
    "resume_leg": _resume_leg,
    "send_group": _send_group,
    "collect_group": _collect_group,
    "task_handle": _task_handle,
    "carry_locals": _entry(fsm_carry.carry_locals),
    "restore_locals": _entry(fsm_carry.restore_locals),
})
"""``cowboy_sdk.pvm_fsm``: the helpers the lowered continuation legs import (SDK functions, charged)."""

RUNNER_VIEW: Mapping[str, object] = types.MappingProxyType({
    "continuation": _not_lowered,
    "llm": _entry(_sdk_runner.llm),
    "http": _entry(_sdk_runner.http),
    "mcp": _entry(_sdk_runner.mcp),
    "agent": _entry(_sdk_runner.agent),
    "container": _entry(_sdk_runner.container),
    "RunnerResult": _sdk_runner.RunnerResult,
    "LlmFailure": _sdk_runner.LlmFailure,
    "RUNNER_ADDRESS": bytes(_sdk_runner.RUNNER_ADDRESS),
    "extract_text": _entry(_sdk_runner.extract_text),
})
"""``cowboy_sdk.runner`` as actors see it: the job helpers and result types; ``@runner.continuation`` itself
is lowered at deploy (``actors/fsm.py``) and only reaches run time when aliased, where it is refused."""

CONTINUATION_VIEW: Mapping[str, object] = types.MappingProxyType({
    "capture": _capture,
    "save_cont": _entry(_sdk_cont.save_cont),
    "load_cont": _entry(_sdk_cont.load_cont),
    "delete_cont": _entry(_sdk_cont.delete_cont),
    "new_cid": _entry(_sdk_cont.new_cid),
})
"""``cowboy_sdk.continuation`` as actors see it: the continuation store (``__continuation:<cid>`` keys)."""


def _emit(topic: Any) -> Callable[[Any], Any]:
    """``@emit(topic)``: the SDK's, on the actor's own functions only."""
    _charge()
    inner = _sdk_emit(topic)

    def apply(f: Any) -> Any:
        _own_function(f, "@emit")
        return inner(f)

    return apply


def _on_event(emitter: Any, topic: Any, gas: Any, bid: Any = 0) -> Callable[[Any], Any]:
    """``@on_event(emitter, topic, gas, bid)``: the SDK's (its @actor walk subscribes in ``init``), on the
    actor's own functions only."""
    _charge()
    inner = _sdk_on_event(emitter, topic, gas, bid)

    def apply(f: Any) -> Any:
        _own_function(f, "@on_event")
        return inner(f)

    return apply


def _bounded_loop(max_iterations: int = 1000) -> Callable[[Any], Any]:
    """``@bounded_loop(max_iterations=N)``: the SDK's, on the actor's own functions only."""
    _charge()
    inner = bounded_loop(max_iterations)

    def apply(f: Any) -> Any:
        _own_function(f, "@bounded_loop")
        return inner(f)

    return apply


def _current_block() -> int:
    _charge()
    return _sdk_runtime.get_block_height()


def _runtime_names() -> tuple[str, ...]:
    """Public functions defined in ``cowboy_sdk.runtime`` itself (not its imports), sorted."""
    return tuple(sorted(
        name for name, value in vars(_sdk_runtime).items()
        if not name.startswith("_") and isinstance(value, types.FunctionType)
        and value.__module__ == _sdk_runtime.__name__
    ))


RUNTIME_NAMES: tuple[str, ...] = (*_runtime_names(), "current_block")
"""``cowboy_sdk.runtime`` as actors see it: its public functions plus ``current_block`` (an
alias of ``get_block_height`` that the SDK's own documentation uses)."""

ERROR_NAMES: tuple[str, ...] = (
    "CowboyError", "PermissionDeniedError", "CodecError", "ReentrancyError", "ActorCallError",
    "ActorNotFoundError", "PurityViolationError", "CallDepthExceeded", "DeterminismError", "StateConflictError",
    "LoopBoundExceeded", "CaptureTypeError", "ContinuationLimitError", "ContinuationNotFoundError",
    "ContinuationCorruptedError", "ContinuationSizeLimitError", "ContinuationCountLimitError", "RunnerTimeoutError",
    "RunnerValidationError", "AddressError", "TokenIdError",
)
"""SDK exception classes actors may raise or catch."""


def _build_view() -> Mapping[str, object]:
    runtime_view: dict[str, object] = {name: _entry(getattr(_sdk_runtime, name)) for name in RUNTIME_NAMES[:-1]}
    runtime_view["current_block"] = _current_block
    view: dict[str, object] = {
        "actor": _actor,
        "timer": TimerView(),
        "runtime": types.MappingProxyType(runtime_view),
        "codec": types.MappingProxyType({"encode": _encode, "decode": _decode}),
        "public": _function_decorator(cowboy_sdk.public, "@public"),
        "callable_by": _callable_by,
        "OWNER": cowboy_sdk.OWNER,
        "SELF": cowboy_sdk.SELF,
        "pure": _function_decorator(cowboy_sdk.pure, "@pure"),
        "deferred": _function_decorator(cowboy_sdk.deferred, "@deferred"),
        "reentrancy_guard": _function_decorator(cowboy_sdk.reentrancy_guard, "@reentrancy_guard"),
        "send": _entry(cowboy_sdk.send),
        "call": _entry(cowboy_sdk.call),
        "ok": _entry(cowboy_sdk.ok),
        "decode_payload": _entry(cowboy_sdk.decode_payload),
        "ActorRef": cowboy_sdk.ActorRef,
        "Address": cowboy_sdk.Address,
        "runner": RUNNER_VIEW,
        "continuation": CONTINUATION_VIEW,
        "capture": _capture,
        "save_cont": CONTINUATION_VIEW["save_cont"],
        "load_cont": CONTINUATION_VIEW["load_cont"],
        "delete_cont": CONTINUATION_VIEW["delete_cont"],
        "pvm_fsm": FSM_VIEW,
        "emit": _emit,
        "bounded_loop": _bounded_loop,
        "BoundedRange": _entry(BoundedRange),
        "check_iteration": _entry(check_iteration),
        "SortedMap": _entry(_sdk_sorted_map.SortedMap),
        "sorted_map": types.MappingProxyType({"SortedMap": _entry(_sdk_sorted_map.SortedMap)}),
        "to_address_bytes": _entry(_sdk_types.to_address_bytes),
        "BlockHeight": _entry(_sdk_types.BlockHeight),
        "TokenId": _entry(_sdk_types.TokenId),
        "SoftFloat": _entry(_sdk_types.SoftFloat),
        "ordered_set": _entry(_sdk_types.ordered_set),
        "TaskGroup": _task_group,
        "fork": _entry(cowboy_sdk.fork),
        "on_event": _on_event,
    }
    for name in ERROR_NAMES:
        view[name] = getattr(_sdk_errors, name)
    view["errors"] = types.MappingProxyType({name: getattr(_sdk_errors, name) for name in ERROR_NAMES})
    return types.MappingProxyType(view)


SDK_VIEW: Mapping[str, object] = _build_view()
"""The ``cowboy_sdk`` module actors import (read-only; shared: it holds no per-call state)."""
PUBLIC_NAMES: tuple[str, ...] = tuple(SDK_VIEW)
"""Names ``cowboy_sdk`` exposes to actors, in documentation order."""


def modules_for(host: object) -> dict[str, object]:
    """The ``modules`` mapping for ``pvm.call_handler``: ``pvm_host`` and the curated ``cowboy_sdk`` (a new dict
    on every call: the caller may add to it)."""
    install()
    return {"pvm_host": host, "cowboy_sdk": SDK_VIEW}


install()

__all__ = ["CONTINUATION_VIEW", "FSM_VIEW", "PUBLIC_NAMES", "RUNNER_VIEW", "RUNTIME_NAMES", "SDK_VIEW", "TimerView",
           "current_host", "enter_host", "host_scope", "install", "leave_host",
           "modules_for"]
