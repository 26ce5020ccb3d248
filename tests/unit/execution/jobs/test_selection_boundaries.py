"""Boundary rules of the selection helpers that mutation testing found unguarded (docs/testing.md, issue 31 §2).

Each test pins one limit the spec or the function's contract states: the u64/u128 ranges of the §9.2 draw and seed
preimages, the 48-byte MinSig seed, re-selection attempts counting from 1, K ≥ 0, the 20-byte MRU record fields,
one weight per runner in each pool, and the MRU multiplier applying to the MRU runner wherever it sits in the pool
at iteration 0 — including slot 0 (§9.3).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from cowboy_node.execution.jobs import draw, mru, seeds
from cowboy_node.execution.jobs.filters import SelectionRequest, eligible
from cowboy_protocol.types.params import RunnerConfig
from cowboy_protocol.types.runner import JOB_KIND_HTTP, JOB_KIND_LLM, JOB_KIND_MCP, Rate, RateCard, RunnerRecord
from tests.unit.execution.jobs.test_selection_support import HEIGHT, addr, runner

U64_MAX = 2**64 - 1
U128_MAX = 2**128 - 1
SIG = b"\x05" * 48
H32 = b"\x07" * 32


def test_draw_hash_accepts_the_u64_range_only() -> None:
    assert len(draw.draw_hash(b"s", 0)) == 32 and len(draw.draw_hash(b"s", U64_MAX)) == 32
    for bad in (-1, U64_MAX + 1):
        with pytest.raises(ValueError):
            draw.draw_hash(b"s", bad)


def test_total_weight_may_reach_u128_max_but_not_exceed_it() -> None:
    assert draw.weighted_draw([U128_MAX], b"s", 0) == 0
    with pytest.raises(ValueError):
        draw.weighted_draw([U128_MAX, 1], b"s", 0)


@pytest.mark.parametrize("sizes", [(2, 1, 0, 0), (1, 2, 0, 0), (1, 1, 2, 1), (1, 1, 1, 2)])
def test_every_pool_needs_exactly_one_weight_per_runner(sizes: tuple[int, int, int, int]) -> None:
    np, npw, nf, nfw = sizes
    present = [runner(i + 1, i) for i in range(np)]
    fallback = [runner(i + 10, i + 10) for i in range(nf)]
    with pytest.raises(ValueError):
        draw.draw_committee_weighted(present, [1] * npw, fallback, [1] * nfw, 1, b"s", None, mru_multiplier=4)


def test_mru_runner_in_slot_zero_of_the_active_pool_gets_the_multiplier() -> None:
    a, b = runner(1, 0), runner(2, 1)
    # A seed whose iteration-0 ticket picks B from equal weights but A once A's weight is multiplied by 64.
    seed = next(s for s in (bytes([n]) for n in range(256))
                if draw.weighted_draw([1, 1], s, 0) == 1 and draw.weighted_draw([64, 1], s, 0) == 0)
    plain = draw.draw_committee_weighted([a, b], [1, 1], [], [], 1, seed, None, mru_multiplier=64)
    biased = draw.draw_committee_weighted([a, b], [1, 1], [], [], 1, seed, a.address, mru_multiplier=64)
    assert plain == [b] and biased == [a]


def test_beacon_hash_needs_exactly_48_signature_bytes_and_u64_rounds() -> None:
    assert len(seeds.beacon_hash_v1(0, U64_MAX, SIG)) == 32
    for sig in (SIG[:47], SIG + b"\x00"):
        with pytest.raises(ValueError):
            seeds.beacon_hash_v1(0, 1, sig)
    for view in (-1, U64_MAX + 1):
        with pytest.raises(ValueError):
            seeds.beacon_hash_v1(0, view, SIG)


def test_mode_for_needs_a_committee_of_at_least_one() -> None:
    assert seeds.mode_for(1) == seeds.MODE_IMMEDIATE and seeds.mode_for(2) == seeds.MODE_DELAYED
    with pytest.raises(ValueError):
        seeds.mode_for(0)


def test_reselection_attempts_count_from_one() -> None:
    assert seeds.reselection_seed(H32, 1) != seeds.reselection_seed(H32, 2)
    with pytest.raises(ValueError):
        seeds.reselection_seed(H32, 0)


def test_advance_round_takes_any_k_from_zero() -> None:
    assert seeds.advance_round(0, 5, 0) == (0, 5)
    with pytest.raises(ValueError):
        seeds.advance_round(0, 5, -1)


def test_mru_record_fields_are_exactly_20_bytes() -> None:
    assert len(mru.mru_key(addr(1), 0x01)) == len(mru.MRU_PREFIX) + 21
    for bad in (addr(1)[:19], addr(1) + b"\x00"):
        with pytest.raises(ValueError):
            mru.mru_key(bad, 0x01)
        with pytest.raises(ValueError):
            mru.encode_mru(bad, 5)


# --- filter chain (jobs-filters survivors) ----------------------------------------------------------------------

def _req(kind: int, max_price: int, excluded: frozenset[bytes] = frozenset()) -> SelectionRequest:
    return SelectionRequest(job_kind=kind, http_host=None, tee_required=False, required_tee_type=None,
                            max_price=max_price, required_runner_pool=None, excluded=excluded)


def _eligible(runners: list[RunnerRecord], request: SelectionRequest) -> list[bytes]:
    return [r.address for r in eligible(runners, request, height=HEIGHT, heartbeat_timeout_blocks=100,
                                        cfg=RunnerConfig())]


def test_price_filter_reads_the_rate_of_the_jobs_own_kind() -> None:
    """The price filter compares max_price with the base price of the job's kind, not of another kind."""
    r = runner(1, 0, kinds=(JOB_KIND_LLM, JOB_KIND_HTTP, JOB_KIND_MCP))
    rates = RateCard(((JOB_KIND_LLM, Rate(1, 1)), (JOB_KIND_HTTP, Rate(500, 1)), (JOB_KIND_MCP, Rate(1, 1))))
    priced = replace(r, rate_card=rates)
    assert _eligible([priced], _req(JOB_KIND_HTTP, 100)) == []            # HTTP costs 500 > 100
    assert _eligible([priced], _req(JOB_KIND_HTTP, 500)) == [r.address]
    no_rate = replace(r, rate_card=RateCard(((JOB_KIND_MCP, Rate(1, 1)),)))  # capable of HTTP, no HTTP rate
    assert _eligible([no_rate], _req(JOB_KIND_HTTP, 10**6)) == []


def test_a_runner_above_its_concurrency_cap_is_not_eligible() -> None:
    """active_jobs ≥ max_concurrent_jobs excludes — also when it is above the cap (the cap was lowered)."""
    assert _eligible([runner(1, 0, max_jobs=2, active=3)], _req(JOB_KIND_LLM, 1_000)) == []
    assert _eligible([runner(1, 0, max_jobs=2, active=1)], _req(JOB_KIND_LLM, 1_000)) != []


def test_an_excluded_runner_does_not_end_the_scan() -> None:
    first, second = runner(1, 0), runner(2, 1)
    assert _eligible([first, second], _req(JOB_KIND_LLM, 1_000, frozenset({first.address}))) == [second.address]
