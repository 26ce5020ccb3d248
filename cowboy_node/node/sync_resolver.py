"""The resolver: the part of consensus that fetches and serves finalized blocks (issue 32: voter / application /
resolver, as commonware's simplex actors).

:class:`Resolver` is built by the consensus service with what it needs (the chain, the store's consensus records,
the threshold scheme, the peer layer, the builder thread) and composes:

- :class:`~cowboy_node.node.sync_server.SyncServer`: answers peers' SyncRequests and BlockRequests from stored
  bytes off the event loop, and budgets their Fetches;
- :class:`~cowboy_node.node.sync_client.SyncClient`: catches up with peers that are ahead (pipelined requests,
  verified pages, sliced application); ``fallback`` (issue 34) is told each tick what the peers claim, and may
  restart the node into a state sync (``node/statesync_fallback.py``).

The service hands it every message of the sync channel (:meth:`Resolver.on_sync`), asks it before the engine sees a
Fetch (:meth:`Resolver.allow_fetch`), and calls :meth:`Resolver.tick` every second with its Status broadcast.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from cowboy_node.chain.chain import Chain, PreparedBlock
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.consensus.simplex.scheme import Scheme
from cowboy_node.consensus.sync_messages import (
    BlockRequest,
    PackedPage,
    Status,
    SyncPage,
    SyncPruned,
    SyncRequest,
    SyncResponse,
    decode_sync,
    encode_sync,
)
from cowboy_node.node.statesync_fallback import PeerSyncView
from cowboy_node.node.sync_client import FetchLimits, SyncClient
from cowboy_node.node.sync_server import ServeLimits, SyncServer
from cowboy_node.node.sync_verify import PageVerifier
from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.types.block import Block


class ResolverNetwork(Protocol):
    """What the resolver needs from the validator peer layer."""

    def send(self, to: int, channel: int, payload: bytes) -> bool: ...

    def connected(self) -> frozenset[int]: ...

    def penalize(self, peer: int, reason: str) -> None: ...


class Resolver:
    """Serves and fetches finalized blocks for one validator (see the module docstring)."""

    def __init__(self, chain: Chain, records: ConsensusRecords, scheme: Scheme, *,
                 net: Callable[[], ResolverNetwork | None], metrics: NodeMetrics,
                 in_builder: Callable[[Callable[[], Any]], Awaitable[Any]], spawn: Callable[[object], None],
                 memory_body: Callable[[bytes], Block | None],
                 on_applied: Callable[[Block, bytes, list[PreparedBlock]], None],
                 signature_checked: Callable[[bytes], bool] | None = None,
                 clock: Callable[[], float] = time.monotonic, serve: ServeLimits | None = None,
                 fetch: FetchLimits | None = None, verify_workers: int = 0,
                 fallback: Callable[[int, dict[int, PeerSyncView]], None] | None = None) -> None:
        self.verifier = PageVerifier(scheme, verify_workers)
        """Verifies answers off the event loop (``verify_workers`` processes; 0: a thread)."""

        def body_encoder(digest: bytes) -> Callable[[], bytes] | None:
            block = memory_body(digest)  # a body held in memory (not yet committed): encoded in a serving thread
            return None if block is None else block.encode

        def connected() -> frozenset[int]:
            n = net()
            return frozenset() if n is None else n.connected()

        self.server = SyncServer(chain.blocks, records, head=lambda: chain.height, net=net, metrics=metrics,
                                 clock=clock, spawn=spawn, limits=serve, memory_body=body_encoder,
                                 earliest=chain.earliest_height)  # issue 34: refuse pruned heights typed
        """Answers peers' requests."""
        self.client = SyncClient(chain, net=net, metrics=metrics, clock=clock, in_builder=in_builder,
                                 verify=self.verifier.verify, spawn=spawn, connected=connected, on_applied=on_applied,
                                 signature_checked=signature_checked, limits=fetch, fallback=fallback)
        """Catches up with peers."""
        self._chain = chain

    @property
    def syncing(self) -> bool:
        """True while a trusted peer is two or more finalized blocks ahead."""
        return self.client.syncing

    def on_sync(self, sender: int, payload: bytes) -> None:
        """A message of the sync channel (raises DecodeError for a malformed one)."""
        msg = decode_sync(payload)
        if isinstance(msg, Status):
            self.client.on_status(sender, msg.height)
        elif isinstance(msg, BlockRequest):
            self.server.on_block_request(sender, msg.digest)
        elif isinstance(msg, SyncRequest):
            self.server.on_sync_request(sender, msg)
        elif isinstance(msg, SyncResponse | SyncPage | PackedPage):
            self.client.on_answer(sender, msg)
        elif isinstance(msg, SyncPruned):  # issue 34: that peer pruned what we asked for
            self.client.on_pruned(sender, msg.earliest)

    def allow_fetch(self, sender: int, views: int) -> bool:
        """Whether a Fetch of ``views`` views from ``sender`` is within its budget (refused and counted if not)."""
        return self.server.allow_fetch(sender, views)

    def status(self) -> bytes:
        """This validator's Status message (its finalized height)."""
        return encode_sync(Status(self._chain.height))

    def tick(self, force: bool = False) -> None:
        """Expire late answers and send the requests the window allows (``force``: one block behind is enough)."""
        self.client.plan(force)

    def close(self) -> None:
        """Wait for the reads and verifications in progress (before the store closes)."""
        self.server.close()
        self.verifier.close()


__all__ = ["Resolver", "ResolverNetwork"]
