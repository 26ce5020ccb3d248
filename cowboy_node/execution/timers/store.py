"""Timer state layout: records, the ordered height index, the per-actor index and counters.

Every key lives under ``timer/`` in the world state (docs/timers.md §2)::

    timer/t/<timer_id>                    -> Timer record (model.Timer canonical CBOR)
    timer/h/<height u64 BE><seq u64 BE>   -> CBOR bytes(timer_id)        height index
    timer/a/<actor 20><timer_id>          -> CBOR uint height            per-actor index
    timer/m/<actor 20>                    -> CBOR {0: live, 1: next_nonce}
    timer/seq                             -> CBOR uint next seq          global insertion counter
    timer/cursor                          -> CBOR {0: height, 1: seq}    delivery scan start

The height index is one key per timer, ordered by (height, seq): the keys of
one height form a contiguous range in insertion (FIFO) order, so reading the
timers due at ``h`` costs O(timers due at h) whatever else is stored. Every
function here reads and writes through the :class:`WorldState`, so timer
writes made by a transaction sit in its journal and are undone by a revert.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from cowboy_node.execution.timers.model import MAX_TIMER_ID_BYTES, Timer, encode_indexed
from cowboy_node.state.world import WorldState
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.fields import ADDRESS_LEN, expect_bytes, expect_map, expect_uint

PREFIX = b"timer/"
"""Namespace of all timer state."""
RECORD_PREFIX = b"timer/t/"
"""``timer/t/<timer_id>`` -> Timer record."""
HEIGHT_PREFIX = b"timer/h/"
"""``timer/h/<height 8 BE><seq 8 BE>`` -> CBOR bytes(timer_id)."""
ACTOR_PREFIX = b"timer/a/"
"""``timer/a/<actor><timer_id>`` -> CBOR uint height."""
META_PREFIX = b"timer/m/"
"""``timer/m/<actor>`` -> :class:`ActorTimerMeta`."""
KEY_SEQ = b"timer/seq"
"""Next global insertion sequence number (absent = 0)."""
KEY_CURSOR = b"timer/cursor"
"""(height, seq) below which the height index holds no entry (absent = start of the index)."""

Write = tuple[bytes, bytes]
"""A pending ``(key, value)`` write; its cell cost is ``len(key) + len(value)``."""


def record_key(timer_id: bytes) -> bytes:
    """State key of a timer record."""
    return RECORD_PREFIX + timer_id


def height_key(height: int, seq: int) -> bytes:
    """State key of a height-index entry."""
    return HEIGHT_PREFIX + height.to_bytes(8, "big") + seq.to_bytes(8, "big")


def actor_key(actor: bytes, timer_id: bytes) -> bytes:
    """State key of a per-actor index entry."""
    return ACTOR_PREFIX + actor + timer_id


def meta_key(actor: bytes) -> bytes:
    """State key of an actor's timer counters."""
    return META_PREFIX + actor


@dataclass(frozen=True, slots=True)
class ActorTimerMeta:
    """Per-actor timer counters, canonical CBOR ``{0: live, 1: next_nonce}``."""

    live: int = 0
    """Live timers the actor holds (checked against ``max_timers_per_actor``)."""
    next_nonce: int = 0
    """Nonce of the actor's next timer id (§3.3); only ever increases."""

    def encode(self) -> bytes:
        """Canonical CBOR bytes."""
        return encode_indexed(self.live, self.next_nonce)

    @classmethod
    def decode(cls, raw: bytes) -> ActorTimerMeta:
        """Strict decode."""
        m = expect_map(decode(raw), frozenset({0, 1}), "timer_meta")
        return cls(expect_uint(m[0], "timer_meta.live"), expect_uint(m[1], "timer_meta.next_nonce"))


# -- reads --------------------------------------------------------------------------------------

def get_timer(world: WorldState, timer_id: bytes) -> Timer | None:
    """The live timer with ``timer_id``, or None (also for ids no timer can have)."""
    if not isinstance(timer_id, bytes) or not 0 < len(timer_id) <= MAX_TIMER_ID_BYTES:
        return None
    raw = world.get(record_key(timer_id))
    return None if raw is None else Timer.decode(raw)


_META_CACHE_MAX = 4096
_counters_by_raw: dict[bytes, tuple[int, int]] = {}
"""Decoded counters ``(live, next_nonce)`` by their stored bytes: decoding is a pure function of the (immutable)
bytes, and a burst of one actor's fires reads back each time the value the previous fire wrote, so the writer
records it here and the next read decodes nothing. Cleared when full (a node-local cache, never state)."""


def _remember_counters(raw: bytes, counters: tuple[int, int]) -> None:
    if len(_counters_by_raw) >= _META_CACHE_MAX:
        _counters_by_raw.clear()
    _counters_by_raw[raw] = counters


def _counters(raw: bytes) -> tuple[int, int]:
    """``(live, next_nonce)`` of stored counters (strictly decoded the first time those bytes are seen)."""
    counters = _counters_by_raw.get(raw)
    if counters is None:
        meta = ActorTimerMeta.decode(raw)
        counters = (meta.live, meta.next_nonce)
        _remember_counters(raw, counters)
    return counters


def _decode_meta(raw: bytes) -> ActorTimerMeta:
    return ActorTimerMeta(*_counters(raw))


def _encode_meta(live: int, next_nonce: int) -> bytes:
    raw = encode_indexed(live, next_nonce)  # = ActorTimerMeta(live, next_nonce).encode()
    if live >= 0 and next_nonce >= 0:  # what the strict decoder gives back for these bytes (encode refused > u64)
        _remember_counters(raw, (live, next_nonce))
    return raw


def get_meta(world: WorldState, actor: bytes) -> ActorTimerMeta:
    """An actor's counters (zero when absent)."""
    raw = world.get(meta_key(actor))
    return ActorTimerMeta() if raw is None else _decode_meta(raw)


def next_seq(world: WorldState) -> int:
    """The sequence number the next scheduled timer gets."""
    raw = world.get(KEY_SEQ)
    return 0 if raw is None else expect_uint(decode(raw), "timer_seq")


def get_cursor(world: WorldState) -> tuple[int, int]:
    """Where the delivery scan starts: no height-index entry is below ``(height, seq)``."""
    raw = world.get(KEY_CURSOR)
    if raw is None:
        return 0, 0
    m = expect_map(decode(raw), frozenset({0, 1}), "timer_cursor")
    return expect_uint(m[0], "timer_cursor.height"), expect_uint(m[1], "timer_cursor.seq")


def set_cursor(world: WorldState, height: int, seq: int) -> None:
    """Move the delivery scan start (caller keeps the invariant: no entry below it)."""
    world.set(KEY_CURSOR, encode({0: height, 1: seq}))


def _split_height_key(key: bytes) -> tuple[int, int]:
    off = len(HEIGHT_PREFIX)
    return int.from_bytes(key[off:off + 8], "big"), int.from_bytes(key[off + 8:off + 16], "big")


def iter_index(world: WorldState, start: tuple[int, int] = (0, 0)) -> Iterator[tuple[int, int, bytes]]:
    """``(height, seq, timer_id)`` of height-index entries from ``start`` on, ascending.

    Lazy: the caller stops when it passes the height it wants, so it reads only
    the entries it visits plus one.
    """
    for key, value in world.iterate(HEIGHT_PREFIX, start=height_key(*start)):
        height, seq = _split_height_key(key)
        yield height, seq, _index_timer_id(value)


def _index_timer_id(value: bytes) -> bytes:
    """The timer id a height-index entry holds (canonical CBOR bytes of at most 256 bytes)."""
    # Every id this node writes is 32 bytes: the canonical head of a 24..255-byte string is 0x58, len.
    if len(value) > 2 and value[0] == 0x58 and value[1] == len(value) - 2 and value[1] >= 24:
        return value[2:]
    return expect_bytes(decode(value), "timer_index.timer_id", max_len=MAX_TIMER_ID_BYTES)


def timers_at(world: WorldState, height: int) -> list[bytes]:
    """Ids of the timers due at exactly ``height``, in insertion (FIFO) order.

    Reads only that height's index range (``get_timers_by_height``, §5.1).
    """
    prefix = HEIGHT_PREFIX + height.to_bytes(8, "big")
    return [_index_timer_id(v) for _k, v in world.iterate(prefix)]


def actor_timers(world: WorldState, actor: bytes) -> list[tuple[bytes, int]]:
    """``(timer_id, height)`` of an actor's live timers, ordered by timer id."""
    prefix = ACTOR_PREFIX + actor
    cut = len(prefix)
    return [(k[cut:], expect_uint(decode(v), "timer_actor.height")) for k, v in world.iterate(prefix)]


# -- writes -------------------------------------------------------------------------------------

def insert_writes(timer: Timer, meta: ActorTimerMeta) -> list[Write]:
    """Every write that adds ``timer`` (whose ``seq`` is the current counter) to the store.

    Returned rather than applied so the caller can charge their cells first.
    ``meta`` is the actor's counters before the insert; the nonce it used is consumed.
    """
    if len(timer.actor_address) != ADDRESS_LEN:
        raise ValueError("actor_address must be 20 bytes")
    return [
        (record_key(timer.timer_id), timer.encode()),
        (height_key(timer.height, timer.seq), encode(timer.timer_id)),
        (actor_key(timer.actor_address, timer.timer_id), encode(timer.height)),
        (meta_key(timer.actor_address), ActorTimerMeta(meta.live + 1, meta.next_nonce + 1).encode()),
        (KEY_SEQ, encode(timer.seq + 1)),
    ]


def apply_writes(world: WorldState, writes: list[Write]) -> None:
    """Apply writes produced by :func:`insert_writes`."""
    for key, value in writes:
        world.set(key, value)


def replace_record(world: WorldState, timer: Timer) -> None:
    """Rewrite a live timer's record (its indexes are unchanged; used by extend)."""
    world.set(record_key(timer.timer_id), timer.encode())


def remove_timer(world: WorldState, timer: Timer) -> None:
    """Delete a live timer: record, height-index entry, actor-index entry, and its live count."""
    actor, timer_id = timer.actor_address, timer.timer_id
    world.delete(RECORD_PREFIX + timer_id)
    world.delete(height_key(timer.height, timer.seq))
    world.delete(ACTOR_PREFIX + actor + timer_id)
    key = META_PREFIX + actor
    raw = world.get(key)
    live, next_nonce = (0, 0) if raw is None else _counters(raw)
    world.set(key, _encode_meta(max(live - 1, 0), next_nonce))
