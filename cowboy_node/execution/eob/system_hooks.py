"""End-of-Block step 5 "SystemHooks" (seeds/000 EOB-5): interval timer write-back, runner unbonding and
governance apply.

The interval timers DeliverTimers fired (FIFO) or materialised (Globalbox) in
this block are rescheduled at ``h + every_blocks`` (``timers/interval.py``).
Runner stakes whose unbonding period ends at or before this height are returned
(``runners/registry.py``: ``release_unbonded``). Governance apply: the CIP-11
governance changes scheduled for height ``h + 1`` are applied last
(``governance.py``: ``activate_due``), so the next block — and its proposer,
which reads the parent state — starts under them. The diagram's other system
hooks (archive, index, VRF) have no counterpart in this node; the older config
instructions (UpdateTimerConfig …) take effect when they execute.
"""

from __future__ import annotations

from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.governance import activate_due
from cowboy_node.execution.runners.registry import release_unbonded
from cowboy_node.execution.timers.interval import roll_forward
from cowboy_node.state.world import WorldState


def system_hooks(world: WorldState, ctx: BlockContext) -> None:
    """Roll this block's fired interval timers forward, pay back the runner stakes whose unbonding ended, then
    apply the governance changes due at the next height."""
    ctx.eob.intervals_rolled += roll_forward(world, ctx.env.height, ctx.eob.fired_timers)
    release_unbonded(world, ctx)
    activate_due(world, ctx)
