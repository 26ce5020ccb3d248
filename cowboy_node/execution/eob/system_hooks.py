"""End-of-Block step 5 "SystemHooks" (seeds/000 EOB-5): interval timer write-back and runner unbonding.

The interval timers DeliverTimers fired (FIFO) or materialised (Globalbox) in
this block are rescheduled at ``h + every_blocks`` (``timers/interval.py``).
Runner stakes whose unbonding period ends at or before this height are returned
(``runners/registry.py``: ``release_unbonded``). The
diagram's other system hooks (archive, index, VRF, governance apply) have no
counterpart in this node: governance instructions take effect when they execute.
"""

from __future__ import annotations

from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.runners.registry import release_unbonded
from cowboy_node.execution.timers.interval import roll_forward
from cowboy_node.state.world import WorldState


def system_hooks(world: WorldState, ctx: BlockContext) -> None:
    """Roll this block's fired interval timers forward, then pay back the runner stakes whose unbonding ended."""
    ctx.eob.intervals_rolled += roll_forward(world, ctx.env.height, ctx.eob.fired_timers)
    release_unbonded(world, ctx)
