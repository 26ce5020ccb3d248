"""Let a reply carry the ACK of the packet it answers (one datagram per request/reply, not two).

aioquic delays the ACK of an ack-eliciting packet by ``K_GRANULARITY`` (1 ms) and writes it into an outgoing
packet only once that time has come. A HeartbeatPong written right after its HeartbeatPing was read therefore
left in one datagram and the ping's ACK followed alone 1 ms later (packet build, encryption, ``sendto`` and a
timer wake-up for nothing). Two moves, both within RFC 9000 §13.2.1 (an endpoint may always acknowledge
earlier, and may delay an ACK up to the ``max_ack_delay`` it advertised):

- :func:`ack_with_next_packet` — when stream data is queued, a pending ACK becomes due at once, so aioquic
  writes it into the packet that carries the data (``FramedProtocol.send_raw`` does this on both ends);
- :func:`expect_reply` — when a frame is received whose reply comes later (a QUIC worker relays the ping to the
  validator process), the ACK may wait up to ``REPLY_ACK_DELAY_S`` for that reply.
"""

from __future__ import annotations

from aioquic.quic.connection import QuicConnection
from aioquic.tls import Epoch

__all__ = ["REPLY_ACK_DELAY_S", "ack_with_next_packet", "expect_reply"]

REPLY_ACK_DELAY_S = 0.015
"""How long an ACK may wait for the reply it would ride with (aioquic advertises max_ack_delay = 25 ms)."""


def expect_reply(quic: QuicConnection, now: float) -> None:
    """A frame that gets a reply soon was received: let its pending ACK wait for that reply's packet."""
    space = quic._spaces.get(Epoch.ONE_RTT)  # aioquic has no public ACK-delay control
    if space is not None and space.ack_at is not None:
        space.ack_at = max(space.ack_at, now + REPLY_ACK_DELAY_S)


def ack_with_next_packet(quic: QuicConnection, now: float) -> None:
    """If an ACK of 1-RTT packets is pending, make it due now (it then rides in the next packet sent)."""
    space = quic._spaces.get(Epoch.ONE_RTT)
    if space is not None and space.ack_at is not None and space.ack_at > now:
        space.ack_at = now
