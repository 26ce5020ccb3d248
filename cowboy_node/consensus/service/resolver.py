"""The resolver: this validator's place among its peers' finalized heights.

Every second it announces its finalized height and lets block sync ask peers that are ahead for runs of
finalized blocks (:class:`~cowboy_node.consensus.service.ports.BlockSync`: ``node/sync_resolver.py`` serves and
fetches them, off the event loop); it hands block sync the sync channel's messages; and when synced blocks were
committed it gives them to the application's after-commit work and moves the engine's floor to the last of them.
"""

from __future__ import annotations

from cowboy_node.chain.chain import PreparedBlock
from cowboy_node.consensus.service.application import Application
from cowboy_node.consensus.service.ports import BlockSync, ConsensusMetrics, EventLog, Network, Runtime
from cowboy_node.consensus.service.voter import Voter
from cowboy_node.consensus.sync_messages import CH_SYNC
from cowboy_node.types.block import Block


class Resolver:
    """Status, the sync channel and catching up, for one validator (see the module docstring)."""

    def __init__(self, sync: BlockSync, *, voter: Voter, application: Application, net: Network | None,
                 runtime: Runtime, metrics: ConsensusMetrics, log: EventLog) -> None:
        self.sync = sync
        """Serves and fetches finalized blocks."""
        self.voter = voter
        self.application = application
        self.net = net
        self.runtime = runtime
        self.metrics = metrics
        self.log = log
        self.syncing = False
        """True while this validator is catching up with peers that are ahead (as of the last sync message or
        tick)."""

    def on_sync(self, sender: int, payload: bytes) -> None:
        """A message of the sync channel (raises DecodeError for a malformed one)."""
        self.sync.on_sync(sender, payload)
        self.syncing = self.sync.syncing

    def status_tick(self) -> None:
        """The once-a-second step: announce the finalized height, count the peers, sync if behind."""
        if self.net is not None:
            self.net.broadcast(CH_SYNC, self.sync.status())
            self.metrics.consensus_gauges(peers=len(self.net.connected()))
        self.maybe_sync()

    def maybe_sync(self, force: bool = False) -> None:
        """Let block sync ask peers that are ahead for blocks (``force``: one block behind is enough)."""
        self.sync.tick(force)
        self.syncing = self.sync.syncing

    def on_synced(self, last: Block, seed: bytes, committed: list[PreparedBlock]) -> None:
        """Synced blocks were committed (on the event loop): the node's after-commit work, then the engine's floor
        moves to the last of them."""
        self.application.synced(committed)
        self.log.info("synced finalized blocks", count=len(committed), height=last.header.height)
        engine = self.voter.engine
        if engine is not None:
            self.voter.act(engine.advance_floor(last.header.round.view, last.hash(), seed, self.voter.now()))
        self.runtime.wake_commit()


__all__ = ["Resolver"]
