"""``scheduler/listing.py``: the read-only view of an actor's CIP-1 timers behind ``GET /actor/{a}/timers``.

Placement (ring / epoch queue / overflow / backlog, carried over after a deferral), the paged scan (bounded by
records and by bytes, every timer of the actor found exactly once across pages, no other actor's timer), the
early stop once the live count is found, and the weight summary. Nothing here writes state.
"""

from __future__ import annotations

from cowboy_node.execution.scheduler import listing, queue
from cowboy_node.execution.scheduler.timer_layout import Cip1Timer
from cowboy_node.execution.timers.policy import get_timer_policy
from cowboy_node.state.world import WorldState
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

A, B, C = owner(1), owner(2), owner(3)


def test_record_bytes_start_with_the_owner_at_offset_3() -> None:
    # canonical CBOR of {0: actor, ...}: a8 (map, 8 pairs), 00 (key 0), 54 (byte string of 20), then the actor
    raw = Cip1Timer(A, 5, gba_address(0), "h", b"", 1, 9, 0).encode()
    assert raw[:3] == bytes.fromhex("a80054") and raw[3:23] == A


def test_placement_follows_the_tiers_and_the_carry_over() -> None:
    world = cip1_world()
    fund(world, A)
    ring = timeout(world, A, 20)                      # epoch 0 (current 10): ring
    epoch = timeout(world, A, 10_000)                 # epoch 2: epoch queue
    over = timeout(world, A, 200_000)                 # epoch 55 > 0 + 1 + 24: overflow

    def where(tid: bytes) -> listing.Placement:
        t = queue.get_timer(world, tid)
        assert t is not None
        return listing.placement(world, t)

    assert where(ring) == listing.Placement("ring", 20, False)
    assert where(epoch) == listing.Placement("epoch", 10_000, False)
    assert where(over) == listing.Placement("overflow", 200_000, False)
    queue.collect(world, 20, 100)                     # height 20 is due: moved to the backlog, not attempted yet
    assert where(ring) == listing.Placement("backlog", 20, False)
    gbas = FakeGbas({gba_address(0): (bid(1, 0), None, 5)})  # max fee 1 < basefee 10: deferred
    rep, _ctx, _runner = run(world, 20, gbas)
    assert rep.deferred == 1 and rep.executed == 0
    assert where(ring) == listing.Placement("backlog", 21, True)  # carried behind the unvisited backlog


def _ids(pages: list[listing.ScanPage]) -> list[bytes]:
    return [t.timer_id for p in pages for t in p.timers]


def _all_pages(world: WorldState, actor: bytes, *, max_records: int | None = None,
               max_bytes: int | None = None) -> list[listing.ScanPage]:
    pages = [listing.scan_actor_timers(world, actor, max_records=max_records, max_bytes=max_bytes)]
    while pages[-1].next_after is not None:
        pages.append(listing.scan_actor_timers(world, actor, after=pages[-1].next_after, max_records=max_records,
                                               max_bytes=max_bytes))
    return pages


def test_pages_find_each_timer_of_the_actor_once_and_no_other() -> None:
    world = cip1_world()
    mine = {timeout(world, A, 20 + i) for i in range(5)}
    for i in range(7):
        timeout(world, B, 30 + i, payload=A)          # B's payloads even contain A's address
        timeout(world, C, 40 + i)
    pages = _all_pages(world, A, max_records=3)
    assert sorted(_ids(pages)) == sorted(mine) and len(_ids(pages)) == 5
    assert all(p.scanned <= 3 for p in pages) and len(pages) >= 2
    assert all(t.timer.actor == A for p in pages for t in p.timers)
    for p in pages:  # each page in due order
        assert [t.timer.height for t in p.timers] == sorted(t.timer.height for t in p.timers)
    assert _ids(_all_pages(world, B, max_records=1000)) != []
    assert len(_ids(_all_pages(world, B, max_records=2))) == 7


def test_the_scan_stops_once_the_live_count_is_found() -> None:
    world = cip1_world()
    tid = timeout(world, A, 20)
    others = [timeout(world, B, 30 + i) for i in range(50)]
    total = 51
    page = listing.scan_actor_timers(world, A)
    assert [t.timer_id for t in page.timers] == [tid] and page.next_after is None
    # records are read in id order and the scan ends at A's only timer: the records after it are not read
    before = sum(1 for o in others if o < tid)
    assert page.scanned == before + 1 <= total


def test_an_actor_without_cip1_timers_reads_no_record() -> None:
    world = cip1_world()
    for i in range(5):
        timeout(world, B, 30 + i)
    page = listing.scan_actor_timers(world, A)
    assert page == listing.ScanPage([], 0, None)


def test_the_byte_bound_ends_a_page_after_the_record_that_crosses_it() -> None:
    world = cip1_world()
    ids = {timeout(world, A, 20 + i, payload=bytes(1_000)) for i in range(4)}
    timeout(world, B, 50, payload=bytes(1_000))
    pages = _all_pages(world, A, max_bytes=1)         # the first record read crosses the bound: one per page
    assert [p.scanned for p in pages][:4] == [1, 1, 1, 1] and all(p.scanned <= 1 for p in pages)
    assert sorted(_ids(pages)) == sorted(ids)
    pages = _all_pages(world, A, max_bytes=2_000)     # records of ~1,070 bytes: the second crosses 2,000
    assert all(p.scanned <= 2 for p in pages) and sorted(_ids(pages)) == sorted(ids)


def test_summary_reports_counters_and_the_weight_in_force() -> None:
    world = cip1_world(TimerPolicy(mode=MODE_CIP1, cip1_starvation_blocks=1))
    fund(world, A)
    timeout(world, A, 20)
    timeout(world, A, 21)
    policy = get_timer_policy(world)
    s = listing.actor_summary(world, A, policy, height=10)
    assert (s.live, s.next_nonce, s.weight.weight, s.effective_weight, s.starving) == (2, 2, 1_000_000,
                                                                                       1_000_000, False)
    run(world, 20, FakeGbas({gba_address(0): (bid(1, 0), None, 5)}))  # deferred, none run: starved 1 block
    s = listing.actor_summary(world, A, policy, height=20)
    assert s.weight.starved_blocks == 1 and s.starving is True
    assert s.effective_weight == policy.cip1_starvation_floor == 2_000_000
