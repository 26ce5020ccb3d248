"""Timer storm (issue: actors and timers): 100,000 timers due at one height drain over later blocks.

Every timer is scheduled through the real host call (``schedule_timer``) by one of 100
deployed actors, all for the same height. The blocks from that height on run the real
End of Block; the handler (a sandboxed actor) counts its own fires per payload. The
test checks the lane rule of seeds/003 §6.5 block by block, FIFO order across the
deferral, and that every timer fired exactly once. Block *time* is a performance
figure: ``bench/eob_timers.py --storm`` reports it.
"""

from __future__ import annotations

from cowboy_node.chain.chain import Chain
from cowboy_node.execution.actors.actor_record import ActorRecord, source_hash
from cowboy_node.execution.actors.actor_state import get_state, put_actor, put_source
from cowboy_node.execution.block import begin_block
from cowboy_node.execution.context import BlockEnv
from cowboy_node.execution.end_of_block import run_end_of_block
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.system_state import put_account
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.timers.deliver import LANE_TIMER_CYCLES, TOPIC_FIRED
from cowboy_node.execution.timers.schedule import schedule_timer
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import Account
from cowboy_protocol.codec import decode
from tests.helpers import CHAIN_ID, FEE_RECIPIENT, make_dev_genesis

TIMERS = 100_000
ACTORS = 100
DUE = 5
GAS = 2_000
# Counts fires per payload: a second fire of the same timer would leave b"2".
SOURCE = """\
import pvm_host


def handle_timer(payload):
    seen = pvm_host.get_state(payload)
    pvm_host.set_state(payload, b"1" if seen is None else b"2")
    return b""
"""


def _env(height: int) -> BlockEnv:
    return BlockEnv(chain_id=CHAIN_ID, height=height, timestamp_ms=1_700_000_000_000 + height * 1000,
                    fee_recipient=FEE_RECIPIENT, beacon=b"", parent_beacon=b"")


def _commit(chain: Chain, world: WorldState) -> None:
    _root, ops = world.prepare_commit()
    chain.store.write_batch(ops, sync=False)
    world.mark_committed()


def test_storm_of_100k_timers_drains_within_the_lane_none_lost_or_fired_twice() -> None:
    chain = Chain(MemoryStore(), make_dev_genesis().genesis)
    world = chain.world()
    ctx1 = begin_block(world, _env(1))
    actors = [(0xA0000 + i).to_bytes(20, "big") for i in range(ACTORS)]
    put_source(world, source_hash(SOURCE), SOURCE)
    for a in actors:
        put_actor(world, a, ActorRecord(source_hash(SOURCE), a, 1, ("handle_timer",)))
        put_account(world, a, Account(10**30, 0))
    scheduled: list[tuple[bytes, bytes]] = []  # (timer_id, payload) in scheduling order
    meter = Meter(1 << 62, 1 << 62)
    for i in range(TIMERS):
        actor = actors[i % ACTORS]
        payload = i.to_bytes(4, "big")
        tid = schedule_timer(world, ctx1, meter, actor=actor, tx_sender=actor, height=DUE, handler="handle_timer",
                             payload=payload, gas_limit=GAS)
        scheduled.append((tid, payload))
    _commit(chain, world)
    assert len(store.timers_at(world, DUE)) == TIMERS

    fired_ids: list[bytes] = []
    per_block: list[int] = []
    height = DUE
    while store.timers_at(world, DUE) or height == DUE:
        ctx = begin_block(world, _env(height))
        run_end_of_block(world, ctx)
        events = [e for e in ctx.events if getattr(e, "topic", None) == TOPIC_FIRED]
        ids = [decode(e.data)[0] for e in events]
        cycles = [decode(e.data)[2] for e in events]
        assert all(decode(e.data)[1] is True for e in events), "every fire succeeds"
        # §6.5: a fire is dispatched only while its gas limit fits what is left of the lane,
        # except the block's first fire; so the lane is never overrun by more than one fire's limit.
        used = 0
        for n, c in enumerate(cycles):
            assert n == 0 or LANE_TIMER_CYCLES - used >= GAS
            used += c
        assert used <= LANE_TIMER_CYCLES
        per_block.append(len(ids))
        fired_ids.extend(ids)
        _commit(chain, world)
        height += 1
        assert height < DUE + 1_000, "the storm must drain"

    assert len(per_block) > 1, "100k fires cannot fit one block's lane: the storm is spread over blocks"
    assert all(n > 0 for n in per_block), "every block of the drain makes progress"
    assert len(fired_ids) == TIMERS and len(set(fired_ids)) == TIMERS, "none lost, none fired twice"
    assert fired_ids == [tid for tid, _ in scheduled], "FIFO across the deferral"
    for i, (_tid, payload) in enumerate(scheduled):
        assert get_state(world, actors[i % ACTORS], payload) == b"1"
    assert all(store.get_meta(world, a).live == 0 for a in actors)
    assert store.timers_at(world, DUE) == []
