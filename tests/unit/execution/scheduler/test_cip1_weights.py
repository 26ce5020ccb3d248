"""CIP-1 per-actor priority weights (seeds/004 §3 "Priority Weight for the next epoch"; docs/timers.md §15):
the integer score, the exponential-decay update at epoch rollover, inactivity decay, clamping, the starvation
floor, the record's golden bytes, and the weights' use in a block (tie-breaks and starvation)."""

from __future__ import annotations

from cowboy_node.execution.scheduler import timer_layout as model
from cowboy_node.execution.scheduler import weights
from cowboy_node.execution.scheduler.weights import BlockStats, WeightRecord
from cowboy_protocol.types.timer_policy import MODE_CIP1, TimerPolicy
from tests.unit.eob_helpers import make_world
from tests.unit.execution.scheduler.cip1_helpers import (
    FakeGbas,
    bid,
    cip1_world,
    fund,
    gba_address,
    owner,
    run,
    timeout,
)

P = TimerPolicy(mode=MODE_CIP1)  # lambda 0.2, clamp [0.1, 10], floor 2.0 after 8 blocks


def test_weight_record_golden_bytes() -> None:
    rec = WeightRecord(weight=900_000, epoch=3, score_sum=1_000_000, score_count=2, starved_blocks=1)
    golden = bytes.fromhex("a5" "001a000dbba0" "0103" "021a000f4240" "0302" "0401")
    assert rec.encode() == golden and WeightRecord.decode(golden) == rec


def test_score_combines_tip_lateness_deferral_and_thrift() -> None:
    stats = BlockStats(attempted=2, executed=1, deferred=1, best_tip=5, max_lateness=16, cycles=1_000)
    # tip 5/10 -> 500,000; lateness 16/64 -> 250,000; deferral 1/2 -> 500,000; thrift 1 - 1,000/10^7 -> 999,900
    assert weights.score(stats, cycle_basefee=10, budget=10_000_000) == (2 * 500_000 + 250_000 + 500_000 + 999_900) // 5
    capped = BlockStats(attempted=1, best_tip=10**6, max_lateness=10**6, deferred=1)
    assert weights.score(capped, cycle_basefee=1, budget=1) == 1_000_000


def test_rollover_applies_the_epoch_mean_score_with_lambda() -> None:
    rec = WeightRecord(1_000_000, 0, 1_000_000, 2, 0)  # mean score 500,000
    assert weights.fold(rec, 0, P) == rec  # same epoch: nothing changes
    assert weights.fold(rec, 1, P).weight == (800_000 * 1_000_000 + 200_000 * 500_000) // 1_000_000 == 900_000
    assert weights.fold(rec, 1, P).score_count == 0


def test_inactive_epochs_decay_the_weight_toward_one() -> None:
    rec = WeightRecord(1_000_000, 0, 1_000_000, 2, 0)
    # epoch 1 folds the score (900,000); epochs 1 and 2 had no activity: 920,000 then 936,000
    assert weights.fold(rec, 3, P).weight == 936_000
    high = WeightRecord(5_000_000, 0, 0, 0, 0)
    assert weights.fold(high, 1, P).weight == (800_000 * 5_000_000 + 200_000 * 1_000_000) // 1_000_000 == 4_200_000
    # however long the gap, the work is bounded (64 steps) and the result is ~1.0
    assert abs(weights.fold(high, 10**9, P).weight - 1_000_000) < 1_000


def test_weights_are_clamped_to_the_governed_bounds() -> None:
    assert weights.fold(WeightRecord(50_000, 4), 4, P).weight == 100_000
    assert weights.fold(WeightRecord(20_000_000, 4), 4, P).weight == 10_000_000
    narrow = TimerPolicy(mode=MODE_CIP1, cip1_weight_min=900_000, cip1_starvation_floor=950_000,
                         cip1_weight_max=1_000_000)
    assert weights.fold(WeightRecord(500_000, 4), 4, narrow).weight == 900_000  # a parameter change applies on read


def test_the_starvation_floor_applies_after_starvation_blocks_in_a_row() -> None:
    rec = WeightRecord(300_000, 0, 0, 0, 7)
    assert weights.effective(rec, P) == 300_000
    assert weights.effective(WeightRecord(300_000, 0, 0, 0, 8), P) == 2_000_000
    assert weights.effective(WeightRecord(3_000_000, 0, 0, 0, 8), P) == 3_000_000  # a floor, not a cap


def test_record_block_counts_starved_blocks_and_resets_on_execution() -> None:
    world = make_world()
    a = owner(1)
    for n in range(1, 4):
        rec = weights.record_block(world, a, 0, P, BlockStats(attempted=1, deferred=1), cycle_basefee=10)
        assert rec.starved_blocks == n and rec.score_count == n
    rec = weights.record_block(world, a, 0, P, BlockStats(attempted=1, executed=1, cycles=10), cycle_basefee=10)
    assert rec.starved_blocks == 0
    assert world.get(model.WEIGHT_PREFIX + a) == rec.encode()


def test_a_starved_actor_wins_ties_once_the_floor_applies() -> None:
    world = cip1_world(TimerPolicy(mode=MODE_CIP1, cip1_budget_cycles=1_000, cip1_starvation_blocks=2))
    a, b = owner(1), owner(2)
    fund(world, a, 10**15)
    fund(world, b, 10**15)
    # equal tips; A's timers are older (lower trigger height) so A wins the ties until B starves
    a_ids = [timeout(world, a, 19) for _ in range(4)]
    b_ids = [timeout(world, b, 20, gba=0) for _ in range(2)]
    gbas = FakeGbas({gba_address(0): (bid(20, 5), None, 10)})
    orders = [run(world, h, gbas)[0].order for h in range(20, 24)]
    # one execution per block (budget 1,000); B deferred in blocks 20 and 21 -> starving (2) -> weight 2.0 wins
    # block 22; served, B is no longer starving and A's older timer wins block 23 again
    assert orders == [[a_ids[0]], [a_ids[1]], [b_ids[0]], [a_ids[2]]]
