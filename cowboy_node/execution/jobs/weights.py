"""CIP-2 v3 base weight of a candidate (CIP-11 §9.3), in exact integer arithmetic.

``weight = effective_stake · max(sqrt(reputation / REPUTATION_NORMALIZER), w_min_floor)``, computed as::

    factor_x1e6 = max(isqrt(reputation_x1e9 · 10^12 // reputation_normalizer_x1e9), w_min_floor_x1e6)
    weight      = effective_stake · factor_x1e6 // 10^6

``reputation_x1e9 · 10^12 // normalizer_x1e9`` is ``(rep / norm) · 10^12``, so its integer square root
is ``sqrt(rep / norm) · 10^6`` rounded down: the factor in millionths. Both divisions floor.
``effective_stake`` is the registered stake: CIP-13 delegation is not live, so its delegated total is 0.
The MRU multiplier (§9.3) is applied by the draw on top of this weight, never here.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import isqrt

from cowboy_protocol.types.params import RunnerConfig
from cowboy_protocol.types.runner import RunnerRecord

FACTOR_SCALE = 10**6
"""Fixed-point scale of the weight factor (millionths)."""
_RATIO_SCALE = FACTOR_SCALE * FACTOR_SCALE


def weight_factor_x1e6(reputation_x1e9: int, reputation_normalizer_x1e9: int, w_min_floor_x1e6: int) -> int:
    """``max(sqrt(rep / norm), w_min_floor)`` in millionths, rounded down."""
    return max(isqrt(reputation_x1e9 * _RATIO_SCALE // reputation_normalizer_x1e9), w_min_floor_x1e6)


def cip2_v3_weight(stake: int, reputation_x1e9: int, cfg: RunnerConfig) -> int:
    """CIP-2 v3 base weight of a runner with ``stake`` (effective stake) and ``reputation_x1e9``."""
    factor = weight_factor_x1e6(reputation_x1e9, cfg.reputation_normalizer_x1e9, cfg.w_min_floor_x1e6)
    return stake * factor // FACTOR_SCALE


def effective_stake(r: RunnerRecord) -> int:
    """CIP-13 v2 effective stake at the snapshot block: the registered stake (delegation not live)."""
    return r.stake


def base_weights(candidates: Sequence[RunnerRecord], cfg: RunnerConfig) -> list[int]:
    """Base weight of each candidate, paired by position with ``candidates``.

    Runners often share a reputation value, so the square root is computed once per distinct reputation
    (a pure cache: the result equals :func:`cip2_v3_weight` per runner; it runs for every job).
    """
    norm, floor = cfg.reputation_normalizer_x1e9, cfg.w_min_floor_x1e6
    factor = {rep: weight_factor_x1e6(rep, norm, floor) for rep in dict.fromkeys(r.reputation_x1e9 for r in candidates)}
    return [r.stake * factor[r.reputation_x1e9] // FACTOR_SCALE for r in candidates]
