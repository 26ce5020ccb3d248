"""select_committee (CIP-11 §7.3, §8.4, §9.2): pools per mode, fail-open, Mode A guard, determinism."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cowboy_node.execution.jobs.filters import SelectionRequest, eligible
from cowboy_node.execution.jobs.selection import (
    effective_k,
    membership_over_full_set,
    mode_a_effective,
    select_committee,
)
from cowboy_node.execution.jobs.weights import base_weights
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.params import Cip11Flags, RunnerConfig
from cowboy_protocol.types.runner import JOB_KIND_LLM, RunnerRecord
from tests.unit.execution.jobs.test_selection_support import HEIGHT, hashed_runners, ref_committee

CFG = RunnerConfig()
REQ = SelectionRequest(job_kind=JOB_KIND_LLM, http_host=None, tee_required=False, required_tee_type=None,
                       max_price=10**6, required_runner_pool=None)
RUNNERS = hashed_runners(10)
ELIGIBLE = eligible(RUNNERS, REQ, height=HEIGHT, heartbeat_timeout_blocks=100, cfg=CFG)
SEED = keccak256(b"committee-test")


def pairs(rs: list[RunnerRecord]) -> list[tuple[bytes, int]]:
    return list(zip([r.address for r in rs], base_weights(rs, CFG), strict=True))


def select(present: frozenset[int], m: int, seed: bytes = SEED, **kw: object) -> list[bytes]:
    args: dict[str, object] = dict(present_first=True, membership_over_full_set=False, mru_address=None)
    args.update(kw)
    return [r.address for r in select_committee(ELIGIBLE, present, m, seed, CFG, **args)]  # type: ignore[arg-type]


def test_fail_open_empty_presence_draws_over_every_eligible_runner() -> None:
    assert len(ELIGIBLE) == 10
    expected = ref_committee([], pairs(ELIGIBLE), SEED, 4)
    assert select(frozenset(), 4) == expected
    # presence naming only runners that are not eligible is the same as an empty set
    assert select(frozenset({10_000, 10_001}), 4) == expected


def test_mode_b_presence_never_removes_an_eligible_runner() -> None:
    # one present runner and M = all: every floor-eligible runner is still selected, absent ones from fallback
    present = frozenset({ELIGIBLE[3].index})
    got = select(present, len(ELIGIBLE))
    assert got[0] == ELIGIBLE[3].address
    assert sorted(got) == sorted(r.address for r in ELIGIBLE)


def test_mode_b_present_first_matches_the_reference_draw() -> None:
    present_rs = [r for r in ELIGIBLE if r.index % 3 == 0]
    fallback_rs = [r for r in ELIGIBLE if r.index % 3 != 0]
    present = frozenset(r.index for r in present_rs)
    assert select(present, 6) == ref_committee(pairs(present_rs), pairs(fallback_rs), SEED, 6)


def test_v2_path_ignores_presence_and_mru() -> None:
    present = frozenset(r.index for r in ELIGIBLE[:3])
    mru = ELIGIBLE[5].address
    expected = ref_committee([], pairs(ELIGIBLE), SEED, 3)
    assert select(present, 3, present_first=False, mru_address=mru) == expected


def test_membership_over_full_set_ignores_presence_but_keeps_the_mru_bias() -> None:
    present = frozenset(r.index for r in ELIGIBLE[:3])
    mru = ELIGIBLE[5].address
    expected = ref_committee([], pairs(ELIGIBLE), SEED, 3, mru)
    assert select(present, 3, membership_over_full_set=True, mru_address=mru) == expected


def test_membership_over_full_set_applies_to_multi_validator_multi_runner_jobs_only() -> None:
    assert membership_over_full_set(4, 3) is True
    assert membership_over_full_set(1, 3) is False   # single validator: present-first decides membership
    assert membership_over_full_set(4, 1) is False   # M == 1: bond/slashing, not committee independence


def test_mode_a_guard_is_false_for_default_subset_bounds_so_nothing_is_hard_excluded() -> None:
    flags = Cip11Flags(CIP11_PRESENT_FIRST_ENABLED=True, PRESENCE_HARD_EXCLUDE_ENABLED=True)
    for n in (1, 4, 7, 100, 10_000):
        assert effective_k(n) <= 8
        assert mode_a_effective(flags, n, t_hard=n) is False
    # guard false ⇒ select with hard_exclude=False: absent runners stay drawable from the fallback pool
    present = frozenset({ELIGIBLE[0].index})
    got = select(present, 3, hard_exclude=mode_a_effective(flags, 4, t_hard=3))
    assert len(got) == 3 and got[0] == ELIGIBLE[0].address


@pytest.mark.parametrize(("n", "k"), [(1, 1), (2, 2), (3, 3), (4, 3), (5, 4), (8, 4), (9, 5), (64, 7), (129, 8),
                                      (10**6, 8)])
def test_effective_k_formula(n: int, k: int) -> None:
    # min(|V|, clamp(ceil(log2 |V|) + 1, 3, 8))
    assert effective_k(n) == k


def test_mode_a_guard_needs_the_flag_k_hard_min_and_an_honest_majority_threshold() -> None:
    on = Cip11Flags(PRESENCE_HARD_EXCLUDE_ENABLED=True)
    big = dict(min_subset=3, max_subset=100)
    # |V| = 2^20: ceil(log2) + 1 = 21 ≥ K_HARD_MIN 20; t_hard must be ≥ 21 // 2 + 1 = 11
    assert mode_a_effective(on, 2**20, 11, **big) is True
    assert mode_a_effective(on, 2**20, 10, **big) is False
    assert mode_a_effective(Cip11Flags(), 2**20, 11, **big) is False
    assert mode_a_effective(on, 2**17, 11, **big) is False  # effective_k = 18 < 20


def test_mode_a_effective_hard_excludes_absent_runners() -> None:
    present_rs = ELIGIBLE[:2]
    present = frozenset(r.index for r in present_rs)
    got = select(present, 5, hard_exclude=True)
    assert sorted(got) == sorted(r.address for r in present_rs)  # under-fills instead of using absent runners
    assert select(frozenset(), 3, hard_exclude=True) == []


def test_unsorted_candidates_are_rejected() -> None:
    with pytest.raises(ValueError, match="ascending"):
        select_committee(list(reversed(ELIGIBLE)), frozenset(), 1, SEED, CFG, present_first=True,
                         membership_over_full_set=False, mru_address=None)


def _pipeline(runners: list[RunnerRecord], present: frozenset[int], m: int, seed: bytes,
              mru: bytes | None) -> list[bytes]:
    cands = eligible(runners, REQ, height=HEIGHT, heartbeat_timeout_blocks=100, cfg=CFG)
    return [r.address for r in select_committee(cands, present, m, seed, CFG, present_first=True,
                                                membership_over_full_set=False, mru_address=mru)]


@settings(max_examples=200, deadline=None)
@given(st.permutations(list(range(10))), st.frozensets(st.integers(0, 11)), st.integers(0, 11),
       st.binary(min_size=32, max_size=32), st.one_of(st.none(), st.integers(0, 9)))
def test_committee_is_deterministic_and_independent_of_runner_input_order(
        perm: list[int], present: frozenset[int], m: int, seed: bytes, mru_i: int | None) -> None:
    mru = None if mru_i is None else RUNNERS[mru_i].address
    base = _pipeline(RUNNERS, present, m, seed, mru)
    assert _pipeline(RUNNERS, present, m, seed, mru) == base
    assert _pipeline([RUNNERS[i] for i in perm], present, m, seed, mru) == base
    assert len(base) == min(m, len(RUNNERS)) and len(set(base)) == len(base)
