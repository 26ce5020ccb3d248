"""EOB step 5 SystemHooks: interval timers fired this block are written back at h + every_blocks."""

from __future__ import annotations

from cowboy_node.execution.eob.system_hooks import system_hooks
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.timers.interval import set_interval
from tests.unit.eob_helpers import ACTOR, SENDER, balance, big_meter, make_ctx, make_world


def test_fired_interval_timer_is_rescheduled_and_one_shot_timers_are_not() -> None:
    world = make_world()
    tid = set_interval(world, make_ctx(1), big_meter(), actor=ACTOR, tx_sender=SENDER, every_blocks=4,
                       handler="tick", payload=b"p")
    fired = store.get_timer(world, tid)
    assert fired is not None and fired.height == 5
    store.remove_timer(world, fired)  # what a fire does first
    ctx = make_ctx(5)
    ctx.eob.fired_timers.append(fired)
    system_hooks(world, ctx)
    again = store.get_timer(world, tid)
    assert again is not None and again.height == 9 and (again.handler, again.payload) == ("tick", b"p")
    assert store.timers_at(world, 9) == [tid] and ctx.eob.intervals_rolled == 1
    assert store.get_meta(world, ACTOR).live == 1


def test_nothing_fired_writes_nothing() -> None:
    world = make_world()
    before = world.changes()
    system_hooks(world, make_ctx(3))
    assert world.changes() == before


def test_system_hooks_returns_runner_stakes_whose_unbonding_ended() -> None:
    from cowboy_node.execution.runners import registry_state as runner_store
    from cowboy_node.execution.system_state import RUNNER_REGISTRY
    from cowboy_node.types.receipt import STATUS_SUCCESS
    from cowboy_protocol.types.runner_instructions import RunnerDeregister
    from tests.unit.runner.test_runner_support import SK_A, UNBONDING, A, register, registry_world, run

    world = registry_world()
    assert register(world, SK_A, 1, stake=5_000).status == STATUS_SUCCESS
    assert run(world, SK_A, RunnerDeregister(), 2).status == STATUS_SUCCESS
    before = balance(world, A)
    system_hooks(world, make_ctx(1 + UNBONDING))  # one block early
    assert balance(world, A) == before
    ctx = make_ctx(2 + UNBONDING)
    system_hooks(world, ctx)
    assert balance(world, A) == before + 5_000 and balance(world, RUNNER_REGISTRY) == 0
    rec = runner_store.get_runner(world, A)
    assert rec is not None and (rec.stake, rec.unbonding_until) == (0, 0)
    assert [getattr(e, "topic") for e in ctx.events] == ["runner.unbonded"]  # noqa: B009
