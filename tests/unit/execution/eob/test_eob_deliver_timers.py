"""EOB step 1 DeliverTimers: ModifiedKeySet, FIFO delivery unchanged, watch hits, Globalbox switch."""

from __future__ import annotations

from cowboy_node.execution import mailbox
from cowboy_node.execution.eob.deliver_timers import deliver_timers
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.timers.policy import MODE_GLOBALBOX, TimerPolicy, set_timer_policy
from cowboy_node.execution.timers.schedule import schedule_timer
from cowboy_node.execution.timers.watch import get_watch, set_state_watch
from tests.unit.eob_helpers import ACTOR, SENDER, FakeRunner, big_meter, commit, fund, make_ctx, make_world


def _sched(world, at: int, height: int, payload: bytes = b"") -> bytes:  # type: ignore[no-untyped-def]
    return schedule_timer(world, make_ctx(at), big_meter(), actor=ACTOR, tx_sender=SENDER, height=height,
                          handler="handle_timer", payload=payload)


def test_modified_key_set_is_the_blocks_writes_before_any_eob_write() -> None:
    world = make_world()
    commit(world)
    world.set(b"actor/x/kv/b", b"1")
    world.set(b"actor/x/kv/a", b"2")
    world.delete(b"actor/x/kv/gone")
    ctx = make_ctx(3)
    deliver_timers(world, ctx, run_fire=FakeRunner().fire)
    assert ctx.eob.modified_keys == (b"actor/x/kv/a", b"actor/x/kv/b", b"actor/x/kv/gone")


def test_fifo_fires_due_timers_in_order_and_counts_them() -> None:
    world = make_world()
    fund(world, ACTOR)
    a = _sched(world, 1, 5, b"a")
    b = _sched(world, 1, 5, b"b")
    _sched(world, 1, 6, b"later")
    commit(world)
    runner = FakeRunner()
    ctx = make_ctx(5)
    deliver_timers(world, ctx, run_fire=runner.fire)
    assert [f[0] for f in runner.fires] == [a, b]
    assert ctx.eob.timers_fired == 2 and ctx.eob.timers_deferred == 0
    assert [t.timer_id for t in ctx.eob.fired_timers] == [a, b]
    assert store.get_timer(world, a) is None


def test_fifo_lane_deferral_is_reported() -> None:
    world = make_world()
    fund(world, ACTOR)
    _sched(world, 1, 5)
    _sched(world, 1, 5)
    commit(world)
    ctx = make_ctx(5)
    deliver_timers(world, ctx, run_fire=FakeRunner(cycles=100_000).fire, lane_timer_cycles=600_000)
    # the second limit (550,000) does not fit the 500,000 the first fire left
    assert ctx.eob.timers_fired == 1 and ctx.eob.timers_deferred == 1


def test_watch_hit_is_materialised_into_the_mailbox_under_fifo() -> None:
    world = make_world()
    fund(world, ACTOR)
    wid = set_state_watch(world, make_ctx(1), big_meter(), actor=ACTOR, tx_sender=SENDER,
                          prefixes=[b"actor/x/kv/"], handler="on_change", payload=b"p")
    commit(world)
    world.set(b"actor/x/kv/k1", b"v")
    ctx = make_ctx(2)
    deliver_timers(world, ctx, run_fire=FakeRunner().fire)
    entries = list(mailbox.pending(world))
    assert len(entries) == 1
    e = entries[0][1]
    assert (e.kind, e.timer_id, e.handler, e.payload, e.target) == (mailbox.KIND_TIMER, wid, "on_change", b"p", ACTOR)
    assert e.deliver_id == mailbox.timer_deliver_id(2, ctx.env.parent_state_root, wid, 0)
    assert ctx.eob.watch_hits == 1 and ctx.eob.timers_materialized == 1
    w = get_watch(world, wid)
    assert w is not None and w.fire_seq == 1


def test_globalbox_mode_materialises_instead_of_firing() -> None:
    world = make_world()
    fund(world, ACTOR)
    set_timer_policy(world, TimerPolicy(mode=MODE_GLOBALBOX))
    tid = _sched(world, 1, 5)
    commit(world)
    runner = FakeRunner()
    ctx = make_ctx(5)
    deliver_timers(world, ctx, run_fire=runner.fire)
    assert runner.fires == []
    assert [e.timer_id for _, e in mailbox.pending(world)] == [tid]
    assert ctx.eob.timers_materialized == 1
