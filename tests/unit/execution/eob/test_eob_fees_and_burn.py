"""EOB step 4 Fees & Burn: tips to the proposer, burn recorded, next basefees from the block's usage."""

from __future__ import annotations

from cowboy_node.execution.eob.fees_and_burn import fees_and_burn
from cowboy_node.execution.fees import next_basefee
from cowboy_node.execution.system_state import get_basefees, get_burned
from tests.unit.eob_helpers import PROPOSER, balance, make_ctx, make_world


def test_tips_burn_and_basefees() -> None:
    world = make_world()
    ctx = make_ctx(3, cycle_basefee=1000, cell_basefee=100)
    ctx.tips, ctx.burned = 77, 500
    ctx.cycles_used, ctx.cells_used = 30_000_000, 0
    fees_and_burn(world, ctx)
    assert balance(world, PROPOSER) == 77
    assert get_burned(world) == 500
    cfg = ctx.basefee_config
    expected = (next_basefee(1000, 30_000_000, cfg.cycles_target, cfg), next_basefee(100, 0, cfg.cells_target, cfg))
    assert get_basefees(world) == expected
    assert expected[0] > 1000  # above the cycles target the basefee rises


def test_no_tips_leave_the_proposer_account_untouched() -> None:
    world = make_world()
    fees_and_burn(world, make_ctx(3))
    assert not any(k.startswith(b"acct") or PROPOSER in k for k in world.changes())
