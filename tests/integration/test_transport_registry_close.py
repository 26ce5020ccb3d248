"""Real loopback QUIC (CIP-11 §6.2, §7.4): a runner that deregisters while its session is up is dropped from local
presence and its session is closed with ``Goodbye{Deregistered}`` right after the block that deregistered it —
not left live until the runner happens to reconnect. Its reconnects are then refused at admission."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from cowboy_protocol.types.runner_instructions import RunnerDeregister
from tests.integration.transport_harness import NodeHarness, until
from tests.unit.node_harness import RUNNER_SKS


@pytest.fixture
def harness() -> Iterator[NodeHarness]:
    h = NodeHarness(registered=[0]).start()
    try:
        yield h
    finally:
        h.stop()


def test_deregistration_closes_the_live_session_with_goodbye_deregistered(harness: NodeHarness) -> None:
    link = harness.link
    assert link is not None and link.authenticated.is_set() and 0 in harness.node.api.local_presence()
    tx = harness.nonces.tx(RUNNER_SKS[0], RunnerDeregister())
    harness.node.api.submit_transaction(tx.to_bytes())
    start = time.monotonic()
    harness.run(until(lambda: harness.metric("registry", "deregistered") >= 1, "the registry re-check"))
    harness.run(until(lambda: (link.last_close or "").startswith("DEREGISTERED"), "Goodbye{Deregistered}"))
    closed_after = time.monotonic() - start
    assert 0 not in harness.node.api.local_presence()
    # The runner's reconnects are refused by the §6.2 admission check, with the same reason.
    harness.run(until(lambda: harness.metric("handshake", "deregistered") >= 1, "a refused reconnect"))
    assert 0 not in harness.node.api.local_presence() and not link.authenticated.is_set()
    print(f"session closed {closed_after:.2f} s after the deregistration was submitted (block time 200 ms)")
