"""The runner's side of a §5.3 reconfiguration while running (``cowboy_runner/reconfig.py``): which links a
re-plan at each head closes, and a link closed with ``Goodbye{OverlapExpired}`` never reconnecting.

Fixture as in test_runner_sessions_plan.py: E = 0 over v1..v10 (Sub_0(G) = v1, v4, v6, v7, v10); E+1 = 1 over
v1..v6, v11, v12 (Sub_1(G) = v1, v4, v6, v11); ValidatorSetActivated(1, h = 1000), OVERLAP_BLOCKS = 160.
"""

from __future__ import annotations

import asyncio

import pytest

from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.preimages import RunnerKey as SessionKey
from cowboy_protocol.transport.session import Closed
from cowboy_runner import link as link_module
from cowboy_runner.link import Link, LinkConfig
from cowboy_runner.reconfig import EpochLink, link_key, planned_keys, stale_links
from cowboy_runner.sessions_plan import Snapshot, plan_sessions, snapshot_from_status
from tests.unit.runner.test_runner_sessions_plan import H_ACT, TEN, V12, G, _recfg_status

ENDPOINTS = {v: (f"10.0.0.{v[0]}", 4433) for v in V12}


def _link(validator: bytes, epoch: int, cls: type[Link] = EpochLink) -> Link:
    cfg = LinkConfig(host="127.0.0.1", port=9, chain_id="c", validator_set=tuple(TEN), expected_validator=validator,
                     subset_epoch=epoch)

    async def on_assignment(*_: object) -> None:
        return None

    return cls(SessionKey((0x77).to_bytes(32, "big")), cfg, height=lambda: 0, on_assignment=on_assignment)


def _links_planned_at(height: int) -> list[Link]:
    snap = snapshot_from_status(_recfg_status(TEN[3]))
    targets, _ = plan_sessions(G, snap, ("rpc-host", 9000), ENDPOINTS, height=height)
    return [_link(t.validator, t.snapshot.epoch if t.snapshot else snap.subset_epoch) for t in targets]


def _stale_at(links: list[Link], height: int) -> list[tuple[int, int]]:
    snap = snapshot_from_status(_recfg_status(TEN[3]))
    targets, _ = plan_sessions(G, snap, ("rpc-host", 9000), ENDPOINTS, height=height)
    return sorted(((link_key(lk)[0] or b"?")[0], link_key(lk)[1]) for lk in stale_links(links, targets, snap))


@pytest.mark.parametrize(("height", "stale"), [
    (H_ACT - 1, []),                          # before h nothing changes
    (H_ACT, [(1, 0), (4, 0), (6, 0)]),        # in both subsets: reached under E+1 from h (project choice)
    (H_ACT + 159, [(1, 0), (4, 0), (6, 0)]),  # h + OVERLAP − 1: the epoch-E-only v7, v10 are kept
    (H_ACT + 160, [(1, 0), (4, 0), (6, 0), (7, 0), (10, 0)]),  # the cutoff: epoch-E-only links dropped
])
def test_links_from_before_the_activation_are_dropped_at_the_right_heights(height: int,
                                                                            stale: list[tuple[int, int]]) -> None:
    assert _stale_at(_links_planned_at(H_ACT - 1), height) == stale


def test_links_of_the_window_keep_the_union_until_the_cutoff() -> None:
    window = _links_planned_at(H_ACT)
    assert _stale_at(window, H_ACT + 159) == []
    assert _stale_at(window, H_ACT + 160) == [(7, 0), (10, 0)]  # "then drop epoch-E-only validators"


def test_overlap_expired_stops_the_link_for_good() -> None:
    lk = _link(V12[6], 0)
    assert isinstance(lk, EpochLink)
    lk._handle([Closed(GoodbyeReason.OVERLAP_EXPIRED, "epoch 0 session not valid at height 1160", True)])
    assert lk.overlap_expired
    # run() returns at its first step, awaiting nothing: no connect to 127.0.0.1:9, no backoff sleep. Driven by hand
    # rather than under asyncio.run + wait_for(timeout=5): no event loop, no wall-clock bound, and no change to the
    # thread's current event loop (asyncio.run leaves it None for the tests that follow in the same process).
    step = lk.run()
    with pytest.raises(StopIteration):
        step.send(None)
    assert lk.connects == 0
    # ... and the next re-plan drops it even if the plan still wanted it.
    snap = snapshot_from_status(_recfg_status(TEN[3]))
    targets, _ = plan_sessions(G, snap, ("rpc-host", 9000), ENDPOINTS, height=H_ACT)
    assert lk in stale_links([lk], targets, snap)


def test_other_goodbyes_keep_reconnecting() -> None:
    lk = _link(V12[6], 0)
    lk._handle([Closed(GoodbyeReason.IDLE_TIMEOUT, None, True)])
    assert isinstance(lk, EpochLink) and not lk.overlap_expired and not lk._stopping


def test_a_governed_subset_size_change_drops_and_adds_links_at_the_next_plan() -> None:
    # The daemon re-plans at every head with the MIN_SUBSET/MAX_SUBSET of that head's GET /params
    # (docs/transport.md §8 "Governed constants"): Sub(G) over TEN is v1, v4, v6, v7, v10 at the defaults and
    # v1, v10 with MIN = MAX = 2 (test_runner_sessions_plan.py::test_plan_uses_the_governed_subset_bounds).
    snap = Snapshot(0, tuple(TEN), TEN[3])
    endpoints = {v: ("h", 1) for v in TEN}
    wide, _ = plan_sessions(G, snap, ("rpc-host", 9000), endpoints)
    links = [_link(t.validator, 0) for t in wide]
    narrow, _ = plan_sessions(G, snap, ("rpc-host", 9000), endpoints, min_subset=2, max_subset=2)
    assert sorted((link_key(lk)[0] or b"?")[0] for lk in stale_links(links, narrow, snap)) == [4, 6, 7]
    kept = [lk for lk in links if lk not in stale_links(links, narrow, snap)]
    assert stale_links(kept, wide, snap) == []  # raised again: nothing to drop, the plan re-adds v4, v6, v7
    assert {t.validator for t in wide} - {link_key(lk)[0] for lk in kept} == {TEN[3], TEN[5], TEN[6]}


@pytest.mark.parametrize(("height", "reconnects"), [(H_ACT + 159, True), (H_ACT + 160, False)])
def test_a_session_dropped_without_goodbye_does_not_come_back_past_the_cutoff(
        height: int, reconnects: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # v7 is in Sub_0(G) only. Its session drops (the validator's Goodbye{OverlapExpired} lost, only the QUIC close
    # arrives): before reconnecting the link asks the plan at the current head (the daemon's _planned_now).
    snap = snapshot_from_status(_recfg_status(TEN[3]))
    lk = _link(V12[6], 0)
    assert isinstance(lk, EpochLink)
    targets, _ = plan_sessions(G, snap, ("rpc-host", 9000), ENDPOINTS, height=height)
    lk.still_planned = lambda: link_key(lk) in planned_keys(targets, snap)
    lk.connects = 1  # it had a session
    attempts: list[str] = []

    async def connect(host: str, *_: object, **__: object) -> None:
        attempts.append(host)
        lk.stop()  # one attempt is all this test needs to see
        raise OSError("unreachable")

    monkeypatch.setattr(link_module, "connect", connect)
    loop = asyncio.new_event_loop()  # not asyncio.run: it would leave this thread without a current loop
    try:
        loop.run_until_complete(asyncio.wait_for(lk.run(), 10))
    finally:
        loop.close()
    # inside the window it reconnects; from the cutoff it stops without offering hash(E) again
    assert attempts == (["127.0.0.1"] if reconnects else [])
