"""End-of-Block step 6 "Commit" (seeds/000 EOB-6): seal the block's state changes.

The write itself is the chain layer's: it stores the state ops together with the
block and its receipts in one atomic, synced batch (``Chain.commit``). In
execution terms Commit is the point after which nothing changes the block's state:
it computes the state root and the store ops of everything the block wrote —
transactions, timers, Mailbox segment, fees — and records the root in
``ctx.eob.committed_root``. ``WorldState`` caches that result, so the caller's
``prepare_commit`` after End of Block returns it without recomputing, and a write
made after this step would change the version and be visible as a different root.
"""

from __future__ import annotations

from cowboy_node.execution.context import BlockContext
from cowboy_node.state.world import WorldState


def commit(world: WorldState, ctx: BlockContext) -> None:
    """Compute (and cache) the block's state root and store ops; record the root."""
    root, _ops = world.prepare_commit()
    ctx.eob.committed_root = root
