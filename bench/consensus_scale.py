"""Consensus at internet scale (issue 33 §2): prints ONE JSON object with one row per validator count n.

Per n (default 4, 16, 64, 100), in one run:

1. Real BLS CPU per view per validator (measured, ``time.process_time``): validator 0's real :class:`Engine` with
   the real :class:`ThresholdScheme` handles every message of a view as they come off the wire (CBOR decode
   included): the leader's proposal, the other ``n − 1`` notarize votes, the ``n − 1`` copies of the notarization
   its peers relay, then the same for finalize — signing its own two votes (four partials). The engine verifies
   lazily at quorum: a quorum's partials aggregated into the certificate, one pairing check; on failure one
   aggregated check of the partials, bisected to the bad signers (``cowboy_node/consensus/batch_verify.py``).
   Same-run baselines: the same view with every vote verified on arrival, one pairing product per vote
   (``one_by_one``); every partial of the view batch-verified (``batch_all``, commonware's batcher checking all it
   receives); and a view where one signer's partials are forged (``forged``), with the bisecting checked path and
   with the previous one (a batch, then one by one: ``forged_one_by_one``).
2. The costs of each scheme operation at this n, timed once here (:class:`CryptoCosts`), fed into the
   deterministic simulator (``tests/unit/consensus/simnet.py``) with its WAN model: per-link one-way latency
   log-normal (median 70 ms, σ 0.35, clipped to 30–150 ms), exponential jitter (mean 5 ms), 1 % loss,
   ``max(1, round(0.05·n))`` slow validators (3× CPU, +50 ms per output), Δ = 500 ms, random leader election.
   Safety (``check_safety``) is checked on every run. Same-run baseline: the same network with no processing at
   all (``network_only``: the three hops alone). Reported: finalization latency p50/p99 (from the leader's
   ProposalWanted to each honest validator's Finalized, simulated time), its ratio to the median one-way delay and
   the goal ``3.5 × median one-way + build + verify``, views nullified per 1,000, bytes sent per validator per
   view.

The machine's load average (``os.getloadavg``) is in the JSON: figures taken on a loaded machine are provisional.

Usage: python bench/consensus_scale.py [--ns 4,16,64,100] [--views 4] [--sim-ms 4:60000,16:30000,64:15000,100:12000]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cowboy_node.consensus.batch_verify import bad_partials
from cowboy_node.consensus.pair_check import check_two
from cowboy_node.consensus.simplex.elector import Election
from cowboy_node.consensus.simplex.engine import Config, Engine, Finalized, Output, ProposalWanted, VerifyBlock
from cowboy_node.consensus.simplex.scheme import ThresholdScheme, quorum_size
from cowboy_node.consensus.simplex.types import (
    Finalization,
    Finalize,
    Notarization,
    Notarize,
    Proposal,
    decode_message,
    encode_message,
    finalize_message,
    notarize_message,
    seed_message,
)
from cowboy_node.crypto import bls, threshold
from cowboy_node.types.block import Round
from tests.unit.consensus.simnet import GENESIS, Sim, check_safety, fast_schemes
from tests.unit.consensus.simwan import CryptoCosts, Wan, wan_figures

BUILD_MS, VERIFY_MS, DELTA_MS = 10, 5, 500
"""Block build and verify time of the simulated host, and Δ (leader timeout 2Δ = 1 s, advance 3Δ)."""


def _cpu_us(f: Callable[[], object], k: int, cold: bool = True) -> int:
    """CPU µs of one call of ``f`` (mean of ``k``); ``cold``: each call hashes its messages to G1 afresh (the memo
    cleared first), an upper bound of a scheme operation's cost now that a view hashes each message once."""
    t0 = time.process_time()
    for _ in range(k):
        if cold:
            _cold_hashes()
        f()
    return max(1, round((time.process_time() - t0) / k * 1e6))


# ------------------------------------------------------------------------------------------------ one real view


class _View:
    """The wire bytes of every message validator 0 receives in one view (signed ahead, outside the timing)."""

    def __init__(self, dealing: threshold.Dealing, n: int, view: int, parent_view: int, parent: bytes,
                 forger: int | None) -> None:
        self.proposal = Proposal(Round(0, view), parent_view, parent, view.to_bytes(32, "big"))
        self.leader = view % n  # round-robin
        q = quorum_size(n)
        p, seed_m = self.proposal, seed_message(self.proposal.round)

        def sign(j: int, m: bytes) -> bytes:
            if j == forger:
                return threshold.partial_sign(dealing.shares[j], m + b"forged")
            return threshold.partial_sign(dealing.shares[j], m)

        others = [j for j in range(1, n)]
        order = random.Random(view).sample(others, len(others))
        if forger is not None:  # the forger is among the first quorum: the optimistic assembly fails
            order.remove(forger)
            order.insert(0, forger)
        self.notarizes = [Notarize(p, j, sign(j, notarize_message(p)), sign(j, seed_m)) for j in order]
        order2 = random.Random(-view).sample(others, len(others))  # finalize votes arrive in another order
        if forger is not None:
            order2.remove(forger)
            order2.insert(0, forger)
        self.finalizes = [Finalize(p, j, sign(j, finalize_message(p)), sign(j, seed_m)) for j in order2]
        good = [j for j in range(n) if j != forger][:q]
        nz_sig = threshold.recover([(j + 1, threshold.partial_sign(dealing.shares[j], notarize_message(p)))
                                    for j in good], q)
        fz_sig = threshold.recover([(j + 1, threshold.partial_sign(dealing.shares[j], finalize_message(p)))
                                    for j in good], q)
        seed = threshold.recover([(j + 1, threshold.partial_sign(dealing.shares[j], seed_m)) for j in good], q)
        self.notarization = Notarization(p, nz_sig, seed)
        self.finalization = Finalization(p, fz_sig, seed)
        self.wire: list[tuple[int, bytes]] = []
        """(sender, bytes) in arrival order."""
        lead = [x for x in self.notarizes if x.signer == self.leader]
        rest = [x for x in self.notarizes if x.signer != self.leader]
        for x in lead + rest:
            self.wire.append((x.signer, encode_message(x)))
        self.wire += [(j, encode_message(self.notarization)) for j in others]
        self.wire += [(x.signer, encode_message(x)) for x in self.finalizes]
        self.wire += [(j, encode_message(self.finalization)) for j in others]


def _views(dealing: threshold.Dealing, n: int, count: int, forger: int | None) -> list[_View]:
    out, parent_view, parent = [], 0, GENESIS
    for v in range(1, count + 1):
        view = _View(dealing, n, v, parent_view, parent, forger)
        out.append(view)
        parent_view, parent = v, view.proposal.payload
    return out


def _engine_cpu_ms(dealing: threshold.Dealing, n: int, views: Sequence[_View],
                   scheme_cls: type[ThresholdScheme]) -> float:
    """CPU ms per view of validator 0's engine handling ``views`` (each must finalize)."""
    scheme = scheme_cls.from_dealing(dealing, 0)
    engine = Engine(Config(me=0, delta_ms=10**9, election=Election.ROUND_ROBIN, genesis=GENESIS), scheme)
    engine.start(0)
    finalized = 0
    _cold_hashes()
    t0 = time.process_time()
    for v in views:
        outs: list[Output] = []
        for sender, data in v.wire:
            if sender == 0:
                continue
            outs = engine.receive(sender, decode_message(data), 1)
            for o in outs:
                if isinstance(o, VerifyBlock):
                    outs += engine.verified(o.proposal, True, 1)
                elif isinstance(o, ProposalWanted):
                    outs += engine.propose(o.round, v.proposal.payload, 1)
                elif isinstance(o, Finalized):
                    finalized += 1
    cpu = time.process_time() - t0
    if finalized != len(views):
        raise RuntimeError(f"n={n}: {finalized} of {len(views)} views finalized")
    return cpu / len(views) * 1000


def _cold_hashes() -> None:
    """Forget the memoised hashes to G1 (``bls.hash_to_g1``): signing the views ahead hashed every message of
    them, and a validator hashes each message of a view once, inside the view."""
    bls.hash_to_g1.cache_clear()


class _OneByOneFallback(ThresholdScheme):
    """The checked path before this issue (``threshold.recover_checked``: a batch of a quorum, then each partial
    of it alone on failure): the same-run baseline of the bisection."""

    def recover(self, message: bytes, partials: Sequence[tuple[int, bytes]]) -> tuple[bytes | None, frozenset[int]]:
        keys = {i + 1: pk for i, pk in enumerate(self.public_parts()[1])}
        r = threshold.recover_checked([(i + 1, p) for i, p in partials], self.quorum, message=message,
                                      public_keys=keys)
        return r.signature, frozenset(i - 1 for i in r.bad)


def _one_by_one_cpu_ms(dealing: threshold.Dealing, n: int, views: Sequence[_View]) -> float:
    """Baseline: decode every message, verify each vote's two partials on arrival (one pairing product per vote),
    recover each certificate and seed from a quorum of verified partials, sign the own four partials."""
    scheme = ThresholdScheme.from_dealing(dealing, 0)
    pks = [bls.decode_g2(pk) for pk in dealing.share_public_keys]
    q = quorum_size(n)
    _cold_hashes()
    t0 = time.process_time()
    for v in views:
        p = v.proposal
        seed_m = seed_message(p.round)
        received = [(sender, decode_message(data)) for sender, data in v.wire if sender != 0]
        for kind, msg in ((Notarize, notarize_message(p)), (Finalize, finalize_message(p))):
            scheme.sign(msg)
            scheme.sign(seed_m)
            good: list[tuple[int, bytes, bytes]] = []
            for _, m in received:  # the relayed certificates are dropped: already held
                if isinstance(m, kind) and check_two(pks[m.signer], msg, bls.decode_g1(m.signature), seed_m,
                                                     bls.decode_g1(m.seed)):
                    good.append((m.signer, m.signature, m.seed))
            chosen = sorted(good)[:q]
            threshold.recover([(j + 1, s) for j, s, _ in chosen], q)
            threshold.recover([(j + 1, s) for j, _, s in chosen], q)
    return (time.process_time() - t0) / len(views) * 1000


def _batch_all_cpu_ms(dealing: threshold.Dealing, n: int, views: Sequence[_View]) -> float:
    """Every partial of the view checked, in four aggregated batches (notarize and finalize, signature and seed
    partials), bisected on failure, then the certificates recovered: commonware's batcher verifying all it gets."""
    pks = dict(enumerate(bls.decode_g2(pk) for pk in dealing.share_public_keys))
    q = quorum_size(n)
    _cold_hashes()
    t0 = time.process_time()
    for v in views:
        p = v.proposal
        seed_m = seed_message(p.round)
        for votes, msg in ((v.notarizes, notarize_message(p)), (v.finalizes, finalize_message(p))):
            decoded = [decode_message(encode_message(x)) for x in votes]
            bad = bad_partials(pks, msg, [(x.signer, x.signature) for x in decoded])  # type: ignore[union-attr]
            bad |= bad_partials(pks, seed_m, [(x.signer, x.seed) for x in decoded])  # type: ignore[union-attr]
            chosen = sorted((x.signer, x.signature) for x in decoded if x.signer not in bad)[:q]  # type: ignore[union-attr]
            threshold.recover([(j + 1, s) for j, s in chosen], q)
    return (time.process_time() - t0) / len(views) * 1000


# ------------------------------------------------------------------------------------------------ costs → sim


def measure_costs(dealing: threshold.Dealing, n: int) -> CryptoCosts:
    """Each scheme operation's CPU µs at this n on this machine (the sim's virtual processing time)."""
    q = quorum_size(n)
    s = ThresholdScheme.from_dealing(dealing, None)
    m, sm = b"cowboy-cost-probe" * 4, b"cowboy-seed-probe"
    sigs = [(i, threshold.partial_sign(dealing.shares[i], m)) for i in range(n)]
    seeds = [(i, threshold.partial_sign(dealing.shares[i], sm)) for i in range(n)]
    group_sig = threshold.recover([(i + 1, p) for i, p in sigs[:q]], q)
    reps = 20 if n <= 16 else 6
    fresh = [ThresholdScheme.from_dealing(dealing, None) for _ in range(3 * reps)]  # no verification cache hit

    def one_of(f: Callable[[ThresholdScheme], object]) -> Callable[[], object]:
        return lambda: f(fresh.pop())

    sign = _cpu_us(lambda: threshold.partial_sign(dealing.shares[0], m), reps)
    verify = _cpu_us(one_of(lambda x: x.verify(1, m, sigs[1][1])), reps)
    pair = _cpu_us(one_of(lambda x: x.verify_pair(1, m, sigs[1][1], sm, seeds[1][1])), reps)
    recover_pair = _cpu_us(one_of(lambda x: x.recover_pair(m, sigs, sm, seeds)), reps // 2)
    s.recover_pair(m, sigs, sm, seeds)  # the seed is now known to s
    known = _cpu_us(lambda: s.recover_pair(m + b"2", sigs, sm, seeds), 3)  # bad sigs: interpolation + check
    cert = _cpu_us(lambda: bls.verify(dealing.group_public_key, m, group_sig), reps)
    checked = _cpu_us(one_of(lambda x: x.recover(m, sigs)), 2)
    fast = fast_schemes(n)(0)
    vote = Notarize(Proposal(Round(0, 1), 0, GENESIS, bytes(32)), 1, sigs[1][1], seeds[1][1])
    wire = encode_message(vote)
    engine = Engine(Config(me=0, election=Election.ROUND_ROBIN), fast)
    engine.start(0)
    message = _cpu_us(lambda: engine.receive(1, decode_message(wire), 0), 200, cold=False)
    return CryptoCosts(partial_sign_us=sign, partial_verify_us=verify, pair_verify_us=pair,
                       recover_pair_us=recover_pair, recover_known_seed_us=known, certificate_verify_us=cert,
                       recover_checked_us=checked, message_us=message)


ZERO_COSTS = CryptoCosts(0, 0, 0, 0, 0, 0, 0, 0)


def network_only(n: int, until_ms: int, seed: int) -> dict[str, object]:
    """The same WAN with no processing time at all (no scheme costs, no build, no verify, no slow CPU): what the
    three hops alone cost — the same-run baseline that splits the latency into network and processing."""
    sim = Sim(n, seed, wan=Wan(slow=0, costs=ZERO_COSTS), delta=DELTA_MS, build_ms=0, verify_ms=0,
              election=Election.RANDOM)
    r = sim.run(until_ms)
    check_safety(r)
    f = wan_figures(sim, r)
    return {"network_only_latency_p50_ms": round(f.latency_p50_ms, 1),
            "network_only_ratio_p50_to_median_one_way": round(f.latency_p50_ms / f.median_one_way_ms, 2)}


def simulate(n: int, costs: CryptoCosts, until_ms: int, seed: int) -> dict[str, object]:
    wan = Wan(slow=max(1, round(0.05 * n)), costs=costs)
    t0 = time.perf_counter()
    sim = Sim(n, seed, wan=wan, delta=DELTA_MS, build_ms=BUILD_MS, verify_ms=VERIFY_MS, election=Election.RANDOM)
    r = sim.run(until_ms)
    check_safety(r)
    f = wan_figures(sim, r)
    if f.finalized < 3:
        raise RuntimeError(f"n={n}: only {f.finalized} blocks finalized in {until_ms} ms")
    goal = 3.5 * f.median_one_way_ms + BUILD_MS + VERIFY_MS
    return {
        "sim_ms": until_ms, "sim_wall_s": round(time.perf_counter() - t0, 1), "views": f.views,
        "finalized_blocks": f.finalized, "slow_validators": sorted(sim.stats.slow),
        "latency_p50_ms": round(f.latency_p50_ms, 1), "latency_p99_ms": round(f.latency_p99_ms, 1),
        "median_one_way_ms": round(f.median_one_way_ms, 1), "median_link_ms": round(f.median_link_ms, 1),
        "ratio_p50_to_median_one_way": round(f.latency_p50_ms / f.median_one_way_ms, 2),
        "goal_p50_ms": round(goal, 1), "latency_goal_met": f.latency_p50_ms <= goal,
        "nullified_per_1000": round(f.nullified_per_1000, 1),
        "bytes_per_validator_per_view": round(f.bytes_per_validator_per_view),
        "sim_cpu_ms_per_view": round(f.cpu_ms_per_view, 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--ns", default="4,16,64,100")
    ap.add_argument("--views", type=int, default=4, help="real-BLS views measured per n and mode")
    ap.add_argument("--sim-ms", default="4:60000,16:30000,64:15000,100:12000",
                    help="simulated ms per n (n:ms,...)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-sim", action="store_true")
    a = ap.parse_args(argv)
    ns = [int(x) for x in a.ns.split(",")]
    sim_ms = {int(k): int(v) for k, v in (kv.split(":") for kv in a.sim_ms.split(","))}
    load_before = os.getloadavg()
    rows = []
    for n in ns:
        dealing = threshold.deal(0xC0FFEE + n, n, quorum_size(n), bytes([n % 256]) * 32)
        views = _views(dealing, n, a.views, None)
        forged = _views(dealing, n, a.views, forger=1)
        row: dict[str, object] = {"n": n, "quorum": quorum_size(n)}
        cpu = _engine_cpu_ms(dealing, n, views, ThresholdScheme)
        row["cpu_ms_per_view_per_validator"] = round(cpu, 2)
        row["baseline_one_by_one_cpu_ms_per_view"] = round(_one_by_one_cpu_ms(dealing, n, views), 2)
        row["batch_all_cpu_ms_per_view"] = round(_batch_all_cpu_ms(dealing, n, views), 2)
        row["forged_cpu_ms_per_view"] = round(_engine_cpu_ms(dealing, n, forged, ThresholdScheme), 2)
        row["forged_one_by_one_cpu_ms_per_view"] = round(_engine_cpu_ms(dealing, n, forged, _OneByOneFallback), 2)
        row["cpu_goal_met"] = cpu <= 30.0
        costs = measure_costs(dealing, n)
        row["costs_us"] = {k: getattr(costs, k) for k in costs.__dataclass_fields__}
        if not a.no_sim:
            row.update(simulate(n, costs, sim_ms.get(n, 15000), a.seed))
            row.update(network_only(n, sim_ms.get(n, 15000) // 2, a.seed))
        rows.append(row)
        print(json.dumps({"progress": row}), file=sys.stderr, flush=True)
    growth = None
    by_n = {int(str(r["n"])): float(str(r["cpu_ms_per_view_per_validator"])) for r in rows}
    if len(by_n) >= 2:
        lo, hi = min(by_n), max(by_n)
        growth = {"from_n": lo, "to_n": hi, "cpu_ratio": round(by_n[hi] / by_n[lo], 2), "n_ratio": hi / lo,
                  "exponent": round(math.log(by_n[hi] / by_n[lo]) / math.log(hi / lo), 2),
                  "no_worse_than_linear": by_n[hi] / by_n[lo] <= hi / lo}
    print(json.dumps({
        "bench": "consensus_scale",
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "provisional": "figures from a loaded machine are provisional; final figures on a quiet machine",
        "wan": {"link_ms": "log-normal median 70, sigma 0.35, clipped 30..150", "jitter_ms_mean": 5, "loss": 0.01,
                "slow": "max(1, round(0.05 n)) validators, 3x CPU, +50 ms per output", "delta_ms": DELTA_MS,
                "build_ms": BUILD_MS, "verify_ms": VERIFY_MS, "election": "random"},
        "rows": rows,
        "cpu_growth": growth,
    }, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
