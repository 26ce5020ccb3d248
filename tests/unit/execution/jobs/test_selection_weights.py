"""CIP-2 v3 base weight (CIP-11 §9.3): stake · max(sqrt(rep / normalizer), w_min_floor), exact integers."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cowboy_node.execution.jobs.weights import base_weights, cip2_v3_weight, weight_factor_x1e6
from cowboy_protocol.types.params import RunnerConfig
from tests.unit.execution.jobs.test_selection_support import runner

CFG = RunnerConfig()  # normalizer 100.0, w_min_floor 0.1
E18 = 10**18


@pytest.mark.parametrize(("stake", "rep_x1e9", "expected"), [
    (E18, 100_000_000_000, E18),                       # sqrt(100/100) = 1
    (E18, 50_000_000_000, 707_106 * 10**12),           # isqrt(5e11) = 707106 (707107² = 500000309449 > 5e11)
    (E18, 25_000_000_000, E18 // 2),                   # sqrt(0.25) = 0.5 exactly
    (E18, 64_000_000_000, 8 * E18 // 10),              # sqrt(0.64) = 0.8 exactly
    (E18, 1_000_000_000, E18 // 10),                   # sqrt(0.01) = 0.1 = the floor
    (E18, 810_000_000, E18 // 10),                     # sqrt(0.0081) = 0.09 < floor 0.1
    (E18, 0, E18 // 10),                               # zero reputation still weighs the floor
    (7, 50_000_000_000, 4),                            # 7 · 707106 // 10^6 = 4 (floors)
    (0, 100_000_000_000, 0),
])
def test_cip2_v3_weight_values_worked_by_hand(stake: int, rep_x1e9: int, expected: int) -> None:
    assert cip2_v3_weight(stake, rep_x1e9, CFG) == expected


def test_weight_uses_the_governed_normalizer_and_floor() -> None:
    cfg = RunnerConfig(reputation_normalizer_x1e9=50_000_000_000, w_min_floor_x1e6=900_000)
    assert weight_factor_x1e6(50_000_000_000, 50_000_000_000, 900_000) == 1_000_000
    assert cip2_v3_weight(E18, 50_000_000_000, cfg) == E18
    assert cip2_v3_weight(E18, 25_000_000_000, cfg) == 9 * E18 // 10  # sqrt(0.5) ≈ 0.707 < floor 0.9


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10**27), st.integers(0, 200_000_000_000))
def test_weight_matches_the_real_formula_within_rounding(stake: int, rep: int) -> None:
    w = cip2_v3_weight(stake, rep, CFG)
    exact = stake * max(math.sqrt(rep / 100e9), 0.1)
    # two floors (factor to 1e-6, product to an integer) plus float error of the reference
    assert exact - stake / 1e6 - 1 - exact * 1e-12 <= w <= exact + 1 + exact * 1e-12


def test_base_weights_are_paired_by_position_and_equal_the_per_runner_formula() -> None:
    rs = [runner(1, 0, stake=3 * E18, rep=100_000_000_000), runner(2, 1, stake=E18, rep=25_000_000_000),
          runner(3, 2, stake=5 * E18, rep=64_000_000_000), runner(4, 3, stake=2 * E18, rep=25_000_000_000)]
    assert base_weights(rs, CFG) == [3 * E18, E18 // 2, 4 * E18, E18]
