"""The six test vectors of seeds/000 §19, each through the End-of-Block pipeline (Globalbox policy)."""

from __future__ import annotations

from cowboy_node.execution import mailbox
from cowboy_node.execution.eob.deliver_timers import deliver_timers
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.timers.interval import set_interval
from cowboy_node.execution.timers.policy import MODE_GLOBALBOX, TimerPolicy, set_timer_policy
from cowboy_node.execution.timers.schedule import schedule_timer
from cowboy_node.execution.timers.watch import set_state_watch
from cowboy_node.state.world import WorldState
from tests.unit.eob_helpers import FakeRunner, big_meter, commit, fund, make_ctx, make_world, run_block

ACTORS = [bytes([0xA0 + i]) * 20 for i in range(4)]


def _world(**policy: int) -> WorldState:
    world = make_world()
    set_timer_policy(world, TimerPolicy(mode=MODE_GLOBALBOX, **policy))
    for a in ACTORS:
        fund(world, a)
    return world


def _sched(world: WorldState, at: int, due: int, actor: bytes = ACTORS[0], payload: bytes = b"") -> bytes:
    return schedule_timer(world, make_ctx(at), big_meter(), actor=actor, tx_sender=actor, height=due,
                          handler="handle_timer", payload=payload)


def test_vector_1_basic_height_trigger_due_height_h_runs_at_h_not_at_h_minus_1() -> None:
    world = _world()
    tid = _sched(world, 1, 10)
    commit(world)
    runner = FakeRunner()
    run_block(world, 9, runner)
    assert runner.fires == []
    ctx = run_block(world, 10, runner)
    assert [f[0] for f in runner.fires] == [tid]
    assert ctx.eob.timers_materialized == 1 and ctx.eob.timers_fired == 1


def test_vector_2_state_trigger_watch_k1_fires_only_when_k1_is_modified() -> None:
    world = _world()
    wid = set_state_watch(world, make_ctx(1), big_meter(), actor=ACTORS[0], tx_sender=ACTORS[0],
                          prefixes=[b"actor/k1"], handler="handle_timer", payload=b"w")
    commit(world)
    runner = FakeRunner()
    run_block(world, 2, runner, lambda w: w.set(b"actor/k2", b"x"))
    assert runner.fires == []
    run_block(world, 3, runner, lambda w: w.set(b"actor/k1", b"x"))
    assert [f[0] for f in runner.fires] == [wid]


def test_vector_3_quota_pruning_max_fires_per_block_2_third_goes_first_next_block() -> None:
    world = _world(max_fires_per_block=2)
    ids = [_sched(world, 1, 10, ACTORS[i]) for i in range(3)]
    commit(world)
    runner = FakeRunner()
    run_block(world, 10, runner)
    first = [f[0] for f in runner.fires]
    assert len(first) == 2 and set(first) < set(ids)
    (third,) = set(ids) - set(first)
    newer = _sched(world, 10, 11, ACTORS[3])
    commit(world)
    run_block(world, 11, runner)
    # the leftover has aged one block more than the new candidate: it is delivered first
    assert [f[0] for f in runner.fires[2:]] == [third, newer]


def test_vector_4_per_target_limit_max_fires_per_target_1_one_of_three_is_enqueued() -> None:
    world = _world(max_fires_per_target=1)
    for p in (b"a", b"b", b"c"):
        _sched(world, 1, 10, ACTORS[0], p)
    commit(world)
    runner = FakeRunner()
    ctx = run_block(world, 10, runner)
    assert len(runner.fires) == 1 and ctx.eob.timers_materialized == 1
    run_block(world, 11, runner)
    assert len(runner.fires) == 2  # the others stay queued and go out one per block


def test_vector_5_idempotent_materialisation_replaying_deliver_timers_h_adds_no_entries() -> None:
    world = _world()
    _sched(world, 1, 10)
    _sched(world, 1, 10, ACTORS[1])
    commit(world)
    cp = world.checkpoint()
    deliver_timers(world, make_ctx(10), run_fire=FakeRunner().fire)
    first = [(s, e.deliver_id) for s, e in mailbox.pending(world)]
    world.revert(cp)  # replay from the same parent state
    deliver_timers(world, make_ctx(10), run_fire=FakeRunner().fire)
    again = [(s, e.deliver_id) for s, e in mailbox.pending(world)]
    assert len(first) == 2 and again == first
    for _s, e in list(mailbox.pending(world)):
        mailbox.materialize(world, e)  # re-materialising the same deliver_id is a no-op
    assert [(s, e.deliver_id) for s, e in mailbox.pending(world)] == first


def test_vector_6_interval_roll_every_blocks_5_due_height_becomes_h_plus_5() -> None:
    world = _world()
    tid = set_interval(world, make_ctx(5), big_meter(), actor=ACTORS[0], tx_sender=ACTORS[0], every_blocks=5,
                       handler="handle_timer", payload=b"i")
    commit(world)
    runner = FakeRunner()
    ctx = run_block(world, 10, runner)
    assert [f[0] for f in runner.fires] == [tid] and ctx.eob.intervals_rolled == 1
    assert store.timers_at(world, 15) == [tid]
    run_block(world, 15, runner)
    assert [f[0] for f in runner.fires] == [tid, tid] and store.timers_at(world, 20) == [tid]
