"""Globalbox: score, total-order key layout, frozen order, quotas, cancellation and expiry before materialisation."""

from __future__ import annotations

from cowboy_node.execution import mailbox
from cowboy_node.execution.timers import globalbox
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.timers.globalbox import Candidate, GlobalFire
from cowboy_node.execution.timers.policy import MODE_GLOBALBOX, TimerPolicy
from cowboy_node.execution.timers.schedule import schedule_timer
from cowboy_node.types.receipt import Event
from tests.unit.eob_helpers import ACTOR, OTHER, big_meter, make_ctx, make_world

P = TimerPolicy(mode=MODE_GLOBALBOX, w_age=3, w_bid=2)
T1 = bytes([0x01]) * 32


def test_score_is_w_age_times_age_plus_w_bid_times_bid() -> None:
    assert globalbox.score(P, 10, 7, 5) == 3 * 3 + 2 * 5
    assert globalbox.score(P, 5, 7, 0) == 0  # age never negative


def test_queue_key_golden_layout() -> None:
    c = Candidate(globalbox.KIND_HEIGHT, T1, ACTOR, due=7, bid=5)
    norm = 2 * 5 - 3 * 7  # -11
    expected = (b"gbox/q/" + ((1 << 255) + 11).to_bytes(32, "big") + bytes.fromhex("00000002")
                + bytes.fromhex("0000000000000007") + ACTOR + T1)
    assert globalbox.queue_key(P, c, 2) == expected
    assert norm == -11


def test_global_fire_golden_bytes() -> None:
    f = GlobalFire(globalbox.KIND_WATCH, T1, ACTOR, 9)
    assert f.encode() == bytes.fromhex("a4 0001 01 5820") + T1 + bytes.fromhex("02 54") + ACTOR + bytes.fromhex("03 09")
    assert GlobalFire.decode(f.encode()) == f


def test_order_is_score_then_round_robin_between_targets() -> None:
    p = TimerPolicy(mode=MODE_GLOBALBOX)
    a = [Candidate(0, bytes([i]) * 32, ACTOR, 10) for i in (1, 2)]
    b = [Candidate(0, bytes([i]) * 32, OTHER, 10) for i in (3, 4)]
    old = Candidate(0, bytes([9]) * 32, OTHER, 8)
    # equal scores: rank 0 of every target before rank 1 of any (ties: due, target, timer id)
    assert [c.timer_id[0] for _k, c in globalbox.order_batch(p, 10, [*b, *a])] == [1, 3, 2, 4]
    # the oldest goes first; it is OTHER's rank 0, so OTHER's two newer ones rank 1 and 2
    assert [c.timer_id[0] for _k, c in globalbox.order_batch(p, 10, [*a, *b, old])] == [9, 1, 2, 3, 4]


def test_enqueued_order_is_frozen_and_old_fires_outrank_new_ones() -> None:
    world = make_world()
    p = TimerPolicy(mode=MODE_GLOBALBOX)
    globalbox.insert(world, p, 10, [Candidate(0, T1, ACTOR, 10)])
    keys_before = [k for k, _ in globalbox.queue(world)]
    globalbox.insert(world, p, 12, [Candidate(0, bytes([2]) * 32, OTHER, 12)])
    queued = [(k, f.timer_id) for k, f in globalbox.queue(world)]
    assert queued[0] == (keys_before[0], T1)
    assert globalbox.insert(world, p, 13, [Candidate(0, T1, ACTOR, 10)]) == 0  # already queued: deduplicated
    assert world.get(globalbox.pending_key(T1)) is not None


def test_cancelled_timer_is_dropped_and_expired_one_emits_timer_expired() -> None:
    world = make_world()
    p = TimerPolicy(mode=MODE_GLOBALBOX)
    keep = schedule_timer(world, make_ctx(1), big_meter(), actor=ACTOR, tx_sender=ACTOR, height=5,
                          handler="handle_timer", payload=b"k")
    gone = schedule_timer(world, make_ctx(1), big_meter(), actor=ACTOR, tx_sender=ACTOR, height=5,
                          handler="handle_timer", payload=b"g")
    old = schedule_timer(world, make_ctx(1), big_meter(), actor=OTHER, tx_sender=OTHER, height=5,
                         handler="handle_timer", payload=b"o", expires_at=6)
    globalbox.insert(world, p, 5, globalbox.collect_due(world, 5))
    assert store.timers_at(world, 5) == [] and store.get_cursor(world) == (6, 0)
    t = store.get_timer(world, gone)
    assert t is not None
    store.remove_timer(world, t)  # cancelled while queued
    ctx = make_ctx(7)
    fired: list[object] = []
    rep = globalbox.materialize(world, ctx, p, fired)  # type: ignore[arg-type]
    assert (rep.materialized, rep.cancelled, rep.expired) == (1, 1, 1)
    assert [e.timer_id for _, e in mailbox.pending(world)] == [keep]
    assert [e.topic for e in ctx.events if isinstance(e, Event)] == ["timer.expired"]
    assert store.get_timer(world, keep) is None and store.get_meta(world, ACTOR).live == 0
    assert list(globalbox.queue(world)) == []
    del old


def test_collected_timers_leave_the_height_index_for_timer_g_and_stay_readable_by_id() -> None:
    world = make_world()
    p = TimerPolicy(mode=MODE_GLOBALBOX)
    tid = schedule_timer(world, make_ctx(1), big_meter(), actor=ACTOR, tx_sender=ACTOR, height=5,
                         handler="handle_timer", payload=b"k")
    t = store.get_timer(world, tid)
    assert t is not None
    before = world.changes()
    assert before[b"timer/h/" + bytes.fromhex("0000000000000005" "0000000000000000")] == t.encode()
    assert globalbox.collect_due(world, 5) == [Candidate(globalbox.KIND_HEIGHT, tid, ACTOR, 5)]
    after = world.changes()
    # the entry and the pointer are gone (deleted); the record, byte for byte, is at timer/g/<id>
    assert after[b"timer/h/" + bytes.fromhex("0000000000000005" "0000000000000000")] is None
    assert after[b"timer/t/" + tid] is None
    assert after[b"timer/g/" + tid] == t.encode()
    assert store.get_timer(world, tid) == t and store.has_timer(world, tid)
    assert store.actor_timers(world, ACTOR) == [(tid, 5)] and store.get_meta(world, ACTOR).live == 1
    store.remove_timer(world, t)  # a cancel while queued removes the parked record
    assert world.get(b"timer/g/" + tid) is None and store.get_timer(world, tid) is None
    assert store.actor_timers(world, ACTOR) == [] and store.get_meta(world, ACTOR).live == 0
    globalbox.insert(world, p, 5, [Candidate(globalbox.KIND_HEIGHT, tid, ACTOR, 5)])
    assert globalbox.materialize(world, make_ctx(6), p, []).cancelled == 1
