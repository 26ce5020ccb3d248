"""Interval timers: record golden bytes, validation, FIFO roll-forward through the pipeline, cancel."""

from __future__ import annotations

import pytest

from cowboy_node.execution.timers import interval
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.timers.interval import IntervalSpec, set_interval
from cowboy_node.execution.validity_errors import TxFailed
from tests.unit.eob_helpers import (
    ACTOR,
    OTHER,
    SENDER,
    FakeRunner,
    big_meter,
    commit,
    fund,
    make_ctx,
    make_world,
    run_block,
)

T1 = bytes([0x01]) * 32


def test_record_key_and_golden_bytes() -> None:
    assert interval.interval_key(T1) == b"timer/i/" + T1
    spec = IntervalSpec(5, "tick", b"p")
    assert spec.encode() == bytes.fromhex("a3 0005 01 64 7469636b 02 41 70")
    assert IntervalSpec.decode(spec.encode()) == spec


@pytest.mark.parametrize("every", [0, 2_592_001, True])
def test_every_blocks_is_validated(every: int) -> None:
    with pytest.raises(TxFailed) as e:
        set_interval(make_world(), make_ctx(1), big_meter(), actor=ACTOR, tx_sender=SENDER, every_blocks=every,
                     handler="h", payload=b"")
    assert e.value.code == "timer_interval_invalid"


def test_fifo_interval_fires_every_n_blocks_even_after_a_failed_run() -> None:
    world = make_world()
    fund(world, ACTOR)
    tid = set_interval(world, make_ctx(1), big_meter(), actor=ACTOR, tx_sender=SENDER, every_blocks=3,
                       handler="handle_timer", payload=b"x")
    commit(world)
    runner = FakeRunner(ok=False)
    for h in range(2, 11):
        run_block(world, h, runner)
    assert [f[0] for f in runner.fires] == [tid, tid, tid]  # heights 4, 7, 10
    assert store.timers_at(world, 13) == [tid] and store.get_meta(world, ACTOR).live == 1


def test_cancel_interval_from_its_own_handler_stops_the_roll() -> None:
    world = make_world()
    fund(world, ACTOR)
    tid = set_interval(world, make_ctx(1), big_meter(), actor=ACTOR, tx_sender=SENDER, every_blocks=2,
                       handler="handle_timer", payload=b"x")
    commit(world)
    runner = FakeRunner(write=lambda w, t: interval.cancel_interval(w, actor=ACTOR, timer_id=t) and None)
    run_block(world, 3, runner)
    assert len(runner.fires) == 1 and store.get_timer(world, tid) is None
    assert interval.get_interval(world, tid) is None


def test_cancel_interval_of_another_actor_is_unauthorized() -> None:
    world = make_world()
    tid = set_interval(world, make_ctx(1), big_meter(), actor=ACTOR, tx_sender=SENDER, every_blocks=2,
                       handler="h", payload=b"")
    with pytest.raises(TxFailed) as e:
        interval.cancel_interval(world, actor=OTHER, timer_id=tid)
    assert e.value.code == "timer_unauthorized"
    assert interval.cancel_interval(world, actor=ACTOR, timer_id=tid) is True
    assert store.get_timer(world, tid) is None and interval.cancel_interval(world, actor=ACTOR, timer_id=tid) is False
