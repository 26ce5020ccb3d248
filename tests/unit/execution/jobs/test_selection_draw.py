"""CIP-11 §9.2 ``partition`` / ``weighted_draw`` / committee loop and §9.3 MRU, against a reference written
from the spec text (``ref_*`` in test_selection_support)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cowboy_node.execution.jobs.draw import draw_committee, partition, swap_remove, weighted_draw
from cowboy_node.execution.jobs.filters import SelectionRequest, eligible
from cowboy_node.execution.jobs.selection import select_committee
from cowboy_node.execution.jobs.weights import cip2_v3_weight
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.params import RunnerConfig
from cowboy_protocol.types.runner import JOB_KIND_LLM, RunnerRecord
from tests.unit.execution.jobs.test_selection_support import HEIGHT, addr, ref_committee, ref_ticket, ref_walk, runner

CFG = RunnerConfig()
E18 = 10**18
REQ = SelectionRequest(job_kind=JOB_KIND_LLM, http_host=None, tee_required=False, required_tee_type=None,
                       max_price=10**6, required_runner_pool=None)


def seed_n(n: int) -> bytes:
    return keccak256(b"cowboy-selection-pin-" + bytes([n]))


def weight(r: RunnerRecord) -> int:
    return cip2_v3_weight(r.stake, r.reputation_x1e9, CFG)


def test_weighted_draw_pin_unsorted_addresses_distinct_weights_partition_and_swap_remove() -> None:
    """CIP-11 §9.2 MUST pin: weights stay paired with their runner through sorting, partition and swap_remove."""
    # Registry order (index 0..3) is NOT address order; stake/reputation give four distinct weights.
    registry = [
        runner(0x30, 0, stake=3 * E18, rep=100_000_000_000),   # weight 3.0e18  (sqrt(1.00) = 1.0)
        runner(0x10, 1, stake=1 * E18, rep=72_250_000_000),    # weight 0.85e18 (sqrt(0.7225) = 0.85)
        runner(0x40, 2, stake=5 * E18, rep=64_000_000_000),    # weight 4.0e18  (sqrt(0.64) = 0.8)
        runner(0x20, 3, stake=2 * E18, rep=81_000_000_000),    # weight 1.8e18  (sqrt(0.81) = 0.9)
    ]
    present_indices = frozenset({0, 2, 3})
    seed = seed_n(2)
    # Worked from the spec: address order 0x10, 0x20, 0x30, 0x40; index 1 (0x10) is not present, so
    # present = [0x20 (1.8), 0x30 (3.0), 0x40 (4.0)] and fallback = [0x10 (0.85)], each weight with its runner.
    present = [(addr(0x20), 18 * E18 // 10), (addr(0x30), 3 * E18), (addr(0x40), 4 * E18)]
    fallback = [(addr(0x10), 85 * E18 // 100)]
    t0 = ref_ticket(seed, 0, sum(w for _, w in present))
    assert ref_walk([w for _, w in present], t0) == 0    # i = 0 draws slot 0 (0x20) ...
    # ... so swap_remove moves 0x40 into slot 0: the residual pool is [0x40, 0x30], not re-sorted
    expected = ref_committee(present, fallback, seed, 4)
    assert expected == [addr(0x20), addr(0x30), addr(0x40), addr(0x10)]
    # the forbidden variants give a different committee for this seed, so the pin discriminates them
    ordered_remove = [addr(0x20), addr(0x40), addr(0x30), addr(0x10)]
    assert expected != ordered_remove

    cands = eligible(registry, REQ, height=HEIGHT, heartbeat_timeout_blocks=100, cfg=CFG)
    assert [r.address for r in cands] == [addr(0x10), addr(0x20), addr(0x30), addr(0x40)]
    got = select_committee(cands, present_indices, 4, seed, CFG, present_first=True,
                           membership_over_full_set=False, mru_address=None)
    assert [r.address for r in got] == expected
    p, f = partition(cands, present_indices)
    got2 = draw_committee(p, f, weight, 4, seed, None, mru_multiplier=4)
    assert [r.address for r in got2] == expected


def test_seed_is_not_replaced_by_h_between_iterations() -> None:
    present = [(addr(0x20), 18 * E18 // 10), (addr(0x30), 3 * E18), (addr(0x40), 4 * E18)]
    seed = seed_n(2)  # i = 0 draws 0x20 (pin test above); the residual pool is [0x40 (4.0), 0x30 (3.0)]
    residual = [4 * E18, 3 * E18]
    pinned = ref_walk(residual, ref_ticket(seed, 1, 7 * E18))
    h0 = keccak256(seed + (0).to_bytes(8, "little"))
    chained = ref_walk(residual, ref_ticket(h0, 1, 7 * E18))  # the forbidden "seed = h" chaining
    assert chained != pinned  # this seed tells the two apart
    rs = [runner(a[0], k, stake=w) for k, (a, w) in enumerate(present)]
    got = draw_committee(rs, [], lambda r: r.stake, 2, seed, None, mru_multiplier=4)
    assert got[0].address == addr(0x20)
    assert got[1].address == [addr(0x40), addr(0x30)][pinned]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 10**20), min_size=1, max_size=30), st.binary(min_size=32, max_size=32),
       st.integers(0, 2**64 - 1))
def test_weighted_draw_equals_the_literal_walk(weights: list[int], seed: bytes, i: int) -> None:
    total = sum(weights)
    got = weighted_draw(weights, seed, i)
    if total == 0:
        assert got is None
    else:
        assert got == ref_walk(weights, ref_ticket(seed, i, total))


def test_weighted_draw_ticket_is_first_8_bytes_little_endian_mod_total() -> None:
    seed = bytes(range(32))
    for i in (0, 1, 7, 2**64 - 1):
        h = keccak256(seed + i.to_bytes(8, "little"))
        # unit weights: the drawn index IS the ticket
        assert weighted_draw([1] * 1000, seed, i) == int.from_bytes(h[:8], "little") % 1000


def test_weighted_draw_none_for_an_empty_pool_or_zero_total() -> None:
    assert weighted_draw([], b"s" * 32, 0) is None
    assert weighted_draw([0, 0, 0], b"s" * 32, 0) is None
    assert weighted_draw([0, 5, 0], b"s" * 32, 3) == 1


def test_swap_remove_moves_the_last_element_into_the_hole() -> None:
    xs = ["a", "b", "c", "d"]
    assert swap_remove(xs, 1) == "b" and xs == ["a", "d", "c"]
    assert swap_remove(xs, 2) == "c" and xs == ["a", "d"]


def test_partition_is_stable_and_never_sorted_by_presence_or_weight() -> None:
    # eligible in address order; registry indices and weights deliberately out of step with it
    rs = [runner(1, 5, stake=1), runner(2, 0, stake=9 * E18), runner(3, 3, stake=5), runner(4, 1, stake=7 * E18),
          runner(5, 4, stake=2)]
    present, fallback = partition(rs, frozenset({5, 1, 4}))
    assert [r.address[0] for r in present] == [1, 4, 5]
    assert [r.address[0] for r in fallback] == [2, 3]
    assert partition(rs, frozenset()) == ([], rs)


def test_present_pool_is_exhausted_before_any_fallback_draw() -> None:
    # a tiny-weight present runner and a huge-weight fallback runner: over present ++ fallback the fallback
    # runner would win at i = 0 for this seed; present-first must still draw the present runner first.
    full = 100_000_000_000  # reputation 100: weight = stake
    p = runner(0x50, 0, stake=10**6, rep=full)
    f = runner(0x60, 1, stake=10**9 * E18, rep=full)
    seed = seed_n(0)
    assert ref_walk([10**6, 10**9 * E18], ref_ticket(seed, 0, 10**6 + 10**9 * E18)) == 1  # concatenation: f
    got = select_committee([p, f], frozenset({0}), 1, seed, CFG, present_first=True,
                           membership_over_full_set=False, mru_address=None)
    assert got == [p]
    got2 = select_committee([p, f], frozenset({0}), 2, seed, CFG, present_first=True,
                            membership_over_full_set=False, mru_address=None)
    assert got2 == [p, f]


def test_draw_counter_is_global_across_the_present_to_fallback_boundary() -> None:
    present = [(addr(0x01), 5 * E18)]
    fallback = [(addr(0x02), E18), (addr(0x03), 2 * E18), (addr(0x04), 3 * E18), (addr(0x05), 4 * E18)]
    # pick the first seed for which restarting i at the boundary would choose a different committee
    seed = next(s for s in map(seed_n, range(256))
                if ref_committee(present, fallback, s, 3) != ref_committee(present, fallback, s, 3,
                                                                          reset_counter=True))
    rs = {a: runner(a, k, stake=w) for k, (a, w) in enumerate(present + fallback)}
    got = draw_committee([rs[a] for a, _ in present], [rs[a] for a, _ in fallback], lambda r: r.stake, 3, seed,
                         None, mru_multiplier=4)
    assert [r.address for r in got] == ref_committee(present, fallback, seed, 3)


def _mru_case() -> tuple[list[tuple[bytes, int]], bytes]:
    pool = [(addr(0x01), 4 * E18), (addr(0x02), E18), (addr(0x03), 3 * E18)]
    # first seed where the MRU runner (0x02) loses at i = 0 without the bias but wins with ×4
    seed = next(s for s in map(seed_n, range(256))
                if ref_committee(pool, [], s, 1)[0] != addr(0x02) and ref_committee(pool, [], s, 1, addr(0x02))[0]
                == addr(0x02))
    return pool, seed


def test_mru_multiplier_applies_at_iteration_zero() -> None:
    pool, seed = _mru_case()
    rs = [runner(a, k, stake=w) for k, (a, w) in enumerate(pool)]
    got = draw_committee(rs, [], lambda r: r.stake, 1, seed, addr(0x02), mru_multiplier=4)
    assert got[0].address == addr(0x02)
    assert draw_committee(rs, [], lambda r: r.stake, 1, seed, None, mru_multiplier=4)[0].address != addr(0x02)


def test_mru_multiplier_does_not_apply_after_iteration_zero() -> None:
    pool = [(addr(0x01), 4 * E18), (addr(0x02), E18), (addr(0x03), 3 * E18), (addr(0x04), 2 * E18)]
    mru = addr(0x02)
    # a seed where 0x02 is not drawn at i = 0, and where biasing it again at i = 1 would change the outcome
    seed = next(s for s in map(seed_n, range(256))
                if ref_committee(pool, [], s, 1, mru)[0] != mru
                and _biased_twice(pool, s, mru) != ref_committee(pool, [], s, 2, mru))
    rs = [runner(a, k, stake=w) for k, (a, w) in enumerate(pool)]
    got = draw_committee(rs, [], lambda r: r.stake, 2, seed, mru, mru_multiplier=4)
    assert [r.address for r in got] == ref_committee(pool, [], seed, 2, mru)


def _biased_twice(pool: list[tuple[bytes, int]], seed: bytes, mru: bytes) -> list[bytes]:
    """The forbidden variant that applies the MRU bias at i = 0 and i = 1."""
    first = ref_committee(pool, [], seed, 1, mru)[0]
    j0 = [a for a, _ in pool].index(first)
    rest = list(pool)
    last = rest.pop()
    if j0 < len(rest):
        rest[j0] = last
    ws = [w * 4 if a == mru else w for a, w in rest]
    return [first, rest[ref_walk(ws, ref_ticket(seed, 1, sum(ws)))][0]]


def test_mru_gives_no_bias_when_the_mru_runner_is_not_in_the_active_pool_at_iteration_zero() -> None:
    pool, seed = _mru_case()
    # the MRU runner is only in the fallback pool while a present runner exists: no bias anywhere
    present_r = runner(0x09, 9, stake=E18)
    rs = [runner(a, k, stake=w) for k, (a, w) in enumerate(pool)]
    got = draw_committee([present_r], rs, lambda r: r.stake, 2, seed, addr(0x02), mru_multiplier=4)
    expected = ref_committee([(present_r.address, E18)], pool, seed, 2)  # no MRU in the reference
    assert [r.address for r in got] == expected


def test_mru_address_absent_from_every_pool_changes_nothing() -> None:
    pool, seed = _mru_case()
    rs = [runner(a, k, stake=w) for k, (a, w) in enumerate(pool)]
    assert draw_committee(rs, [], lambda r: r.stake, 3, seed, addr(0x77), mru_multiplier=4) == \
        draw_committee(rs, [], lambda r: r.stake, 3, seed, None, mru_multiplier=4)


def test_under_fill_breaks_early_and_zero_m_draws_nothing() -> None:
    rs = [runner(1, 0), runner(2, 1)]
    got = draw_committee(rs[:1], rs[1:], weight, 5, seed_n(1), None, mru_multiplier=4)
    assert sorted(r.address for r in got) == [addr(1), addr(2)]
    assert draw_committee(rs[:1], rs[1:], weight, 0, seed_n(1), None, mru_multiplier=4) == []
    assert draw_committee([], [], weight, 3, seed_n(1), None, mru_multiplier=4) == []


def test_zero_total_weight_in_the_active_pool_stops_the_loop() -> None:
    zero = runner(1, 0, stake=0)
    other = runner(2, 1)
    assert draw_committee([zero], [other], weight, 2, seed_n(1), None, mru_multiplier=4) == []


def test_draw_does_not_mutate_its_inputs() -> None:
    present = [runner(1, 0), runner(2, 1), runner(3, 2)]
    fallback = [runner(4, 3)]
    before = (list(present), list(fallback))
    draw_committee(present, fallback, weight, 4, seed_n(3), addr(2), mru_multiplier=4)
    assert (present, fallback) == before
