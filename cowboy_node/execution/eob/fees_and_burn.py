"""End-of-Block step 4 "Fees & Burn": settle the block's fees and move the basefees (CIP-3).

Runs after every step that uses cycles or cells (transactions, DeliverTimers,
ExecuteMailbox), so the next basefees see the whole block's usage.
"""

from __future__ import annotations

from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.fees import next_basefee
from cowboy_node.execution.system_state import add_burned, get_account, put_account, set_basefees
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import Account


def fees_and_burn(world: WorldState, ctx: BlockContext) -> None:
    """Credit tips to the proposer, record the burn, set next block's basefees."""
    if ctx.tips:
        acct = get_account(world, ctx.env.fee_recipient)
        put_account(world, ctx.env.fee_recipient, Account(acct.balance + ctx.tips, acct.nonce))
    add_burned(world, ctx.burned)
    cfg = ctx.basefee_config
    set_basefees(
        world,
        next_basefee(ctx.cycle_basefee, ctx.cycles_used, cfg.cycles_target, cfg),
        next_basefee(ctx.cell_basefee, ctx.cells_used, cfg.cells_target, cfg),
    )
