"""End of Block: an ordered list of steps, in the order of seeds/000's EOB diagram.

DeliverTimers → ResolveOffchain → ExecuteMailbox → Fees & Burn → SystemHooks → Commit,
one module each in ``execution/eob/``. The caller may time each step through
``observe`` (execution never reads a clock); the counters of what the steps did
are in ``ctx.eob`` (:class:`~cowboy_node.execution.context.EobReport`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from cowboy_node.execution.context import BlockContext, Observe
from cowboy_node.execution.eob.commit import commit
from cowboy_node.execution.eob.deliver_timers import deliver_timers
from cowboy_node.execution.eob.execute_mailbox import execute_mailbox
from cowboy_node.execution.eob.fees_and_burn import fees_and_burn
from cowboy_node.execution.eob.resolve_offchain import resolve_offchain
from cowboy_node.execution.eob.system_hooks import system_hooks
from cowboy_node.state.world import WorldState

EobStep = Callable[[WorldState, BlockContext], None]
"""One End-of-Block step."""

EOB_STEPS: tuple[tuple[str, EobStep], ...] = (
    ("deliver_timers", deliver_timers),
    ("resolve_offchain", resolve_offchain),
    ("execute_mailbox", execute_mailbox),
    ("fees_and_burn", fees_and_burn),
    ("system_hooks", system_hooks),
    ("commit", commit),
)
"""The steps and their names, in execution order."""


def run_end_of_block(world: WorldState, ctx: BlockContext, *, observe: Observe | None = None,
                     steps: tuple[tuple[str, EobStep], ...] = EOB_STEPS) -> None:
    """Run every End-of-Block step in order; ``observe(name)`` wraps each step when given."""
    for name, step in steps:
        with observe(name) if observe is not None else contextlib.nullcontext():
            step(world, ctx)
        ctx.eob.steps_run += (name,)
