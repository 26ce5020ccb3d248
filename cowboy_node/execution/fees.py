"""CIP-3 dual metering: basefee update, effective tip, fee split.

Cycles meter compute and cells meter bytes; each resource has its own
basefee adjusted once per block towards its target:

    Δ = min(bf · |used − target| // (target · alpha), bf // denom)
    next = bf + Δ  if used > target  else  max(min_basefee, bf − Δ)

All integer arithmetic; 100% of the basefee portion is burned, the tip goes
to the proposer, unused limits are never charged (equivalent to pre-charge
of the maximum and refund of the rest).
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_protocol.types.params import BasefeeConfig

TX_BASE_CYCLES = 10_000
"""Intrinsic compute charge of every transaction (signature recovery, nonce, fee logic)."""
TRANSFER_CYCLES = 2_000
"""Additional compute of a Transfer instruction."""
SYSTEM_INSTRUCTION_CYCLES = 5_000
"""Additional compute of a governed-config system instruction."""


def next_basefee(basefee: int, used: int, target: int, cfg: BasefeeConfig) -> int:
    """Basefee for the next block given this block's usage of one resource."""
    if used == target:
        return basefee
    delta = min(basefee * abs(used - target) // (target * cfg.alpha), basefee // cfg.denom)
    if used > target:
        return basefee + max(delta, 1)
    return max(cfg.min_basefee, basefee - delta)


def effective_tip(max_fee: int, max_priority_fee: int, basefee: int) -> int:
    """Tip per unit actually paid: min(priority cap, max fee − basefee). Caller ensures max_fee ≥ basefee."""
    return min(max_priority_fee, max_fee - basefee)


@dataclass(frozen=True, slots=True)
class FeeSplit:
    """What a transaction's usage costs and where the money goes."""

    total: int
    """Debited from the payer."""
    burned: int
    """Basefee portion, destroyed."""
    tip: int
    """Priority portion, credited to the proposer."""


def split_fee(cycles: int, cells: int, *, cycle_basefee: int, cell_basefee: int,
              cycle_tip: int, cell_tip: int) -> FeeSplit:
    """Fee for ``cycles`` and ``cells`` at the given basefees and per-unit tips."""
    burned = cycles * cycle_basefee + cells * cell_basefee
    tip = cycles * cycle_tip + cells * cell_tip
    return FeeSplit(total=burned + tip, burned=burned, tip=tip)
