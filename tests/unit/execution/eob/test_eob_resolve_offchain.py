"""EOB step 2 ResolveOffchain: no runner inbox exists yet, so the step changes nothing."""

from __future__ import annotations

from cowboy_node.execution.eob.resolve_offchain import resolve_offchain
from tests.unit.eob_helpers import make_ctx, make_world


def test_resolve_offchain_changes_no_state_and_no_totals() -> None:
    world = make_world()
    world.set(b"k", b"v")
    ctx = make_ctx(2)
    before = world.changes()
    resolve_offchain(world, ctx)
    assert world.changes() == before
    assert (ctx.events, ctx.burned, ctx.cycles_used, ctx.cells_used) == ([], 0, 0, 0)
