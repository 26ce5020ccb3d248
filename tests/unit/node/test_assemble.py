"""Issue 32 item 1: ``assemble()`` registers every peer channel on the peer layer's router, each once, and the
router counts what no part serves."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cowboy_node.consensus.sync_messages import CH_BLOCKS, CH_CONSENSUS, CH_SYNC, CH_TX_BATCH, CH_TXS
from cowboy_node.p2p.endpoint_gossip import CH_ENDPOINTS
from cowboy_node.p2p.peer_router import PeerRouter
from cowboy_node.p2p.presence_gossip import CH_PRESENCE
from cowboy_node.snapshot.messages import CH_SNAPSHOT
from tests.unit.node_harness import make_node

Route = Callable[[int, int, bytes], None]


class _Net:
    """A peer network that records the router it was given and sends nowhere."""

    route: Route | None = None

    def __init__(self, on_message: Route) -> None:
        _Net.route = on_message

    def send(self, to: int, channel: int, payload: bytes) -> bool:
        return False

    def broadcast(self, channel: int, payload: bytes) -> int:
        return 0

    def connected(self) -> frozenset[int]:
        return frozenset()

    def penalize(self, peer: int, reason: str) -> None:
        pass


def _unknown(node: Any) -> float:
    return float(node.metrics.registry.get_sample_value("cowboy_consensus_bad_messages_total",
                                                        {"reason": "unknown_channel"}) or 0.0)


def test_every_peer_channel_has_its_handler_and_an_unknown_one_is_counted(tmp_path: Path) -> None:
    node = make_node(peers=_Net, snapshot_dir=tmp_path)
    try:
        route = _Net.route
        assert route is not None and node.net is not None
        handlers = route.__self__._handlers  # type: ignore[attr-defined]
        assert sorted(handlers) == sorted({CH_CONSENSUS, CH_BLOCKS, CH_TXS, CH_SYNC, CH_PRESENCE, CH_ENDPOINTS,
                                           CH_TX_BATCH, CH_SNAPSHOT})
        assert handlers[CH_TX_BATCH] == node.tx_gossip.receive
        route(0, 99, b"")
        assert _unknown(node) == 1.0
        route(0, CH_PRESENCE, b"\xff")  # served (a refused announcement), not an unknown channel
        assert _unknown(node) == 1.0
    finally:
        node.close()


def test_a_channel_is_registered_once() -> None:
    router = PeerRouter(metrics=None)  # type: ignore[arg-type]
    router.register(4, lambda s, p: None)
    with pytest.raises(ValueError, match="already has a handler"):
        router.register(4, lambda s, p: None)


def test_the_tx_gossip_window_is_the_configured_one(tmp_path: Path) -> None:
    # [p2p] tx_gossip_flush_ms reaches the gossip sender: a batch waits that long for more transactions
    for ms, expected in ((None, 0.05), (7, 0.007)):
        extra = {} if ms is None else {"tx_gossip_flush_ms": ms}
        node = make_node(peers=_Net, snapshot_dir=tmp_path, **extra)
        try:
            assert node.tx_gossip.config.flush_interval_s == expected
        finally:
            node.close()
