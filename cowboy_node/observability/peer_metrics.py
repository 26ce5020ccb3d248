"""Prometheus metrics of the validator peer layer (``cowboy_node.p2p.peers``), namespace ``cowboy``, ``p2p_``.

Defined on the registry the caller passes (the node's own, see ``metrics.NodeMetrics``), so several nodes in one
process never collide. Label values are low-cardinality: ``channel`` is 0..255 (the node uses 0..3), ``reason``
one of the fixed tuples below, all exported at 0 from the start.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["DROP_REASONS", "HANDSHAKE_FAILURE_REASONS", "NAMESPACE", "PeerMetrics"]

NAMESPACE = "cowboy"
DROP_REASONS = ("rate_limited", "too_large", "not_connected", "queue_full", "bad_frame", "penalized")
"""Why a message was dropped (sending: not_connected, too_large, queue_full; receiving: the others; penalized: its
sender is serving a back-off)."""
HANDSHAKE_FAILURE_REASONS = ("wrong_network", "unknown_validator", "bad_signature", "unexpected_identity",
                             "handshake_timeout", "bad_frame", "incompatible_version")
"""Why a Hello/HelloAck was refused by this node."""


class PeerMetrics:
    """The ``cowboy_p2p_*`` metrics, registered on ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        ns, r = NAMESPACE, registry
        self.peers_connected = Gauge(
            "p2p_peers_connected", "Peers with an authenticated outbound connection (the ones we can send to).",
            namespace=ns, registry=r)
        self.messages_sent = Counter(
            "p2p_messages_sent", "Messages written to a peer connection, by channel.", ["channel"],
            namespace=ns, registry=r)
        self.bytes_sent = Counter(
            "p2p_bytes_sent", "Payload bytes written to peer connections, by channel.", ["channel"],
            namespace=ns, registry=r)
        self.messages_received = Counter(
            "p2p_messages_received", "Messages received from authenticated peers and delivered, by channel.",
            ["channel"], namespace=ns, registry=r)
        self.bytes_received = Counter(
            "p2p_bytes_received", "Payload bytes received and delivered, by channel.", ["channel"],
            namespace=ns, registry=r)
        self.messages_dropped = Counter(
            "p2p_messages_dropped", "Messages dropped, by reason: " + ", ".join(DROP_REASONS) + ".", ["reason"],
            namespace=ns, registry=r)
        self.messages_dropped_by_channel = Counter(
            "p2p_messages_dropped_by_channel", "Messages dropped whose channel is known, by channel and reason "
            "(the same drops as p2p_messages_dropped).", ["channel", "reason"], namespace=ns, registry=r)
        self.handshake_failures = Counter(
            "p2p_handshake_failures", "Peer handshakes this node refused, by reason: "
            + ", ".join(HANDSHAKE_FAILURE_REASONS) + ".", ["reason"], namespace=ns, registry=r)
        self.reconnects = Counter(
            "p2p_reconnects", "Outbound connections re-established after a disconnection.", namespace=ns, registry=r)
        self.handler_errors = Counter(
            "p2p_handler_errors", "Exceptions raised by the message callback (the connection stays up).",
            namespace=ns, registry=r)
        self.penalties = Counter(
            "p2p_penalties", "Peers disconnected for a back-off (PeerNetwork.penalize), by reason.", ["reason"],
            namespace=ns, registry=r)
        for reason in DROP_REASONS:
            self.messages_dropped.labels(reason=reason)
        for reason in HANDSHAKE_FAILURE_REASONS:
            self.handshake_failures.labels(reason=reason)
