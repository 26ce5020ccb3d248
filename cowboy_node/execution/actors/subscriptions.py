"""Event subscriptions (``pvm_host.subscribe_event`` & co., cowboy_sdk ``mock_host``; docs/actors.md §8).

An actor subscribes one of its handlers to the events another actor (the *emitter*) emits under a topic
(the event name's UTF-8 bytes). When the emitter emits such an event in a run that succeeds, each
subscription — at most :data:`MAX_DELIVERIES_PER_EMIT`, highest ``bid`` first (ties: lower ``sub_id``) —
gets a Mailbox entry ``subscriber.<handler>(event payload)`` run as the subscriber's own deferred work
(sender = the subscriber: the SDK's ``@on_event`` handlers are not ``@public``), which End of
Block's ExecuteMailbox runs like any entry (seed 000/001 Mailbox semantics: ``deliver_seq`` order, the
per-block budget, pre-charged from the subscriber, refund of the unused part; the entry is a named-handler
entry, kind 2, like a job callback — a job-callback reply translation only ever applies to entries the
Job Dispatcher sent). The enqueue is part of the emitting run, so a run that fails enqueues nothing.

``gas_prepaid`` is the subscription's cycle budget — **not** an escrow as ``cowboy_sdk.runtime`` describes
(each delivery is pre-charged from the subscriber by the Mailbox instead): each delivery takes
``min(max_cycles_per_fire, gas_remaining)`` from it, and a subscription whose budget falls below
:data:`MIN_SUBSCRIPTION_GAS_PREPAID` ends. ``bid`` cycles are burned by the subscribing run (and by
``update_bid``) and order deliveries; at most :data:`MAX_SUBSCRIBERS_PER_TOPIC` subscriptions follow one
(emitter, topic). The emitter pays the matching (:data:`MATCH_CYCLES` per emit plus :data:`DELIVERY_CYCLES`
and the entry's cells per delivery). The seeds define no CIP-29 pricing: all of this is a project choice.

State (project choice)::

    evsub/r/<sub_id 33>                                        -> CBOR {0: emitter, 1: topic, 2: subscriber,
                                                                  3: handler, 4: gas_remaining, 5: bid, 6: height}
    evsub/i/<emitter 20><keccak256(topic) 32><u128 BE (2^128-1-bid)><sub_id 33> -> b""   (delivery order)
    evsub/n/<subscriber 20>                                    -> CBOR uint (subscriptions made, for sub ids)
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_node.execution import mailbox
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.system_state import get_timer_config
from cowboy_node.state.world import WorldState
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.fields import ADDRESS_LEN, U128_MAX, expect_bytes, expect_map, expect_text, expect_uint

RECORD_PREFIX = b"evsub/r/"
"""``evsub/r/<sub_id>`` -> :class:`Subscription`."""
INDEX_PREFIX = b"evsub/i/"
"""Delivery-order index: ``evsub/i/<emitter><keccak256(topic)><inverted bid><sub_id>``."""
COUNT_PREFIX = b"evsub/n/"
"""``evsub/n/<subscriber>`` -> subscriptions made (sub ids never repeat)."""
SUB_ID_DOMAIN = b"cowboy/evsub/v1"
"""Domain of a sub id: ``keccak256(domain ‖ subscriber ‖ count u64 BE) ‖ 0x00`` (33 bytes, as the mock's)."""
SUB_ID_LEN = 33
MIN_SUBSCRIPTION_GAS_PREPAID = 50_000
"""Least cycle budget of a subscription (``cowboy_sdk.events.on_event``'s MIN_SUBSCRIPTION_GAS_PREPAID)."""
MAX_TOPIC_BYTES = 64
"""Longest topic (an event name: ``host.MAX_EVENT_NAME_BYTES``)."""
MAX_HANDLER_BYTES = 256
"""Longest handler name."""
MAX_SUBSCRIBERS_PER_TOPIC = 512
"""Most live subscriptions to one (emitter, topic) (``cowboy_sdk.runtime.subscribe_event``)."""
MAX_DELIVERIES_PER_EMIT = 16
"""Most subscriptions one emitted event is delivered to (highest bids first)."""
SUBSCRIBE_CYCLES = 2_000
"""subscribe / unsubscribe / update_bid / topup cost (plus cells for what they write)."""
MATCH_CYCLES = 200
"""Charged to the emitter per emitted event (the index lookup)."""
DELIVERY_CYCLES = 1_000
"""Charged to the emitter per delivery enqueued (plus the entry's cells)."""
DELIVERY_OVERHEAD_CELLS = 72
"""Cells of a delivery's Mailbox entry besides its payload (as a ``send_message``)."""
DELIVERY_DOMAIN = b"cowboy/mailbox/event/v1"
"""Domain of a delivery's ``deliver_id``."""
_INVERT = U128_MAX


@dataclass(frozen=True)
class Subscription:
    """One live subscription (``evsub/r/<sub_id>``)."""

    emitter: bytes
    """The actor whose events are delivered."""
    topic: bytes
    """The event name (UTF-8 bytes) matched exactly."""
    subscriber: bytes
    """The subscribing actor (delivery target and fee payer)."""
    handler: str
    """The subscriber's handler that receives the event payload."""
    gas_remaining: int
    """Cycle budget left for deliveries."""
    bid: int
    """Delivery priority among the subscriptions to the same event (higher first)."""
    height: int
    """Block that made the subscription."""

    def encode(self) -> bytes:
        """Canonical CBOR ``{0: emitter, …, 6: height}``."""
        return encode({0: self.emitter, 1: self.topic, 2: self.subscriber, 3: self.handler, 4: self.gas_remaining,
                       5: self.bid, 6: self.height})

    @classmethod
    def decode(cls, raw: bytes) -> Subscription:
        """Strict decode."""
        m = expect_map(decode(raw), frozenset(range(7)), "subscription")
        return cls(expect_bytes(m[0], "subscription.emitter", ADDRESS_LEN),
                   expect_bytes(m[1], "subscription.topic", max_len=MAX_TOPIC_BYTES),
                   expect_bytes(m[2], "subscription.subscriber", ADDRESS_LEN),
                   expect_text(m[3], "subscription.handler"), expect_uint(m[4], "subscription.gas_remaining"),
                   expect_uint(m[5], "subscription.bid"), expect_uint(m[6], "subscription.height"))


def _index_key(sub: Subscription, sub_id: bytes) -> bytes:
    return (INDEX_PREFIX + sub.emitter + keccak256(sub.topic) + (_INVERT - sub.bid).to_bytes(16, "big") + sub_id)


def _put(world: WorldState, meter: Meter, sub_id: bytes, sub: Subscription) -> None:
    raw = sub.encode()
    meter.charge_cells(len(RECORD_PREFIX) + SUB_ID_LEN + len(raw))
    world.set(RECORD_PREFIX + sub_id, raw)


def get(world: WorldState, sub_id: bytes) -> Subscription | None:
    """The live subscription ``sub_id``, or None."""
    raw = world.get(RECORD_PREFIX + sub_id)
    return None if raw is None else Subscription.decode(raw)


def _remove(world: WorldState, sub_id: bytes, sub: Subscription) -> None:
    world.delete(RECORD_PREFIX + sub_id)
    world.delete(_index_key(sub, sub_id))


def subscribe(world: WorldState, ctx: BlockContext, meter: Meter, *, subscriber: bytes, emitter: bytes,
              topic: bytes, handler: str, gas_prepaid: int, bid: int) -> bytes:
    """Create a subscription; returns its 33-byte id. Arguments are validated by the host."""
    meter.charge_cycles(SUBSCRIBE_CYCLES)
    if gas_prepaid < MIN_SUBSCRIPTION_GAS_PREPAID:
        raise ValueError(f"gas_prepaid must be at least {MIN_SUBSCRIPTION_GAS_PREPAID}")
    meter.charge_cycles(bid)  # the bid is burned as cycles of the subscribing run (cowboy_sdk.runtime)
    prefix = INDEX_PREFIX + emitter + keccak256(topic)
    taken = 0
    for _ in world.iterate(prefix):
        taken += 1
        if taken >= MAX_SUBSCRIBERS_PER_TOPIC:
            raise OverflowError(f"{MAX_SUBSCRIBERS_PER_TOPIC} subscriptions already follow this topic")
    meter.charge_cycles(MATCH_CYCLES * (1 + taken // 16))
    raw = world.get(COUNT_PREFIX + subscriber)
    count = 0 if raw is None else expect_uint(decode(raw), "evsub.count")
    sub_id = keccak256(SUB_ID_DOMAIN + subscriber + count.to_bytes(8, "big")) + b"\x00"
    counter = encode(count + 1)
    meter.charge_cells(len(COUNT_PREFIX) + ADDRESS_LEN + len(counter))
    world.set(COUNT_PREFIX + subscriber, counter)
    sub = Subscription(emitter, topic, subscriber, handler, gas_prepaid, bid, ctx.env.height)
    _put(world, meter, sub_id, sub)
    key = _index_key(sub, sub_id)
    meter.charge_cells(len(key))
    world.set(key, b"")
    return sub_id


def _own(world: WorldState, sub_id: bytes, subscriber: bytes) -> Subscription:
    sub = get(world, sub_id)
    if sub is None or sub.subscriber != subscriber:
        raise LookupError("EventSubNotFound")  # the host turns it into HostError(not_found)
    return sub


def unsubscribe(world: WorldState, meter: Meter, *, sub_id: bytes, subscriber: bytes) -> int:
    """End the caller's subscription; returns its unused budget (0 if there is none)."""
    meter.charge_cycles(SUBSCRIBE_CYCLES)
    sub = get(world, sub_id)
    if sub is None or sub.subscriber != subscriber:
        return 0
    meter.charge_cells(SUB_ID_LEN)
    _remove(world, sub_id, sub)
    return sub.gas_remaining


def force_unsubscribe(world: WorldState, meter: Meter, *, sub_id: bytes, caller: bytes) -> None:
    """End a subscription *to the caller's events* (the emitter's way out); a missing one is a no-op."""
    meter.charge_cycles(SUBSCRIBE_CYCLES)
    sub = get(world, sub_id)
    if sub is None:
        return
    if caller not in (sub.emitter, sub.subscriber):
        raise PermissionError("force_unsubscribe_event: only the emitter or the subscriber may end a subscription")
    meter.charge_cells(SUB_ID_LEN)
    _remove(world, sub_id, sub)


def update_bid(world: WorldState, meter: Meter, *, sub_id: bytes, subscriber: bytes, additional: int) -> int:
    """Raise the caller's bid; returns the new bid."""
    meter.charge_cycles(SUBSCRIBE_CYCLES)
    sub = _own(world, sub_id, subscriber)
    meter.charge_cycles(additional)  # burned, like the first bid
    if sub.bid + additional > U128_MAX:
        raise ValueError("bid would exceed u128")
    world.delete(_index_key(sub, sub_id))
    new = Subscription(sub.emitter, sub.topic, sub.subscriber, sub.handler, sub.gas_remaining, sub.bid + additional,
                       sub.height)
    _put(world, meter, sub_id, new)
    key = _index_key(new, sub_id)
    meter.charge_cells(len(key))
    world.set(key, b"")
    return new.bid


def topup(world: WorldState, meter: Meter, *, sub_id: bytes, subscriber: bytes, additional: int) -> int:
    """Add to the caller's cycle budget; returns the new budget."""
    meter.charge_cycles(SUBSCRIBE_CYCLES)
    sub = _own(world, sub_id, subscriber)
    if sub.gas_remaining + additional > U128_MAX:
        raise ValueError("gas would exceed u128")
    new = Subscription(sub.emitter, sub.topic, sub.subscriber, sub.handler, sub.gas_remaining + additional, sub.bid,
                       sub.height)
    _put(world, meter, sub_id, new)
    return new.gas_remaining


def deliver(world: WorldState, ctx: BlockContext, meter: Meter, *, emitter: bytes, topic: bytes,
            payload: bytes) -> list[bytes]:
    """Enqueue the deliveries of one emitted event (charged to the emitter); returns the sub ids served."""
    meter.charge_cycles(MATCH_CYCLES)
    prefix = INDEX_PREFIX + emitter + keccak256(topic)
    cut = len(prefix) + 16
    matched = []
    for key, _ in world.iterate(prefix):
        matched.append(key[cut:])
        if len(matched) >= MAX_DELIVERIES_PER_EMIT:
            break
    cycles_cap = get_timer_config(world).max_cycles_per_fire
    served = []
    for sub_id in matched:
        sub = get(world, sub_id)
        if sub is None:  # the index and the records change together; defensive
            continue
        gas = min(cycles_cap, sub.gas_remaining)
        meter.charge_cycles(DELIVERY_CYCLES)
        meter.charge_cells(DELIVERY_OVERHEAD_CELLS + len(payload))
        # the next deliver_seq is unique (the Mailbox counter only grows): the id never collides with another
        did = keccak256(DELIVERY_DOMAIN + ctx.env.height.to_bytes(8, "big")
                        + mailbox.next_seq(world).to_bytes(8, "big") + sub_id)
        mailbox.materialize(world, mailbox.MailboxEntry(
            deliver_id=did, kind=mailbox.KIND_JOB_CALLBACK, sender=sub.subscriber, target=sub.subscriber,
            handler=sub.handler, payload=payload, gas_limit=gas, fee_payer=sub.subscriber, height=ctx.env.height,
            timer_id=None))
        left = sub.gas_remaining - gas
        if left < MIN_SUBSCRIPTION_GAS_PREPAID:
            _remove(world, sub_id, sub)
        else:
            _put(world, meter, sub_id, Subscription(sub.emitter, sub.topic, sub.subscriber, sub.handler, left,
                                                    sub.bid, sub.height))
        served.append(sub_id)
    return served


__all__ = ["MAX_DELIVERIES_PER_EMIT", "MIN_SUBSCRIPTION_GAS_PREPAID", "Subscription", "deliver",
           "force_unsubscribe", "get", "subscribe", "topup", "unsubscribe", "update_bid"]
