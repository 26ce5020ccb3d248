"""CIP-1 under congestion (seeds/004 §5 "Economic Prioritization", "Best-Effort Delivery"; docs/timers.md §15):
many bidders compete for ``TIMER_PROCESSING_BUDGET_CYCLES``; high bidders are served first, low bidders are
carried over and served once the burst has passed, and under sustained overload the per-actor budget slices still
serve a low bidder every block while high bidders keep most of the budget."""

from __future__ import annotations

from cowboy_node.execution.scheduler import queue
from cowboy_protocol.types.timer_policy import MODE_CIP1, TimerPolicy
from tests.unit.execution.scheduler.cip1_helpers import (
    FakeGbas,
    bid,
    cip1_world,
    fund,
    gba_address,
    owner,
    run,
    timeout,
)

GAS = 1_000
BUDGET = 10 * GAS  # ten executions per block (the fake handler uses its whole gas limit)
HIGH, LOW = gba_address(0), gba_address(1)


def _gbas() -> FakeGbas:
    return FakeGbas({HIGH: (bid(100, 50), None, 10), LOW: (bid(100, 1), None, 10)})


def test_a_burst_serves_every_high_bid_before_any_low_bid_and_then_every_low_bid() -> None:
    world = cip1_world(TimerPolicy(mode=MODE_CIP1, cip1_budget_cycles=BUDGET))
    high, low = set(), set()
    for n in range(30):  # 15 high-bidding actors and 15 low-bidding ones, 4 timers each, all due at 20
        a = owner(n)
        fund(world, a, 10**15)
        for _ in range(4):
            tid = timeout(world, a, 20, gba=0 if n % 2 else 1, gas=GAS)
            (high if n % 2 else low).add(tid)
    served: list[list[bytes]] = []
    for h in range(20, 40):
        rep, _ctx, _runner = run(world, h, _gbas())
        assert rep.budget_used <= BUDGET and rep.executed <= 10
        served.append(rep.order)
    flat = [t for block in served for t in block]
    assert len(flat) == 120 and set(flat) == high | low  # everyone served, once
    assert set(flat[:60]) == high and set(flat[60:]) == low  # every high bid before any low bid
    assert [len(b) for b in served[:12]] == [10] * 12 and all(not b for b in served[12:])  # full blocks, no gaps
    assert all(queue.get_meta(world, owner(n)).live == 0 for n in range(30))


def test_under_sustained_overload_slices_serve_a_low_bidder_while_high_bidders_keep_most_of_the_budget() -> None:
    world = cip1_world(TimerPolicy(mode=MODE_CIP1, cip1_budget_cycles=BUDGET))
    highs = [owner(n) for n in range(4)]
    low_actor = owner(9)
    for a in [*highs, low_actor]:
        fund(world, a, 10**15)
    low = [timeout(world, low_actor, 20, gba=1, gas=GAS) for _ in range(4)]
    high_served = 0
    low_blocks: list[int] = []
    for h in range(20, 26):
        for a in highs:  # every block brings 16 new high-bid timers: demand is always above the budget
            for _ in range(4):
                timeout(world, a, h, current=h - 1, gba=0, gas=GAS)
        rep, _ctx, _runner = run(world, h, _gbas())
        assert rep.executed == 10 and rep.budget_used == BUDGET
        n_low = sum(t in low for t in rep.order)
        high_served += rep.executed - n_low
        if n_low:
            low_blocks.append(h)
    # equal weights, five actors: each slice is 2,000 cycles, so the low bidder gets 2 executions per block
    assert low_blocks == [20, 21] and all(queue.get_timer(world, t) is None for t in low)
    assert high_served == 60 - 4
