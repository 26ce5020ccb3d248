"""Admission limits of the QUIC frame server: caps, per-peer Hello rate limit, counters (CIP-11 §6.2, §6.6).

aioquic creates connection state for every client Initial and caps nothing by itself
(DESIGN.md §4 "Transport"). :class:`ServerLimits` holds the knobs the adapter in
``cowboy_protocol/quic/adapter.py`` enforces *before* it creates that state; :class:`PeerRateLimiter` is
the per-source-IP token bucket behind the §6.2 "Validators MUST rate-limit unauthenticated
Hello per peer"; :class:`ServerStats` exposes what happened, as plain counters, for metrics.

Nothing here touches the network or a clock: times are passed in (``now`` in seconds from
any monotonic origin), so the bucket is unit-testable without sleeping.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cowboy_protocol.netaddr import normalize_ip
from cowboy_protocol.transport.frames import MAX_FRAME_BYTES

__all__ = ["PeerRateLimiter", "ServerLimits", "ServerStats", "peer_key"]


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Caps and timeouts of one QUIC frame server; the defaults suit one validator with ~5,000 runners (§6.6)."""

    max_connections: int = 10_000
    """Live QUIC connections (any state). An Initial beyond it is refused with a QUIC
    CONNECTION_REFUSED close before any connection state exists."""
    max_half_open: int = 512
    """Connections not yet authenticated: TLS handshake in progress, or handshake done but the
    session has not called ``FrameConnection.mark_authenticated``. New ones beyond it are refused
    like ``max_connections`` (§6.6 "cap concurrent half-open handshakes")."""
    retry_threshold: int = 64
    """While the half-open count is ≥ this, a client Initial without a token is answered with a
    stateless QUIC Retry (address validation, RFC 9000 §8.1), so spoofed sources create no state.
    0 = always Retry."""
    hello_rate_per_peer: float = 2.0
    """Token-bucket refill, new connections per second per source IP. A connection admitted with an
    empty bucket completes its handshake but is answered with ``Goodbye{RateLimited}`` and closed at
    its first stream byte (its Hello), without ever reaching the session (§6.2)."""
    hello_burst_per_peer: int = 10
    """Bucket size: connections a source IP may open back to back."""
    idle_timeout_s: float = 30.0
    """QUIC idle timeout (RFC 9000 §10.1): a connection silent this long is dropped by both ends.
    Runners ping every block (HEARTBEAT_BLOCKS = 1), so 30 s is two PRESENCE_TIMEOUT_BLOCKS windows."""
    auth_timeout_s: float = 10.0
    """A connection still unauthenticated this long after its first Initial is closed
    (``Goodbye{IdleTimeout, "auth_timeout"}``) so a silent peer cannot hold a half-open slot."""
    max_frame_bytes: int = MAX_FRAME_BYTES
    """Largest accepted frame ``length`` (type byte + payload, §12.1, §13); checked on the 4-byte prefix."""
    goodbye_linger_s: float = 1.0
    """After sending a Goodbye, how long to wait for the peer's acknowledgement of it before the
    QUIC close (the close is sent as soon as the Goodbye is acknowledged)."""
    max_tracked_peers: int = 65_536
    """Bound on the rate limiter's table of source IPs (memory under a spoofed flood)."""
    stateless_reset_rate: float = 10_000.0
    """Stateless resets (RFC 9000 §10.3) sent per second at most, over all peers; each is smaller than the
    packet that caused it, so this bounds CPU, not amplification. A restarted validator answers every runner's
    next packet with one, so keep it above the expected runner count per second."""
    stateless_reset_burst: int = 10_000
    """Burst of that budget."""

    def __post_init__(self) -> None:
        """Reject values that would disable a cap by accident."""
        for name in ("max_connections", "max_half_open", "hello_burst_per_peer", "max_frame_bytes",
                     "max_tracked_peers", "stateless_reset_burst"):
            if getattr(self, name) < 1:
                raise ValueError(f"ServerLimits.{name} must be ≥ 1")
        if self.retry_threshold < 0:
            raise ValueError("ServerLimits.retry_threshold must be ≥ 0")
        for name in ("hello_rate_per_peer", "idle_timeout_s", "auth_timeout_s", "goodbye_linger_s",
                     "stateless_reset_rate"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ServerLimits.{name} must be > 0")
        if self.max_frame_bytes > MAX_FRAME_BYTES:
            raise ValueError(f"ServerLimits.max_frame_bytes must be ≤ MAX_FRAME_BYTES ({MAX_FRAME_BYTES})")


@dataclass(slots=True)
class ServerStats:
    """Counters of one server, for metrics (read them; only the server writes them)."""

    connections_open: int = 0
    """Live QUIC connections (any state, including closing)."""
    half_open: int = 0
    """Live connections not yet authenticated."""
    accepted_total: int = 0
    """Connections whose state was created (admitted Initials)."""
    opened_total: int = 0
    """Connections handed to a handler (``on_open``)."""
    authenticated_total: int = 0
    """``mark_authenticated`` calls."""
    closed_total: int = 0
    """Connections whose QUIC state ended."""
    retries_sent: int = 0
    """QUIC Retry packets sent (address validation while the half-open count ≥ ``retry_threshold``)."""
    ignored_datagrams: int = 0
    """Datagrams dropped without effect: unparseable header, unknown connection, undersized Initial."""
    handler_errors: int = 0
    """Exceptions raised by a connection handler (the connection is closed; the server keeps serving)."""
    stateless_resets_sent: int = 0
    """Stateless resets sent for short-header packets of unknown connections (RFC 9000 §10.3)."""
    refused: dict[str, int] = field(default_factory=dict)
    """Refusals by reason: ``max_connections``, ``max_half_open``, ``invalid_token``, ``rate_limited``,
    ``auth_timeout``, ``stateless_reset_rate`` (a reset not sent: over ``stateless_reset_rate``)."""
    decode_errors: dict[str, int] = field(default_factory=dict)
    """Frame decode failures by ``TransportError.code`` (``frame_too_large``, ``malformed_body``, …)."""
    stream_errors: dict[str, int] = field(default_factory=dict)
    """Stream misuse by code: ``unexpected_stream``, ``stream_fin``, ``stream_reset``."""

    @staticmethod
    def bump(counter: dict[str, int], key: str) -> None:
        """Add one to ``counter[key]``."""
        counter[key] = counter.get(key, 0) + 1

    def snapshot(self) -> dict[str, object]:
        """A JSON-ready copy (dict counters sorted by key)."""
        out: dict[str, object] = {}
        for name in self.__slots__:
            value = getattr(self, name)
            out[name] = dict(sorted(value.items())) if isinstance(value, dict) else value
        return out


def peer_key(host: str) -> str:
    """The rate-limit key of a source address: the IP, with IPv4-mapped IPv6 folded to IPv4."""
    return normalize_ip(host)


class PeerRateLimiter:
    """Token bucket per peer key: ``burst`` tokens, refilled at ``rate_per_s``; one token per admission."""

    def __init__(self, rate_per_s: float, burst: int, *, max_peers: int = 65_536) -> None:
        """``max_peers`` bounds the table; beyond it, full buckets are forgotten first, then the oldest."""
        self._rate = rate_per_s
        self._burst = float(burst)
        self._max_peers = max_peers
        self._buckets: dict[str, tuple[float, float]] = {}  # peer → (tokens, time of last update)

    def __len__(self) -> int:
        """Peers currently tracked."""
        return len(self._buckets)

    def tokens(self, peer: str, now: float) -> float:
        """Tokens ``peer`` would have at ``now`` (full bucket if unknown)."""
        tokens, last = self._buckets.get(peer, (self._burst, now))
        return min(self._burst, tokens + max(0.0, now - last) * self._rate)

    def allow(self, peer: str, now: float) -> bool:
        """Take one token from ``peer``'s bucket if it has one; False means rate-limited."""
        tokens = self.tokens(peer, now)
        allowed = tokens >= 1.0
        if allowed:
            tokens -= 1.0
        self._buckets.pop(peer, None)  # re-insert: dict order is last-use order, used for eviction
        self._buckets[peer] = (tokens, now)
        if len(self._buckets) > self._max_peers:
            self._prune(now)
        return allowed

    def _prune(self, now: float) -> None:
        # A full bucket carries no information; forgetting it changes nothing for that peer.
        for p in [p for p in self._buckets if self.tokens(p, now) >= self._burst]:
            del self._buckets[p]
        # Still too many (a flood of distinct sources): forget the least recently used half.
        if len(self._buckets) > self._max_peers:
            for p in list(self._buckets)[: len(self._buckets) - self._max_peers // 2]:
                del self._buckets[p]
