"""Timer state layout: records in the ordered height index, id pointers, the per-actor index and counters.

Every key lives under ``timer/`` in the world state (docs/timers.md §2)::

    timer/h/<height u64 BE><seq u64 BE>   -> Timer record (model.Timer canonical CBOR)   height index
    timer/t/<timer_id>                    -> <height u64 BE><seq u64 BE> (16 raw bytes)   id -> index entry
    timer/g/<timer_id>                    -> Timer record      collected into the Globalbox (mode 1 only)
    timer/a/<actor 20><timer_id>          -> CBOR uint height            per-actor index
    timer/m/<actor 20>                    -> CBOR {0: live, 1: next_nonce}
    timer/seq                             -> CBOR uint next seq          global insertion counter
    timer/cursor                          -> CBOR {0: height, 1: seq}    delivery scan start

The height index is one key per timer, ordered by (height, seq), and its value
is the timer's record: the timers of one height form a contiguous range in
insertion (FIFO) order, so delivering the timers due at ``h`` reads that range
with one iterator and nothing else, whatever else is stored (records keyed by
id would cost one scattered read per fire). Lookups by id (cancel, extend,
listings) go through the pointer ``timer/t/<timer_id>``: the 16-byte suffix of
the index key, so the record's key is ``HEIGHT_PREFIX + pointer`` with no
decoding step and any 16 bytes are a well-formed pointer. A timer the Globalbox
policy collects leaves the index (its record moves to ``timer/g/<timer_id>``,
its pointer is deleted) until it is materialised or cancelled.

The pointer and the per-actor index are *derived* keys (``state/derived.py``): stored and
journaled like the rest, but not in the state tree, so in no state root or proof. They are
a function of the records (:func:`derived_writes`), which is how a snapshot install
rebuilds them, and leaving them out halves the state-tree changes of a fire (four to two).

Every function here reads and writes through the :class:`WorldState`, so timer
writes made by a transaction sit in its journal and are undone by a revert.
Writes under :data:`HEIGHT_PREFIX` are logged in ``WorldState.watch_log``
(``watch_prefix``), which lets a delivery scan learn that a handler changed an
entry its iterator had already read.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from cowboy_node.execution.timers.timer_record import MAX_TIMER_ID_BYTES, Timer, encode_indexed
from cowboy_node.state.derived import DERIVED_PREFIXES, is_derived
from cowboy_node.state.world import WorldState, watch_prefix
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.fields import ADDRESS_LEN, expect_map, expect_uint
from cowboy_protocol.types.validation_errors import DecodeError

PREFIX = b"timer/"
"""Namespace of all timer state."""
POINTER_PREFIX = b"timer/t/"
"""``timer/t/<timer_id>`` -> pointer: ``<height 8 BE><seq 8 BE>``, the suffix of the timer's height-index key."""
HEIGHT_PREFIX = b"timer/h/"
"""``timer/h/<height 8 BE><seq 8 BE>`` -> Timer record (canonical CBOR)."""
PARKED_PREFIX = b"timer/g/"
"""``timer/g/<timer_id>`` -> Timer record of a timer the Globalbox collected out of the height index."""
POINTER_LEN = 16
"""Length of a pointer value (height and seq, 8 bytes each, big-endian)."""
ACTOR_PREFIX = b"timer/a/"
"""``timer/a/<actor><timer_id>`` -> CBOR uint height."""
META_PREFIX = b"timer/m/"
"""``timer/m/<actor>`` -> :class:`ActorTimerMeta`."""
KEY_SEQ = b"timer/seq"
"""Next global insertion sequence number (absent = 0)."""
KEY_CURSOR = b"timer/cursor"
"""(height, seq) below which the height index holds no entry (absent = start of the index)."""

assert set(DERIVED_PREFIXES) == {POINTER_PREFIX, ACTOR_PREFIX}, "state/derived.py names the timer indexes"
assert not any(is_derived(p) for p in (HEIGHT_PREFIX, PARKED_PREFIX, META_PREFIX, KEY_SEQ, KEY_CURSOR))

watch_prefix(HEIGHT_PREFIX)  # see the module docstring: deliver.py learns which entries handlers wrote

Write = tuple[bytes, bytes]
"""A pending ``(key, value)`` write; its cell cost is ``len(key) + len(value)``."""


def pointer_key(timer_id: bytes) -> bytes:
    """State key of a timer's pointer (its id -> its height-index entry)."""
    return POINTER_PREFIX + timer_id


def pointer_value(height: int, seq: int) -> bytes:
    """Pointer value of the timer at ``(height, seq)``: the 16 bytes after :data:`HEIGHT_PREFIX` in its key."""
    return height.to_bytes(8, "big") + seq.to_bytes(8, "big")


def parked_key(timer_id: bytes) -> bytes:
    """State key of a record collected into the Globalbox."""
    return PARKED_PREFIX + timer_id


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

def _index_key_of(world: WorldState, timer_id: bytes) -> bytes | None:
    """The height-index key the pointer of ``timer_id`` names, or None (no pointer)."""
    ptr = world.get(POINTER_PREFIX + timer_id)
    if ptr is None:
        return None
    if len(ptr) != POINTER_LEN:
        raise DecodeError(f"timer pointer is {len(ptr)} bytes, not {POINTER_LEN}", field="timer_pointer")
    return HEIGHT_PREFIX + ptr


def decode_entry(key: bytes, raw: bytes) -> Timer:
    """The record stored at height-index ``key``; its ``(height, seq)`` must be the key's."""
    timer = Timer.decode(raw)
    if height_key(timer.height, timer.seq) != key:
        raise DecodeError("timer record is not at its (height, seq) key", field="timer_index")
    return timer


def _locate(world: WorldState, timer_id: bytes) -> tuple[bytes, bytes] | None:
    """``(key, record bytes)`` of the live timer ``timer_id``: its height-index entry, else its Globalbox record."""
    if not isinstance(timer_id, bytes) or not 0 < len(timer_id) <= MAX_TIMER_ID_BYTES:
        return None
    key = _index_key_of(world, timer_id)
    if key is None:
        key = PARKED_PREFIX + timer_id
        raw = world.get(key)
        return None if raw is None else (key, raw)
    raw = world.get(key)
    if raw is None:
        raise DecodeError("timer pointer names no height-index entry", field="timer_pointer")
    return key, raw


def get_timer(world: WorldState, timer_id: bytes) -> Timer | None:
    """The live timer with ``timer_id``, or None (also for ids no timer can have).

    Two reads (the pointer, then the entry it names); a timer collected into the Globalbox is read from
    :data:`PARKED_PREFIX` instead.
    """
    found = _locate(world, timer_id)
    if found is None:
        return None
    key, raw = found
    return Timer.decode(raw) if key.startswith(PARKED_PREFIX) else decode_entry(key, raw)


def has_timer(world: WorldState, timer_id: bytes) -> bool:
    """True if a live timer has ``timer_id`` (no record is decoded)."""
    return _locate(world, timer_id) is not None


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


def split_height_key(key: bytes) -> tuple[int, int]:
    """``(height, seq)`` of a height-index key."""
    off = len(HEIGHT_PREFIX)
    return int.from_bytes(key[off:off + 8], "big"), int.from_bytes(key[off + 8:off + 16], "big")


def iter_entries(world: WorldState, start: tuple[int, int] = (0, 0)) -> Iterator[tuple[bytes, bytes]]:
    """``(key, record bytes)`` of height-index entries from ``start`` on, ascending (``WorldState.iterate``:
    pending changes as of the call).

    Lazy: the caller stops when it passes the height it wants, so it reads only
    the entries it visits plus one.
    """
    return world.iterate(HEIGHT_PREFIX, start=height_key(*start))


def iter_index(world: WorldState, start: tuple[int, int] = (0, 0)) -> Iterator[tuple[int, int, Timer]]:
    """``(height, seq, timer)`` of height-index entries from ``start`` on, ascending (lazy, as :func:`iter_entries`)."""
    for key, raw in iter_entries(world, start):
        height, seq = split_height_key(key)
        yield height, seq, decode_entry(key, raw)


def timers_at(world: WorldState, height: int) -> list[bytes]:
    """Ids of the timers due at exactly ``height``, in insertion (FIFO) order.

    Reads only that height's index range (``get_timers_by_height``, §5.1).
    """
    prefix = HEIGHT_PREFIX + height.to_bytes(8, "big")
    return [decode_entry(k, v).timer_id for k, v in world.iterate(prefix)]


def actor_timers(world: WorldState, actor: bytes) -> list[tuple[bytes, int]]:
    """``(timer_id, height)`` of an actor's live timers, ordered by timer id."""
    prefix = ACTOR_PREFIX + actor
    cut = len(prefix)
    return [(k[cut:], expect_uint(decode(v), "timer_actor.height")) for k, v in world.iterate(prefix)]


def derived_writes(records: Iterable[tuple[bytes, bytes]]) -> Iterator[Write]:
    """The derived keys the committed timer records imply: for each height-index entry its pointer and its
    per-actor index entry, for each Globalbox record (:data:`PARKED_PREFIX`, no pointer) its per-actor entry.

    ``records`` are ``(logical key, value)`` pairs under :data:`HEIGHT_PREFIX` and :data:`PARKED_PREFIX` (others
    are skipped). The values are the ones :func:`insert_writes` wrote, so a store rebuilt from its records holds
    what execution maintained (``test_timer_derived_index.py``). A record that does not decode raises
    :class:`DecodeError`: committed state the node cannot read.
    """
    for key, raw in records:
        if key.startswith(HEIGHT_PREFIX):
            timer = decode_entry(key, raw)
            yield pointer_key(timer.timer_id), pointer_value(timer.height, timer.seq)
        elif key.startswith(PARKED_PREFIX):
            timer = Timer.decode(raw)
            if key != parked_key(timer.timer_id):
                raise DecodeError("Globalbox record is not at its timer id's key", field="timer_parked")
        else:
            continue
        yield actor_key(timer.actor_address, timer.timer_id), encode(timer.height)


# -- writes -------------------------------------------------------------------------------------

def insert_writes(timer: Timer, meta: ActorTimerMeta) -> list[Write]:
    """Every write that adds ``timer`` (whose ``seq`` is the current counter) to the store.

    Returned rather than applied so the caller can charge their cells first.
    ``meta`` is the actor's counters before the insert; the nonce it used is consumed.
    """
    if len(timer.actor_address) != ADDRESS_LEN:
        raise ValueError("actor_address must be 20 bytes")
    return [
        (height_key(timer.height, timer.seq), timer.encode()),
        (pointer_key(timer.timer_id), pointer_value(timer.height, timer.seq)),
        (actor_key(timer.actor_address, timer.timer_id), encode(timer.height)),
        (meta_key(timer.actor_address), ActorTimerMeta(meta.live + 1, meta.next_nonce + 1).encode()),
        (KEY_SEQ, encode(timer.seq + 1)),
    ]


def apply_writes(world: WorldState, writes: list[Write]) -> None:
    """Apply writes produced by :func:`insert_writes`."""
    for key, value in writes:
        world.set(key, value)


def replace_record(world: WorldState, timer: Timer) -> None:
    """Rewrite a live timer's record where it is stored (same id, height and seq: the keys are unchanged; used by
    extend). A timer that no longer exists is left absent."""
    found = _locate(world, timer.timer_id)
    if found is not None:
        world.set(found[0], timer.encode())


def remove_timer(world: WorldState, timer: Timer) -> None:
    """Delete a live timer wherever its record is (height index + pointer, or its Globalbox record), its
    actor-index entry, and one from its live count."""
    found = _locate(world, timer.timer_id)
    if found is not None and found[0].startswith(PARKED_PREFIX):
        world.delete(found[0])
        _remove_rest(world, timer)
    else:
        remove_indexed(world, timer)


def remove_indexed(world: WorldState, timer: Timer) -> None:
    """Delete a live timer known to be in the height index (what the delivery scan read): entry, pointer,
    actor-index entry, and one from its live count."""
    world.delete(height_key(timer.height, timer.seq))
    world.delete(POINTER_PREFIX + timer.timer_id)
    _remove_rest(world, timer)


def park(world: WorldState, timer: Timer, raw: bytes) -> None:
    """Move an indexed timer's record (its stored bytes ``raw``) out of the height index for the Globalbox:
    entry and pointer deleted, record at :func:`parked_key`; its actor index and live count are unchanged."""
    world.delete(height_key(timer.height, timer.seq))
    world.delete(POINTER_PREFIX + timer.timer_id)
    world.set(PARKED_PREFIX + timer.timer_id, raw)


def _remove_rest(world: WorldState, timer: Timer) -> None:
    actor, timer_id = timer.actor_address, timer.timer_id
    world.delete(ACTOR_PREFIX + actor + timer_id)
    key = META_PREFIX + actor
    raw = world.get(key)
    live, next_nonce = (0, 0) if raw is None else _counters(raw)
    world.set(key, _encode_meta(max(live - 1, 0), next_nonce))
