"""Congestion control of validator links (``p2p/peer_congestion.py``, issue 30 §5): loss reduces the window
by 0.7 once per recovery period and never below the floor; the peer layer uses it on both ends of a link."""

from __future__ import annotations

from pathlib import Path

import pytest
from aioquic.quic.congestion.reno import RenoCongestionControl
from aioquic.quic.packet import QuicPacketType
from aioquic.quic.packet_builder import QuicSentPacket

from cowboy_node.p2p import peer_congestion
from cowboy_node.p2p.peer_congestion import LOSS_REDUCTION, MIN_WINDOW_DATAGRAMS, ValidatorLinkCongestion
from cowboy_node.p2p.peers import PeerLimits, PeerNetwork
from tests.unit.p2p.test_peer_network import FAST, free_udp_port, make_node, start, wait_until

MDS = 1200


def _packet(n: int, sent_time: float, size: int = MDS) -> QuicSentPacket:
    return QuicSentPacket(epoch=3, in_flight=True, is_ack_eliciting=True, is_crypto_packet=False,  # type: ignore
                          packet_number=n, packet_type=QuicPacketType.ONE_RTT, sent_time=sent_time,
                          sent_bytes=size)


def _lose_one_per_round(cc: RenoCongestionControl, rounds: int) -> None:
    """A loss in each of ``rounds`` round trips (each packet sent after the previous recovery began)."""
    for r in range(rounds):
        p = _packet(r, sent_time=float(r) + 0.5)
        cc.on_packet_sent(packet=p)
        cc.on_packets_lost(now=float(r + 1), packets=[p])


def test_one_loss_event_keeps_seven_tenths_of_the_window() -> None:
    cc = ValidatorLinkCongestion(max_datagram_size=MDS)
    cc.congestion_window = 1000 * MDS
    _lose_one_per_round(cc, 1)
    assert cc.congestion_window == int(1000 * MDS * LOSS_REDUCTION) == 700 * MDS
    assert cc.ssthresh == cc.congestion_window
    p = _packet(7, sent_time=0.2)  # sent before that recovery began: the same loss event, no second cut
    cc.on_packet_sent(packet=p)
    cc.on_packets_lost(now=1.1, packets=[p])
    assert cc.congestion_window == 700 * MDS


def test_random_loss_never_takes_the_window_below_the_floor_where_reno_falls_to_two_datagrams() -> None:
    ours, reno = ValidatorLinkCongestion(max_datagram_size=MDS), RenoCongestionControl(max_datagram_size=MDS)
    _lose_one_per_round(ours, 50)
    _lose_one_per_round(reno, 50)
    assert ours.congestion_window == MIN_WINDOW_DATAGRAMS * MDS
    assert reno.congestion_window == 2 * MDS  # what starved votes on the impaired link
    ours.on_persistent_congestion()
    assert ours.congestion_window == MIN_WINDOW_DATAGRAMS * MDS


def test_the_window_starts_at_the_floor_and_still_grows_on_acknowledgements() -> None:
    cc = ValidatorLinkCongestion(max_datagram_size=MDS)
    assert cc.congestion_window == MIN_WINDOW_DATAGRAMS * MDS
    p = _packet(1, sent_time=1.0)
    cc.on_packet_sent(packet=p)
    cc.on_packet_acked(now=1.2, packet=p)
    assert cc.congestion_window == (MIN_WINDOW_DATAGRAMS + 1) * MDS and cc.bytes_in_flight == 0


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("limits", "expected"), [(FAST, ValidatorLinkCongestion),
                                                   (PeerLimits(reconnect_min_s=0.05, congestion_control="reno"),
                                                    RenoCongestionControl)])
async def test_both_ends_of_a_validator_link_use_the_configured_congestion_control(
        tmp_path: Path, limits: PeerLimits, expected: type) -> None:
    assert FAST.congestion_control == peer_congestion.NAME  # the default
    ports = [free_udp_port() for _ in range(2)]
    nodes = [make_node(tmp_path, me=i, ports=ports, n=2, limits=limits) for i in range(2)]
    nets: list[PeerNetwork] = []
    try:
        await start(nets, *nodes)
        await wait_until(lambda: all(n.net.connected() for n in nodes))
        for node in nodes:
            protos = [o.proto for o in node.net._out.values() if o.proto is not None]  # its dialed link
            protos += [c.proto for c in node.net._inbound]  # and the one it accepted
            assert protos
            for proto in protos:
                assert type(proto._quic._loss._cc) is expected
    finally:
        for net in nets:
            await net.stop()
