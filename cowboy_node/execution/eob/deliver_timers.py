"""End-of-Block step 1 "DeliverTimers" (seeds/000 EOB-1, seeds/003 §5).

First it records ModifiedKeySet(h) — the keys the block's transactions changed,
i.e. the world's pending changes before any End-of-Block write (the chain
executes every block on a fresh ``WorldState``) — in ``ctx.eob.modified_keys``.
Then, by ``TimerPolicy.mode``:

* **FIFO** (default, seeds/003): ``timers.deliver.deliver_timers`` exactly as
  before — fires run here, under the lane and GC budgets; then the block's
  state-watch hits (at most ``max_watch_fires_per_block``, in timer-id order) are
  materialised into the Mailbox.
* **Globalbox** (seeds/001): due height timers and watch hits become candidates,
  are inserted into the Globalbox and the head is materialised into the Mailbox
  under the quotas (``timers/globalbox.py``). ExecuteMailbox runs them.
* **CIP-1** (seeds/004, docs/timers.md §15): everything FIFO does, exactly as
  under FIFO; then the CIP-1 step for the ``set_timeout`` timers
  (``scheduler/deliver.py``: maintenance and collection, GBA bids, order by
  effective tip and weight, execution under ``cip1_budget_cycles``, carry-over).
  Its counts go to ``ctx.eob``: executed → ``timers_fired``, deferred →
  ``timers_deferred``, expired → ``timers_expired``, dropped for a broken GBA →
  ``timers_self_destructed``.

Height timers fired or materialised are kept in ``ctx.eob.fired_timers`` for the
SystemHooks interval roll-forward (CIP-1 executions are not: they are not
seeds/003 timers).
"""

from __future__ import annotations

from collections.abc import Callable

from cowboy_node.execution import mailbox
from cowboy_node.execution.actors.invoke import run_checkpointed_fire
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.scheduler.deliver import deliver as cip1_deliver
from cowboy_node.execution.timers import deliver, globalbox, watch
from cowboy_node.execution.timers.deliver import FireOutcome
from cowboy_node.execution.timers.policy import MODE_FIFO, TimerPolicy, get_timer_policy
from cowboy_node.execution.timers.timer_record import Timer
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import encode
from cowboy_protocol.types.timer_policy import MODE_CIP1

RunFire = Callable[[WorldState, BlockContext, Timer, Meter], FireOutcome]
"""Runs one timer fire: ``actors.invoke.run_checkpointed_fire`` in the node, fakes in tests. Every caller here runs
it inside ``timers.deliver.run_checkpointed`` (the checkpoint that reverts a failed fire)."""


def default_run_fire() -> RunFire:
    """``actors.invoke.run_checkpointed_fire`` (``run_timer_fire`` without a second checkpoint of its own)."""
    return run_checkpointed_fire


def deliver_timers(world: WorldState, ctx: BlockContext, *, run_fire: RunFire | None = None,
                   lane_timer_cycles: int = deliver.LANE_TIMER_CYCLES) -> None:
    """Run DeliverTimers for block ``ctx.env.height`` (see the module docstring)."""
    ctx.eob.modified_keys = tuple(world.changes())
    policy = get_timer_policy(world)
    if policy.mode in (MODE_FIFO, MODE_CIP1):  # CIP-1 keeps seeds/003 timers and watch hits as under FIFO
        _fifo(world, ctx, run_fire or default_run_fire(), lane_timer_cycles)
        _materialize_watch_hits(world, ctx, policy)
        if policy.mode == MODE_CIP1:
            _cip1(world, ctx, policy, run_fire or default_run_fire())
    else:
        _globalbox(world, ctx, policy)


def _cip1(world: WorldState, ctx: BlockContext, policy: TimerPolicy, run_fire: RunFire) -> None:
    """The CIP-1 scheduler's timers (``execution/scheduler/``, docs/timers.md §15), after the seeds/003 ones."""
    rep = cip1_deliver(world, ctx, policy, run_fire)
    ctx.eob.timers_fired += rep.executed
    ctx.eob.timers_deferred += rep.deferred
    ctx.eob.timers_expired += rep.expired
    ctx.eob.timers_self_destructed += rep.dropped


def _fifo(world: WorldState, ctx: BlockContext, run_fire: RunFire, lane_timer_cycles: int) -> None:
    fired = ctx.eob.fired_timers

    def run_handler(w: WorldState, timer: Timer, meter: Meter) -> FireOutcome:
        fired.append(timer)
        return run_fire(w, ctx, timer, meter)

    rep = deliver.deliver_timers(world, ctx, run_handler, lane_timer_cycles=lane_timer_cycles)
    eob = ctx.eob
    eob.timers_fired += rep.fired
    eob.timers_deferred += int(rep.deferred)
    eob.timers_expired += rep.expired
    eob.timers_self_destructed += rep.self_destructed
    eob.timers_gc_deferred += rep.gc_deferred


def _live_hits(world: WorldState, ctx: BlockContext, policy: TimerPolicy) -> list[tuple[bytes, watch.WatchTimer]]:
    """Watch timers hit this block, minus those created in it (same-block prohibition); expired ones removed."""
    h = ctx.env.height
    out: list[tuple[bytes, watch.WatchTimer]] = []
    for timer_id in watch.hits(world, ctx.eob.modified_keys):
        if len(out) >= policy.max_watch_fires_per_block:
            break
        w = watch.get_watch(world, timer_id)
        if w is None or w.created_height >= h:
            continue
        if h > w.expires_at:
            watch.remove_watch(world, timer_id, w)
            ctx.eob.timers_expired += 1
            ctx.events.append(Event(w.actor_address, deliver.TOPIC_EXPIRED,
                                    encode({0: timer_id, 1: w.expires_at, 2: h})))
            continue
        out.append((timer_id, w))
    ctx.eob.watch_hits += len(out)
    return out


def _materialize_watch_hits(world: WorldState, ctx: BlockContext, policy: TimerPolicy) -> None:
    for timer_id, w in _live_hits(world, ctx, policy):
        mailbox.materialize(world, globalbox.watch_entry(ctx, timer_id, w))
        watch.bump_fire_seq(world, timer_id, w)
        ctx.eob.timers_materialized += 1


def _globalbox(world: WorldState, ctx: BlockContext, policy: TimerPolicy) -> None:
    h = ctx.env.height
    batch = globalbox.collect_due(world, h)
    batch += [globalbox.Candidate(globalbox.KIND_WATCH, tid, w.actor_address, h)
              for tid, w in _live_hits(world, ctx, policy)]
    globalbox.insert(world, policy, h, batch)
    rep = globalbox.materialize(world, ctx, policy, ctx.eob.fired_timers)
    ctx.eob.timers_materialized += rep.materialized
    ctx.eob.timers_expired += rep.expired
    ctx.eob.timers_deferred += rep.left
