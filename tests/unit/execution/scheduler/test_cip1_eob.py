"""The CIP-1 branch of End-of-Block DeliverTimers (``eob/deliver_timers.py``): under ``TimerPolicy.mode = 2``
seeds/003 timers are delivered exactly as under FIFO and the CIP-1 step runs after them (its GBA a deployed
actor run read-only in the PVM); under FIFO a pending CIP-1 timer is left alone."""

from __future__ import annotations

from cowboy_node.execution.actors.actor_record import ActorRecord, source_hash
from cowboy_node.execution.actors.actor_state import put_actor, put_source
from cowboy_node.execution.eob.deliver_timers import deliver_timers
from cowboy_node.execution.scheduler import queue
from cowboy_node.execution.timers import schedule
from cowboy_node.execution.timers.policy import set_timer_policy
from cowboy_protocol.types.timer_policy import MODE_CIP1, TimerPolicy
from tests.unit.eob_helpers import FakeRunner, big_meter, fund, make_ctx
from tests.unit.execution.scheduler.cip1_helpers import cip1_world, gba_address, owner, timeout

GBA_SRC = '''import json

def get_gas_bid(payload):
    ctx = json.loads(payload)
    return json.dumps({"max_fee_per_cycle": ctx["basefee_cycle"] + 4, "tip_per_cycle": 2}).encode()
'''


def _world():  # type: ignore[no-untyped-def]
    world = cip1_world(gbas=0)
    put_source(world, source_hash(GBA_SRC), GBA_SRC)
    put_actor(world, gba_address(0), ActorRecord(source_hash(GBA_SRC), bytes(20), 1, ("get_gas_bid",),
                                                 len(GBA_SRC.encode())))
    return world


def test_cip1_mode_delivers_seeds_003_timers_then_cip1_timers() -> None:
    world = _world()
    a = owner(1)
    fund(world, a, 10**15)
    fifo = schedule.schedule_timer(world, make_ctx(10), big_meter(), actor=a, tx_sender=a, height=20,
                                   handler="handle_timer", payload=b"f")
    cip1 = timeout(world, a, 20)
    runner = FakeRunner(cycles=500, cells=4)
    ctx = make_ctx(20)
    deliver_timers(world, ctx, run_fire=runner.fire)
    assert [f[0] for f in runner.fires] == [fifo, cip1]
    assert ctx.eob.timers_fired == 2 and ctx.tips == 500 * 2  # only the CIP-1 fire carries a tip
    assert queue.get_timer(world, cip1) is None


def test_under_fifo_a_pending_cip1_timer_stays_until_cip1_is_back() -> None:
    world = _world()
    a = owner(1)
    fund(world, a, 10**15)
    cip1 = timeout(world, a, 20)
    set_timer_policy(world, TimerPolicy())
    runner = FakeRunner(cycles=500, cells=4)
    deliver_timers(world, make_ctx(20), run_fire=runner.fire)
    assert runner.fires == [] and queue.get_timer(world, cip1) is not None
    set_timer_policy(world, TimerPolicy(mode=MODE_CIP1))
    deliver_timers(world, make_ctx(21), run_fire=runner.fire)
    assert [f[0] for f in runner.fires] == [cip1]
