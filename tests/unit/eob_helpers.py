"""Shared helpers for the End-of-Block and timer-extension tests: a bare world, a block context, fake runners."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from cowboy_node.execution.context import BlockContext, BlockEnv
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.system_state import get_account, put_account
from cowboy_node.execution.timers import timer_state
from cowboy_node.execution.timers.deliver import FireOutcome
from cowboy_node.execution.timers.timer_record import Timer
from cowboy_node.state.derived import is_derived
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.tree import StateTree
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import Account
from cowboy_protocol.types.params import BasefeeConfig, ChainLimits, Cip11Flags

ACTOR = bytes([0xA1]) * 20
OTHER = bytes([0xB2]) * 20
SENDER = bytes([0xC3]) * 20
PROPOSER = bytes([0xF0]) * 20
ROOT = bytes([0x5A]) * 32
RICH = 10**30


def make_world() -> WorldState:
    st = MemoryStore()
    return WorldState(st, StateTree(st, b"n/"), data_prefix=b"s/")


def check_timer_indexes(world: WorldState) -> None:
    """The derived timer indexes (``state/derived.py``) are exactly what the timer records imply: what a snapshot
    install rebuilds from the records alone (``timer_state.derived_writes``)."""
    state = dict(world.iterate(timer_state.PREFIX))  # derived_writes reads the records and skips the rest
    assert {k: v for k, v in state.items() if is_derived(k)} == dict(timer_state.derived_writes(state.items()))


def commit(world: WorldState) -> None:
    """Write the pending changes to the store, as the chain does after a block (checking the timer indexes first)."""
    check_timer_indexes(world)
    _root, ops = world.prepare_commit()
    world._store.write_batch(ops)
    world.mark_committed()


def make_ctx(height: int, *, cycle_basefee: int = 10, cell_basefee: int = 1, root: bytes = ROOT) -> BlockContext:
    env = BlockEnv(chain_id="t", height=height, timestamp_ms=0, fee_recipient=PROPOSER, beacon=b"",
                   parent_beacon=b"", parent_state_root=root)
    return BlockContext(env=env, basefee_config=BasefeeConfig(), limits=ChainLimits(), flags=Cip11Flags(),
                        system_deployers=(), cycle_basefee=cycle_basefee, cell_basefee=cell_basefee)


def fund(world: WorldState, who: bytes, amount: int = RICH) -> None:
    put_account(world, who, Account(amount, get_account(world, who).nonce))


def balance(world: WorldState, who: bytes) -> int:
    return get_account(world, who).balance


def big_meter() -> Meter:
    return Meter(10**12, 10**12)


@dataclass
class FakeRunner:
    """Records each call; uses ``cycles``/``cells``; optionally writes a key or fails."""

    cycles: int = 100
    cells: int = 10
    ok: bool = True
    write: Callable[[WorldState, bytes], None] | None = None
    fires: list[tuple[bytes, str, bytes]] = field(default_factory=list)
    messages: list[tuple[bytes, bytes, bytes]] = field(default_factory=list)

    def fire(self, world: WorldState, ctx: BlockContext, timer: Timer, meter: Meter) -> FireOutcome:
        self.fires.append((timer.timer_id, timer.handler, timer.payload))
        if self.write is not None:
            self.write(world, timer.timer_id)
        return FireOutcome(self.ok, self.cycles, self.cells, None if self.ok else "handler_error")

    def message(self, world: WorldState, ctx: BlockContext, *, sender: bytes, target: bytes, payload: bytes,
                meter: Meter) -> FireOutcome:
        self.messages.append((sender, target, payload))
        return FireOutcome(self.ok, self.cycles, self.cells, None if self.ok else "handler_error")


def fake_steps(runner: FakeRunner) -> tuple[tuple[str, Callable[[WorldState, BlockContext], None]], ...]:
    """The real End-of-Block list with ``runner`` injected into DeliverTimers and ExecuteMailbox."""
    from functools import partial

    from cowboy_node.execution.end_of_block import EOB_STEPS
    from cowboy_node.execution.eob.deliver_timers import deliver_timers
    from cowboy_node.execution.eob.execute_mailbox import execute_mailbox

    injected = {"deliver_timers": partial(deliver_timers, run_fire=runner.fire),
                "execute_mailbox": partial(execute_mailbox, run_fire=runner.fire, run_message=runner.message)}
    return tuple((name, injected.get(name, step)) for name, step in EOB_STEPS)


def run_block(world: WorldState, height: int, runner: FakeRunner,
              before_eob: Callable[[WorldState], None] | None = None) -> BlockContext:
    """Execute an empty block (plus ``before_eob`` writes standing for its transactions) and commit it."""
    from cowboy_node.execution.end_of_block import run_end_of_block

    if before_eob is not None:
        before_eob(world)
    ctx = make_ctx(height)
    run_end_of_block(world, ctx, steps=fake_steps(runner))
    commit(world)
    return ctx
