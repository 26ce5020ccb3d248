"""Faults under load with real processes (issue 30 §5): a proxied 4-validator network (``cowboy-node testnet``
homes, ``cowboy-node run`` processes, every peer link through a :class:`~tests.e2e.udp_proxy.UdpLink`) takes a
steady load of signed transfers (:class:`~tests.e2e.load.LoadGenerator`, ≥ 300 offered per second from
``SENDERS`` genesis-funded accounts, for the whole module) while one perturbation after another hits it:

* ``kill9``: kill -9 of a validator, restarted after the fault window;
* ``sigstop_leader``: SIGSTOP of the current leader, SIGCONT after the window;
* ``partition``: every link to and from one validator cut, healed after the window;
* ``latency``: every link delayed 100 ± 50 ms (uniform, seeded) with 5 % loss each way, cleared after the window
  (the relay's impairment: this machine's kernel has no ``netem`` qdisc, so ``tc netem`` is not available);
* ``wipe`` (last: the longest catch-up): a validator stopped, its data directory deleted, restarted from genesis
  (it must sync the whole chain and, with the double-sign guard, not vote until it has watched enough views).

After each one: every validator has the same block hash and state root at every height (each stretch checked
once, so the whole chain is covered), every transfer the load got accepted (HTTP 200) is in exactly one block and
no block repeats a transaction (every block scanned on one validator), the healed validator is back at the head of
the others within ``CATCH_UP_S`` (60 s), and ``GET /consensus/evidence`` on every validator names none of them (all
four are honest here). Each perturbation also checks that the others finalized blocks during the fault, and prints
one JSON line of its figures (``FAULTS_UNDER_LOAD {...}``); with ``FAULTS_SUMMARY=path`` the lines are appended to
that file too.

The network is module-scoped: the perturbations run in sequence on one network under one load (each starts only
once every validator is at the head, and fails if one is not within ``HEALTHY_S``), which is sound because each
one ends healed and checked. A validator still behind after its catch-up bound gets no load of its own. The default run
(``make test``) is short: ``kill9`` and ``partition`` with a ``SHORT_FAULT_S`` window. ``FAULTS_FULL=1`` (``make
e2e-faults``) runs all five with a ``FULL_FAULT_S`` window.

The validator taken out is left out of the load's targets first, and the transfers it accepted are included
before the fault starts (so no accepted transfer sits only in a pool that the fault destroys: a kill -9 or a wipe
loses the mempool by design); it is given load again once it is back at the head.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from tests.e2e.load import Accepted, LoadGenerator, sender_keys
from tests.e2e.netproc import RpcUnavailable, Testnet

FULL = os.environ.get("FAULTS_FULL", "") not in ("", "0")
RATE = 320.0
"""Transfers offered per second (a margin over the 300/s the issue asks for: the pacing loses a little)."""
MIN_OFFERED_PER_S = 300.0
SENDERS = 600
RATE_ASSERTED = ("opt-in: the >= 300/s offered rate is asserted in the full run only (make e2e-faults): the "
                 "default run "
                 "shares the two cores with another process-test module (make test runs them two at a time), so "
                 "there the generator's rate measures the host, not the node; it is still reported in each record")
FULL_FAULT_S = 25.0
SHORT_FAULT_S = 8.0
FAULT_S = float(os.environ.get("FAULTS_SECONDS") or (FULL_FAULT_S if FULL else SHORT_FAULT_S))
"""How long each fault lasts (under load the whole time); ``FAULTS_SECONDS`` overrides."""
MIN_FAULT_BLOCKS = 3 if FULL else 1
"""Blocks the others must finalize during the fault window. The full run asserts the figure (3 in the window); the
default run shares two cores with another process-test module and often a busy host, so there it asserts only that
the others kept finalizing."""
CATCH_UP_S = 60.0
"""The healed validator is back at the head within this, counted from its restart / resume / heal (full run)."""
CATCH_UP_MAX_LOAD_FACTOR = 3.0
"""Default run only: CATCH_UP_S is stretched by the host's load per core (1-minute load average ÷ cores, at least 1,
at most this), so a host loaded far beyond the suite's own processes slows the check, not fails it."""


def _catch_up_budget_s() -> float:
    if FULL:
        return CATCH_UP_S
    per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    return CATCH_UP_S * min(CATCH_UP_MAX_LOAD_FACTOR, max(1.0, per_core))
HEALTHY_S = 60.0
"""Before a perturbation every validator must be at the head within this."""
DRAIN_S = 30.0
"""The transfers the victim accepted are included within this before the fault starts."""
INCLUDE_S = 60.0
"""Every accepted transfer is included within this after the healed validator is back."""
FORM_S = 60.0
OBSERVE_S = 60.0
"""A validator not back at the head within CATCH_UP_S is watched this much longer, for the figures only (does it
still move, and when does it get there?): the check has already failed."""
IMPAIR = {"delay_ms": 100.0, "jitter_ms": 50.0, "loss": 0.05}
BLOCK_TIME_MS = 500

pytestmark = pytest.mark.timeout(int(420 + 2 * FAULT_S + (CATCH_UP_MAX_LOAD_FACTOR - 1) * CATCH_UP_S))


@dataclass
class Run:
    """The module's network, its load, and what has been checked so far."""

    net: Testnet
    load: LoadGenerator
    scan_on: int = 0
    """Validator whose blocks are scanned for transactions (one that is never perturbed)."""
    accepted: dict[str, Accepted] = field(default_factory=dict)
    included: dict[str, list[int]] = field(default_factory=dict)
    """Every transaction hash seen in a block → the heights it appeared at (more than one: a duplicate)."""
    duplicates: dict[str, list[int]] = field(default_factory=dict)
    scanned: int = 0
    agreed: int = 0
    start_height: int = 0

    def take(self) -> list[Accepted]:
        got, _ = self.load.snapshot()
        for a in got:
            self.accepted[a.tx_hash] = a
        return got

    def scan(self) -> int:
        """Read every block above the last one scanned on ``scan_on``; its height."""
        top = self.net.height(self.scan_on)
        for h in range(self.scanned + 1, top + 1):
            b = self.net.block(self.scan_on, h)
            assert b is not None, f"validator {self.scan_on} has no block {h} below its height {top}"
            seen: set[str] = set()
            for tx in b.get("transactions", []):
                t = str(tx if isinstance(tx, str) else tx.get("hash", tx.get("tx_hash")))
                if t in seen:
                    self.duplicates.setdefault(t, []).append(h)
                seen.add(t)
                heights = self.included.setdefault(t, [])
                heights.append(h)
                if len(heights) > 1:
                    self.duplicates[t] = heights
            self.scanned = h
        return top


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    net = Testnet.create(tmp_path_factory.mktemp("faults"), n=4, block_time_ms=BLOCK_TIME_MS, proxied=True)
    load: LoadGenerator | None = None
    try:
        keys = sender_keys(SENDERS)
        net.fund_in_genesis([private_key_to_address(k) for k in keys])
        chain_id = json.loads((net.validators[0].home / "genesis.json").read_text())["chain_id"]
        try:
            net.start(timeout=FORM_S)
            net.wait_heights(2, FORM_S)
        except BaseException:
            print(net.logs(60))
            raise
        load = LoadGenerator([v.rpc_url for v in net.validators], chain_id, keys, rate=RATE)
        yield Run(net, load, start_height=net.height(0))
    finally:
        try:
            if load is not None:
                _, stats = load.stop()
                print("FAULTS_UNDER_LOAD_TOTAL " + json.dumps(stats.figures()))
        finally:
            net.close()


# -- helpers ------------------------------------------------------------------------------------
def _top(net: Testnet, among: list[int]) -> int:
    hs = net.heights(among)
    assert all(h is not None for h in hs.values()), f"a validator does not answer: {hs}"
    return max(h for h in hs.values() if h is not None)


def _at_head(net: Testnet, i: int, others: list[int]) -> bool:
    """``i`` has reached the highest of ``others`` (read just before it)."""
    top = _top(net, others)
    return net.height(i) >= top


def _evidence(net: Testnet) -> dict[int, list[dict[str, Any]]]:
    """Evidence entries naming a validator of this network (all honest), per validator that reports them."""
    named: dict[int, list[dict[str, Any]]] = {}
    keys = {v.public_key for v in net.validators}
    for i in range(len(net)):
        code, body = net.get(i, "/consensus/evidence?limit=1000")
        assert code == 200, f"validator {i} /consensus/evidence: {code} {body}"
        entries = body.get("evidence", body) if isinstance(body, dict) else body
        assert isinstance(entries, list), f"validator {i} /consensus/evidence: {body}"
        bad = [e for e in entries if e.get("signer") in range(len(net)) or str(e.get("signer")).lower() in keys]
        if bad:
            named[i] = [{k: e.get(k) for k in ("signer", "view", "reason")} for e in bad]
    return named


class Gaps:
    """Largest height gap between the most and the least advanced validator seen by :meth:`sample`."""

    def __init__(self, net: Testnet, among: list[int]) -> None:
        self.net, self.among, self.max_gap = net, among, 0

    def sample(self) -> None:
        """Heights of the live validators that answer (a paused one is not asked: it would hang the request)."""
        live = [i for i in self.among if self.net.validators[i].live]
        hs = [h for h in self.net.heights(live).values() if h is not None]
        if len(hs) >= 2:
            self.max_gap = max(self.max_gap, max(hs) - min(hs))


def _hold(seconds: float, every: Callable[[], None]) -> None:
    """Keep the fault on for ``seconds`` (a fixed fault window, not a wait for a result), sampling meanwhile."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        every()
        time.sleep(min(0.5, max(0.0, left)))


def _view(net: Testnet, i: int) -> int | None:
    try:
        return int(net.status(i)["consensus"]["view"])
    except (RpcUnavailable, AssertionError, KeyError, TypeError):
        return None


def _log_excerpt(net: Testnet, i: int, lines: int = 12) -> list[str]:
    """The last ``lines`` lines of validator ``i``'s log that are not routine commits."""
    keep = [ln for ln in net.validators[i].tail(4000).splitlines() if "block committed" not in ln]
    return [ln[:300] for ln in keep[-lines:]]


def _emit(record: dict[str, Any]) -> None:
    line = json.dumps(record, sort_keys=False)
    print("FAULTS_UNDER_LOAD " + line)
    path = os.environ.get("FAULTS_SUMMARY")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def _perturb(run: Run, name: str, victim: int | None, out: Callable[[], None], back: Callable[[], None]) -> None:
    """Take ``victim`` out (``out``) under load for FAULT_S, bring it back (``back``), then check everything; with
    ``victim`` None the fault hits every link and no validator is left out of the load."""
    net, load = run.net, run.load
    everyone = list(range(len(net)))
    others = [i for i in everyone if i != victim]
    checks: dict[str, Any] = {}
    record: dict[str, Any] = {"perturbation": name, "victim": victim, "fault_s": FAULT_S, "checks": checks}
    # Start from a network at the head, with every validator taking load.
    net.wait_for("every validator at the head before the perturbation",
                 lambda: all(_at_head(net, i, everyone) for i in everyone), HEALTHY_S, interval=0.25)
    load.set_targets(everyone)
    run.take()
    _, stats0 = load.snapshot()
    if victim is not None:
        load.set_targets(others)
        load.wait_idle(victim)
        mine = [a.tx_hash for a in run.take() if a.target == victim] + \
            [h for h, a in run.accepted.items() if a.target == victim and h not in run.included]

        def drained() -> bool:
            run.scan()
            return all(h in run.included for h in mine)

        net.wait_for(f"the {len(mine)} transfers validator {victim} accepted to be included", drained, DRAIN_S,
                     interval=0.25)
    gaps = Gaps(net, everyone)
    h_start = _top(net, others)
    view_start = _view(net, run.scan_on)
    t_fault = time.monotonic()
    out()
    _hold(FAULT_S, gaps.sample)
    h_end = max((h for h in net.heights(others).values() if h is not None), default=h_start)
    record["blocks_during_fault"] = h_end - h_start
    record["others_blocks_per_s_during_fault"] = round((h_end - h_start) / FAULT_S, 2)
    view_end = _view(net, run.scan_on)
    record["views_during_fault"] = None if view_start is None or view_end is None else view_end - view_start
    checks["others_finalized_during_fault"] = h_end - h_start >= MIN_FAULT_BLOCKS
    back_at = time.monotonic()
    back()
    h_back = _top(net, others)
    # Catch-up: the healed validator (every validator after a link fault) at the head of the others.
    caught: float | None = None
    catch_up_to = [victim] if victim is not None else everyone
    budget = _catch_up_budget_s()
    record["catch_up_budget_s"] = round(budget, 1)
    deadline = back_at + budget
    while time.monotonic() < deadline:
        gaps.sample()
        try:
            if all(_at_head(net, i, everyone if victim is None else others) for i in catch_up_to):
                caught = time.monotonic() - back_at
                break
        except (RpcUnavailable, AssertionError):
            pass
        time.sleep(0.25)
    if caught is None:  # failed: watch a while longer to tell "slow" from "stuck" in the figures
        record["heights_at_deadline"] = net.heights(everyone)
        trail: list[tuple[float, dict[int, int | None]]] = []
        end = time.monotonic() + OBSERVE_S
        while time.monotonic() < end:
            trail.append((round(time.monotonic() - back_at, 1), net.heights(everyone)))
            with contextlib.suppress(RpcUnavailable, AssertionError):
                if all(_at_head(net, i, everyone if victim is None else others) for i in catch_up_to):
                    record["at_head_after_s"] = round(time.monotonic() - back_at, 2)
                    break
            time.sleep(5.0)
        record["heights_after_deadline"] = trail[::max(1, len(trail) // 6)]
    record["catch_up_s"] = None if caught is None else round(caught, 2)
    if victim is not None and caught:  # the others' cadence while the healed validator syncs from them (reported)
        record["others_blocks_per_s_while_serving"] = round((_top(net, others) - h_back) / caught, 2)
    record["max_height_gap"] = gaps.max_gap
    checks["caught_up_within_60s"] = caught is not None
    if caught is None:
        for i in catch_up_to:
            with contextlib.suppress(RpcUnavailable, AssertionError, KeyError):
                c = net.status(i).get("consensus", {})
                record.setdefault("behind_status", {})[i] = {k: c.get(k) for k in ("view", "finalized_height",
                                                                                    "syncing", "peers")}
            record.setdefault("behind_log", {})[i] = _log_excerpt(net, i)
    if victim is not None and caught is not None:  # a validator still behind keeps no load of its own
        load.set_targets(everyone)
    # Every transfer accepted so far is included, exactly once, and no block repeats one.
    run.take()
    pending = [h for h in run.accepted if h not in run.included]
    t_inc = time.monotonic()
    while pending and time.monotonic() - t_inc < INCLUDE_S:
        with contextlib.suppress(RpcUnavailable):
            run.scan()
        pending = [h for h in pending if h not in run.included]
        if pending:
            time.sleep(0.5)
    twice = {h: hs for h, hs in run.duplicates.items()}
    record["accepted_total"] = len(run.accepted)
    record["included_total"] = sum(1 for h in run.accepted if h in run.included)
    record["not_included"] = len(pending)
    record["duplicates"] = len(twice)
    checks["every_accepted_included"] = not pending
    checks["no_duplicate_inclusion"] = not twice
    if pending:
        record["not_included_sample"] = [(h, run.accepted[h].target, run.accepted[h].at_s) for h in pending[:5]]
    if twice:
        record["duplicate_sample"] = dict(list(twice.items())[:5])
    # Agreement on every height not checked before: every validator up to the lowest of them, and (when one is
    # still behind) the others up to the lowest of theirs.
    hs_all = net.heights(everyone)
    record["heights_at_agreement"] = hs_all
    low_all = min((h for h in hs_all.values() if h is not None), default=0)
    low_others = min((h for i, h in hs_all.items() if i in others and h is not None), default=0)
    try:
        net.assert_agreement(low_all, among=everyone, from_height=run.agreed + 1)
        if low_others > low_all:
            net.assert_agreement(low_others, among=others, from_height=low_all + 1)
        checks["agreement"] = True
        run.agreed = low_all
    except (AssertionError, RpcUnavailable) as e:  # RpcUnavailable: a validator's API did not answer in time
        checks["agreement"] = False
        record["agreement_error"] = f"{type(e).__name__}: {str(e)[:500]}"
    record["agreement_all_up_to"] = low_all
    record["agreement_others_up_to"] = max(low_all, low_others)
    # Evidence names no (honest) validator.
    try:
        named = _evidence(net)
        checks["no_evidence_against_honest"] = not named
        if named:
            record["evidence"] = named
    except RpcUnavailable as e:
        checks["no_evidence_against_honest"] = False
        record["evidence_error"] = str(e)[:300]
    _, stats1 = load.snapshot()
    span = stats1.elapsed_s - stats0.elapsed_s
    record["offered_per_s"] = round((stats1.offered - stats0.offered) / span, 1) if span > 0 else None
    record["accepted_per_s"] = round((stats1.accepted - stats0.accepted) / span, 1) if span > 0 else None
    record["generator_cpu_cores"] = round((stats1.cpu_s - stats0.cpu_s) / span, 3) if span > 0 else None
    record["refused"] = {k: v - stats0.codes.get(k, 0) for k, v in stats1.codes.items()
                         if v - stats0.codes.get(k, 0)}
    record["elapsed_s"] = round(time.monotonic() - t_fault, 1)
    record["loadavg_1m"] = round(os.getloadavg()[0], 2)  # the host is shared: other processes' load shows here
    offered_ok = (record["offered_per_s"] or 0) >= MIN_OFFERED_PER_S
    if FULL:
        checks["offered_at_least_300_per_s"] = offered_ok
    else:  # reported, not asserted: see RATE_ASSERTED
        record["offered_at_least_300_per_s"] = offered_ok
    record["pass"] = all(checks.values())
    _emit(record)
    failed = [k for k, ok in checks.items() if not ok]
    assert not failed, f"{name}: failed checks {failed}: {json.dumps(record)}\n{net.logs(40)}"


def _full_only() -> None:
    if not FULL:
        pytest.skip("opt-in: in the full run only (FAULTS_FULL=1, make e2e-faults)")


# -- the perturbations, in sequence on the module's network --------------------------------------------
def test_kill9_a_validator_under_load(run: Run) -> None:
    net = run.net
    victim = 1
    _perturb(run, "kill9", victim, lambda: net.kill(victim), lambda: net.start(victim))


def test_sigstop_the_leader_under_load(run: Run) -> None:
    _full_only()
    net = run.net
    victim = net.leader()
    if victim == run.scan_on:  # keep the scanned validator out of it: any other leader is as good
        net.wait_for("a leader other than the scanned validator",
                     lambda: net.leader() != run.scan_on, 30, interval=0.05)
        victim = net.leader()
    _perturb(run, "sigstop_leader", victim, lambda: net.pause(victim), lambda: net.resume(victim))


def test_partition_a_validator_under_load(run: Run) -> None:
    net = run.net
    victim = 3
    links = [link for (a, b), link in net.links.items() if victim in (a, b)]
    dropped = sum(link.dropped for link in links)
    _perturb(run, "partition", victim, lambda: net.partition(victim), lambda: net.heal(victim))
    assert sum(link.dropped for link in links) > dropped, "nothing was dropped while partitioned"


def test_link_latency_and_loss_under_load(run: Run) -> None:
    _full_only()
    net = run.net

    def out() -> None:
        for n, link in enumerate(net.links.values()):
            link.impair(IMPAIR["delay_ms"], IMPAIR["jitter_ms"], IMPAIR["loss"], rng_seed=1000 + n)

    def back() -> None:
        for link in net.links.values():
            link.impair()

    dropped = sum(link.dropped for link in net.links.values())
    _perturb(run, "latency_100ms_50ms_loss_5pct", None, out, back)
    assert sum(link.dropped for link in net.links.values()) > dropped, "5 % loss dropped nothing"


def test_wipe_and_resync_a_validator_under_load(run: Run) -> None:
    _full_only()
    net = run.net
    victim = 2

    def out() -> None:
        assert net.stop(victim) == 0
        net.wipe(victim)

    _perturb(run, "wipe", victim, out, lambda: net.start(victim))


def test_the_load_kept_its_rate_over_the_module(run: Run) -> None:
    """Last: the offered rate over the whole module, perturbations and checks included."""
    if not FULL:
        pytest.skip(RATE_ASSERTED)
    _, stats = run.load.snapshot()
    assert stats.offered_per_s >= MIN_OFFERED_PER_S * 0.95, stats.figures()
