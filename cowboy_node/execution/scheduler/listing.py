"""Read-only views of an actor's CIP-1 timers for the node's API (``GET /actor/{address}/timers``).

Nothing in execution calls this module: it only reads the scheduler's state (docs/timers.md §15.2) and writes
nothing. It is not metered and not part of consensus; ``pvm_host.get_timers()`` does not list CIP-1 timers
(docs/actors.md §4).

**Why a paged scan.** The scheduler's state has no per-actor index of CIP-1 timers (``cip1/m/<actor>`` holds
only the live count and the nonce; records are keyed by the timer id, a hash). Finding one actor's timers
therefore walks the records ``cip1/t/<timer_id>`` in id order. :func:`scan_actor_timers` bounds one call by
:data:`SCAN_RECORDS` records and :data:`SCAN_BYTES` bytes of values and returns a cursor (the last id read)
to continue from; it stops early once it has found as many timers as the actor's live count, so an actor
with no CIP-1 timer costs one read and a small chain lists everything in one call. A per-actor index in
consensus state would make this O(timers of the actor); that is a state-layout change of the scheduler
(not made here).
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_node.execution.scheduler import queue, weights
from cowboy_node.execution.scheduler import timer_layout as model
from cowboy_node.execution.scheduler.timer_layout import Cip1Timer
from cowboy_node.state.world import WorldState
from cowboy_protocol.codec import decode
from cowboy_protocol.types.fields import ADDRESS_LEN, expect_uint
from cowboy_protocol.types.timer_policy import TimerPolicy

SCAN_RECORDS = 2_048
"""Most CIP-1 records (of every actor) one :func:`scan_actor_timers` call reads."""
SCAN_BYTES = 4 * 1024 * 1024
"""Most bytes of record values one call reads (a record holds its payload, up to 1 MiB): the call stops after
the record that crosses this."""
MAX_LISTED = 1_000
"""Most timers one call returns (as the seeds/003 listing)."""
_ACTOR_AT = slice(3, 3 + ADDRESS_LEN)
"""Where the owner sits in a record's canonical bytes: ``a8`` (map of 8), ``00`` (key 0), ``54`` (bytes of
length 20), then the 20 address bytes (model.py). Used to skip other actors' records without decoding them;
a match is then decoded in full."""

TIER_RING = "ring"
"""Tier 1: the block ring buffer (trigger epoch ≤ current + 1)."""
TIER_EPOCH = "epoch"
"""Tier 2: the epoch queue."""
TIER_OVERFLOW = "overflow"
"""Tier 3: the overflow set (trigger epoch beyond the epoch queue)."""
TIER_BACKLOG = "backlog"
"""Due: collected into the backlog, waiting for the bid window (or carried over after an attempt)."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a pending CIP-1 timer is queued."""

    tier: str | None
    """:data:`TIER_RING`, :data:`TIER_EPOCH`, :data:`TIER_OVERFLOW`, :data:`TIER_BACKLOG`; None if no queue entry
    was found (never for a consistent state)."""
    queued_at: int | None
    """Height part of its queue key: the trigger height, or for a carried-over timer the block it was carried to
    (its next bid)."""
    carried_over: bool
    """The timer was attempted (bid asked or ordered) and not run, at least once: a market refusal, the budget,
    or the owner's balance (``cip1.bid_refused`` events say which)."""


@dataclass(frozen=True, slots=True)
class ListedTimer:
    """One pending CIP-1 timer and its queue placement."""

    timer_id: bytes
    """32-byte id (``model.derive_timeout_id``)."""
    timer: Cip1Timer
    """The stored record."""
    placement: Placement
    """Tier and queue height."""


@dataclass(frozen=True, slots=True)
class ScanPage:
    """One bounded step of :func:`scan_actor_timers`."""

    timers: list[ListedTimer]
    """The actor's timers found in this step, in due order ``(height, seq)``."""
    scanned: int
    """Records (of any actor) read."""
    next_after: bytes | None
    """Cursor to continue from (the last id read), or None when the scan is complete."""


@dataclass(frozen=True, slots=True)
class ActorSummary:
    """An actor's CIP-1 counters and its priority weight as the next step would use it."""

    live: int
    """Pending CIP-1 timers (``max_timers_per_actor`` applies to it)."""
    next_nonce: int
    """Nonce of the actor's next timer id."""
    weight: weights.WeightRecord
    """Weight record folded to the current epoch (what the step reads; the stored record may be older)."""
    effective_weight: int
    """Weight used for tie-breaks and budget slices (the starvation floor applied)."""
    starving: bool
    """``starved_blocks ≥ cip1_starvation_blocks``: the floor is in force."""


def placement(world: WorldState, timer: Cip1Timer) -> Placement:
    """Find the queue entry of a pending timer (at most five reads, as ``queue.remove`` does)."""
    moved = world.get(model.defer_key(timer.seq))
    if moved is not None:
        return Placement(TIER_BACKLOG, expect_uint(decode(moved), "cip1_defer"), True)
    h, s = timer.height, timer.seq
    for tier, key in ((TIER_BACKLOG, model.backlog_key(h, s)), (TIER_RING, model.ring_key(h, s)),
                      (TIER_EPOCH, model.epoch_key(h, s)), (TIER_OVERFLOW, model.overflow_key(h, s))):
        if world.get(key) is not None:
            return Placement(tier, h, False)
    return Placement(None, None, False)


def actor_summary(world: WorldState, actor: bytes, policy: TimerPolicy, *, height: int) -> ActorSummary:
    """The actor's counters and weight as of block ``height`` (the folded record is not written back)."""
    meta = queue.get_meta(world, actor)
    rec = weights.get_record(world, actor, model.epoch_of(height), policy)
    return ActorSummary(meta.live, meta.next_nonce, rec, weights.effective(rec, policy),
                        rec.starved_blocks >= policy.cip1_starvation_blocks)


def scan_actor_timers(world: WorldState, actor: bytes, *, after: bytes | None = None,
                      max_records: int | None = None, max_bytes: int | None = None) -> ScanPage:
    """The actor's CIP-1 timers among at most ``max_records`` (default :data:`SCAN_RECORDS`) records after id
    ``after`` (module docstring); ``max_bytes`` defaults to :data:`SCAN_BYTES`.

    Stops early, with no cursor, once the actor's live count has been found (counting the pages before this
    one is the caller's business: a later page simply finds the rest or nothing).
    """
    max_records = SCAN_RECORDS if max_records is None else max_records
    max_bytes = SCAN_BYTES if max_bytes is None else max_bytes
    live = queue.get_meta(world, actor).live
    if live == 0:
        return ScanPage([], 0, None)
    start = None if after is None else model.RECORD_PREFIX + after + b"\x00"
    found: list[ListedTimer] = []
    scanned = 0
    read = 0
    last: bytes | None = None
    complete = True
    for key, raw in world.iterate(model.RECORD_PREFIX, start=start):
        if scanned >= max_records or read >= max_bytes or len(found) >= min(live, MAX_LISTED):
            complete = len(found) >= live
            break
        scanned += 1
        read += len(raw)
        last = key[len(model.RECORD_PREFIX):]
        if raw[_ACTOR_AT] != actor:
            continue
        timer = Cip1Timer.decode(raw)
        if timer.actor == actor:
            found.append(ListedTimer(last, timer, placement(world, timer)))
    found.sort(key=lambda t: (t.timer.height, t.timer.seq))
    return ScanPage(found, scanned, None if complete else last)
