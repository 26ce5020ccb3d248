"""State-watch timers (seeds/001 §5, §7; seeds/000 §8): fire when a watched key prefix is modified.

A watch timer is persistent: every block whose ModifiedKeySet(h) — the state keys
the block's transactions changed — holds a key starting with one of its prefixes
produces one *hit*, materialised as a Mailbox timer entry (FIFO policy) or queued
in the Globalbox (Globalbox policy). It never fires in the block that created it
(same-block prohibition) and is removed, with ``timer.expired``, at its first hit
after ``expires_at``. It counts against ``max_timers_per_actor`` like a height timer.

State (docs/timers.md §12.2)::

    timer/w/<timer_id>                       -> WatchTimer (canonical CBOR)
    timer/x/<len u16 BE><prefix><timer_id>   -> CBOR null   prefix index
    timer/xl/<len u16 BE>                    -> CBOR uint   watches per prefix length

Matching reads, for every modified key and every prefix length in use, the index
range of that key's prefix of that length: the cost grows with
``|ModifiedKeySet| × |lengths in use|`` and the hits, not with the number of watches.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.system_state import get_timer_config
from cowboy_node.execution.timers import schedule
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.timers.policy import E_EXTENSION_DISABLED, get_timer_policy
from cowboy_node.execution.timers.timer_record import MAX_HANDLER_BYTES, MAX_PAYLOAD_BYTES
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.fields import ADDRESS_LEN, U32_MAX, expect_bytes, expect_map, expect_text, expect_uint
from cowboy_protocol.types.validation_errors import DecodeError

WATCH_PREFIX = b"timer/w/"
"""``timer/w/<timer_id>`` -> :class:`WatchTimer`."""
INDEX_PREFIX = b"timer/x/"
"""``timer/x/<len u16><prefix><timer_id>`` -> CBOR null."""
LENGTHS_PREFIX = b"timer/xl/"
"""``timer/xl/<len u16>`` -> CBOR uint: number of index entries with that prefix length."""
WATCH_ID_DOMAIN = b"cowboy/timer/watch/v1"
"""Domain tag of a watch timer id: ``keccak256(tag ‖ actor ‖ timer nonce u64 BE)``."""
MAX_PREFIX_BYTES = 256
"""Longest watched prefix."""
SET_WATCH_BASE_CYCLES = 200
"""Charged by ``set_state_watch`` (plus cells for every byte written), as ``schedule_timer``."""
E_WATCH_PREFIXES = "timer_watch_prefixes_invalid"
"""No prefix, too many (``TimerPolicy.max_watch_prefixes``), a prefix empty / over 256 bytes, or duplicates."""


@dataclass(frozen=True, slots=True)
class WatchTimer:
    """A state-watch timer, canonical CBOR ``{0: actor, 1: prefixes, …, 8: fire_seq}``."""

    actor_address: bytes
    """Owner and target: its handler runs as this actor."""
    prefixes: tuple[bytes, ...]
    """Watched logical state-key prefixes, sorted, distinct."""
    handler: str
    """Handler to run (the ``_handler`` convention applies to ``handle_timer``)."""
    payload: bytes
    """Payload delivered on every hit."""
    fee_payer: bytes
    """Account pre-charged when a hit runs."""
    gas_limit_per_fire: int
    """Cycle limit of each run."""
    expires_at: int
    """Last height at which a hit may still fire."""
    created_height: int
    """Height of the block that created it (no hit in that block)."""
    fire_seq: int
    """Hits materialised so far (u32; part of each hit's ``deliver_id``)."""

    def encode(self) -> bytes:
        """Canonical CBOR bytes."""
        return encode({0: self.actor_address, 1: list(self.prefixes), 2: self.handler, 3: self.payload,
                       4: self.fee_payer, 5: self.gas_limit_per_fire, 6: self.expires_at, 7: self.created_height,
                       8: self.fire_seq})

    @classmethod
    def decode(cls, raw: bytes) -> WatchTimer:
        """Strict decode."""
        m = expect_map(decode(raw), frozenset(range(9)), "watch_timer")
        if not isinstance(m[1], list):
            raise DecodeError("watch_timer.prefixes: expected a list", field="watch_timer.prefixes")
        return cls(
            actor_address=expect_bytes(m[0], "watch_timer.actor", ADDRESS_LEN),
            prefixes=tuple(expect_bytes(p, "watch_timer.prefix", max_len=MAX_PREFIX_BYTES) for p in m[1]),
            handler=expect_text(m[2], "watch_timer.handler", MAX_HANDLER_BYTES),
            payload=expect_bytes(m[3], "watch_timer.payload", max_len=MAX_PAYLOAD_BYTES),
            fee_payer=expect_bytes(m[4], "watch_timer.fee_payer", ADDRESS_LEN),
            gas_limit_per_fire=expect_uint(m[5], "watch_timer.gas_limit"),
            expires_at=expect_uint(m[6], "watch_timer.expires_at"),
            created_height=expect_uint(m[7], "watch_timer.created_height"),
            fire_seq=expect_uint(m[8], "watch_timer.fire_seq", U32_MAX),
        )


def watch_key(timer_id: bytes) -> bytes:
    """State key of a watch record."""
    return WATCH_PREFIX + timer_id


def index_key(prefix: bytes, timer_id: bytes) -> bytes:
    """State key of one prefix-index entry."""
    return INDEX_PREFIX + len(prefix).to_bytes(2, "big") + prefix + timer_id


def length_key(length: int) -> bytes:
    """State key of the count of index entries with prefix length ``length``."""
    return LENGTHS_PREFIX + length.to_bytes(2, "big")


def derive_watch_id(actor: bytes, nonce: int) -> bytes:
    """``keccak256("cowboy/timer/watch/v1" ‖ actor ‖ nonce u64 BE)`` (nonce: the actor's timer nonce)."""
    return keccak256(WATCH_ID_DOMAIN + actor + nonce.to_bytes(8, "big"))


def get_watch(world: WorldState, timer_id: bytes) -> WatchTimer | None:
    """The watch timer with ``timer_id``, or None."""
    raw = world.get(watch_key(timer_id))
    return None if raw is None else WatchTimer.decode(raw)


def _length_count(world: WorldState, length: int) -> int:
    raw = world.get(length_key(length))
    return 0 if raw is None else expect_uint(decode(raw), "watch_lengths")


def set_state_watch(world: WorldState, ctx: BlockContext, meter: Meter, *, actor: bytes, tx_sender: bytes,
                    prefixes: list[bytes], handler: str, payload: bytes, fee_payer: bytes | None = None,
                    gas_limit: int | None = None, expires_at: int | None = None) -> bytes:
    """Register a state-watch timer; returns its id. Same checks and costs as ``schedule_timer`` (docs §4)
    except the height, plus :data:`E_WATCH_PREFIXES` and ``timer_extension_disabled`` (policy limit 0).
    Every check runs before any write: a refusal changes nothing but the cycles charged."""
    meter.charge_cycles(SET_WATCH_BASE_CYCLES)
    current = ctx.env.height
    cfg = get_timer_config(world)
    policy = get_timer_policy(world)
    if policy.max_watch_prefixes == 0:
        raise TxFailed(E_EXTENSION_DISABLED, "state-watch timers are disabled by the governed timer policy")
    if (not isinstance(prefixes, list) or not 1 <= len(prefixes) <= policy.max_watch_prefixes
            or any(not isinstance(p, bytes) or not 1 <= len(p) <= MAX_PREFIX_BYTES for p in prefixes)
            or len(set(prefixes)) != len(prefixes)):
        raise TxFailed(E_WATCH_PREFIXES, f"1..{policy.max_watch_prefixes} distinct prefixes of 1..256 bytes")
    if not isinstance(payload, bytes):
        raise TxFailed(schedule.E_INVALID_INPUT, "payload must be bytes")
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise TxFailed(schedule.E_PAYLOAD_TOO_LARGE, f"payload is {len(payload)} bytes, the maximum is 1 MiB")
    if not isinstance(handler, str):
        raise TxFailed(schedule.E_HANDLER_INVALID, "handler must be a string")
    try:
        handler_len = len(handler.encode("utf-8"))  # strict: a lone surrogate could not be stored
    except UnicodeEncodeError:
        raise TxFailed(schedule.E_HANDLER_INVALID, "handler is not valid UTF-8") from None
    if not 0 < handler_len <= MAX_HANDLER_BYTES:
        raise TxFailed(schedule.E_HANDLER_INVALID, f"handler must be 1..{MAX_HANDLER_BYTES} UTF-8 bytes")
    payer = actor if fee_payer is None else schedule._address(fee_payer, "fee_payer")
    schedule._check_fee_payer(payer, actor, tx_sender)  # same fee-payer rule as schedule_timer
    gas = cfg.max_cycles_per_fire if gas_limit is None else schedule._uint(gas_limit, "gas_limit")
    if not 1 <= gas <= cfg.max_cycles_per_fire:
        raise TxFailed(schedule.E_GAS_LIMIT_TOO_HIGH if gas else schedule.E_GAS_LIMIT_ZERO,
                       f"gas_limit must be 1..{cfg.max_cycles_per_fire}")
    ceiling = current + cfg.max_ttl_blocks
    expiry = ceiling if expires_at is None else schedule._uint(expires_at, "expires_at")
    if not current < expiry <= ceiling:
        raise TxFailed(schedule.E_EXPIRY_NOT_FUTURE if expiry <= current else schedule.E_EXPIRY_TOO_FAR,
                       f"expires_at must be in ({current}, {ceiling}]")
    meta = store.get_meta(world, actor)
    if meta.live >= cfg.max_timers_per_actor:
        raise TxFailed(schedule.E_ACTOR_CAP, f"actor already holds {meta.live} timers")
    timer_id = derive_watch_id(actor, meta.next_nonce)
    watch = WatchTimer(actor, tuple(sorted(prefixes)), handler, payload, payer, gas, expiry, current, 0)
    writes = [(watch_key(timer_id), watch.encode()),
              (store.meta_key(actor), store.ActorTimerMeta(meta.live + 1, meta.next_nonce + 1).encode())]
    for p in watch.prefixes:
        writes.append((index_key(p, timer_id), encode(None)))
        writes.append((length_key(len(p)), encode(_length_count(world, len(p)) + 1)))
    meter.charge_cells(sum(len(k) + len(v) for k, v in writes))
    for k, v in writes:
        world.set(k, v)
    return timer_id


def remove_watch(world: WorldState, timer_id: bytes, watch: WatchTimer) -> None:
    """Delete a watch timer, its index entries, and its live count."""
    world.delete(watch_key(timer_id))
    for p in watch.prefixes:
        world.delete(index_key(p, timer_id))
        left = _length_count(world, len(p)) - 1
        if left > 0:
            world.set(length_key(len(p)), encode(left))
        else:
            world.delete(length_key(len(p)))
    meta = store.get_meta(world, watch.actor_address)
    left_meta = store.ActorTimerMeta(max(meta.live - 1, 0), meta.next_nonce)
    world.set(store.meta_key(watch.actor_address), left_meta.encode())


def cancel_watch(world: WorldState, *, actor: bytes, timer_id: bytes) -> bool:
    """Remove the caller's watch timer; False if absent, ``timer_unauthorized`` if another actor's."""
    watch = get_watch(world, timer_id)
    if watch is None:
        return False
    if watch.actor_address != actor:
        raise TxFailed(schedule.E_UNAUTHORIZED, "watch timer belongs to another actor")
    remove_watch(world, timer_id, watch)
    return True


def bump_fire_seq(world: WorldState, timer_id: bytes, watch: WatchTimer) -> None:
    """Record one materialised hit (``fire_seq += 1``, seeds/000 §10.2)."""
    world.set(watch_key(timer_id), replace(watch, fire_seq=watch.fire_seq + 1).encode())


def hits(world: WorldState, modified_keys: tuple[bytes, ...]) -> list[bytes]:
    """Ids of the watch timers with a prefix of some key in ``modified_keys``, ascending."""
    lengths = [int.from_bytes(k[len(LENGTHS_PREFIX):], "big") for k, _ in world.iterate(LENGTHS_PREFIX)]
    found: dict[bytes, None] = {}
    for key in modified_keys:
        for n in lengths:
            if n > len(key):
                break  # lengths ascend
            scan = INDEX_PREFIX + n.to_bytes(2, "big") + key[:n]
            cut = len(scan)
            for ikey, _ in world.iterate(scan):
                found[ikey[cut:]] = None
    return sorted(found)
