"""The subscriptions' shared catch-up budget (``rpc/replay_budget.py``): a token bucket whose waiters queue in
arrival order and are each woken once, when granted, by one batched release timer — never by polling, which
starved the block builder of the GIL with 200 subscribers replaying (bench/subscriptions.py)."""

from __future__ import annotations

import asyncio

import pytest

from cowboy_node.rpc.replay_budget import ReplayBudget

pytestmark = pytest.mark.timeout(300)


async def _drain_burst(b: ReplayBudget) -> None:
    """Spend the bucket's initial burst (``rate`` tokens), each granted without waiting."""
    for _ in range(int(b.rate)):
        await b.take()
    assert b.waiting == 0


async def test_the_burst_is_granted_at_once_without_a_timer() -> None:
    b = ReplayBudget(50)
    await _drain_burst(b)
    assert (b.granted, b.releases) == (50, 0)


async def test_waiters_are_granted_in_arrival_order() -> None:
    b = ReplayBudget(200)
    await _drain_burst(b)
    order: list[int] = []

    async def waiter(i: int) -> None:
        await b.take()
        order.append(i)

    tasks = [asyncio.create_task(waiter(i)) for i in range(60)]
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    assert order == list(range(60))


class Clock:
    """A clock the test moves by hand: tokens accrue only when it says so."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


async def test_a_waiter_does_not_overtake_those_already_queued() -> None:
    clock = Clock()
    b = ReplayBudget(100, clock)
    await _drain_burst(b)
    order: list[str] = []

    async def waiter(name: str) -> None:
        await b.take()
        order.append(name)

    first = asyncio.create_task(waiter("queued"))
    await asyncio.sleep(0)
    assert b.waiting == 1  # parked: no token has accrued by the clock
    clock.t += 1.0  # a second's tokens accrue before the release timer has looked again
    late = asyncio.create_task(waiter("late"))
    await asyncio.wait_for(asyncio.gather(first, late), 60)
    assert order == ["queued", "late"]


async def test_many_waiters_cost_one_wakeup_each_and_releases_are_batched() -> None:
    """200 waiters at 1,000 tokens/s: each take() returns once, and one release grants several (tokens accrued
    over MIN_GRANT_S), so releases are far fewer than grants; a bucket polled per token would be woken
    ~waiters times per token instead."""
    b = ReplayBudget(1000)
    await _drain_burst(b)
    returned = 0

    async def waiter() -> None:
        nonlocal returned
        await b.take()
        returned += 1

    await asyncio.wait_for(asyncio.gather(*(waiter() for _ in range(200))), 60)
    assert returned == 200 and b.granted == 1200
    # At 1,000/s a release every MIN_GRANT_S (5 ms) grants ~5 waiters; a slower loop batches more, never fewer.
    assert b.releases <= 200 // 2


async def test_grants_beyond_the_burst_keep_to_the_rate() -> None:
    b = ReplayBudget(400)
    await _drain_burst(b)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    for _ in range(100):
        await b.take()
    # 100 tokens accrue in 0.25 s at 400/s: a grant can come no sooner (a lower bound: load only adds to it)
    assert loop.time() - t0 >= (100 - 1) / b.rate


async def test_a_cancelled_waiter_spends_no_token_and_does_not_block_the_queue() -> None:
    clock = Clock()
    b = ReplayBudget(100, clock)
    await _drain_burst(b)
    tasks = [asyncio.create_task(b.take()) for _ in range(3)]
    await asyncio.sleep(0)
    assert b.waiting == 3
    tasks[1].cancel()
    await asyncio.sleep(0)
    clock.t += 2 / b.rate  # exactly two tokens: the two live waiters, in one release, the cancelled one skipped
    await asyncio.wait_for(asyncio.gather(tasks[0], tasks[2]), 10)
    assert tasks[1].cancelled()
    assert b.granted == 100 + 2
    assert b.waiting == 0


async def test_close_wakes_every_waiter_and_later_takes_return_at_once() -> None:
    b = ReplayBudget(1)
    await b.take()  # the one token: the next waiter would wait a second
    tasks = [asyncio.create_task(b.take()) for _ in range(5)]
    await asyncio.sleep(0)
    assert b.waiting == 5
    b.close()
    for _ in range(3):  # woken by close() itself, not by a timer: done within a few loop iterations
        await asyncio.sleep(0)
    assert all(t.done() and not t.cancelled() for t in tasks)
    await asyncio.wait_for(b.take(), 5)
    assert b.granted == 1 and b.waiting == 0
