"""Send priorities of the validator peer layer (issues 14/20): a flood of transactions never delays or drops a
consensus message. Real QUIC and real TCP on 127.0.0.1; every test is bounded by ``pytest.mark.timeout``.

Everything sent in one event-loop turn is queued before the first flush (``_enqueue`` schedules the flush with
``call_soon``), so the order the receiver sees is the order the queue wrote them in."""

from __future__ import annotations

from pathlib import Path

import pytest

from cowboy_node.p2p.peers import CLASS_CONTROL, CLASS_GOSSIP, CLASS_TXS, PeerLimits, PeerNetwork, channel_class
from tests.unit.p2p.test_peer_network import (
    cleanup,
    free_port,
    make_node,
    start,
    transport,  # noqa: F401  (autouse: every test on QUIC and on TCP)
    wait_until,
)

pytestmark = pytest.mark.timeout(300)

__all__ = ["cleanup"]  # the fixture, imported for its name

CH_CONSENSUS, CH_BLOCKS, CH_TXS, CH_SYNC, CH_PRESENCE, CH_ENDPOINTS, CH_TX_BATCH = 0, 1, 2, 3, 4, 5, 6


def test_channel_classes() -> None:
    assert [channel_class(c) for c in (CH_CONSENSUS, CH_BLOCKS, CH_SYNC)] == [CLASS_CONTROL] * 3
    assert [channel_class(c) for c in (CH_PRESENCE, CH_ENDPOINTS, 200)] == [CLASS_GOSSIP] * 3
    assert [channel_class(c) for c in (CH_TXS, CH_TX_BATCH)] == [CLASS_TXS] * 2
    assert CLASS_CONTROL < CLASS_GOSSIP < CLASS_TXS


async def test_a_consensus_message_queued_after_a_transaction_flood_is_written_first(
        tmp_path: Path, cleanup: list[PeerNetwork]) -> None:
    ports = [free_port() for _ in range(2)]
    a, b = (make_node(tmp_path, me=i, ports=ports, n=2) for i in range(2))
    await start(cleanup, a, b)
    await wait_until(lambda: a.net.connected() == {1})
    for k in range(200):  # one loop turn: all queued before the first flush
        assert a.net.send(1, CH_TXS, b"tx" + k.to_bytes(2, "big"))
    assert a.net.send(1, CH_PRESENCE, b"presence")
    assert a.net.send(1, CH_CONSENSUS, b"vote")
    await wait_until(lambda: len(b.inbox) == 202)
    assert b.inbox[0] == (0, CH_CONSENSUS, b"vote")
    assert b.inbox[1] == (0, CH_PRESENCE, b"presence")
    assert [p for _, _, p in b.inbox[2:]] == [b"tx" + k.to_bytes(2, "big") for k in range(200)]  # FIFO within


async def test_a_full_queue_evicts_the_oldest_transaction_for_a_consensus_message(
        tmp_path: Path, cleanup: list[PeerNetwork]) -> None:
    ports = [free_port() for _ in range(2)]
    small = PeerLimits(send_queue_messages=10, reconnect_min_s=0.05, handshake_timeout_s=2.0)
    a = make_node(tmp_path, me=0, ports=ports, n=2, limits=small)
    b = make_node(tmp_path, me=1, ports=ports, n=2)
    await start(cleanup, a, b)
    await wait_until(lambda: a.net.connected() == {1})
    assert all(a.net.send(1, CH_TXS, bytes([k])) for k in range(10))  # the queue is full of transactions
    assert a.net.send(1, CH_CONSENSUS, b"vote")  # evicts tx 0, not refused
    assert a.net.send(1, CH_ENDPOINTS, b"endpoint")  # gossip also outranks transactions: evicts tx 1
    assert not a.net.send(1, CH_TXS, b"late")  # nothing lower to evict: the new transaction is dropped
    await wait_until(lambda: len(b.inbox) == 10)
    assert b.inbox[:2] == [(0, CH_CONSENSUS, b"vote"), (0, CH_ENDPOINTS, b"endpoint")]
    assert [p for _, _, p in b.inbox[2:]] == [bytes([k]) for k in range(2, 10)]
    stats = a.net.stats()
    assert stats["dropped.queue_full"] == 3
    assert stats["dropped.queue_full.ch2"] == 3
    assert "dropped.queue_full.ch0" not in stats
    assert a.metric("messages_dropped_by_channel_total", channel="2", reason="queue_full") == 3
    assert a.metric("messages_dropped_by_channel_total", channel="0", reason="queue_full") == 0
    assert a.metric("messages_dropped_total", reason="queue_full") == 3


async def test_a_queue_full_of_consensus_messages_drops_the_new_one_of_any_class(
        tmp_path: Path, cleanup: list[PeerNetwork]) -> None:
    ports = [free_port() for _ in range(2)]
    small = PeerLimits(send_queue_messages=4, reconnect_min_s=0.05, handshake_timeout_s=2.0)
    a = make_node(tmp_path, me=0, ports=ports, n=2, limits=small)
    b = make_node(tmp_path, me=1, ports=ports, n=2)
    await start(cleanup, a, b)
    await wait_until(lambda: a.net.connected() == {1})
    assert all(a.net.send(1, CH_CONSENSUS, bytes([k])) for k in range(4))
    assert not a.net.send(1, CH_CONSENSUS, b"newest")  # a class never evicts its own or a higher class
    assert not a.net.send(1, CH_TXS, b"tx")
    await wait_until(lambda: len(b.inbox) == 4)
    assert [p for _, _, p in b.inbox] == [bytes([k]) for k in range(4)]
    assert a.net.stats()["dropped.queue_full.ch0"] == 1
    assert a.net.stats()["dropped.queue_full.ch2"] == 1
