"""What validators tell each other beside consensus: which runners each holds sessions to (CIP-11 §8.2, merged
into the PresenceInput a leader proposes) and where runners reach each one (its QUIC endpoint and HTTP API)."""

from __future__ import annotations

import time
from collections.abc import Callable

from cowboy_node.chain.chain import Chain
from cowboy_node.execution.runners.registry_state import registry_size
from cowboy_node.execution.system_state import get_cip11_flags
from cowboy_node.node.consensus_service import Network
from cowboy_node.observability.logging import get_logger
from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.p2p.endpoint_gossip import (
    CH_ENDPOINTS,
    EndpointBook,
    EndpointRefused,
    make_endpoint_announcement,
)
from cowboy_node.p2p.peer_router import Handler
from cowboy_node.p2p.presence_gossip import CH_PRESENCE, GossipRefused, PresenceGossip, make_announcement
from cowboy_node.state.world import WorldState
from cowboy_node.types.presence import encode_presence

log = get_logger("cowboy.node")

ENDPOINT_ANNOUNCE_S = 5.0
"""How often a validator re-announces its QUIC endpoint to the others."""


class ValidatorGossip:
    """Presence and endpoint announcements, both ways (see the module docstring).

    ``local_presence()`` is this validator's own sessions (the transport's, or none); ``net`` the peer layer
    (None with one validator); ``quic_advertise``/``rpc_advertise`` what we announce (None/"": nothing, the
    transport is off)."""

    def __init__(self, chain: Chain, *, ed_seed: bytes, ed_pub: bytes, net: Network | None,
                 local_presence: Callable[[], frozenset[int]], sessions: bool, metrics: NodeMetrics,
                 quic_advertise: str | None = None, rpc_advertise: str = "") -> None:
        self._chain = chain
        self._ed_seed = ed_seed
        self._net = net
        self._metrics = metrics
        self.local_presence = local_presence
        """Registry indices of runners with a live authenticated, accepting session here (CIP-11 §7.4)."""
        self._sessions = sessions
        self.quic_advertise = quic_advertise
        """Our runner-facing QUIC endpoint (None when the transport does not run)."""
        self.rpc_advertise = rpc_advertise
        """Our HTTP API URL as announced to the other validators ("" when none)."""
        self._genesis_hash = chain.genesis.hash()
        keys = tuple(v.ed25519_public_key for v in chain.genesis.validators)
        self.presence = PresenceGossip(self._genesis_hash, keys, ed_pub,
                                       on_refused=lambda reason: metrics.presence_gossip.labels(result=reason).inc())
        """Other validators' presence announcements (CIP-11 §8.2), merged into the PresenceInput we propose."""
        self.endpoints = EndpointBook(self._genesis_hash, keys, ed_pub)
        """The other validators' runner-facing QUIC endpoints, as they announced them."""
        self._endpoint_seq = 0
        self._endpoint_announced_at: float | None = None

    def peer_handlers(self) -> dict[int, Handler]:
        """The peer channels this serves (registered on the peer router at assembly)."""
        return {CH_PRESENCE: self._on_presence, CH_ENDPOINTS: self._on_endpoint}

    def presence_input(self, parent_world: WorldState) -> bytes | None:
        """The PresenceInput of a block built on ``parent_world``: the local presence encoded over
        |registry(H−1)| whenever the field is required or shadowed (CIP-11 §7.4)."""
        flags = get_cip11_flags(parent_world)
        if not (flags.CIP11_PRESENT_FIRST_ENABLED or flags.CIP11_PRESENCE_SHADOW_ENABLED):
            return None
        size = registry_size(parent_world)
        # Mode B (§8.2): our own sessions plus what the other validators announced (fail-open: no gossip, no harm).
        present = {i for i in self.local_presence() if i < size} | self.presence.union(self._chain.height, size)
        return encode_presence(present, size)

    def _on_presence(self, sender: int, payload: bytes) -> None:
        """A presence announcement from validator ``sender`` (refusals are counted by the gossip book)."""
        try:
            self.presence.receive(sender, payload, self._chain.height)
        except GossipRefused as e:
            log.debug("presence announcement refused", sender=sender, reason=e.reason, error=str(e))
            return
        self._metrics.presence_gossip.labels(result="accepted").inc()

    def _on_endpoint(self, sender: int, payload: bytes) -> None:
        try:
            self.endpoints.receive(sender, payload)
        except EndpointRefused as e:
            log.debug("endpoint announcement refused", sender=sender, reason=e.reason, error=str(e))

    def after_commit(self, height: int) -> None:
        """After each committed block: announce our presence, and our endpoint when it is due."""
        self._announce_presence(height)
        self._announce_endpoint()

    def _announce_endpoint(self) -> None:
        """Every ENDPOINT_ANNOUNCE_S: tell the other validators where runners reach us (peers that connect
        later hear it at the next round)."""
        net = self._net
        now = time.monotonic()
        if net is None or self.quic_advertise is None or (
                self._endpoint_announced_at is not None and now - self._endpoint_announced_at < ENDPOINT_ANNOUNCE_S):
            return
        self._endpoint_announced_at = now
        self._endpoint_seq = max(self._endpoint_seq + 1, int(time.time() * 1000))
        a = make_endpoint_announcement(self._ed_seed, self._genesis_hash, self.quic_advertise, self._endpoint_seq,
                                       self.rpc_advertise)
        net.broadcast(CH_ENDPOINTS, a.encode())

    def _announce_presence(self, height: int) -> None:
        """Tell the other validators which runners we hold sessions to (after each committed block)."""
        net = self._net
        if net is None or not self._sessions:
            return
        present = self.local_presence()
        basis = max(present) + 1 if present else 0  # any basis holding every index; receivers cut to theirs
        a = make_announcement(self._ed_seed, self._genesis_hash, height, basis, present)
        net.broadcast(CH_PRESENCE, a.encode())
