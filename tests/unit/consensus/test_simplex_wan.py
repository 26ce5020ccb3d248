"""The Simplex engine on a simulated wide-area network (issue 33 §2), n = 16: per-link latency 30–150 ms, jitter,
1 % loss, one slow validator, every validator one CPU charged the scheme's costs (fixed here, so the test never
reads a clock; ``bench/consensus_scale.py`` feeds measured ones and runs n up to 100).

Safety and liveness are checked as in every simulation; the latency bounds are in simulated time (deterministic
for a seed), not wall time. ``SIM_SEEDS=N`` runs N seeds instead of the default 2.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import statistics

from cowboy_node.consensus.simplex.elector import Election
from cowboy_node.consensus.simplex.types import (
    Finalization,
    Finalize,
    Notarization,
    Notarize,
    Proposal,
    encode_message,
)
from cowboy_node.types.block import Round
from tests.unit.consensus.simnet import GENESIS, Sim, SimResult, check_safety
from tests.unit.consensus.simwan import FIXED_COSTS, Wan, WanFigures, percentile, wan_figures

N = 16
RUN_MS = 8000
DELTA_MS = 500
BUILD_MS, VERIFY_MS = 10, 5
SEEDS = range(int(os.environ.get("SIM_SEEDS", "0")) or 2)


def _run(seed: int, wan: Wan | None = None, election: Election = Election.RANDOM) -> tuple[Sim, SimResult,
                                                                                          WanFigures]:
    sim = Sim(N, seed, wan=wan or Wan(slow=1), delta=DELTA_MS, build_ms=BUILD_MS, verify_ms=VERIFY_MS,
              election=election)
    r = sim.run(RUN_MS)
    return sim, r, wan_figures(sim, r)


@functools.cache
def _default(seed: int) -> tuple[Sim, SimResult, WanFigures]:
    """The default WAN run of a seed, shared by the tests that only read it (each run is ~2 s of CPU)."""
    return _run(seed)


CRITICAL_CPU_MS = (FIXED_COSTS.pair_verify_us + 2 * FIXED_COSTS.partial_sign_us + FIXED_COSTS.recover_pair_us
                   + FIXED_COSTS.recover_known_seed_us) / 1000
"""The scheme work on the path from proposal to finalization: the leader's vote checked, two own partials signed
(the seed partial once), the notarization and the finalization assembled."""


def test_wan_n16_is_safe_live_and_finalizes_in_three_hops() -> None:
    for seed in SEEDS:
        _, r, f = _default(seed)
        check_safety(r)
        assert f.finalized >= 20, f"seed {seed}: {f.finalized} blocks in {RUN_MS} ms"
        assert f.nullified_per_1000 <= 100, f"seed {seed}: {f.nullified_per_1000} nullified per 1,000 views"
        # Simplex finalizes in three one-way hops (proposal, notarize, finalize): never faster than three of the
        # shortest links, and at the median within four median one-way delays plus the host's block build and
        # verify and the scheme work on that path (a quorum hop waits for the quorum-th fastest of its links,
        # about the 2/3 quantile, so three hops take ~3.4 medians here: the goal of 3.5 is a figure of
        # bench/consensus_scale.py, not a bound of this test; a fourth hop would break this one)
        assert f.latency_p50_ms >= 3 * Wan().lo_ms + BUILD_MS, f"seed {seed}: p50 {f.latency_p50_ms}"
        bound = 4 * f.median_one_way_ms + BUILD_MS + VERIFY_MS + CRITICAL_CPU_MS
        assert f.latency_p50_ms <= bound, f"seed {seed}: p50 {f.latency_p50_ms:.0f} ms > {bound:.0f} ms"
        assert f.latency_p99_ms <= 2 * DELTA_MS, f"seed {seed}: p99 {f.latency_p99_ms:.0f} ms"


def test_wan_runs_are_deterministic_for_a_seed() -> None:
    a, ra, fa = _default(0)
    b, rb, fb = _run(0)
    assert fa == fb
    assert a.stats.latencies_ms == b.stats.latencies_ms and a.stats.bytes_sent == b.stats.bytes_sent
    assert [ra.logs[i].finalized for i in ra.honest] == [rb.logs[i].finalized for i in rb.honest]
    _, _, fc = _default(1)
    assert fc.latency_p50_ms != fa.latency_p50_ms or fc.median_link_ms != fa.median_link_ms


def test_wan_links_are_symmetric_clipped_and_drawn_from_the_seed() -> None:
    wan = Wan()
    a, b = Sim(N, 3, wan=wan), Sim(N, 3, wan=wan)
    links = a.stats.links_ms
    assert len(links) == N * (N - 1) // 2 and links == b.stats.links_ms
    assert all(wan.lo_ms <= x <= wan.hi_ms for x in links)
    assert 55 <= statistics.median(links) <= 90  # the log-normal's median is 70 ms
    assert links != Sim(N, 4, wan=wan).stats.links_ms
    m = a._link_us
    assert all(m[i][j] == m[j][i] > 0 for i in range(N) for j in range(N) if i != j)
    assert len(a.stats.slow) == 1 and a.stats.slow == b.stats.slow


def test_wan_loses_about_one_percent_of_messages() -> None:
    sim, _, _ = _default(0)
    assert sim.stats.sent > 10_000
    assert 0.005 <= sim.stats.lost / sim.stats.sent <= 0.015


def test_a_validator_is_one_cpu_events_wait_while_it_is_busy() -> None:
    # 3 ms per message received: a validator receives ~4 messages per peer per view, so its CPU is busy for most
    # of a view and votes queue behind one another; finalization is then much later, not just 3 ms per hop later
    heavy = Wan(slow=1, costs=dataclasses.replace(FIXED_COSTS, message_us=3000))
    _, _, light = _default(0)
    _, r_heavy, loaded = _run(0, heavy)
    check_safety(r_heavy)
    assert loaded.cpu_ms_per_view >= light.cpu_ms_per_view + 100
    assert loaded.latency_p50_ms >= light.latency_p50_ms + 30, (light.latency_p50_ms, loaded.latency_p50_ms)


def test_a_slow_leader_finalizes_later() -> None:
    sim, _, _ = _run(1, Wan(slow=1, slow_delay_ms=50), Election.ROUND_ROBIN)  # it leads every 16th view
    (slow,) = sim.stats.slow
    st = sim.stats
    by_slow = [ms for ms, v in zip(st.latencies_ms, st.latency_views, strict=True) if st.proposers.get(v) == slow]
    others = [ms for ms, v in zip(st.latencies_ms, st.latency_views, strict=True) if st.proposers.get(v) != slow]
    assert by_slow and others
    assert statistics.median(by_slow) >= statistics.median(others) + 40  # its proposal leaves 50 ms late


def test_bytes_sent_count_every_vote_and_certificate_to_every_peer() -> None:
    _, _, f = _default(0)
    p = Proposal(Round(0, 1), 0, GENESIS, bytes(32))
    sig = bytes(48)
    per_view = sum(len(encode_message(m)) for m in (Notarize(p, 1, sig, sig), Finalize(p, 1, sig, sig),
                                                    Notarization(p, sig, sig), Finalization(p, sig, sig)))
    # each honest validator broadcasts its notarize, its finalize and both certificates of every finalized view
    floor = (N - 1) * per_view * f.finalized / f.views
    assert floor <= f.bytes_per_validator_per_view <= 2 * (N - 1) * per_view
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0 and percentile([5.0], 99) == 5.0


def test_a_validator_whose_votes_arrive_after_finalization_keeps_its_leader_views() -> None:
    """A validator 100 ms slower than the rest (round-robin: it leads every 16th view): the others finalize each
    view before its votes arrive, so they are too late to count towards any certificate. They still show it alive
    (the engine counts a late vote once its signature verifies), so it is never presumed down and its views are
    not nullified on entry. The bound: no more of its views nullified than in the same network with
    ``skip_timeout`` off, where no validator is ever presumed down — whatever nullifies its views there (loss, a
    timeout) is the network's doing, not the skip rule's."""
    skip = 10
    for seed in SEEDS:
        runs = {}
        for skip_timeout in (skip, 0):
            sim = Sim(N, seed, wan=Wan(slow=1, slow_delay_ms=100), delta=DELTA_MS, build_ms=BUILD_MS,
                      verify_ms=VERIFY_MS, election=Election.ROUND_ROBIN, skip_timeout=skip_timeout)
            r = sim.run(2 * RUN_MS)
            check_safety(r)
            runs[skip_timeout] = sim, r
        sim, r = runs[skip]
        (slow,) = sim.stats.slow
        st = sim.stats
        assert st.late_votes[slow] > st.votes[slow] / 2, f"seed {seed}: its votes are not mostly late"
        views = max(r.views[i] for i in r.honest)
        assert len([v for v in range(skip + 2, views + 1) if v % N == slow]) >= 2  # it leads after skip_timeout
        nullified = {k: sorted(v for v in s.stats.nullified if v % N == slow) for k, (s, _) in runs.items()}
        assert len(nullified[skip]) <= len(nullified[0]), f"seed {seed}: its views nullified {nullified}"
