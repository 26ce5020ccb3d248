"""CIP-3 basefee update rule and fee split (DESIGN.md §4 "Fees")."""

from __future__ import annotations

from cowboy_node.execution import fees
from cowboy_node.execution.fees import effective_tip, next_basefee, split_fee
from cowboy_protocol.types.params import BasefeeConfig

CFG = BasefeeConfig()  # alpha = denom = 96, cycles target 20M, min 10,000


def test_defaults_are_the_public_cowboy_values() -> None:
    assert (CFG.alpha, CFG.denom, CFG.cycles_target, CFG.cells_target, CFG.min_basefee, CFG.initial_basefee) == (
        96, 96, 20_000_000, 4_000_000, 10_000, 100_000)


def test_at_target_basefee_is_unchanged() -> None:
    assert next_basefee(100_000, 20_000_000, 20_000_000, CFG) == 100_000


def test_full_block_raises_by_one_ninety_sixth() -> None:
    # Δ = 100000·20M/20M/96 = 1041 (floor), cap 100000//96 = 1041
    assert next_basefee(100_000, 40_000_000, 20_000_000, CFG) == 101_041


def test_half_over_target_raises_proportionally() -> None:
    # Δ = 100000·10M/(20M·96) = 520
    assert next_basefee(100_000, 30_000_000, 20_000_000, CFG) == 100_520


def test_increase_is_capped_at_bf_over_denom() -> None:
    # uncapped Δ would be 100000·60M/(20M·96) = 3125
    assert next_basefee(100_000, 80_000_000, 20_000_000, CFG) == 101_041


def test_empty_block_lowers_basefee() -> None:
    assert next_basefee(100_000, 0, 20_000_000, CFG) == 98_959


def test_basefee_never_drops_below_the_floor() -> None:
    assert next_basefee(10_000, 0, 20_000_000, CFG) == 10_000
    assert next_basefee(10_050, 0, 20_000_000, CFG) == 10_000


def test_tiny_overshoot_still_moves_basefee_up() -> None:
    assert next_basefee(10_000, 20_000_001, 20_000_000, CFG) == 10_001


def test_tip_is_bounded_by_max_fee_minus_basefee() -> None:
    assert effective_tip(max_fee=150, max_priority_fee=100, basefee=100) == 50
    assert effective_tip(max_fee=300, max_priority_fee=100, basefee=100) == 100


def test_split_burns_basefee_and_tips_the_rest() -> None:
    s = split_fee(10, 5, cycle_basefee=100, cell_basefee=7, cycle_tip=3, cell_tip=1)
    assert (s.burned, s.tip, s.total) == (10 * 100 + 5 * 7, 10 * 3 + 5 * 1, 1035 + 35)


def test_intrinsic_cycle_charges_are_the_documented_protocol_constants() -> None:
    """docs/protocol.md §4: every transaction costs 10,000 cycles and a Transfer adds 2,000; a governed-config system
    instruction adds 5,000. Consensus constants: changing one changes every fee and state root."""
    assert (fees.TX_BASE_CYCLES, fees.TRANSFER_CYCLES, fees.SYSTEM_INSTRUCTION_CYCLES) == (10_000, 2_000, 5_000)


def test_split_charges_each_resource_at_its_own_basefee_and_tip() -> None:
    s = split_fee(7, 10, cycle_basefee=2, cell_basefee=5, cycle_tip=3, cell_tip=4)
    assert (s.burned, s.tip, s.total) == (7 * 2 + 10 * 5, 7 * 3 + 10 * 4, 7 * 5 + 10 * 9)
