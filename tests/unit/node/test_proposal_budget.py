"""The proposer's time-budgeted candidate cap (cowboy_node/node/proposal_budget.py): a node whose builds are slow
offers fewer transactions, so a flood cannot make every view outlast the leader timeout (issues 14/20)."""

from __future__ import annotations

import pytest

from cowboy_node.node.proposal_budget import ProposalBudget


def test_no_estimate_offers_the_full_cap() -> None:
    assert ProposalBudget(0.5).limit(3332) == 3332


def test_the_cap_is_what_fits_the_budget_at_the_measured_rate() -> None:
    b = ProposalBudget(0.5)
    b.observe(1000, 2.0)  # 2 ms per transaction: 0.5 s holds 250
    assert b.limit(3332) == 250
    assert b.limit(100) == 100  # never above the caller's own limit


def test_the_estimate_follows_newer_builds() -> None:
    b = ProposalBudget(1.0, weight=0.5)
    b.observe(1000, 2.0)  # 2 ms
    b.observe(1000, 1.0)  # 1 ms: estimate halfway, 1.5 ms
    assert b.per_tx_s == pytest.approx(0.0015)
    assert b.limit(10_000) == 666


def test_tiny_builds_are_not_samples_and_the_floor_keeps_progress() -> None:
    b = ProposalBudget(0.5, min_txs=64, sample_min_txs=32)
    b.observe(10, 5.0)  # fixed costs of a near-empty block say nothing per transaction
    assert b.per_tx_s is None
    b.observe(100, 100.0)  # 1 s per transaction: the budget holds none, the floor still offers 64
    assert b.limit(3332) == 64
    assert b.limit(10) == 10


def test_bad_parameters_are_refused() -> None:
    for kw in ({"budget_s": 0.0}, {"budget_s": 1.0, "min_txs": 0}, {"budget_s": 1.0, "weight": 0.0}):
        with pytest.raises(ValueError):
            ProposalBudget(**kw)  # type: ignore[arg-type]
