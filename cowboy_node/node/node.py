"""The running validator: the parts :func:`cowboy_node.node.assemble.assemble` built, and their lifecycle.

One asyncio process. The consensus service (:mod:`cowboy_node.node.consensus_service`) drives the
threshold-Simplex engine: when this validator leads a view it takes the ready transactions from the mempool
and builds the block in a worker thread (the event loop keeps serving RPC); blocks are committed once
finalized, each in one synced batch, and :class:`~cowboy_node.node.after_commit.CommitFollower` then updates the
mempool, pushes assignments and records metrics. With one validator every proposed block is final at once; with
several, blocks and votes travel over the validator peer layer. Stopping (SIGTERM/SIGINT) lets the block in
progress finish and commit, then closes the servers and the store.

Nothing here reads or serves: the RPC reads through :attr:`Node.api` (``node/api.py``), the runner transport
through :attr:`Node.link` (``node/transport_link.py``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool
from cowboy_node.consensus.stop import StopSignal
from cowboy_node.node.after_commit import CommitFollower
from cowboy_node.node.api import NodeApi
from cowboy_node.node.consensus_service import ConsensusService
from cowboy_node.node.intake import AdmissionWorkers, TxIntake
from cowboy_node.node.peer_gossip import ValidatorGossip
from cowboy_node.node.proposal_budget import ProposalBudget
from cowboy_node.node.pruner import Pruner
from cowboy_node.node.snapshot_server import SnapshotServer
from cowboy_node.node.snapshotter import Snapshotter
from cowboy_node.node.transport_link import TransportLink
from cowboy_node.node.tx_gossip import TxGossip
from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.p2p.peers import PeerNetwork
from cowboy_node.transport.service import TransportService
from cowboy_protocol.transport.preimages import ValidatorKey as TransportValidatorKey


@dataclass(frozen=True, slots=True)
class Node:
    """A validator's parts, built once, in order, by ``assemble()`` (none is attached later)."""

    chain: Chain
    """The chain: block store, head state, genesis."""
    mempool: Mempool
    """The transaction pool."""
    metrics: NodeMetrics
    """The node's Prometheus metrics."""
    index: int
    """This validator's position in the genesis validator list."""
    fee_recipient: bytes
    """Where this validator's block fees go (its genesis record)."""
    block_time_ms: int
    """Target interval between two blocks."""
    ed25519_seed: bytes
    """This validator's Ed25519 secret seed (peer identity, transport signatures)."""
    stop: StopSignal
    """The one stop request every part shares."""
    tree_lock: threading.Lock
    """The state lock: held while a block is built or committed, and by reads that must see one head."""
    workers: AdmissionWorkers
    """The signature pool of ``[mempool] admission_workers``."""
    tx_gossip: TxGossip
    """Batched transaction gossip to the other validators, and the bounded admission of theirs."""
    intake: TxIntake
    """The admission path of RPC submissions and runners' result transactions."""
    link: TransportLink
    """What the runner transport reads (its ``NodeLink``)."""
    transport: TransportService | None
    """The CIP-11 transport (None when ``CIP11_TRANSPORT_ENABLED`` is off or not asked for)."""
    net: PeerNetwork | None
    """The validator peer layer (None with one validator, or when not asked for)."""
    gossip: ValidatorGossip
    """Presence and endpoint announcements."""
    proposal_budget: ProposalBudget
    """Caps our proposals' candidates so a build takes about Δ/2."""
    pruner: Pruner
    """``[storage] retain_blocks`` pruning."""
    snapshotter: Snapshotter | None
    """``[snapshot] interval_blocks`` snapshots (None: not configured)."""
    snapshot_server: SnapshotServer | None
    """Serves this home's snapshots to validators that state-sync (None: no snapshot directory)."""
    consensus: ConsensusService
    """Runs the consensus engine: proposes, verifies, commits finalized blocks."""
    follower: CommitFollower
    """The work after each commit."""
    api: NodeApi
    """What the RPC reads and calls."""

    @property
    def halted(self) -> bool:
        """True once the block at ``chain.halt_height`` is committed (the node then stops and exits 0)."""
        return self.follower.halted

    def validator_transport_key(self) -> TransportValidatorKey:
        """This validator's Ed25519 peer key as the transport signs with it (HelloAck, pongs, assignments)."""
        return TransportValidatorKey(self.ed25519_seed)

    def request_stop(self) -> None:
        """Ask the consensus service to stop after the block in progress."""
        self.stop.request()

    def close(self) -> None:
        """Release the builder thread of a node whose :meth:`run` was never started (tests), and the signature
        pool's workers."""
        self.consensus.close()
        self._close_helpers()

    def _close_helpers(self) -> None:
        self.tx_gossip.close()
        self.workers.close()
        self.pruner.close()
        if self.snapshotter is not None:
            self.snapshotter.close()
        if self.snapshot_server is not None:
            self.snapshot_server.close()

    async def run(self) -> None:
        """Run consensus (propose, vote, commit) until stopped; then stop the signature pool's workers."""
        try:
            await self.consensus.run()
        finally:
            self._close_helpers()

    async def produce_block(self) -> None:
        """Single validator driven by hand (tests, benchmarks): propose and commit the next block now."""
        await self.consensus.produce_once()
