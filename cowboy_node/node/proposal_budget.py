"""How many transactions a proposer offers to its next block so that building it fits a time budget.

With several validators, the others nullify a view whose proposal has not arrived within the leader timeout
(2Δ) and one not notarized within 3Δ — and they must execute the block too before voting. A proposer whose
mempool holds a flood builds the largest block it may (3,332 transfers at the default cycle cap); on a loaded
two-core machine that took longer than 2Δ, the view was nullified, the next leader built the same block from the
same mempool, and finalization stalled (issues 14/20, measured in ``docs/performance.md``).

:class:`ProposalBudget` keeps an exponentially weighted estimate of this node's build seconds per transaction
(from its own builds, nullified ones included) and caps the candidates so that the next build should take about
``budget_s``: the node passes Δ/2, a quarter of the leader timeout, leaving the verifiers' execution time within
3Δ. The cap never goes below ``min_txs`` (progress) and never above the caller's own limit. Which candidates a
proposer offers is its own policy, not a consensus rule (``chain/candidates.py``): verification is unchanged and
every block remains valid to every validator whatever this estimate is.
"""

from __future__ import annotations

__all__ = ["ProposalBudget"]


class ProposalBudget:
    """A time-budgeted cap on proposal candidates; see the module docstring."""

    def __init__(self, budget_s: float, *, min_txs: int = 64, sample_min_txs: int = 32,
                 weight: float = 0.5) -> None:
        """``budget_s``: target build time; builds of fewer than ``sample_min_txs`` transactions (fixed costs
        dominate) are not samples; ``weight`` of the newest sample in the estimate."""
        if budget_s <= 0 or min_txs < 1 or not 0 < weight <= 1:
            raise ValueError("budget_s > 0, min_txs ≥ 1 and 0 < weight ≤ 1 are required")
        self.budget_s = budget_s
        self.min_txs = min_txs
        self.sample_min_txs = sample_min_txs
        self.weight = weight
        self.per_tx_s: float | None = None
        """Current estimate of build seconds per transaction (None until the first sample)."""

    def observe(self, txs: int, seconds: float) -> None:
        """A build of ``txs`` transactions took ``seconds`` (wall time in the builder)."""
        if txs < self.sample_min_txs or seconds < 0:
            return
        sample = seconds / txs
        old = self.per_tx_s
        self.per_tx_s = sample if old is None else old + self.weight * (sample - old)

    def limit(self, cap: int) -> int:
        """Candidates to offer: ``cap`` until there is an estimate, then what fits the budget within
        ``[min(min_txs, cap), cap]``."""
        if self.per_tx_s is None or self.per_tx_s <= 0:
            return cap
        return max(min(self.min_txs, cap), min(cap, int(self.budget_s / self.per_tx_s)))
