"""A validator that stops answering (SIGKILLed, frozen, or restarted and silently dropping packets of connections it
no longer knows) is given up on after ``dead_after_pings`` ping intervals, not the 30 s QUIC idle timeout: the
runner says ``Goodbye{IdleTimeout}`` and reconnects with the §11.3 backoff."""

from __future__ import annotations

from collections.abc import Iterator
from unittest.mock import patch

import pytest

from cowboy_protocol.transport.validator_session import ValidatorSession
from cowboy_runner.link import MIN_DEAD_AFTER_S
from tests.integration.transport_harness import NodeHarness, until


@pytest.fixture
def harness() -> Iterator[NodeHarness]:
    h = NodeHarness(registered=[0]).start()
    try:
        yield h
    finally:
        h.stop()


def test_runner_gives_up_on_a_validator_that_stops_answering_pings_and_reconnects(harness: NodeHarness) -> None:
    link = harness.link
    assert link is not None
    assert link.dead_after_s() == MIN_DEAD_AFTER_S  # 5 × 0.2 s pings is below the 3 s floor
    goodbyes = harness.metric("frame", "Goodbye")
    admitted = harness.metric("handshake", "admitted")
    with patch.object(ValidatorSession, "_on_ping", lambda self, ping, now: []):  # pings go unanswered
        harness.run(until(lambda: link.dead_peer_closes == 1, "the runner to close the silent session", 20))
        harness.run(until(lambda: harness.metric("frame", "Goodbye") == goodbyes + 1, "its Goodbye at the node"))
    harness.run(until(lambda: link.authentications >= 2 and link.authenticated.is_set(), "the reconnect"))
    assert link.connects == 2 and link.dead_peer_closes == 1
    assert harness.metric("handshake", "admitted") == admitted + 1
    harness.run(until(lambda: 0 in harness.node.api.local_presence(), "the runner present again"))


def test_answered_pings_keep_the_session(harness: NodeHarness) -> None:
    # Control for the test above: with pongs flowing, the same wait sees no close (3 s floor, 0.2 s pings).
    link = harness.link
    assert link is not None
    start = harness.node.chain.height
    harness.run(until(lambda: harness.node.chain.height >= start + 25, "25 blocks (5 s at 200 ms)"))
    assert (link.connects, link.dead_peer_closes) == (1, 0)
