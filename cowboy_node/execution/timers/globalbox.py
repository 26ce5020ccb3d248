"""The Globalbox scheduling policy (seeds/001 §5.3, §7–§9; seeds/000 §9–§10), ``TimerPolicy.mode = 1``.

DeliverTimers under this policy:

1. **Collect** the block's incremental candidates: due height timers (height index
   ≤ h, at most :data:`MAX_INTAKE_PER_BLOCK` per block, the rest stay in the index)
   and state-watch hits (see ``watch.py``), skipping timers that already have a
   queued fire.
2. **Score and insert** each into the persistent, ordered Globalbox queue.
   ``score(h) = W_age·(h − due) + W_bid·bid``. Since ``W_age·h`` is the same for
   every element at a given height, the queue is keyed by the height-independent
   ``norm = W_bid·bid − W_age·due``: comparing norms compares scores at every height,
   so the order of enqueued fires is frozen and old fires age exactly as the draft's
   "uniform offset" describes. The key is the total-order comparator (§8.2)::

       gbox/q/ ‖ (2^255 − norm) u256 BE ‖ rr u32 BE ‖ due u64 BE ‖ target 20 ‖ timer_id

   ``rr`` (the per-target round-robin cursor) is the candidate's rank among the same
   target's candidates of its batch, so equal scores alternate between targets;
   ``priority_bucket`` is not used (no tiering policy is defined).
3. **Materialise** from the head: at most ``MAX_FIRES_PER_BLOCK`` fires, at most
   ``MAX_FIRES_PER_TARGET`` per target (a target over quota is skipped, its fires stay
   queued); visiting at most ``4 × MAX_FIRES_PER_BLOCK`` queue entries. Each becomes a
   Mailbox timer entry with ``deliver_id = H(h, parent_state_root, timer_id, fire_seq)``
   and the next ``deliver_seq``; ExecuteMailbox runs it (pre-charge, refund, burn as a
   CIP-5 fire). A fire whose timer was cancelled meanwhile is dropped; one whose timer
   expired is removed with ``timer.expired``.

Other state::

    gbox/p/<timer_id> -> CBOR bytes(queue key)    the timer has a queued fire (dedup, seeds/001 §7.1)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from cowboy_node.execution import mailbox
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.timers import watch
from cowboy_node.execution.timers.policy import TimerPolicy
from cowboy_node.execution.timers.timer_record import Timer
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.fields import ADDRESS_LEN, HASH_LEN, expect_bytes, expect_map, expect_uint
from cowboy_protocol.types.validation_errors import DecodeError

QUEUE_PREFIX = b"gbox/q/"
"""Ordered queue of fires, keyed by the total-order comparator."""
PENDING_PREFIX = b"gbox/p/"
"""``gbox/p/<timer_id>`` -> CBOR bytes(queue key): the timer's queued fire."""
KIND_HEIGHT = 0
"""A height (or interval) timer fire."""
KIND_WATCH = 1
"""A state-watch hit."""
MAX_INTAKE_PER_BLOCK = 4_096
"""Due height timers moved from the height index into the Globalbox per block (bounds EOB work)."""
NORM_OFFSET = 1 << 255
"""``2^255 − norm`` is positive for every norm the u32 weights, u64 heights and u128 bids allow."""
TOPIC_EXPIRED = "timer.expired"


@dataclass(frozen=True, slots=True)
class Candidate:
    """One incremental candidate of DeliverTimers(h)."""

    kind: int
    """:data:`KIND_HEIGHT` or :data:`KIND_WATCH`."""
    timer_id: bytes
    """Timer id (32 bytes)."""
    target: bytes
    """The timer's actor."""
    due: int
    """Due height (height timers) or hit height (watch hits)."""
    bid: int = 0
    """Bid (u128); CIP-5 (003) timers carry none, so 0."""


@dataclass(frozen=True, slots=True)
class GlobalFire:
    """A queued fire, canonical CBOR ``{0: kind, 1: timer_id, 2: target, 3: due}``."""

    kind: int
    """:data:`KIND_HEIGHT` or :data:`KIND_WATCH`."""
    timer_id: bytes
    """Timer id."""
    target: bytes
    """The timer's actor (for the per-target quota)."""
    due: int
    """Due / hit height."""

    def encode(self) -> bytes:
        """Canonical CBOR bytes."""
        return encode({0: self.kind, 1: self.timer_id, 2: self.target, 3: self.due})

    @classmethod
    def decode(cls, raw: bytes) -> GlobalFire:
        """Strict decode."""
        m = expect_map(decode(raw), frozenset({0, 1, 2, 3}), "global_fire")
        kind = expect_uint(m[0], "global_fire.kind")
        if kind not in (KIND_HEIGHT, KIND_WATCH):
            raise DecodeError(f"global_fire.kind {kind} is unknown", field="global_fire.kind")
        return cls(kind, expect_bytes(m[1], "global_fire.timer_id", HASH_LEN),
                   expect_bytes(m[2], "global_fire.target", ADDRESS_LEN), expect_uint(m[3], "global_fire.due"))


def score(policy: TimerPolicy, height: int, due: int, bid: int) -> int:
    """``W_age·max(0, h − due) + W_bid·bid`` (seeds/001 §8.1)."""
    return policy.w_age * max(0, height - due) + policy.w_bid * bid


def queue_key(policy: TimerPolicy, c: Candidate, rr: int) -> bytes:
    """The fire's position: the total-order comparator as one big-endian byte string (module docstring)."""
    norm = policy.w_bid * c.bid - policy.w_age * c.due
    return (QUEUE_PREFIX + (NORM_OFFSET - norm).to_bytes(32, "big") + rr.to_bytes(4, "big")
            + c.due.to_bytes(8, "big") + c.target + c.timer_id)


def order_batch(policy: TimerPolicy, height: int, batch: list[Candidate]) -> list[tuple[bytes, Candidate]]:
    """Sort one block's candidates by (score desc, due, target, timer_id), assign ``rr``, return their keys."""
    ranked = sorted(batch, key=lambda c: (-score(policy, height, c.due, c.bid), c.due, c.target, c.timer_id))
    per_target: dict[bytes, int] = {}
    out: list[tuple[bytes, Candidate]] = []
    for c in ranked:
        rr = per_target.get(c.target, 0)
        per_target[c.target] = rr + 1
        out.append((queue_key(policy, c, rr), c))
    return sorted(out, key=lambda kc: kc[0])


def pending_key(timer_id: bytes) -> bytes:
    """State key of a timer's queued-fire marker."""
    return PENDING_PREFIX + timer_id


def has_queued_fire(world: WorldState, timer_id: bytes) -> bool:
    """True if the timer already has a fire in the Globalbox."""
    return world.get(pending_key(timer_id)) is not None


def queue(world: WorldState) -> Iterator[tuple[bytes, GlobalFire]]:
    """The queue from its head: ``(key, fire)``."""
    for key, raw in world.iterate(QUEUE_PREFIX):
        yield key, GlobalFire.decode(raw)


def insert(world: WorldState, policy: TimerPolicy, height: int, batch: list[Candidate]) -> int:
    """Insert a block's candidates (those without a queued fire); existing entries keep their keys."""
    fresh = [c for c in batch if not has_queued_fire(world, c.timer_id)]
    for key, c in order_batch(policy, height, fresh):
        world.set(key, GlobalFire(c.kind, c.timer_id, c.target, c.due).encode())
        world.set(pending_key(c.timer_id), encode(key))
    return len(fresh)


def collect_due(world: WorldState, height: int) -> list[Candidate]:
    """Move up to :data:`MAX_INTAKE_PER_BLOCK` due height timers out of the height index; their records move to
    ``timer/g/<timer_id>`` (``store.park``) until materialised or cancelled."""
    out: list[Candidate] = []
    start = store.get_cursor(world)
    left: tuple[int, int] | None = None
    for key, raw in store.iter_entries(world, start):  # no handler runs here: the entries read are current
        h, seq = store.split_height_key(key)
        if h > height:
            break
        if len(out) >= MAX_INTAKE_PER_BLOCK:
            left = (h, seq)
            break
        timer = store.decode_entry(key, raw)
        store.park(world, timer, raw)
        out.append(Candidate(KIND_HEIGHT, timer.timer_id, timer.actor_address, timer.height))
    if out:
        cursor = left or (height + 1, 0)
        if cursor != start:
            store.set_cursor(world, *cursor)
    return out


def _drop_height_record(world: WorldState, timer: Timer) -> None:
    """Remove a timer whose index entry already left for the Globalbox: record, actor index, live count."""
    world.delete(store.parked_key(timer.timer_id))
    world.delete(store.actor_key(timer.actor_address, timer.timer_id))
    meta = store.get_meta(world, timer.actor_address)
    world.set(store.meta_key(timer.actor_address),
              store.ActorTimerMeta(max(meta.live - 1, 0), meta.next_nonce).encode())


@dataclass(slots=True)
class MaterializeReport:
    """What one Materialize pass did."""

    materialized: int = 0
    """Mailbox entries written."""
    expired: int = 0
    """Fires dropped because their timer had expired (event ``timer.expired``)."""
    cancelled: int = 0
    """Fires dropped because their timer no longer exists."""
    left: int = 0
    """Queue entries visited but left (per-target quota)."""


def materialize(world: WorldState, ctx: BlockContext, policy: TimerPolicy,
                fired_height_timers: list[Timer]) -> MaterializeReport:
    """Consume the queue head into the Mailbox under the quotas (module docstring, step 3).

    Height timers consumed are appended to ``fired_height_timers`` (for interval roll-forward).
    """
    rep = MaterializeReport()
    per_target: dict[bytes, int] = {}
    # Read the head first: materialising writes to the queue being read.
    for key, fire in list(_head(world, 4 * policy.max_fires_per_block)):
        if rep.materialized >= policy.max_fires_per_block:
            break
        if per_target.get(fire.target, 0) >= policy.max_fires_per_target:
            rep.left += 1
            continue
        world.delete(key)
        world.delete(pending_key(fire.timer_id))
        entry = _entry_for(world, ctx, fire, rep, fired_height_timers)
        if entry is None:
            continue
        mailbox.materialize(world, entry)
        per_target[fire.target] = per_target.get(fire.target, 0) + 1
        rep.materialized += 1
    return rep


def _head(world: WorldState, n: int) -> Iterator[tuple[bytes, GlobalFire]]:
    for i, item in enumerate(queue(world)):
        if i >= n:
            return
        yield item


def _entry_for(world: WorldState, ctx: BlockContext, fire: GlobalFire, rep: MaterializeReport,
               fired_height_timers: list[Timer]) -> mailbox.MailboxEntry | None:
    h = ctx.env.height
    root = ctx.env.parent_state_root
    if fire.kind == KIND_HEIGHT:
        timer = store.get_timer(world, fire.timer_id)
        if timer is None:
            rep.cancelled += 1
            return None
        _drop_height_record(world, timer)
        if h > timer.expires_at:
            rep.expired += 1
            ctx.events.append(Event(timer.actor_address, TOPIC_EXPIRED,
                                    encode({0: timer.timer_id, 1: timer.expires_at, 2: h})))
            return None
        fired_height_timers.append(timer)
        return mailbox.MailboxEntry(
            deliver_id=mailbox.timer_deliver_id(h, root, timer.timer_id, 0), kind=mailbox.KIND_TIMER,
            sender=timer.actor_address, target=timer.actor_address, handler=timer.handler, payload=timer.payload,
            gas_limit=timer.gas_limit_per_fire, fee_payer=timer.fee_payer, height=h, timer_id=timer.timer_id)
    w = watch.get_watch(world, fire.timer_id)
    if w is None:
        rep.cancelled += 1
        return None
    if h > w.expires_at:
        watch.remove_watch(world, fire.timer_id, w)
        rep.expired += 1
        ctx.events.append(Event(w.actor_address, TOPIC_EXPIRED, encode({0: fire.timer_id, 1: w.expires_at, 2: h})))
        return None
    watch.bump_fire_seq(world, fire.timer_id, w)
    return watch_entry(ctx, fire.timer_id, w)


def watch_entry(ctx: BlockContext, timer_id: bytes, w: watch.WatchTimer) -> mailbox.MailboxEntry:
    """The Mailbox entry of one watch hit (``fire_seq`` = hits before this one)."""
    return mailbox.MailboxEntry(
        deliver_id=mailbox.timer_deliver_id(ctx.env.height, ctx.env.parent_state_root, timer_id, w.fire_seq),
        kind=mailbox.KIND_TIMER, sender=w.actor_address, target=w.actor_address, handler=w.handler,
        payload=w.payload, gas_limit=w.gas_limit_per_fire, fee_payer=w.fee_payer, height=ctx.env.height,
        timer_id=timer_id)
