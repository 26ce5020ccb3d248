"""Shared fixtures of the CIP-1 scheduler tests: a world in CIP-1 mode, GBA fakes, scheduling shortcuts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from cowboy_node.execution.actors import actor_state as actor_store
from cowboy_node.execution.actors.actor_record import ActorRecord
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.scheduler import deliver as sched_deliver
from cowboy_node.execution.scheduler.timeout import set_timeout
from cowboy_node.execution.timers.policy import get_timer_policy, set_timer_policy
from cowboy_node.state.world import WorldState
from cowboy_protocol.types.timer_policy import MODE_CIP1, TimerPolicy
from tests.unit.eob_helpers import FakeRunner, big_meter, fund, make_ctx, make_world


def gba_address(n: int) -> bytes:
    return bytes([0xD0, n]) + bytes(18)


def owner(n: int) -> bytes:
    return bytes([0xE0, n]) + bytes(18)


def bid(max_fee: int, tip: int) -> bytes:
    return b'{"max_fee_per_cycle": %d, "tip_per_cycle": %d}' % (max_fee, tip)


Reply = tuple[bytes | None, str | None, int]


@dataclass
class FakeGbas:
    """``bid_call`` fake: each GBA address answers with a fixed reply or a function of the context."""

    replies: dict[bytes, Reply | Callable[[bytes], Reply]] = field(default_factory=dict)
    calls: list[tuple[bytes, bytes, int]] = field(default_factory=list)

    def __call__(self, world: WorldState, ctx: BlockContext, gba: bytes, context: bytes, cap: int) -> Reply:
        self.calls.append((gba, context, cap))
        r = self.replies[gba]
        return r(context) if callable(r) else r


def cip1_world(policy: TimerPolicy | None = None, gbas: int = 4) -> WorldState:
    """A world in CIP-1 mode with ``gbas`` deployed (record-only) GBA actors."""
    world = make_world()
    set_timer_policy(world, policy or TimerPolicy(mode=MODE_CIP1))
    for n in range(gbas):
        actor_store.put_actor(world, gba_address(n), ActorRecord(bytes(32), bytes(20), 1, ("get_gas_bid",)))
    return world


def timeout(world: WorldState, actor: bytes, height: int, *, current: int = 10, gba: int = 0, gas: int = 1_000,
            payload: bytes = b"p", expires_at: int | None = None) -> bytes:
    return set_timeout(world, make_ctx(current), big_meter(), actor=actor, height=height, gba=gba_address(gba),
                       handler="on_timeout", payload=payload, gas_limit=gas, expires_at=expires_at)


def run(world: WorldState, height: int, gbas: FakeGbas, runner: FakeRunner | None = None,
        **ctx_kw: int) -> tuple[sched_deliver.Cip1Report, BlockContext, FakeRunner]:
    runner = runner or FakeRunner(cycles=1_000, cells=10)
    ctx = make_ctx(height, **ctx_kw)
    rep = sched_deliver.deliver(world, ctx, get_timer_policy(world), runner.fire, bid_call=gbas)
    return rep, ctx, runner


__all__ = ["FakeGbas", "bid", "cip1_world", "fund", "gba_address", "owner", "run", "timeout"]
