"""Congestion control of validator peer links: NewReno with a floor, so random loss cannot starve consensus.

aioquic's NewReno halves its window on every loss event and falls to 2 datagrams on persistent congestion. On a
wide-area path with random loss and jitter (issue 30 §5: 100 ± 50 ms, 5 % loss) that is most of the time: jitter
reorders datagrams, reordering is declared loss, and the window sits near its minimum — about 2.4 KB per round
trip, 12 KB/s at 200 ms. Block bodies and transaction gossip at 300 transfers/s need several times that, so the
single framed stream of a peer link backs up behind them, votes wait in it, and views take seconds.

A validator has a handful of authenticated peer links whose timeliness is the network's liveness, so
:class:`ValidatorLinkCongestion` keeps NewReno's growth and its response to loss, but reduces the window by
:data:`LOSS_REDUCTION` (CUBIC's β, not one half) and never below :data:`MIN_WINDOW_DATAGRAMS` datagrams.
``bench/p2p_lossy_link.py`` measures it against aioquic's ``reno`` on the same impaired link, in the same run.
The runner transport (CIP-11) keeps aioquic's default.
"""

from __future__ import annotations

from collections.abc import Iterable

from aioquic.quic.congestion.base import register_congestion_control
from aioquic.quic.congestion.reno import RenoCongestionControl
from aioquic.quic.packet_builder import QuicSentPacket

NAME = "cowboy-validator-link"
"""The algorithm's registered name (``QuicConfiguration.congestion_control_algorithm``)."""
MIN_WINDOW_DATAGRAMS = 64
"""Smallest congestion window, in datagrams (≈ 77 KB: 385 KB/s at a 200 ms round trip). On the bench's impaired
link (100 ± 50 ms, 5 % loss, 115 KB/s offered) a floor of 32 still queued votes for 1.9 s (p50); 64 delivers
everything offered with votes at 168 ms p50; 128 gained little more (148 ms)."""
LOSS_REDUCTION = 0.7
"""Window kept on a loss event (NewReno keeps 0.5)."""


class ValidatorLinkCongestion(RenoCongestionControl):
    """NewReno with a floor of :data:`MIN_WINDOW_DATAGRAMS` and a gentler reduction (see the module docstring)."""

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        self._floor = MIN_WINDOW_DATAGRAMS * max_datagram_size
        self.congestion_window = max(self.congestion_window, self._floor)

    def on_packets_lost(self, *, now: float, packets: Iterable[QuicSentPacket]) -> None:
        lost_largest_time = 0.0
        for packet in packets:
            self.bytes_in_flight -= packet.sent_bytes
            lost_largest_time = packet.sent_time or lost_largest_time
        # One reduction per round trip of losses (a new event only for a packet sent after the last one began).
        if lost_largest_time > self._congestion_recovery_start_time:
            self._congestion_recovery_start_time = now
            self.congestion_window = max(int(self.congestion_window * LOSS_REDUCTION), self._floor)
            self.ssthresh = self.congestion_window

    def on_persistent_congestion(self) -> None:
        self.congestion_window = self._floor
        self._congestion_recovery_start_time = 0.0


register_congestion_control(NAME, ValidatorLinkCongestion)

__all__ = ["LOSS_REDUCTION", "MIN_WINDOW_DATAGRAMS", "NAME", "ValidatorLinkCongestion"]
