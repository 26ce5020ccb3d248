"""Per-peer budgets: what one validator peer may make this node spend, refilled over time.

A peer's requests (block bodies, sync runs, certificate fetches) cost this node CPU, disk reads and upload bytes.
Each kind of request has its own budget per peer, so one faulty peer exhausts only its own share. The caller passes
``now`` (monotonic seconds): tests hold time still or move it explicitly.
"""

from __future__ import annotations

from cowboy_node.p2p.peer_frames import TokenBucket

__all__ = ["PeerBudgets"]


class PeerBudgets:
    """One token bucket of the same shape (``rate`` units per second, ``burst`` banked, full at first) per peer."""

    def __init__(self, rate: float, burst: float) -> None:
        if rate <= 0 or burst <= 0:
            raise ValueError("a budget needs a positive rate and burst")
        self.rate = rate
        self.burst = burst
        self._by_peer: dict[int, TokenBucket] = {}

    def take(self, peer: int, cost: float, now: float) -> bool:
        """Spend ``cost`` of ``peer``'s budget at ``now``; False (nothing spent) when it does not have that much."""
        bucket = self._by_peer.get(peer)
        if bucket is None:
            bucket = self._by_peer[peer] = TokenBucket(self.rate, self.burst, now)
        return bucket.take(cost, now)
