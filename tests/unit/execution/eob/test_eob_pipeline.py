"""End of Block: the step list is exactly seeds/000's diagram order; observe wraps each step."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from cowboy_node.execution import end_of_block
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.end_of_block import EOB_STEPS, run_end_of_block
from cowboy_node.state.world import WorldState
from tests.unit.eob_helpers import make_ctx, make_world

DIAGRAM = ("deliver_timers", "resolve_offchain", "execute_mailbox", "fees_and_burn", "system_hooks", "commit")


def test_steps_are_the_diagrams_six_in_order() -> None:
    assert tuple(name for name, _ in EOB_STEPS) == DIAGRAM
    for name, step in EOB_STEPS:
        assert step.__module__ == f"cowboy_node.execution.eob.{name}"


def test_run_calls_each_step_once_in_order_inside_observe() -> None:
    log: list[str] = []

    def step(name: str):  # type: ignore[no-untyped-def]
        def run(world: WorldState, ctx: BlockContext) -> None:
            log.append(f"run {name}")
        return run

    @contextlib.contextmanager
    def observe(name: str) -> Iterator[None]:
        log.append(f"enter {name}")
        yield
        log.append(f"exit {name}")

    ctx = make_ctx(1)
    run_end_of_block(make_world(), ctx, observe=observe, steps=tuple((n, step(n)) for n in DIAGRAM))
    assert log == [x for n in DIAGRAM for x in (f"enter {n}", f"run {n}", f"exit {n}")]
    assert ctx.eob.steps_run == DIAGRAM


def test_real_pipeline_on_an_empty_block_runs_every_step_and_commits() -> None:
    world = make_world()
    ctx = make_ctx(1)
    run_end_of_block(world, ctx)
    assert ctx.eob.steps_run == DIAGRAM
    assert ctx.eob.committed_root == world.prepare_commit()[0]
    assert end_of_block.EOB_STEPS is EOB_STEPS
