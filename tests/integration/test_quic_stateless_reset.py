"""QUIC stateless reset (RFC 9000 §10.3) after a validator restart, over real loopback QUIC.

A validator's transport crashes (its UDP socket closes without a CONNECTION_CLOSE or Goodbye, as under SIGKILL)
and a new one starts on the same port. The runner's link keeps pinging on its old connection; the restarted
server does not know that connection id and answers with a stateless reset whose token it derives from the
persistent secret in the node's home (``quic-reset.key``, mode 0600, created once). The token matches the one the
old server issued, so the runner treats the connection as closed and reconnects at once, instead of waiting for
``dead_after_pings`` unanswered pings (at least ``MIN_DEAD_AFTER_S``).

Control: when the restarted server has a different secret (what happens without the persistent key), the old
connection ids do not carry its tag, so it sends no reset (and a reset with any other token would be ignored,
RFC 9000 §10.3.1): the runner only notices through the ping-based detection. Figures are printed for both.
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cowboy_node.transport.service import TransportConfig, TransportService
from cowboy_protocol.transport.frames import JobAssignment
from cowboy_protocol.transport.preimages import RunnerKey as SessionKey
from cowboy_runner.link import Link, LinkConfig
from tests.integration.transport_harness import ROOMY, NodeHarness, until
from tests.unit.node_harness import RUNNER_SKS

PING_S = 0.2
"""Runner ping interval (the harness node makes 200 ms blocks)."""
RESTART_GAP_S = 0.3
"""Time between the crash and the new transport listening."""


@pytest.fixture
def harness() -> Iterator[NodeHarness]:
    h = NodeHarness(registered=[0], honest=False).start()
    try:
        yield h
    finally:
        h.stop()


async def _ignore(link: Link, a: JobAssignment) -> None:
    del link, a


async def _service(h: NodeHarness, port: int, reset_key: Path) -> TransportService:
    s = TransportService(h.node.link, h.node.validator_transport_key(), validator_set_hash=h.vsh,
                         config=TransportConfig(port=port, limits=ROOMY, reset_key_path=reset_key),
                         metrics=h.node.metrics)
    await s.start()  # a restarted validator's transport (its sessions are not the node's: no pushes needed here)
    return s


def _crash(service: TransportService) -> None:
    """Stop a transport the way SIGKILL does: the socket closes and nothing (no Goodbye, no CONNECTION_CLOSE) is
    sent. Only the test reaches into the adapter like this."""
    if service._ticker is not None:
        service._ticker.cancel()
    server = service._server
    assert server is not None
    for proto in list(server._live.values()):
        proto._aborted = True  # transmit() sends nothing any more
        for timer in (proto._timer, proto._linger, proto._auth_timer):
            if timer is not None:
                timer.cancel()
    assert server._transport is not None
    server._transport.close()
    service._server = None


async def _restart_and_measure(h: NodeHarness, tmp_path: Path, *, same_secret: bool) -> tuple[float, Link]:
    key = tmp_path / "quic-reset.key"
    first = await _service(h, 0, key)
    port = first.port
    link = Link(SessionKey(RUNNER_SKS[0]),
                LinkConfig(host="127.0.0.1", port=port, chain_id=h.chain_id, validator_set=h.vset,
                           expected_validator=h.vset[0], ping_interval_s=PING_S),
                height=lambda: h.node.chain.height, on_assignment=_ignore)
    task = asyncio.get_running_loop().create_task(link.run())
    second: TransportService | None = None
    try:
        await until(lambda: link.authenticated.is_set(), "the first session")
        await asyncio.sleep(3 * PING_S)  # a few pings answered on the first connection
        _crash(first)
        await asyncio.sleep(RESTART_GAP_S)
        second = await _service(h, port, key if same_secret else tmp_path / "other-reset.key")
        restarted = time.monotonic()
        await until(lambda: link.authentications >= 2 and link.authenticated.is_set(), "the reconnect", 30)
        return time.monotonic() - restarted, link
    finally:
        link.stop()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 10)
        if second is not None:
            await second.stop()


def test_restarted_validator_resets_old_connections_and_the_runner_reconnects_at_once(
        harness: NodeHarness, tmp_path: Path) -> None:
    took, link = harness.run(_restart_and_measure(harness, tmp_path, same_secret=True))
    print(f"\nreconnect after restart with the persistent reset secret: {took:.2f} s "
          f"(ping-based detection would take {link.dead_after_s():.1f} s)")
    assert link.stateless_resets == 1 and link.dead_peer_closes == 0
    assert took < link.dead_after_s() / 3
    key = tmp_path / "quic-reset.key"
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600 and len(key.read_bytes()) == 32


def test_reset_with_an_unknown_token_is_ignored_and_ping_detection_remains(
        harness: NodeHarness, tmp_path: Path) -> None:
    took, link = harness.run(_restart_and_measure(harness, tmp_path, same_secret=False))
    print(f"\nreconnect after restart with a different reset secret: {took:.2f} s "
          f"(dead_after {link.dead_after_s():.1f} s)")
    assert link.stateless_resets == 0 and link.dead_peer_closes == 1
    assert took > link.dead_after_s() - RESTART_GAP_S - 3 * PING_S
