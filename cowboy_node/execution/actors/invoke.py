"""Run an actor handler: the entry points for transactions, nested calls, timer fires,
Mailbox messages and read-only RPC calls (docs/actors.md §Execution).

Every run happens under its own world checkpoint: a failure (a ``PvmError`` from
the sandbox, or a ``TxFailed`` before the sandbox starts) reverts the handler's
writes — including those of the calls it made — and still leaves the cycles and
cells it used on the meter. Events are kept only when the run succeeds.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping

from cowboy_node.execution.actors import actor_state as store
from cowboy_node.execution.actors import sdk_bridge
from cowboy_node.execution.actors.actor_record import ActorRecord
from cowboy_node.execution.actors.codecache import CODE_CACHE
from cowboy_node.execution.actors.frame import CallFrame, TxScope
from cowboy_node.execution.actors.host import Host
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.jobs import sdk_jobs
from cowboy_node.execution.meter import InterruptHandle, Meter
from cowboy_node.execution.pvm import ActorRejected, CompiledActor, PvmError, call_handler
from cowboy_node.execution.system_state import JOB_DISPATCHER
from cowboy_node.execution.timers.deliver import FireOutcome, make_outcome
from cowboy_node.execution.timers.timer_record import Timer
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Event
from cowboy_protocol.types.fields import ADDRESS_LEN

MAX_CALL_DEPTH = 32
"""Deepest synchronous call chain: the transaction's own call is depth 1 (CIP-6)."""
INVOKE_CYCLES = 500
"""Charged for every handler run (loading the record), before the handler's own cycles."""
LOAD_CYCLES_PER_SOURCE_BYTE = 8
"""Charged per source byte the first time a run (transaction, fire, message) uses a source.

Whether the node has the code compiled in its cache is not consensus state, so every
run pays as if it might have to compile; a run can then touch at most
``cycles / 8`` bytes of distinct source, far below the cache's byte capacity, so it
cannot make the node recompile within the run."""
MESSAGE_HANDLER = "handle_message"
"""Handler that receives Mailbox messages (the SDK's ``@actor`` dispatcher name)."""
NO_TX_HASH = bytes(32)
"""``tx_hash`` of runs that no transaction started (timer fires, Mailbox messages, read-only calls)."""
READ_ONLY_SENDER = bytes(ADDRESS_LEN)
"""``sender`` a read-only call reports (the zero address)."""

RECURSION_HEADROOM = 10_000
"""Interpreter frames guaranteed free above an outermost run.

A full chain (32 frames, each with actor recursion at the sandbox's 64-level limit)
needs about 2,200 Python frames; the interpreter's own ``RecursionError`` would
otherwise fire at a point that depends on how deep the *node* was when it started
the run (block execution vs RPC), which would make outcomes differ between nodes.
"""

ModuleFactory = Callable[[Host], object]
"""Builds one extra sandbox module for a frame from its host (e.g. ``cowboy_sdk``)."""
_MODULE_FACTORIES: dict[str, ModuleFactory] = {}


def register_module(name: str, factory: ModuleFactory) -> None:
    """Make ``import <name>`` in actors resolve to ``factory(host)`` (used by the SDK layer).

    ``pvm_host`` itself is always the frame's :class:`Host`. Factories must be
    deterministic: every node must register the same ones.
    """
    if name == "pvm_host":
        raise ValueError("pvm_host is always the frame's Host")
    _MODULE_FACTORIES[name] = factory


def _modules(host: Host) -> Mapping[str, object]:
    mods = sdk_bridge.modules_for(host)  # pvm_host and the curated cowboy_sdk, a fresh dict
    for name, factory in _MODULE_FACTORIES.items():
        mods[name] = factory(host)
    return mods


_RECENT_CODE_MAX = 64
_recent_code: dict[bytes, CompiledActor] = {}
"""The compiles :func:`load_code` handed out last, by source hash: a lock-free front of ``CODE_CACHE`` (whose lock
and LRU bookkeeping cost about a microsecond per run) for the few actors a block runs over and over. A compile is
a pure function of the source, so which cache answers changes nothing. Cleared when full (node-local)."""


def load_code(world: WorldState, source_hash: bytes) -> CompiledActor:
    """Compiled code of a stored source (cached); a missing or refused source fails the run."""
    hit = _recent_code.get(source_hash)
    if hit is not None:
        return hit
    hit = CODE_CACHE.get(source_hash)
    if hit is None:
        source = store.get_source(world, source_hash)
        if source is None:
            raise TxFailed("actor_code_missing", f"no source stored for 0x{source_hash.hex()}")
        try:
            hit = CODE_CACHE.compile(source)
        except ActorRejected as e:  # only if the policy changed since deployment
            raise TxFailed("actor_rejected", str(e)) from None
    if len(_recent_code) >= _RECENT_CODE_MAX:
        _recent_code.clear()
    _recent_code[source_hash] = hit
    return hit


_RECORDS_MAX = 1024
_records: dict[bytes, ActorRecord] = {}
"""Decoded actor records by their stored bytes (a node-local cache, never state)."""


def _get_actor(world: WorldState, address: bytes) -> ActorRecord | None:
    """``store.get_actor``, decoding each distinct stored record once.

    The store is read on every run (a record can change), but decoding is a pure function of the bytes
    and a block's timer fires and messages run the same few actors over and over.
    """
    raw = world.get(store.meta_key(address))
    if raw is None:
        return None
    record = _records.get(raw)
    if record is None:
        record = ActorRecord.decode(raw)
        if len(_records) >= _RECORDS_MAX:
            _records.clear()
        _records[raw] = record
    return record


def _ensure_headroom() -> None:
    # ``sys._getframe(k)`` fails exactly when fewer than k + 1 frames (this one included) are on the stack, i.e.
    # when depth + RECURSION_HEADROOM <= the limit: then the walk below would change nothing. It counts in C, so
    # the usual case (a run started well below the limit) costs a fraction of the walk.
    room = sys.getrecursionlimit() - RECURSION_HEADROOM
    if room > 0:
        try:
            sys._getframe(room)
        except ValueError:
            return
    depth = 0
    f = sys._getframe()
    while f is not None:
        depth += 1
        f = f.f_back  # type: ignore[assignment]
    if sys.getrecursionlimit() < depth + RECURSION_HEADROOM:
        sys.setrecursionlimit(depth + RECURSION_HEADROOM)


def run_frame(world: WorldState, ctx: BlockContext, frame: CallFrame, handler: str, payload: bytes, meter: Meter,
              events: list[Event], scope: TxScope, *, own_checkpoint: bool = True) -> bytes:
    """Run one frame (see :func:`invoke`); nested calls share ``scope``.

    ``own_checkpoint=False``: the caller has opened a checkpoint just before and reverts it when this raises, so
    the frame's own (which would hold exactly the same writes) is skipped.
    """
    if frame.depth > MAX_CALL_DEPTH:
        raise TxFailed("call_depth_exceeded", f"call depth {frame.depth} exceeds {MAX_CALL_DEPTH}")
    if frame.depth == 1:
        _ensure_headroom()
    meter.charge_cycles(INVOKE_CYCLES)
    record = _get_actor(world, frame.actor)
    if record is None:
        raise TxFailed("actor_not_found", f"no actor at 0x{frame.actor.hex()}")
    if record.source_hash not in scope.loaded:
        meter.charge_cycles(LOAD_CYCLES_PER_SOURCE_BYTE * record.source_len)
        scope.loaded.add(record.source_hash)
    compiled = load_code(world, record.source_hash)
    frame_events: list[Event] = []
    host = Host(world, ctx, frame, meter, frame_events, scope, record.creator, run_frame)
    scope.frames.append(frame.actor)
    cp = world.checkpoint() if own_checkpoint else -1
    token = sdk_bridge.enter_host(host)  # the SDK finds its host through sys.modules["pvm_host"]
    try:
        result = call_handler(compiled, handler, payload, meter=meter, modules=_modules(host))
    except PvmError as e:
        if own_checkpoint:
            world.revert(cp)
        raise TxFailed(e.code, e.message or e.code) from None
    except BaseException:
        if own_checkpoint:
            world.revert(cp)
        raise
    finally:
        sdk_bridge.leave_host(token)
        host._close()
        scope.frames.pop()
    if own_checkpoint:
        world.release(cp)
    events.extend(frame_events)
    return result


def invoke(world: WorldState, ctx: BlockContext, *, actor: bytes, handler: str, payload: bytes, sender: bytes,
           tx_sender: bytes, tx_hash: bytes, meter: Meter, events: list[Event], depth: int = 1) -> bytes:
    """Run ``actor.handler(payload)`` and return its bytes, or raise ``TxFailed`` with the stable code.

    Codes: ``actor_not_found``, ``call_depth_exceeded`` (depth > 32), ``out_of_cycles`` /
    ``out_of_cells``, the sandbox codes (``handler_error``, ``bad_return_type``,
    ``no_such_handler``...) and any code a host call halted with (``timer_*``,
    ``insufficient_balance``...). On failure the handler's writes are reverted and its
    events dropped; on success its events are appended to ``events``.
    """
    frame = CallFrame(actor=actor, sender=sender, tx_sender=tx_sender, tx_hash=tx_hash, depth=depth)
    return run_frame(world, ctx, frame, handler, payload, meter, events, TxScope())


def _outcome(world: WorldState, ctx: BlockContext, frame: CallFrame, handler: str, payload: bytes,
             meter: Meter, *, own_checkpoint: bool = True) -> FireOutcome:
    events: list[Event] = []
    try:
        run_frame(world, ctx, frame, handler, payload, meter, events, TxScope(), own_checkpoint=own_checkpoint)
    except TxFailed as e:
        return make_outcome(False, meter.cycles_used, meter.cells_used, e.code, ())
    return make_outcome(True, meter.cycles_used, meter.cells_used, None, tuple(events))


_SELF_FRAMES_MAX = 4096
_self_frames: dict[bytes, CallFrame] = {}
"""The (immutable) frame of an actor's own deferred run, by actor: a block's fires run the same few actors over
and over, and building the frozen frame costs about a microsecond. Cleared when full (node-local, never state)."""


def _self_frame(actor: bytes) -> CallFrame:
    frame = _self_frames.get(actor)
    if frame is None:
        frame = CallFrame(actor=actor, sender=actor, tx_sender=actor, tx_hash=NO_TX_HASH, depth=1)
        if len(_self_frames) >= _SELF_FRAMES_MAX:
            _self_frames.clear()
        _self_frames[actor] = frame
    return frame


def run_timer_fire(world: WorldState, ctx: BlockContext, timer: Timer, meter: Meter) -> FireOutcome:
    """One timer fire (``timers.deliver.RunHandler`` once ``ctx`` is bound); never raises for actor failures.

    The actor calls itself: sender = tx_sender = the actor, tx_hash = 32 zero bytes.
    """
    return _outcome(world, ctx, _self_frame(timer.actor_address), timer.handler, timer.payload, meter)


def run_checkpointed_fire(world: WorldState, ctx: BlockContext, timer: Timer, meter: Meter) -> FireOutcome:
    """:func:`run_timer_fire` for a caller that runs it inside a checkpoint of its own, opened just before and
    reverted unless the outcome is ok (``timers.deliver.run_checkpointed``: DeliverTimers, the Mailbox, CIP-1):
    the frame then opens none (it would hold exactly the same writes). The node's End-of-Block steps use this."""
    return _outcome(world, ctx, _self_frame(timer.actor_address), timer.handler, timer.payload, meter,
                    own_checkpoint=False)


def run_message(world: WorldState, ctx: BlockContext, *, sender: bytes, target: bytes, payload: bytes,
                meter: Meter) -> FireOutcome:
    """Deliver one Mailbox message to ``target.handle_message(payload)``; never raises for actor failures.

    sender = the sending actor; tx_sender = the target itself (no transaction signer can be
    billed for timers the target schedules); tx_hash = 32 zero bytes.
    """
    frame = CallFrame(actor=target, sender=sender, tx_sender=target, tx_hash=NO_TX_HASH, depth=1)
    return _outcome(world, ctx, frame, MESSAGE_HANDLER, payload, meter)


def take_sdk_reply(world: WorldState, *, sender: bytes, target: bytes, payload: bytes) -> sdk_jobs.Reply | None:
    """The SDK reply of a job callback entry, consuming its ``sdkjob/`` record; None if it is not one.

    The caller runs this *outside* the handler's checkpoint, so the record is gone even when the resume leg
    then fails and its writes are reverted: a job resumes its continuation at most once.
    """
    # only the Job Dispatcher's callbacks are job replies (an event delivery, also a named-handler entry, is
    # sent by its emitter and must never be read as one: its payload is the emitter's)
    return sdk_jobs.reply_for(world, payload, target) if sender == JOB_DISPATCHER else None


def run_callback(world: WorldState, ctx: BlockContext, *, sender: bytes, target: bytes, handler: str,
                 payload: bytes, meter: Meter, reply: sdk_jobs.Reply | None = None) -> FireOutcome:
    """Deliver a finished job's result to ``target.handler(payload)`` (sender = the Job Dispatcher).

    A cowboy_sdk runner job (``reply`` from :func:`take_sdk_reply`) gets the SDK's reply shape instead,
    delivered as the actor's own deferred work (sender = the actor: the SDK's resume legs accept only
    intra-actor calls), or is dropped with a ``runner.reply_dropped`` event when its continuation is gone.
    """
    if reply is not None:
        if reply.payload is None:
            events = () if reply.dropped is None else (reply.dropped,)
            return FireOutcome(True, meter.cycles_used, meter.cells_used, None, events)
        sender, handler, payload = target, reply.record.reply_handler, reply.payload
    frame = CallFrame(actor=target, sender=sender, tx_sender=target, tx_hash=NO_TX_HASH, depth=1)
    return _outcome(world, ctx, frame, handler, payload, meter)


def read_only_call(world: WorldState, ctx: BlockContext, *, actor: bytes, handler: str, payload: bytes,
                   cycles_limit: int,
                   interrupt: InterruptHandle | None = None) -> tuple[bytes | None, str | None, int]:
    """Run a handler on a checkpoint that is always reverted: ``(result, error_code, cycles_used)``.

    Writes are bounded like a transaction's: at most the block's ``block_max_cells``. ``interrupt`` lets the
    caller stop the run from another thread (its code becomes ``error_code``, e.g. ``read_timeout``).
    """
    meter = Meter(cycles_limit, ctx.basefee_config.block_max_cells)
    if interrupt is not None:
        interrupt.bind(meter)
    frame = CallFrame(actor=actor, sender=READ_ONLY_SENDER, tx_sender=READ_ONLY_SENDER, tx_hash=NO_TX_HASH,
                      depth=1)
    cp = world.checkpoint()
    try:
        result = run_frame(world, ctx, frame, handler, payload, meter, [], TxScope())
    except TxFailed as e:
        return None, e.code, meter.cycles_used
    finally:
        world.revert(cp)
    return result, None, meter.cycles_used
