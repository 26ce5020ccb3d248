"""The governed timer scheduling policy record (docs/timers.md §12): FIFO by default, or the Globalbox.

A plain data type so both the state accessors (``execution/timers/policy.py``)
and the ``UpdateTimerPolicy`` system instruction (kind 0x44) can use it.
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.errors import DecodeError
from cowboy_protocol.types.fields import U32_MAX, expect_map, expect_uint

MODE_FIFO = 0
"""seeds/003 FIFO delivery (default)."""
MODE_GLOBALBOX = 1
"""seeds/001 Globalbox scheduling for height timers."""


@dataclass(frozen=True, slots=True)
class TimerPolicy:
    """Governed extension parameters, canonical CBOR ``{0: mode, 1: w_age, …, 7: max_interval_blocks}``.

    The drafts name these parameters without values; the defaults are this node's.
    """

    mode: int = MODE_FIFO
    """:data:`MODE_FIFO` or :data:`MODE_GLOBALBOX`."""
    w_age: int = 1
    """W_age: score per block of age (u32)."""
    w_bid: int = 0
    """W_bid: score per unit of bid (u32). 0 by default: CIP-5 (003) timers carry no bid."""
    max_fires_per_block: int = 256
    """MAX_FIRES_PER_BLOCK: Globalbox fires materialised per block (≥ 1)."""
    max_fires_per_target: int = 16
    """MAX_FIRES_PER_TARGET: Globalbox fires per target actor per block (≥ 1)."""
    max_watch_prefixes: int = 8
    """Most key prefixes one state-watch timer may watch; 0 disables new state-watch timers."""
    max_watch_fires_per_block: int = 256
    """State-watch hits materialised per block; hits past it are skipped for that block (≥ 1)."""
    max_interval_blocks: int = 2_592_000
    """Longest ``every_blocks`` of an interval timer; 0 disables new interval timers."""

    def to_cbor(self) -> dict[int, int]:
        """CBOR map form."""
        return {0: self.mode, 1: self.w_age, 2: self.w_bid, 3: self.max_fires_per_block,
                4: self.max_fires_per_target, 5: self.max_watch_prefixes, 6: self.max_watch_fires_per_block,
                7: self.max_interval_blocks}

    def encode(self) -> bytes:
        """Canonical CBOR bytes."""
        return encode(self.to_cbor())

    @classmethod
    def from_cbor(cls, value: object) -> TimerPolicy:
        """Strict decode of the CBOR map form (validated)."""
        m = expect_map(value, frozenset(range(8)), "timer_policy")
        policy = cls(*(expect_uint(m[i], f"timer_policy.{i}", U32_MAX) for i in range(8)))
        policy.validate()
        return policy

    @classmethod
    def decode(cls, raw: bytes) -> TimerPolicy:
        """Strict decode of canonical bytes."""
        return cls.from_cbor(decode(raw))

    def validate(self) -> None:
        """Raise :class:`DecodeError` unless every field is in range."""
        if self.mode not in (MODE_FIFO, MODE_GLOBALBOX):
            raise DecodeError(f"timer_policy.mode {self.mode} is unknown", field="timer_policy.mode")
        for name in ("max_fires_per_block", "max_fires_per_target", "max_watch_fires_per_block"):
            value = getattr(self, name)
            if not 1 <= value <= U32_MAX:
                raise DecodeError(f"timer_policy.{name} must be 1..2^32-1", field=f"timer_policy.{name}")
        # 0 is the governed "extension disabled" setting (docs/timers.md §12): no new watch / interval timers.
        for name in ("w_age", "w_bid", "max_watch_prefixes", "max_interval_blocks"):
            if not 0 <= getattr(self, name) <= U32_MAX:
                raise DecodeError(f"timer_policy.{name} must be a u32", field=f"timer_policy.{name}")

    def to_json(self) -> dict[str, int]:
        """JSON view for the RPC."""
        return {"mode": self.mode, "w_age": self.w_age, "w_bid": self.w_bid,
                "max_fires_per_block": self.max_fires_per_block, "max_fires_per_target": self.max_fires_per_target,
                "max_watch_prefixes": self.max_watch_prefixes,
                "max_watch_fires_per_block": self.max_watch_fires_per_block,
                "max_interval_blocks": self.max_interval_blocks}
