"""Committee selection: present-first draw over the filtered candidates (CIP-11 §7.3, §8.4, §9.2–§9.3).

Which pools the draw sees:

============================================  ==================  ===================  =========
case                                          present pool        fallback pool        MRU bias
============================================  ==================  ===================  =========
CIP-11 off (``present_first=False``, v2)      empty               all eligible         no
CIP-11 on, membership over full set           empty               all eligible         yes
  (n_validators > 1 and M > 1, §7.3)
CIP-11 on (Mode B)                            eligible ∩ present  eligible − present   yes
CIP-11 on and Mode A effective                eligible ∩ present  empty                yes
============================================  ==================  ===================  =========

Mode A (hard exclusion) is effective only when ``PRESENCE_HARD_EXCLUDE_ENABLED`` is set *and* the §8.4 guard
holds (:func:`mode_a_effective`); with the default subset bounds it never does, so presence never removes
a floor-eligible runner. An empty or absent presence set leaves the present pool empty: the draw then
runs over every eligible runner (fail-open).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from operator import lt

from cowboy_node.execution.jobs.draw import draw_committee_weighted
from cowboy_node.execution.jobs.weights import base_weights
from cowboy_protocol.transport.subset import MAX_SUBSET, MIN_SUBSET, effective_k
from cowboy_protocol.types.params import Cip11Flags, RunnerConfig
from cowboy_protocol.types.runner import RunnerRecord

K_HARD_MIN = 20
"""CIP-11 §13 K_HARD_MIN: smallest effective k for which Mode A may hard-exclude."""


def mode_a_effective(flags: Cip11Flags, n_validators: int, t_hard: int, *, min_subset: int = MIN_SUBSET,
                     max_subset: int = MAX_SUBSET, k_hard_min: int = K_HARD_MIN) -> bool:
    """True iff Mode A hard-exclude applies: flag set, ``effective_k ≥ K_HARD_MIN`` and ``t_hard > effective_k/2``."""
    if not flags.PRESENCE_HARD_EXCLUDE_ENABLED:
        return False
    k = effective_k(n_validators, min_subset=min_subset, max_subset=max_subset)
    return k >= k_hard_min and t_hard >= k // 2 + 1


def membership_over_full_set(n_validators: int, m: int) -> bool:
    """§7.3 membership-steering bound: multi-validator jobs with M > 1 draw membership over all eligible."""
    return n_validators > 1 and m > 1


def select_committee(eligible: Sequence[RunnerRecord], present_indices: frozenset[int], m: int, seed: bytes,
                     cfg: RunnerConfig, *, present_first: bool, membership_over_full_set: bool,
                     mru_address: bytes | None, hard_exclude: bool = False) -> list[RunnerRecord]:
    """Draw a committee of up to ``m`` runners from ``eligible`` (address ascending, as the filters return it).

    ``present_indices`` are registry indices from the block's PresenceInput (empty when absent or
    malformed). ``mru_address`` is the result of :func:`~cowboy_node.execution.jobs.mru.lookup_mru`.
    ``hard_exclude`` must be :func:`mode_a_effective` (it only matters with ``present_first``).
    Fewer than ``m`` runners come back when the pools run dry (under-fill, CIP-11 §11.2).
    """
    addresses = [r.address for r in eligible]
    if not all(map(lt, addresses, addresses[1:])):
        raise ValueError("eligible candidates must be strictly ascending by address")
    # weights are computed per runner and carried with it through the partition and every swap_remove
    weights = base_weights(eligible, cfg)
    if not present_first:
        return draw_committee_weighted([], [], eligible, weights, m, seed, None,
                                       mru_multiplier=cfg.mru_weight_multiplier)
    use_presence = hard_exclude or not membership_over_full_set
    # stable partition (§9.2): one membership mask, applied to the runners and to their paired weights
    marked = [r.index in present_indices for r in eligible] if use_presence else [False] * len(eligible)
    unmarked = [] if hard_exclude else [not x for x in marked]
    present, present_w = list(compress(eligible, marked)), list(compress(weights, marked))
    fallback, fallback_w = list(compress(eligible, unmarked)), list(compress(weights, unmarked))
    return draw_committee_weighted(present, present_w, fallback, fallback_w, m, seed, mru_address,
                                   mru_multiplier=cfg.mru_weight_multiplier)
