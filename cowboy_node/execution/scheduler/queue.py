"""The tiered calendar queue (seeds/004 §2) in committed state, plus the due backlog.

Tiers, for the current block's epoch ``e`` (``model.epoch_of``):

* **ring** (tier 1): trigger epochs ``≤ e+1`` — one bucket per height, slot ``H % RING_BUFFER_SIZE``; the key
  also carries ``H``, so a bucket read is the exact range of one height whatever the slot held before;
* **epoch queue** (tier 2): trigger epochs ``e+2 .. e+1+EPOCH_BUCKETS``, one bucket per epoch;
* **overflow** (tier 3): later, one range ordered by height (the "merkleized sorted set": it lives in the state
  tree like every other key).

Every block, :func:`maintain` moves at most ``maint_per_block`` entries one tier down (epoch queue → ring for
epochs ``≤ e+1``; overflow → epoch queue as epochs enter its range), lowest heights first, and :func:`collect`
moves the ring buckets of the heights now due into the **backlog** (``cip1/q/``, oldest trigger first), from
which DeliverTimers asks the bids. An entry already due when maintenance reaches it goes straight to the backlog.
So each timer is moved at most three times and read once per block it is bid on: O(1) per schedule and per fire,
independent of how many timers are pending.
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_node.execution.scheduler import timer_layout as model
from cowboy_node.execution.scheduler.timer_layout import Cip1Timer
from cowboy_node.state.world import WorldState
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.fields import expect_map, expect_uint

MAX_COLLECT_HEIGHTS = 64
"""Heights whose ring buckets one block may visit: after the policy was off for a while the cursor catches up
at 64 heights per block (an empty bucket costs one seek)."""


@dataclass(frozen=True, slots=True)
class Meta:
    """Per-actor CIP-1 counters ``{0: live, 1: next_nonce}``."""

    live: int
    """Pending CIP-1 timers of the actor (capped by ``TimerConfig.max_timers_per_actor``)."""
    next_nonce: int
    """Nonce of the actor's next timer id (never reused)."""


def get_meta(world: WorldState, actor: bytes) -> Meta:
    raw = world.get(model.meta_key(actor))
    if raw is None:
        return Meta(0, 0)
    m = expect_map(decode(raw), frozenset({0, 1}), "cip1_meta")
    return Meta(expect_uint(m[0], "cip1_meta.live"), expect_uint(m[1], "cip1_meta.next_nonce"))


def encode_meta(meta: Meta) -> bytes:
    return encode({0: meta.live, 1: meta.next_nonce})


def _uint(world: WorldState, key: bytes, default: int) -> int:
    raw = world.get(key)
    return default if raw is None else expect_uint(decode(raw), key.decode())


def next_seq(world: WorldState) -> int:
    return _uint(world, model.KEY_SEQ, 0)


def tier_key(height: int, seq: int, current: int) -> bytes:
    """The queue key a timer triggering at ``height`` gets when scheduled during block ``current``."""
    e, target = model.epoch_of(current), model.epoch_of(height)
    if target <= e + 1:
        return model.ring_key(height, seq)
    if target <= e + 1 + model.EPOCH_BUCKETS:
        return model.epoch_key(height, seq)
    return model.overflow_key(height, seq)


def insert_writes(timer_id: bytes, timer: Cip1Timer, meta: Meta, current: int) -> list[tuple[bytes, bytes]]:
    """Every write of scheduling ``timer`` (record, queue entry, counters, sequence), in a fixed order."""
    return [(model.record_key(timer_id), timer.encode()),
            (tier_key(timer.height, timer.seq, current), timer_id),
            (model.meta_key(timer.actor), encode_meta(Meta(meta.live + 1, meta.next_nonce + 1))),
            (model.KEY_SEQ, encode(timer.seq + 1))]


def get_timer(world: WorldState, timer_id: bytes) -> Cip1Timer | None:
    raw = world.get(model.record_key(timer_id))
    return None if raw is None else Cip1Timer.decode(raw)


def _entry_keys(timer: Cip1Timer) -> tuple[bytes, ...]:
    h, s = timer.height, timer.seq
    return model.backlog_key(h, s), model.ring_key(h, s), model.epoch_key(h, s), model.overflow_key(h, s)


def remove(world: WorldState, timer_id: bytes, timer: Cip1Timer) -> None:
    """Delete the timer everywhere: its queue entry (whichever tier holds it), record, and live count."""
    moved = world.get(model.defer_key(timer.seq))
    if moved is not None:  # carried over: its backlog key is at the height it was carried to
        world.delete(model.defer_key(timer.seq))
        world.delete(model.backlog_key(expect_uint(decode(moved), "cip1_defer"), timer.seq))
    else:
        for key in _entry_keys(timer):
            if world.get(key) is not None:
                world.delete(key)
                break
    world.delete(model.record_key(timer_id))
    meta = get_meta(world, timer.actor)
    world.set(model.meta_key(timer.actor), encode_meta(Meta(max(meta.live - 1, 0), meta.next_nonce)))


def _move(world: WorldState, old: bytes, new: bytes, timer_id: bytes) -> None:
    world.delete(old)
    world.set(new, timer_id)


def _down(height: int, seq: int, current: int, cursor: int) -> bytes:
    """Where maintenance puts an entry now: the backlog if its ring bucket was already collected, else its tier."""
    if height < cursor:
        return model.backlog_key(height, seq)
    return tier_key(height, seq, current)


def maintain(world: WorldState, current: int, limit: int) -> int:
    """Epoch maintenance for block ``current``: move at most ``limit`` entries of the epoch queue (epochs ≤ e+1)
    into the ring, then at most ``limit`` overflow entries into the epoch queue or ring. Returns the moves."""
    e = model.epoch_of(current)
    cursor = get_cursor(world, current)
    moved = 0
    for key, timer_id in world.iterate(model.EPOCH_PREFIX):
        if moved >= limit or int.from_bytes(key[7:15], "big") > e + 1:
            break
        h, s = model.split_tail(key)
        _move(world, key, _down(h, s, current, cursor), timer_id)
        moved += 1
    done = 0
    for key, timer_id in world.iterate(model.OVERFLOW_PREFIX):
        h, s = model.split_tail(key)
        if done >= limit or model.epoch_of(h) > e + 1 + model.EPOCH_BUCKETS:
            break
        _move(world, key, _down(h, s, current, cursor), timer_id)
        done += 1
    return moved + done


def get_cursor(world: WorldState, current: int) -> int:
    return _uint(world, model.KEY_CURSOR, current)


def collect(world: WorldState, current: int, limit: int) -> int:
    """Move the ring buckets of heights ``cursor .. current`` into the backlog (at most ``limit`` entries and
    :data:`MAX_COLLECT_HEIGHTS` heights); advance the cursor past the buckets emptied. Returns the moves."""
    start = get_cursor(world, current)
    h = start
    moved = 0
    while h <= current and h - start < MAX_COLLECT_HEIGHTS:
        prefix = model.RING_PREFIX + (h % model.RING_BUFFER_SIZE).to_bytes(4, "big") + h.to_bytes(8, "big")
        full = False
        for key, timer_id in world.iterate(prefix):
            if moved >= limit:
                full = True
                break
            _move(world, key, model.backlog_key(*model.split_tail(key)), timer_id)
            moved += 1
        if full:
            break
        h += 1
    if h != start or world.get(model.KEY_CURSOR) is None:
        world.set(model.KEY_CURSOR, encode(h))
    return moved


def carry_over(world: WorldState, key: bytes, timer_id: bytes, seq: int, height: int) -> None:
    """Move a visited, still-due backlog entry behind the entries not yet visited: to ``(height, seq)``, so every
    due timer reaches the bid window however many others are deferred block after block."""
    new = model.backlog_key(height, seq)
    if new != key:
        _move(world, key, new, timer_id)
        world.set(model.defer_key(seq), encode(height))


def backlog_head(world: WorldState, limit: int) -> list[tuple[bytes, bytes]]:
    """``(queue key, timer_id)`` of the first ``limit`` backlog entries (oldest trigger, then insertion)."""
    out: list[tuple[bytes, bytes]] = []
    if limit <= 0:
        return out
    for key, timer_id in world.iterate(model.BACKLOG_PREFIX):
        out.append((key, timer_id))
        if len(out) >= limit:
            break
    return out
