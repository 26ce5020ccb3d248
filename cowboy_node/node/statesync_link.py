"""The short-lived peer network a state sync runs over at start-up, before the node itself exists.

Both start-up paths that install a snapshot use it: a validator with an empty data directory
(``startup.state_sync_if_empty``) and one that fell back from block sync (``statesync_fallback``). The network carries
only the snapshot channel, routed to the :class:`StateSync` it is made with; the caller starts and stops it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cowboy_node.chain.genesis import Genesis
from cowboy_node.consensus.simplex.scheme import ThresholdScheme
from cowboy_node.node.config import NodeConfig, split_host_port
from cowboy_node.node.statesync import StateSync
from cowboy_node.p2p.peers import PeerInfo, PeerLimits, PeerNetwork
from cowboy_node.snapshot.messages import CH_SNAPSHOT
from cowboy_protocol.crypto import ed25519

__all__ = ["state_sync_link", "validator_index"]


def validator_index(genesis: Genesis, ed25519_seed: bytes) -> int | None:
    """Our index in the genesis validator set, or None when the key is not a validator's."""
    public = ed25519.public_key_from_seed(ed25519_seed)
    return next((i for i, v in enumerate(genesis.validators) if v.ed25519_public_key == public), None)


def state_sync_link(cfg: NodeConfig, genesis: Genesis, ed25519_seed: bytes, me: int, *, config_path: str,
                    peers: Callable[[int], list[PeerInfo]], cert_path: Path, key_path: Path,
                    idle_timeout_s: float) -> tuple[StateSync, PeerNetwork]:
    """A :class:`StateSync` and the (not started) peer network it fetches over, each wired to the other."""
    scheme = ThresholdScheme(genesis.group_public_key, genesis.share_public_keys(), genesis.threshold, None)
    holder: list[PeerNetwork] = []

    class _Net:  # the sync needs the network and the network's handler needs the sync
        def send(self, to: int, channel: int, payload: bytes) -> bool:
            return holder[0].send(to, channel, payload)

        def connected(self) -> frozenset[int]:
            return holder[0].connected()

        def penalize(self, peer: int, reason: str) -> None:
            holder[0].penalize(peer, reason)

    sync = StateSync(_Net(), genesis, scheme)
    host, port = split_host_port(cfg.p2p_addr, path=config_path, key="p2p.addr")
    net = PeerNetwork(me=me, ed25519_seed=ed25519_seed, listen_host=host, listen_port=port, peers=peers(me),
                      validator_keys=[v.ed25519_public_key for v in genesis.validators], network_id=genesis.hash(),
                      cert_path=cert_path, key_path=key_path,
                      on_message=lambda s, c, p: sync.receive(s, p) if c == CH_SNAPSHOT else None,
                      limits=PeerLimits(max_message_bytes=cfg.p2p_max_message_bytes, idle_timeout_s=idle_timeout_s,
                                        transport=cfg.p2p_transport))
    holder.append(net)
    return sync, net
