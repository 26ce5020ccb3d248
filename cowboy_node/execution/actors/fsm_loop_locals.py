"""What the legs of a loop-lowered continuation (``fsm_loops.py``) call to carry their locals across an await.

Trusted host code, reached through the curated ``pvm_fsm`` view (``sdk_bridge.FSM_VIEW``). The locals go into
the continuation record's ``ctx`` next to the ``capture()`` fields, under :data:`LOOP_KEY`::

    {'locals': {name: value, ...}, 'results': [name, ...]}

``locals`` is stored as the SDK's implicit carry stores a name (``continuation.carry``): a value the capture
whitelist refuses (a function, an ``Address``, the storage proxy...) becomes the SDK's
``{'__cowboy_uncarried__': <type name>}`` marker instead of failing the suspension, and the resume leg leaves such
a name unbound (reading it raises ``NameError``, as the SDK's ``carried`` does). ``results`` names the locals that
held a ``RunnerResult`` when the leg suspended: the record keeps its ``.raw`` (its ``__cbor_reduce__``), and the
resume leg wraps it back so ``.text``/``.data`` keep working (a ``StructuredResult`` comes back as a plain
``RunnerResult``).
"""

from __future__ import annotations

from typing import Any

from cowboy_sdk import continuation as _sdk_cont
from cowboy_sdk import runner as _sdk_runner
from cowboy_sdk.errors import ContinuationCorruptedError

LOOP_KEY = "__cowboy_loop__"
"""Key of the record's ``ctx`` holding the lowered function's locals (``{'locals', 'results'}``)."""
_UNCARRIED: str = getattr(_sdk_cont, "_UNCARRIED_TAG", "__cowboy_uncarried__")
_CAPTURE: Any = _sdk_cont.Capture  # untyped in the SDK
_RESULT: Any = _sdk_runner.RunnerResult


def carry_locals(ctx: Any, values: Any) -> Any:
    """The ``ctx`` to save: the fields of ``ctx`` (a ``capture()``, or None) plus :data:`LOOP_KEY` for ``values``."""
    if type(values) is not dict or not all(type(k) is str for k in values):
        raise TypeError("carry_locals takes a dict of local names")
    if ctx is not None and not isinstance(ctx, _CAPTURE):
        raise TypeError("carry_locals takes the continuation's capture() or None")
    record = _CAPTURE()
    if ctx is not None:
        record.update(ctx.to_dict())
    kept = _CAPTURE()
    results: list[str] = []
    for name, value in values.items():
        if isinstance(value, _RESULT):
            results.append(name)
        _sdk_cont.carry(kept, name, value)
    record.update({LOOP_KEY: {"locals": kept.to_dict(), "results": results}})
    return record


def restore_locals(ctx: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(capture() fields, locals)`` of a loaded record's ``ctx``: uncarried names left out, results rewrapped."""
    fields = ctx.to_dict() if isinstance(ctx, _CAPTURE) else None
    loop = fields.pop(LOOP_KEY, None) if fields is not None else None
    saved = loop.get("locals") if isinstance(loop, dict) else None
    results = loop.get("results") if isinstance(loop, dict) else None
    if fields is None or not isinstance(saved, dict) or not isinstance(results, list):
        raise ContinuationCorruptedError("continuation record has no lowered-loop locals")
    out: dict[str, Any] = {}
    for name, value in saved.items():
        if isinstance(value, dict) and len(value) == 1 and _UNCARRIED in value:
            continue
        out[name] = _sdk_runner.RunnerResult(value) if name in results else value
    return fields, out


__all__ = ["LOOP_KEY", "carry_locals", "restore_locals"]
