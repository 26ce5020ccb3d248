"""A real 4-validator network (``cowboy-node testnet`` homes, ``cowboy-node run`` processes, every peer link through
a :class:`~tests.e2e.udp_proxy.UdpLink`) under perturbations: kill -9 and restart, SIGSTOP of the leader, a wiped
data directory, a network partition. In every case the others keep finalizing, the perturbed validator catches up,
transactions sent meanwhile to the live validators are included, and all validators agree on the block hash and
state root at every height."""

from __future__ import annotations

import socket
import threading
import time
import tomllib
from pathlib import Path

import pytest

from tests.e2e.netproc import HOST, Testnet

PERTURB_S = 5.0
"""How long a validator is kept out (killed, paused, stopped, partitioned)."""
MIN_PROGRESS = 3
"""Blocks the other validators must finalize while one is out."""
PROGRESS_TIMEOUT_S = 15.0
"""Longest the others may take for MIN_PROGRESS blocks (counted from the start of the perturbation)."""
CATCH_UP_S = 20.0
"""A validator back in the network reaches the others' height within this (counted from its restart/resume/heal)."""
INCLUDE_S = 30.0
"""Every transaction is included within this after it was sent."""
SEND_INTERVAL_S = 0.25

pytestmark = pytest.mark.timeout(600)


# -- helpers ----------------------------------------------------------------------------------
def _top(net: Testnet, among: list[int]) -> int:
    hs = net.heights(among)
    assert all(h is not None for h in hs.values()), f"a validator does not answer: {hs}"
    return max(h for h in hs.values() if h is not None)


def _settle(net: Testnet) -> None:
    """Every transaction sent so far is included (so none waits in a validator about to be taken out)."""
    if net.faucet.sent:
        net.wait_included(net.faucet.sent, INCLUDE_S)


def _keep_out(net: Testnet, victim: int) -> tuple[list[str], float]:
    """While ``victim`` is out: send transfers round-robin to the live others for PERTURB_S and check that they
    finalize at least MIN_PROGRESS blocks. The hashes sent and when the first was sent."""
    others = net.others(victim)
    h0 = _top(net, others)
    t0 = time.monotonic()
    hashes: list[str] = []
    while time.monotonic() - t0 < PERTURB_S:
        hashes += net.faucet_transfers(1, among=others)
        time.sleep(SEND_INTERVAL_S)
    remaining = max(0.5, PROGRESS_TIMEOUT_S - (time.monotonic() - t0))
    net.wait_heights(h0 + MIN_PROGRESS, remaining, among=others)
    return hashes, t0


def _recovered(net: Testnet, victim: int, hashes: list[str], sent_at: float, back_at: float) -> None:
    """The transactions sent while ``victim`` was out are included within INCLUDE_S of sending; ``victim`` reaches
    the others' height within CATCH_UP_S of ``back_at``; every validator agrees up to the lowest height."""
    receipts = net.wait_included(hashes, max(0.5, INCLUDE_S - (time.monotonic() - sent_at)), among=net.others(victim))
    failed = {h: r for h, r in receipts.items() if r.get("status") != "success"}
    assert not failed, f"transfers failed: {failed}"
    target = _top(net, net.others(victim))
    net.wait_heights(target, max(0.5, CATCH_UP_S - (time.monotonic() - back_at)), among=[victim])
    everyone = list(range(len(net)))
    hs = net.heights(everyone)
    net.assert_agreement(min(h for h in hs.values() if h is not None), among=everyone)


# -- the harness itself (no node process) -------------------------------------------------------
@pytest.mark.timeout(600)
def test_proxied_testnet_routes_every_directed_link_through_its_own_relay(tmp_path: Path) -> None:
    """``[p2p] peers`` of each home point at relays that forward to the right validator's ``[p2p] addr``, and
    ``partition(i)`` cuts exactly the links to and from ``i``. Checked with plain UDP sockets on the p2p ports."""
    threads_before = set(threading.enumerate())
    net = Testnet.create(tmp_path, n=4, block_time_ms=500, proxied=True)
    socks: list[socket.socket] = []
    try:
        assert len(net.links) == 12
        for v in net.validators:
            peers = tomllib.loads((v.home / "config.toml").read_text())["p2p"]["peers"]
            assert len(peers) == 3
            for entry in peers:
                key, addr = entry.split("@")
                j = next(w.index for w in net.validators if w.public_key == key.lower())
                link = net.links[(v.index, j)]
                assert addr == link.addr and link.target == (HOST, net.validators[j].p2p_port)
        for v in net.validators:  # stand-ins for the validators' p2p sockets
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            socks.append(s)
            s.bind((HOST, v.p2p_port))
            s.settimeout(0.5)

        def delivered(i: int, j: int) -> bool:
            socks[i].sendto(b"%d->%d" % (i, j), (HOST, net.links[(i, j)].port))
            try:
                data, _ = socks[j].recvfrom(100)
            except TimeoutError:
                return False
            assert data == b"%d->%d" % (i, j)
            return True

        pairs = [(i, j) for i in range(4) for j in range(4) if i != j]
        assert all(delivered(i, j) for i, j in pairs)
        net.partition(2)
        for s in socks:
            s.settimeout(0.1)
        assert [delivered(i, j) for i, j in pairs] == [2 not in (i, j) for i, j in pairs]
        net.heal(2)
        assert all(delivered(i, j) for i, j in pairs)
    finally:
        for s in socks:
            s.close()
        net.close()
    # Threads this test started, only: on a pytest-xdist worker a thread of an earlier module may end meanwhile.
    assert not set(threading.enumerate()) - threads_before, "a relay thread outlived close()"


# -- scenarios --------------------------------------------------------------------------------
def test_steady_network_includes_round_robin_transactions_and_agrees(testnet: Testnet) -> None:
    net = testnet
    t0 = time.monotonic()
    hashes = net.faucet_transfers(24, among=range(4), interval=0.1)  # six to each validator
    receipts = net.wait_included(hashes, max(0.5, INCLUDE_S - (time.monotonic() - t0)))
    assert all(r["status"] == "success" for r in receipts.values()), receipts
    net.wait_progress(2, 10)
    top = min(net.wait_heights(max(int(r["height"]) for r in receipts.values()), 10).values())
    net.assert_agreement(top)
    proposers = {b["proposer"] for h in range(1, top + 1) if (b := net.block(0, h)) is not None}
    if top >= 12:
        assert len(proposers) > 1, f"one validator proposed all {top} blocks: {proposers}"


def test_kill9_one_validator_then_restart_it(testnet: Testnet) -> None:
    net = testnet
    victim = 1
    net.faucet_transfers(4)
    _settle(net)
    net.kill(victim)
    hashes, sent_at = _keep_out(net, victim)
    back_at = time.monotonic()
    net.start(victim)
    _recovered(net, victim, hashes, sent_at, back_at)


def test_sigstop_the_leader_then_resume_it(testnet: Testnet) -> None:
    net = testnet
    net.faucet_transfers(4)
    _settle(net)
    victim = net.leader()
    net.pause(victim)
    hashes, sent_at = _keep_out(net, victim)
    back_at = time.monotonic()
    net.resume(victim)
    _recovered(net, victim, hashes, sent_at, back_at)


def test_wiped_validator_syncs_from_genesis(testnet: Testnet) -> None:
    net = testnet
    victim = 2
    net.faucet_transfers(4)
    _settle(net)
    assert net.stop(victim) == 0
    net.wipe(victim)
    hashes, sent_at = _keep_out(net, victim)
    back_at = time.monotonic()
    net.start(victim)
    _recovered(net, victim, hashes, sent_at, back_at)


def test_partitioned_validator_catches_up_after_healing(testnet: Testnet) -> None:
    net = testnet
    victim = 3
    net.faucet_transfers(4)
    _settle(net)
    links = [link for (a, b), link in net.links.items() if victim in (a, b)]
    relayed_before = sum(link.relayed for link in links)
    assert relayed_before > 0, "no peer traffic went through the relays: the validators do not use [p2p] peers"
    net.partition(victim)
    dropped_before = sum(link.dropped for link in links)
    hashes, sent_at = _keep_out(net, victim)
    assert sum(link.dropped for link in links) > dropped_before, "nothing was dropped while partitioned"
    back_at = time.monotonic()
    net.heal(victim)
    _recovered(net, victim, hashes, sent_at, back_at)
    assert sum(link.relayed for link in links) > relayed_before
