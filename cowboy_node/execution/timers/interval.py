"""Interval timers (seeds/000 §5, §7.1 ``set_interval``, §11): a height timer that rolls forward.

An interval timer is an ordinary CIP-5 height timer (record, height index, FIFO
or Globalbox delivery, TTL, fee payer — all unchanged) plus an interval record.
When the timer is fired (FIFO: its handler ran, successfully or not; Globalbox:
it was materialised into the Mailbox) DeliverTimers remembers it, and the
SystemHooks step writes it back at ``due_height := h + every_blocks`` with the
same id, fee payer, gas limit and TTL and a fresh FIFO ``seq`` (seeds/000 EOB-5
"batch write next due_height"). An expired or unfunded interval timer is removed
like any timer and does not roll. A failed run still rolls (the drafts leave it
to policy; rolling keeps a transient failure from killing the schedule).

State (docs/timers.md §12.3)::

    timer/i/<timer_id>  -> CBOR {0: every_blocks, 1: handler, 2: payload}

The handler and payload are kept because a fire routes them (``_handler``
convention); the roll restores the originals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.timers import schedule
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.timers.policy import E_EXTENSION_DISABLED, get_timer_policy
from cowboy_node.execution.timers.timer_record import MAX_HANDLER_BYTES, MAX_PAYLOAD_BYTES, Timer
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.fields import U32_MAX, expect_bytes, expect_map, expect_text, expect_uint

INTERVAL_PREFIX = b"timer/i/"
"""``timer/i/<timer_id>`` -> :class:`IntervalSpec`."""
E_INTERVAL_INVALID = "timer_interval_invalid"
"""``every_blocks`` outside ``1..TimerPolicy.max_interval_blocks``."""


@dataclass(frozen=True, slots=True)
class IntervalSpec:
    """What an interval timer is rescheduled with, canonical CBOR ``{0: every_blocks, 1: handler, 2: payload}``."""

    every_blocks: int
    """Blocks between fires (u32, seeds/000 §6.1)."""
    handler: str
    """The timer's handler as scheduled (before routing)."""
    payload: bytes
    """The timer's payload as scheduled (before routing)."""

    def encode(self) -> bytes:
        """Canonical CBOR bytes."""
        return encode({0: self.every_blocks, 1: self.handler, 2: self.payload})

    @classmethod
    def decode(cls, raw: bytes) -> IntervalSpec:
        """Strict decode."""
        m = expect_map(decode(raw), frozenset({0, 1, 2}), "interval")
        return cls(expect_uint(m[0], "interval.every_blocks", U32_MAX),
                   expect_text(m[1], "interval.handler", MAX_HANDLER_BYTES),
                   expect_bytes(m[2], "interval.payload", max_len=MAX_PAYLOAD_BYTES))


def interval_key(timer_id: bytes) -> bytes:
    """State key of an interval record."""
    return INTERVAL_PREFIX + timer_id


def get_interval(world: WorldState, timer_id: bytes) -> IntervalSpec | None:
    """The interval record of ``timer_id``, or None (a one-shot timer)."""
    raw = world.get(interval_key(timer_id))
    return None if raw is None else IntervalSpec.decode(raw)


def set_interval(world: WorldState, ctx: BlockContext, meter: Meter, *, actor: bytes, tx_sender: bytes,
                 every_blocks: int, handler: str, payload: bytes, fee_payer: bytes | None = None,
                 gas_limit: int | None = None, expires_at: int | None = None) -> bytes:
    """Schedule a timer first due at ``current + every_blocks`` that rolls forward after each fire.

    Same checks and costs as ``schedule_timer`` plus :data:`E_INTERVAL_INVALID` and
    cells for the interval record. Returns the timer id.
    """
    limit = get_timer_policy(world).max_interval_blocks
    if limit == 0:
        meter.charge_cycles(schedule.SET_TIMER_BASE_CYCLES)
        raise TxFailed(E_EXTENSION_DISABLED, "interval timers are disabled by the governed timer policy")
    if isinstance(every_blocks, bool) or not isinstance(every_blocks, int) or not 1 <= every_blocks <= limit:
        meter.charge_cycles(schedule.SET_TIMER_BASE_CYCLES)
        raise TxFailed(E_INTERVAL_INVALID, f"every_blocks must be 1..{limit}")
    timer_id = schedule.schedule_timer(world, ctx, meter, actor=actor, tx_sender=tx_sender,
                                       height=ctx.env.height + every_blocks, handler=handler, payload=payload,
                                       fee_payer=fee_payer, gas_limit=gas_limit, expires_at=expires_at)
    key, value = interval_key(timer_id), IntervalSpec(every_blocks, handler, payload).encode()
    meter.charge_cells(len(key) + len(value))
    world.set(key, value)
    return timer_id


def cancel_interval(world: WorldState, *, actor: bytes, timer_id: bytes, fired: Sequence[Timer] | None = None) -> bool:
    """Stop an interval timer of ``actor``: removes its pending timer (if any) and its interval record.

    ``timer_unauthorized`` if the timer belongs to another actor; False (nothing changed)
    if ``timer_id`` is no interval timer. Works from the timer's own handler too: the
    fired timer is no longer pending, so its owner is looked up in ``fired`` (this
    block's fired timers, ``ctx.eob.fired_timers`` — what the host call passes). With
    ``fired`` given, an interval whose timer is neither pending nor fired this block
    (removed by expiry, funds or ``cancel_timer``: it will never roll again) is left
    alone and False returned, because its owner can no longer be proven. ``fired=None``
    means the caller vouches for the owner (system code and tests).
    """
    timer = store.get_timer(world, timer_id)
    pending = timer is not None
    if timer is None and fired is not None:
        timer = next((t for t in fired if t.timer_id == timer_id), None)
        if timer is None:
            return False
    if timer is not None and timer.actor_address != actor:
        raise TxFailed(schedule.E_UNAUTHORIZED, "timer belongs to another actor")
    if get_interval(world, timer_id) is None:
        return False
    if pending and timer is not None:
        store.remove_timer(world, timer)
    world.delete(interval_key(timer_id))
    return True


def roll_forward(world: WorldState, height: int, fired: list[Timer]) -> int:
    """SystemHooks: write the interval timers fired at ``height`` back at ``height + every_blocks``.

    ``fired`` holds the timers in fire order (routed or not; the interval record gives
    the original handler and payload). Timers without an interval record are skipped.
    Returns how many were rescheduled. Not charged: the fee payer pays each fire.
    """
    rolled = 0
    for t in fired:
        spec = get_interval(world, t.timer_id)
        if spec is None or store.has_timer(world, t.timer_id):
            continue  # cancelled meanwhile, or already pending again
        nxt = Timer(actor_address=t.actor_address, height=height + spec.every_blocks, payload=spec.payload,
                    timer_id=t.timer_id, handler=spec.handler, fee_payer=t.fee_payer,
                    gas_limit_per_fire=t.gas_limit_per_fire, expires_at=t.expires_at, seq=store.next_seq(world))
        meta = store.get_meta(world, t.actor_address)
        # insert_writes consumes a nonce; an interval keeps its id, so the nonce is restored.
        writes = store.insert_writes(nxt, store.ActorTimerMeta(meta.live, meta.next_nonce - 1))
        store.apply_writes(world, writes)
        rolled += 1
    return rolled
