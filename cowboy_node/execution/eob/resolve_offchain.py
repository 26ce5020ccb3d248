"""End-of-Block step 2 "ResolveOffchain" (seeds/000 EOB-2): materialise verified runner results.

This node has no off-chain job system yet: the runner inbox it would read
(results ≤ h, verified, not disputed) does not exist, so there is nothing to
materialise. The step is kept at its place in the pipeline so the order stays
the diagram's; the jobs issue fills it in (writing Mailbox entries with the same
ordering rules as timer fires).
"""

from __future__ import annotations

from cowboy_node.execution.context import BlockContext
from cowboy_node.state.world import WorldState


def resolve_offchain(world: WorldState, ctx: BlockContext) -> None:
    """Do nothing: no runner inbox exists until the jobs issue adds one (see the module docstring)."""
    del world, ctx
