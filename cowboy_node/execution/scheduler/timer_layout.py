"""The CIP-1 timer record, its id, the tier geometry and every state key of the scheduler (docs/timers.md §15).

Record (canonical CBOR, ``cip1/t/<timer_id>``)::

    {0: actor (bytes 20), 1: height (uint), 2: gba (bytes 20), 3: handler (text), 4: payload (bytes),
     5: gas_limit (uint), 6: expires_at (uint), 7: seq (uint)}

``height`` is the trigger height (the GBA context's ``trigger_block_height``); ``seq`` the global insertion
number, which with ``height`` names the timer's queue entry in whichever tier holds it.
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_node.execution.timers.timer_record import DEFAULT_HANDLER, MAX_HANDLER_BYTES, MAX_PAYLOAD_BYTES, Timer
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.fields import ADDRESS_LEN, expect_bytes, expect_map, expect_text, expect_uint

__all__ = ["DEFAULT_HANDLER", "Cip1Timer"]

EPOCH_BLOCKS = 3_600
"""Blocks per scheduler epoch (the draft's "e.g. one hour of blocks" at 1 s). Not governed: changing it would
re-index every pending timer."""
RING_BUFFER_SIZE = 2 * EPOCH_BLOCKS
"""``RING_BUFFER_SIZE``: the ring holds the current and the next epoch, so the next epoch's bucket can be moved
into it over a whole epoch (bounded work per block) instead of all at the boundary."""
EPOCH_BUCKETS = 24
"""Epoch-queue buckets: epochs ``e+2 .. e+1+EPOCH_BUCKETS`` of the current epoch ``e``; later is overflow."""
ID_DOMAIN = b"cowboy/cip1/timeout/v1"
"""Domain of :func:`derive_timeout_id`."""

PREFIX = b"cip1/"
RECORD_PREFIX = b"cip1/t/"
"""``cip1/t/<timer_id>`` → record."""
RING_PREFIX = b"cip1/r/"
"""Tier 1: ``cip1/r/<H % RING_BUFFER_SIZE u32><H u64><seq u64>`` → timer id."""
EPOCH_PREFIX = b"cip1/e/"
"""Tier 2: ``cip1/e/<H // EPOCH_BLOCKS u64><H u64><seq u64>`` → timer id."""
OVERFLOW_PREFIX = b"cip1/o/"
"""Tier 3: ``cip1/o/<H u64><seq u64>`` → timer id (ordered by height; in the merkleized state tree)."""
BACKLOG_PREFIX = b"cip1/q/"
"""Due timers not yet run: ``cip1/q/<H u64><seq u64>`` → timer id (oldest trigger first)."""
DEFER_PREFIX = b"cip1/d/"
"""``cip1/d/<seq u64>`` → height of the backlog key of a timer carried over (absent: its trigger height)."""
META_PREFIX = b"cip1/m/"
"""``cip1/m/<actor>`` → ``{0: live, 1: next_nonce}``."""
WEIGHT_PREFIX = b"cip1/w/"
"""``cip1/w/<actor>`` → priority-weight record (``weights.py``)."""
KEY_SEQ = b"cip1/seq"
"""Next global insertion number (absent = 0)."""
KEY_CURSOR = b"cip1/cur"
"""Lowest height whose ring entries may not all have been moved to the backlog yet (absent = current)."""
KEY_USAGE = b"cip1/usage"
"""``last_block_cycle_usage`` for the next block's GBA context."""

_KEYS = frozenset(range(8))


def epoch_of(height: int) -> int:
    """The scheduler epoch of ``height``."""
    return height // EPOCH_BLOCKS


def record_key(timer_id: bytes) -> bytes:
    return RECORD_PREFIX + timer_id


def meta_key(actor: bytes) -> bytes:
    return META_PREFIX + actor


def ring_key(height: int, seq: int) -> bytes:
    return RING_PREFIX + (height % RING_BUFFER_SIZE).to_bytes(4, "big") + height.to_bytes(8, "big") + \
        seq.to_bytes(8, "big")


def epoch_key(height: int, seq: int) -> bytes:
    return EPOCH_PREFIX + epoch_of(height).to_bytes(8, "big") + height.to_bytes(8, "big") + seq.to_bytes(8, "big")


def overflow_key(height: int, seq: int) -> bytes:
    return OVERFLOW_PREFIX + height.to_bytes(8, "big") + seq.to_bytes(8, "big")


def backlog_key(height: int, seq: int) -> bytes:
    return BACKLOG_PREFIX + height.to_bytes(8, "big") + seq.to_bytes(8, "big")


def defer_key(seq: int) -> bytes:
    return DEFER_PREFIX + seq.to_bytes(8, "big")


def split_tail(key: bytes) -> tuple[int, int]:
    """``(height, seq)`` from the last 16 bytes of any queue key."""
    return int.from_bytes(key[-16:-8], "big"), int.from_bytes(key[-8:], "big")


def derive_timeout_id(actor: bytes, height: int, nonce: int) -> bytes:
    """``keccak256("cowboy/cip1/timeout/v1" ‖ actor[20] ‖ height u64 BE ‖ nonce u64 BE)``; ``nonce`` is the
    actor's CIP-1 timer nonce (never reused)."""
    return keccak256(ID_DOMAIN + actor + height.to_bytes(8, "big") + nonce.to_bytes(8, "big"))


@dataclass(frozen=True, slots=True)
class Cip1Timer:
    """A ``set_timeout`` timer: runs ``actor.handler(payload)`` at or after ``height``, priced by ``gba``."""

    actor: bytes
    """Owner: the handler runs as this actor and every fee comes from its balance (seeds/004 §4.1)."""
    height: int
    """Trigger height (``trigger_block_height`` of the GBA context)."""
    gba: bytes
    """Gas Bidding Agent: the actor whose ``get_gas_bid(context)`` prices each attempt."""
    handler: str
    """Handler run when the timer executes."""
    payload: bytes
    """Bytes passed to the handler (at most 1 MiB)."""
    gas_limit: int
    """Cycles limit of the execution (≤ ``TimerConfig.max_cycles_per_fire`` when scheduled)."""
    expires_at: int
    """Last height at which the timer may still run; after it is removed unrun (``timer.expired``)."""
    seq: int
    """Global insertion number (tie-break of last resort; locates the queue entry)."""

    def encode(self) -> bytes:
        """Canonical CBOR bytes (see the module docstring)."""
        return encode({0: self.actor, 1: self.height, 2: self.gba, 3: self.handler, 4: self.payload,
                       5: self.gas_limit, 6: self.expires_at, 7: self.seq})

    @classmethod
    def decode(cls, raw: bytes) -> Cip1Timer:
        """Strict decode of stored bytes."""
        m = expect_map(decode(raw), _KEYS, "cip1_timer")
        return cls(actor=expect_bytes(m[0], "cip1_timer.actor", ADDRESS_LEN),
                   height=expect_uint(m[1], "cip1_timer.height"),
                   gba=expect_bytes(m[2], "cip1_timer.gba", ADDRESS_LEN),
                   handler=expect_text(m[3], "cip1_timer.handler", MAX_HANDLER_BYTES),
                   payload=expect_bytes(m[4], "cip1_timer.payload", max_len=MAX_PAYLOAD_BYTES),
                   gas_limit=expect_uint(m[5], "cip1_timer.gas_limit"),
                   expires_at=expect_uint(m[6], "cip1_timer.expires_at"),
                   seq=expect_uint(m[7], "cip1_timer.seq"))

    def as_fire(self, timer_id: bytes) -> Timer:
        """The CIP-5 ``Timer`` shape the fire runner takes (fee payer = the owner)."""
        return Timer(actor_address=self.actor, height=self.height, payload=self.payload, timer_id=timer_id,
                     handler=self.handler, fee_payer=self.actor, gas_limit_per_fire=self.gas_limit,
                     expires_at=self.expires_at, seq=self.seq)
