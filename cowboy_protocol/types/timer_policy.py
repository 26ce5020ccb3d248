"""The governed timer scheduling policy record (docs/timers.md §12, §15): FIFO by default, the Globalbox,
or the CIP-1 Autonomous Actor Scheduler.

A plain data type so both the state accessors (``execution/timers/policy.py``)
and the ``UpdateTimerPolicy`` system instruction (kind 0x44) can use it.

Encoding: the map ``{0..7}`` while every CIP-1 parameter (fields 8..16) has its
default, else the map ``{0..16}``. So every policy written before CIP-1 keeps its
bytes, and each value still has exactly one encoding (a ``{0..16}`` map whose
CIP-1 fields are all default is refused as non-canonical).
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.fields import U32_MAX, expect_map, expect_uint
from cowboy_protocol.types.validation_errors import DecodeError

MODE_FIFO = 0
"""seeds/003 FIFO delivery (default)."""
MODE_GLOBALBOX = 1
"""seeds/001 Globalbox scheduling for height timers."""
MODE_CIP1 = 2
"""seeds/004 CIP-1 Autonomous Actor Scheduler (``execution/scheduler/``): ``set_timeout`` timers, GBA bids."""
MODES = (MODE_FIFO, MODE_GLOBALBOX, MODE_CIP1)
"""Every known mode."""
WEIGHT_ONE = 1_000_000
"""Fixed-point 1.0 of the CIP-1 priority weights and of ``cip1_lambda_ppm`` (parts per million)."""

_BASE_FIELDS = 8
_ALL_FIELDS = 17


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
    cip1_budget_cycles: int = 10_000_000
    """CIP-1 ``TIMER_PROCESSING_BUDGET_CYCLES``: cycles the executed timer handlers may use per block (≥ 1)."""
    cip1_gba_cycles: int = 100_000
    """Hard cycle cap of one ``get_gas_bid`` call (≥ 1); what it uses is charged to the timer's owner."""
    cip1_max_bids_per_block: int = 256
    """Due timers whose GBA is asked per block, oldest first (≥ 1); the rest wait, in order, for later blocks."""
    cip1_maint_per_block: int = 1_024
    """Entries epoch maintenance and collection may move per block, each (≥ 1)."""
    cip1_lambda_ppm: int = 200_000
    """λ of the weight update ``w' = (1 − λ)·w + λ·S``, in parts per million (0..1,000,000)."""
    cip1_weight_min: int = 100_000
    """Lower clamp of a priority weight (fixed point, :data:`WEIGHT_ONE` = 1.0; ≥ 1)."""
    cip1_weight_max: int = 10_000_000
    """Upper clamp of a priority weight (≥ ``cip1_starvation_floor``)."""
    cip1_starvation_floor: int = 2_000_000
    """Weight an actor is raised to after ``cip1_starvation_blocks`` blocks in a row with timers deferred and none
    run (``cip1_weight_min`` ≤ floor ≤ ``cip1_weight_max``)."""
    cip1_starvation_blocks: int = 8
    """Blocks in a row of deferral that make an actor starving (≥ 1)."""

    def to_cbor(self) -> dict[int, int]:
        """CBOR map form (fields 8..16 only when one of them is not its default)."""
        m = {0: self.mode, 1: self.w_age, 2: self.w_bid, 3: self.max_fires_per_block,
             4: self.max_fires_per_target, 5: self.max_watch_prefixes, 6: self.max_watch_fires_per_block,
             7: self.max_interval_blocks}
        cip1 = self._cip1_values()
        if cip1 != _DEFAULT_CIP1:
            m.update(zip(range(_BASE_FIELDS, _ALL_FIELDS), cip1, strict=True))
        return m

    def _cip1_values(self) -> tuple[int, ...]:
        return (self.cip1_budget_cycles, self.cip1_gba_cycles, self.cip1_max_bids_per_block,
                self.cip1_maint_per_block, self.cip1_lambda_ppm, self.cip1_weight_min, self.cip1_weight_max,
                self.cip1_starvation_floor, self.cip1_starvation_blocks)

    def encode(self) -> bytes:
        """Canonical CBOR bytes."""
        return encode(self.to_cbor())

    @classmethod
    def from_cbor(cls, value: object) -> TimerPolicy:
        """Strict decode of the CBOR map form (validated)."""
        n = len(value) if isinstance(value, dict) else _BASE_FIELDS
        m = expect_map(value, frozenset(range(_ALL_FIELDS if n == _ALL_FIELDS else _BASE_FIELDS)), "timer_policy")
        policy = cls(*(expect_uint(m[i], f"timer_policy.{i}", U32_MAX) for i in range(len(m))))
        if len(m) == _ALL_FIELDS and policy._cip1_values() == _DEFAULT_CIP1:
            raise DecodeError("timer_policy: default CIP-1 fields must be omitted", field="timer_policy")
        policy.validate()
        return policy

    @classmethod
    def decode(cls, raw: bytes) -> TimerPolicy:
        """Strict decode of canonical bytes."""
        return cls.from_cbor(decode(raw))

    def validate(self) -> None:
        """Raise :class:`DecodeError` unless every field is in range."""
        if self.mode not in MODES:
            raise DecodeError(f"timer_policy.mode {self.mode} is unknown", field="timer_policy.mode")
        for name in ("max_fires_per_block", "max_fires_per_target", "max_watch_fires_per_block", "cip1_budget_cycles",
                     "cip1_gba_cycles", "cip1_max_bids_per_block", "cip1_maint_per_block", "cip1_weight_min",
                     "cip1_starvation_blocks"):
            value = getattr(self, name)
            if not 1 <= value <= U32_MAX:
                raise DecodeError(f"timer_policy.{name} must be 1..2^32-1", field=f"timer_policy.{name}")
        # 0 is the governed "extension disabled" setting (docs/timers.md §12): no new watch / interval timers.
        for name in ("w_age", "w_bid", "max_watch_prefixes", "max_interval_blocks"):
            if not 0 <= getattr(self, name) <= U32_MAX:
                raise DecodeError(f"timer_policy.{name} must be a u32", field=f"timer_policy.{name}")
        if not 0 <= self.cip1_lambda_ppm <= WEIGHT_ONE:
            raise DecodeError("timer_policy.cip1_lambda_ppm must be 0..1,000,000", field="timer_policy.cip1_lambda_ppm")
        if not self.cip1_weight_min <= self.cip1_starvation_floor <= self.cip1_weight_max <= U32_MAX:
            raise DecodeError("timer_policy: need cip1_weight_min <= cip1_starvation_floor <= cip1_weight_max",
                              field="timer_policy.cip1_weight_max")

    def to_json(self) -> dict[str, object]:
        """JSON view for the RPC."""
        return {"mode": self.mode, "w_age": self.w_age, "w_bid": self.w_bid,
                "max_fires_per_block": self.max_fires_per_block, "max_fires_per_target": self.max_fires_per_target,
                "max_watch_prefixes": self.max_watch_prefixes,
                "max_watch_fires_per_block": self.max_watch_fires_per_block,
                "max_interval_blocks": self.max_interval_blocks,
                "cip1": {"budget_cycles": self.cip1_budget_cycles, "gba_cycles": self.cip1_gba_cycles,
                         "max_bids_per_block": self.cip1_max_bids_per_block,
                         "maint_per_block": self.cip1_maint_per_block, "lambda_ppm": self.cip1_lambda_ppm,
                         "weight_min": self.cip1_weight_min, "weight_max": self.cip1_weight_max,
                         "starvation_floor": self.cip1_starvation_floor,
                         "starvation_blocks": self.cip1_starvation_blocks}}


_DEFAULT_CIP1 = TimerPolicy()._cip1_values()
