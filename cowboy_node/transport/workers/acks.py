"""Let the HeartbeatPong carry the ACK of its HeartbeatPing (one datagram per heartbeat from the worker, not two).

aioquic delays the ACK of an ack-eliciting packet by ``K_GRANULARITY`` (1 ms) and writes it into an outgoing
packet only once that time has come. A worker's pong comes back from the validator process after a local round
trip, often later than 1 ms on a loaded machine, so the ping's ACK left alone (packet build, encryption,
``sendto``, timer wake-up) and the pong followed in a second datagram. Two moves, both within RFC 9000 §13.2.1:

- :func:`expect_reply` — when a HeartbeatPing is relayed, the ACK may wait up to ``REPLY_ACK_DELAY_S``, below
  the ``max_ack_delay`` (25 ms) aioquic advertises, for the reply;
- :func:`ack_with_next_packet` — when the reply is queued, a pending ACK becomes due at once (an endpoint may
  always acknowledge earlier), so aioquic writes it into the pong's packet.
"""

from __future__ import annotations

from aioquic.quic.connection import QuicConnection
from aioquic.tls import Epoch

REPLY_ACK_DELAY_S = 0.015
"""How long an ACK may wait for the reply it would ride with (aioquic advertises max_ack_delay = 25 ms)."""


def expect_reply(quic: QuicConnection, now: float) -> None:
    """A frame that gets an immediate reply was received: let its pending ACK wait for that reply's packet."""
    space = quic._spaces.get(Epoch.ONE_RTT)
    if space is not None and space.ack_at is not None:
        space.ack_at = max(space.ack_at, now + REPLY_ACK_DELAY_S)


def ack_with_next_packet(quic: QuicConnection, now: float) -> None:
    """If an ACK of 1-RTT packets is pending, make it due now (it then rides in the next packet sent)."""
    space = quic._spaces.get(Epoch.ONE_RTT)
    if space is not None and space.ack_at is not None and space.ack_at > now:
        space.ack_at = now
