"""``PeerNetwork.penalize``: a peer that crossed a budget or proved itself faulty is disconnected, its connections
and messages are refused for a back-off, the back-off doubles for a repeat offender, and the link comes back after
it (issue 30 §2: "a peer that crosses a budget is disconnected for a back-off")."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from cowboy_node.p2p.peer_frames import Data
from cowboy_node.p2p.peers import PeerNetwork
from tests.unit.p2p import test_peer_network as base
from tests.unit.p2p.test_peer_network import (
    FAST,
    free_port,
    make_node,
    start,
    transport,  # noqa: F401  (autouse: every test on QUIC and on TCP)
    wait_until,
)

cleanup = base.cleanup
"""The peer-network tests' fixture: every network a test starts is stopped after it."""

pytestmark = pytest.mark.timeout(300)

LONG = dataclasses.replace(FAST, penalty_min_s=3600.0, penalty_max_s=4 * 3600.0)
"""A back-off no test outlives: its end is reached by moving the recorded deadline, never by waiting."""


async def test_a_penalized_peer_is_cut_off_its_messages_dropped_and_it_returns_after_the_back_off(
        tmp_path: Path, cleanup: list[PeerNetwork]) -> None:
    ports = [free_port() for _ in range(2)]
    a = make_node(tmp_path, me=0, ports=ports, n=2, limits=LONG)
    b = make_node(tmp_path, me=1, ports=ports, n=2, limits=LONG)
    await start(cleanup, a, b)
    await wait_until(lambda: a.net.connected() == {1} and b.net.connected() == {0})
    a.net.penalize(1, "sync_budget")
    assert a.net.penalized(1) > 3000
    assert a.metric("penalties_total", reason="sync_budget") == 1
    await wait_until(lambda: 1 not in a.net.connected())
    assert not a.net.send(1, 0, b"x")
    # b redials at once (nobody penalized it): a refuses each link after the handshake, so b keeps reconnecting;
    # what it sends meanwhile never reaches a's handler.
    reconnects = b.net.stats().get("reconnects", 0)
    for _ in range(20):
        b.net.broadcast(0, b"while penalized")
    await wait_until(lambda: b.net.stats().get("reconnects", 0) >= reconnects + 2, timeout=20)
    assert 1 not in a.net.connected()
    assert not [m for m in a.inbox if m[2] == b"while penalized"]
    a.net._deliver(1, Data(0, b"late frame"))  # a frame already in flight when the back-off began
    assert a.net.stats()["dropped.penalized.ch0"] >= 1
    assert a.metric("messages_dropped_total", reason="penalized") >= 1
    assert not [m for m in a.inbox if m[2] == b"late frame"]
    # The back-off ends (moved, not waited for): the link comes back and messages flow again.
    _, backoff = a.net._penalties[1]
    a.net._penalties[1] = (time.monotonic() - 0.001, backoff)
    await wait_until(lambda: a.net.connected() == {1}, timeout=20)
    b.net.send(0, 0, b"after")
    await wait_until(lambda: (1, 0, b"after") in a.inbox, timeout=20)


async def test_a_repeat_offence_soon_after_a_back_off_doubles_it_up_to_the_maximum(
        tmp_path: Path, cleanup: list[PeerNetwork]) -> None:
    ports = [free_port() for _ in range(2)]
    a = make_node(tmp_path, me=0, ports=ports, n=2, limits=dataclasses.replace(FAST, penalty_min_s=5.0,
                                                                                penalty_max_s=18.0))
    a.net.penalize(1, "x")
    assert a.net._penalties[1][1] == 5.0
    a.net.penalize(1, "x")  # while serving it: unchanged
    assert a.net._penalties[1][1] == 5.0
    for expected in (10.0, 18.0, 18.0):
        a.net._penalties[1] = (time.monotonic() - 1.0, a.net._penalties[1][1])  # it just ended
        a.net.penalize(1, "x")
        assert a.net._penalties[1][1] == expected
    a.net._penalties[1] = (time.monotonic() - 100.0, 18.0)  # long after: forgiven, back to the minimum
    a.net.penalize(1, "x")
    assert a.net._penalties[1][1] == 5.0
    assert a.net.stats()["penalties.x"] == 5
