"""Issue 34 §3 over real loopback QUIC and TCP: a validator speaking another peer protocol version is refused with
the typed reason ``incompatible_version`` (both as a dialer's Hello and as a listener's HelloAck), never connected."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from cowboy_node.p2p import peers as peers_module
from cowboy_node.p2p.peer_frames import Hello
from cowboy_node.p2p.peers import PeerNetwork
from tests.unit.p2p.test_peer_network import (
    cleanup,
    free_port,
    make_node,
    start,
    transport,  # noqa: F401  (autouse: every test on QUIC and on TCP)
    wait_until,
)

__all__ = ["cleanup"]  # the fixture, shared with the peer network tests

pytestmark = pytest.mark.timeout(300)


async def test_a_peer_of_another_protocol_version_is_refused_as_incompatible_version(
        tmp_path: Path, cleanup: list[PeerNetwork], monkeypatch: pytest.MonkeyPatch) -> None:
    real = peers_module.make_hello

    def from_the_future(*args: Any, **kw: Any) -> Hello:  # validator 1 runs a binary speaking version 2
        hello = real(*args, **kw)
        return dataclasses.replace(hello, version=2, software="cowboy-node/9.0.0") if kw["index"] == 1 else hello

    monkeypatch.setattr(peers_module, "make_hello", from_the_future)
    ports = [free_port() for _ in range(2)]
    current, future = make_node(tmp_path, me=0, ports=ports, n=2), make_node(tmp_path, me=1, ports=ports, n=2)
    await start(cleanup, current, future)
    await wait_until(lambda: current.metric("handshake_failures_total", reason="incompatible_version") >= 2)
    assert current.net.connected() == frozenset()
    assert current.metric("handshake_failures_total", reason="bad_frame") == 0
    assert not current.net.send(1, 0, b"x")
