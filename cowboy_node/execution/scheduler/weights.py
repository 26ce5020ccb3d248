"""Per-actor priority weights (seeds/004 §3 "Priority Weight for the next epoch"), integer fixed point.

Record ``cip1/w/<actor>`` = ``{0: weight, 1: epoch, 2: score_sum, 3: score_count, 4: starved_blocks}``:
``weight`` is the weight in force during ``epoch`` (:data:`WEIGHT_ONE` = 1.0); ``score_sum / score_count``
accumulate the block scores S of that epoch; ``starved_blocks`` counts blocks in a row in which the actor had
timers deferred and none run.

* **Score** of an actor in a block, each part in ``[0, WEIGHT_ONE]``:
  ``S = (2·tip + lateness + deferral + thrift) // 5`` with ``tip = min(1, best effective tip / cycle basefee)``,
  ``lateness = min(1, most blocks late / LATENESS_BLOCKS)``, ``deferral = deferred / attempted`` and
  ``thrift = 1 − min(1, cycles used / budget)``.
* **Epoch rollover** (lazily, when the record is next read in a later epoch): ``w' = ((1−λ)·w + λ·S̄)`` with
  ``S̄`` the epoch's mean score; then each further epoch without activity (at most :data:`MAX_DECAY_EPOCHS`)
  decays the weight toward 1.0 the same way; then the clamp ``[weight_min, weight_max]``.
* **Starvation floor**: while ``starved_blocks ≥ starvation_blocks`` the weight used is at least
  ``starvation_floor`` (immediately, not from the next epoch).

The weight in use breaks ties between equal effective tips and sizes each actor's slice of the block budget.
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_node.execution.scheduler import timer_layout as model
from cowboy_node.state.world import WorldState
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.fields import expect_map, expect_uint
from cowboy_protocol.types.timer_policy import WEIGHT_ONE, TimerPolicy

LATENESS_BLOCKS = 64
"""Blocks of lateness that give the full lateness part of the score."""
MAX_DECAY_EPOCHS = 64
"""Inactive epochs applied at most (the weight has converged to 1.0 well before): bounds the fold's work."""


@dataclass(frozen=True, slots=True)
class WeightRecord:
    """An actor's persisted weight state (see the module docstring)."""

    weight: int = WEIGHT_ONE
    """Weight in force during ``epoch`` (fixed point)."""
    epoch: int = 0
    """Epoch the weight and the score accumulator belong to."""
    score_sum: int = 0
    """Sum of this epoch's block scores."""
    score_count: int = 0
    """Number of this epoch's block scores."""
    starved_blocks: int = 0
    """Blocks in a row with timers deferred and none run."""

    def encode(self) -> bytes:
        return encode({0: self.weight, 1: self.epoch, 2: self.score_sum, 3: self.score_count,
                       4: self.starved_blocks})

    @classmethod
    def decode(cls, raw: bytes) -> WeightRecord:
        m = expect_map(decode(raw), frozenset(range(5)), "cip1_weight")
        return cls(*(expect_uint(m[i], f"cip1_weight.{i}") for i in range(5)))


def _step(weight: int, target: int, lam: int) -> int:
    return ((WEIGHT_ONE - lam) * weight + lam * target) // WEIGHT_ONE


def fold(rec: WeightRecord, epoch: int, policy: TimerPolicy) -> WeightRecord:
    """The record as of ``epoch``: the rollover (update, inactivity decay, clamp) applied if it is older."""
    lam = policy.cip1_lambda_ppm
    w = rec.weight
    if rec.epoch < epoch:
        inactive = epoch - rec.epoch
        if rec.score_count:
            w = _step(w, rec.score_sum // rec.score_count, lam)
            inactive -= 1
        for _ in range(min(inactive, MAX_DECAY_EPOCHS)):
            w = _step(w, WEIGHT_ONE, lam)
        rec = WeightRecord(w, epoch, 0, 0, rec.starved_blocks)
    return WeightRecord(min(max(rec.weight, policy.cip1_weight_min), policy.cip1_weight_max), rec.epoch,
                        rec.score_sum, rec.score_count, rec.starved_blocks)


def get_record(world: WorldState, actor: bytes, epoch: int, policy: TimerPolicy) -> WeightRecord:
    raw = world.get(model.WEIGHT_PREFIX + actor)
    rec = WeightRecord(epoch=epoch) if raw is None else WeightRecord.decode(raw)
    return fold(rec, epoch, policy)


def effective(rec: WeightRecord, policy: TimerPolicy) -> int:
    """The weight used for tie-breaks and slices (the starvation floor applied)."""
    if rec.starved_blocks >= policy.cip1_starvation_blocks:
        return max(rec.weight, policy.cip1_starvation_floor)
    return rec.weight


@dataclass(slots=True)
class BlockStats:
    """What one actor's timers did in one block (the inputs of its score)."""

    attempted: int = 0
    """Timers of the actor whose bid was asked or that were ordered."""
    executed: int = 0
    """Timers run."""
    deferred: int = 0
    """Timers left due (budget, balance, bid below basefee)."""
    best_tip: int = 0
    """Highest effective tip per cycle among its bids."""
    max_lateness: int = 0
    """Most blocks any of its timers was past its trigger height."""
    cycles: int = 0
    """Cycles its executed handlers used."""


def score(stats: BlockStats, *, cycle_basefee: int, budget: int) -> int:
    """The block score S in ``[0, WEIGHT_ONE]`` (module docstring)."""
    one = WEIGHT_ONE
    tip = min(one, stats.best_tip * one // max(cycle_basefee, 1))
    late = min(one, stats.max_lateness * one // LATENESS_BLOCKS)
    deferral = stats.deferred * one // max(stats.attempted, 1)
    thrift = one - min(one, stats.cycles * one // max(budget, 1))
    return (2 * tip + late + deferral + thrift) // 5


def record_block(world: WorldState, actor: bytes, epoch: int, policy: TimerPolicy, stats: BlockStats, *,
                 cycle_basefee: int) -> WeightRecord:
    """Add this block's score to the actor's epoch accumulator and update its starvation count."""
    rec = get_record(world, actor, epoch, policy)
    s = score(stats, cycle_basefee=cycle_basefee, budget=policy.cip1_budget_cycles)
    if stats.executed:
        starved = 0
    elif stats.deferred:
        starved = rec.starved_blocks + 1
    else:
        starved = rec.starved_blocks
    new = WeightRecord(rec.weight, epoch, rec.score_sum + s, rec.score_count + 1, starved)
    world.set(model.WEIGHT_PREFIX + actor, new.encode())
    return new
