"""End of Block: an ordered list of steps, one line each (seeds/000 EOB diagram).

DeliverTimers → ResolveOffchain → ExecuteMailbox → Fees & Burn → SystemHooks → Commit.
Steps not yet part of the chain are absent from the list rather than stubbed;
each later capability inserts its step at its place in this order. Commit is
done by the caller (one atomic batch with the block).
"""

from __future__ import annotations

from collections.abc import Callable

from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.eob_fees import fees_and_burn
from cowboy_node.state.world import WorldState

EobStep = Callable[[WorldState, BlockContext], None]

EOB_STEPS: tuple[tuple[str, EobStep], ...] = (
    ("fees_and_burn", fees_and_burn),
)


def run_end_of_block(world: WorldState, ctx: BlockContext) -> None:
    """Run every End-of-Block step in order."""
    for _name, step in EOB_STEPS:
        step(world, ctx)
