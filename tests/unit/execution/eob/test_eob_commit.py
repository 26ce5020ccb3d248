"""EOB step 6 Commit: the block's root is computed once and is what the chain writes."""

from __future__ import annotations

from cowboy_node.execution.eob.commit import commit
from tests.unit.eob_helpers import make_ctx, make_world


def test_commit_records_the_root_the_chain_commits_and_caches_it() -> None:
    world = make_world()
    world.set(b"k", b"v")
    ctx = make_ctx(1)
    commit(world, ctx)
    root, ops = world.prepare_commit()
    assert ctx.eob.committed_root == root
    assert (b"s/k", b"v") in ops


def test_a_write_after_commit_changes_the_root() -> None:
    world = make_world()
    world.set(b"k", b"v")
    ctx = make_ctx(1)
    commit(world, ctx)
    world.set(b"k2", b"v")
    assert world.prepare_commit()[0] != ctx.eob.committed_root
