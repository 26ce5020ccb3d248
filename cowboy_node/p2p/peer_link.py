"""What the validator peer layer needs from a link, whichever transport carries it (QUIC or TCP).

:mod:`cowboy_node.p2p.peers` is written against these two protocols only; :mod:`~cowboy_node.p2p.peer_quic`
(aioquic) and :mod:`~cowboy_node.p2p.peer_tcp` (TCP with an X25519/ChaCha20-Poly1305 record layer) implement
them. A link authenticates nothing and interprets no frame: it hands whole frame bodies up, gives the
connection's 32-byte channel binding once open, writes framed bytes, reports the bytes the peer has not yet
acknowledged (backpressure) and calls ``on_close`` exactly once.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

__all__ = ["TRANSPORTS", "LinkHandler", "PeerLink"]

TRANSPORTS = ("quic", "tcp")
"""The link transports a validator may use (``[p2p] transport``): every validator of a network names the same one."""


class PeerLink(Protocol):
    """One connection to a peer (either side)."""

    handler: LinkHandler | None
    binding: bytes
    """32 bytes unique to this connection, equal on both ends (signed in the Hello/HelloAck)."""
    peer_addr: tuple[str, int]
    close_reason: str | None
    opened: asyncio.Future[bool]
    terminated: asyncio.Event

    @property
    def closing(self) -> bool:
        """True once a close began: writes are ignored."""

    def write(self, data: bytes) -> None:
        """Write framed bytes (coalesced to the end of this loop iteration)."""

    def unacked_bytes(self) -> int:
        """Bytes written that the peer has not acknowledged yet."""

    def send_ping(self) -> None:
        """Keep an idle connection alive."""

    def close_with(self, reason: str, *, goodbye: bool = True, report: str | None = None) -> None:
        """Send ``Goodbye{reason}`` (if ``goodbye``) and close; ``on_close`` gets ``report`` or ``local:<reason>``."""

    def abort(self) -> None:
        """Close now without a Goodbye and stop every timer."""


class LinkHandler(Protocol):
    """What a :class:`PeerLink` reports to; all calls happen on the event loop."""

    def on_open(self, proto: PeerLink) -> None:
        """The link's handshake completed: ``proto.binding`` is set and frames may be written."""

    def on_body(self, proto: PeerLink, body: bytes) -> None:
        """One complete frame body (length prefix removed, not yet decoded)."""

    def on_writable(self, proto: PeerLink) -> None:
        """The peer may have acknowledged data: queued frames may fit the window now."""

    def on_close(self, proto: PeerLink, reason: str) -> None:
        """The connection is closing or closed; called exactly once and nothing follows."""
