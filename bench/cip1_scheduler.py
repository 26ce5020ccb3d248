"""CIP-1 scheduler benchmark: cost per ``set_timeout`` and per fire at 10^3 vs 10^6 pending timers (prints JSON).

For each number of pending CIP-1 timers P, a state holds P timers laid out as the tiers hold them in steady
state (heights spread over the next 40 epochs: ring, epoch queue and overflow; maintenance caught up), plus
``--due`` timers due at the measured block, owned by 100 funded actors. The pending timers are written straight
into the store's data keys (the state tree is not built: its own growth with the key count is measured by
``bench/state_root.py``; here it would only add the same commit cost to both sizes), so building 10^6 takes
seconds instead of a state-tree build of minutes.

* **schedule**: ``--schedules`` calls of ``scheduler.timeout.set_timeout`` (validation, record, tier entry,
  counters), heights spread across the three tiers; per call.
* **fire**: the whole CIP-1 End-of-Block step for the measured block (``scheduler.deliver.deliver``: epoch
  maintenance, collection of the due bucket, one GBA bid per due timer, ordering, execution, weights) divided
  by the timers fired. The GBA and the handler are native fakes (a fixed bid; 100 cycles and one key written) so
  the figure is the scheduler's own cost; the PVM cost of a GBA call or a handler does not depend on P.

Each figure is the median of ``--reps`` runs on a fresh view of the same store, the sizes alternating (thread
CPU time, which load from other processes inflates less than wall time; wall time is reported too), plus the
store reads and range seeks per operation (exact, noise-free: equal counts mean the work does not grow with
P). The baseline is the 10^3 point of the same run; ``ratio`` = 10^6 / 10^3 (goal ≤ 1.2: O(1) scheduling).

Usage: python bench/cip1_scheduler.py [--pending 1000,1000000] [--due 1000] [--schedules 2000] [--reps 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cowboy_node.execution.actors import actor_state as actor_store
from cowboy_node.execution.actors.actor_record import ActorRecord
from cowboy_node.execution.block import begin_block
from cowboy_node.execution.context import BlockContext, BlockEnv
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.scheduler import deliver, queue, timeout
from cowboy_node.execution.scheduler import timer_layout as model
from cowboy_node.execution.scheduler.timer_layout import Cip1Timer
from cowboy_node.execution.system_state import put_account
from cowboy_node.execution.timers.deliver import FireOutcome
from cowboy_node.execution.timers.policy import set_timer_policy
from cowboy_node.execution.timers.timer_record import Timer
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.tree import StateTree
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import Account
from cowboy_protocol.codec import encode
from cowboy_protocol.types.timer_policy import MODE_CIP1, TimerPolicy

DATA = b"s/"
HEIGHT = 3_600 * 10 + 1_234
"""The measured block (mid-epoch, so maintenance has its steady-state work)."""
SPREAD = 40 * model.EPOCH_BLOCKS
"""Pending timers' heights: HEIGHT+1 .. HEIGHT+SPREAD (ring, 24 epoch buckets and overflow)."""
GAS = 1_000
HANDLER_CYCLES = 100
GBA = bytes([0xD0]) + bytes(19)
OWNERS = 100
FILLER_OWNERS = 1_000
BID = b'{"max_fee_per_cycle": 1000000000000, "tip_per_cycle": 3}'


def _owner(n: int) -> bytes:
    return (0xE00000 + n).to_bytes(20, "big")


def _filler(n: int) -> bytes:
    return (0xF00000 + n).to_bytes(20, "big")


class CountingStore(MemoryStore):
    """A MemoryStore that counts point reads and range seeks (a noise-free measure of the work per operation)."""

    def __init__(self) -> None:
        super().__init__()
        self.gets = 0
        self.seeks = 0

    def get(self, key: bytes) -> bytes | None:
        self.gets += 1
        return super().get(key)

    def iterate(self, prefix: bytes = b"", *, start: bytes | None = None,
                reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        self.seeks += 1
        return super().iterate(prefix, start=start, reverse=reverse)


class Store:
    """A store holding ``pending`` CIP-1 timers plus ``due`` timers due at :data:`HEIGHT`."""

    def __init__(self, pending: int, due: int) -> None:
        self.store = CountingStore()
        self.due = due
        t0 = time.perf_counter()
        setup = self.world()
        set_timer_policy(setup, TimerPolicy(mode=MODE_CIP1, cip1_max_bids_per_block=due,
                                            cip1_budget_cycles=10 * due * GAS))
        setup.set(actor_store.meta_key(GBA), ActorRecord(bytes(32), bytes(20), 1, ("get_gas_bid",)).encode())
        for n in range(OWNERS):
            put_account(setup, _owner(n), Account(10**30, 0))
        ops: list[tuple[bytes, bytes | None]] = [(DATA + k, v) for k, v in setup.changes().items()]
        seq = 0
        for i in range(due):
            tid = model.derive_timeout_id(_owner(i % OWNERS), HEIGHT, i)
            t = Cip1Timer(_owner(i % OWNERS), HEIGHT, GBA, "on_timeout", i.to_bytes(8, "big"), GAS, HEIGHT + 10**6,
                          seq)
            ops += [(DATA + model.record_key(tid), t.encode()), (DATA + model.ring_key(HEIGHT, seq), tid)]
            seq += 1
        for i in range(pending):
            h = HEIGHT + 1 + (i * 7_919) % SPREAD
            actor = _filler(i % FILLER_OWNERS)
            tid = model.derive_timeout_id(actor, h, i)
            t = Cip1Timer(actor, h, GBA, "on_timeout", b"", GAS, h + 10**6, seq)
            ops += [(DATA + model.record_key(tid), t.encode()), (DATA + queue.tier_key(h, seq, HEIGHT), tid)]
            seq += 1
        ops.append((DATA + model.KEY_SEQ, encode(seq)))
        ops.append((DATA + model.KEY_CURSOR, encode(HEIGHT)))
        for n in range(FILLER_OWNERS):
            ops.append((DATA + model.meta_key(_filler(n)), queue.encode_meta(queue.Meta(pending // FILLER_OWNERS,
                                                                                       pending))))
        self.store.write_batch(ops)
        self.entries = len(self.store)
        self.build_s = time.perf_counter() - t0

    def world(self) -> WorldState:
        return WorldState(self.store, StateTree(self.store, b"n/"), data_prefix=DATA)


def _ctx(world: WorldState, height: int) -> BlockContext:
    env = BlockEnv(chain_id="bench-cip1", height=height, timestamp_ms=0, fee_recipient=bytes(20), beacon=b"",
                   parent_beacon=b"")
    return begin_block(world, env)


def _run_fire(w: WorldState, _ctx: BlockContext, t: Timer, m: Meter) -> FireOutcome:
    m.charge_cycles(HANDLER_CYCLES)
    w.set(actor_store.kv_key(t.actor_address, t.payload), b"1")
    m.charge_cells(8)
    return FireOutcome(True, m.cycles_used, m.cells_used, None)


def _bid(_w: WorldState, _c: BlockContext, _gba: bytes, _context: bytes, _cap: int
         ) -> tuple[bytes | None, str | None, int]:
    return BID, None, 50


Sample = tuple[float, float, float]
"""(thread CPU seconds, wall seconds, store reads + seeks) per operation."""


def _schedule(st: Store, n: int) -> Sample:
    world = st.world()
    ctx = _ctx(world, HEIGHT - 1)
    meter = Meter(10**15, 10**15)
    io0 = st.store.gets + st.store.seeks
    c0, t0 = time.thread_time(), time.perf_counter()
    for i in range(n):
        h = HEIGHT + 1 + (i * 104_729) % SPREAD  # the three tiers, as the pending timers
        timeout.set_timeout(world, ctx, meter, actor=_owner(i % OWNERS), height=h, gba=GBA, handler="on_timeout",
                            payload=b"x", gas_limit=GAS)
    c1, t1 = time.thread_time(), time.perf_counter()
    return (c1 - c0) / n, (t1 - t0) / n, (st.store.gets + st.store.seeks - io0) / n


def _fire(st: Store) -> Sample:
    world = st.world()
    ctx = _ctx(world, HEIGHT)
    policy = TimerPolicy(mode=MODE_CIP1, cip1_max_bids_per_block=st.due, cip1_budget_cycles=10 * st.due * GAS)
    io0 = st.store.gets + st.store.seeks
    c0, t0 = time.thread_time(), time.perf_counter()
    rep = deliver.deliver(world, ctx, policy, _run_fire, bid_call=_bid)
    c1, t1 = time.thread_time(), time.perf_counter()
    if rep.executed != st.due:
        raise RuntimeError(f"fired {rep.executed} of {st.due} due timers ({rep})")
    return (c1 - c0) / rep.executed, (t1 - t0) / rep.executed, (st.store.gets + st.store.seeks - io0) / rep.executed


def measure(sizes: list[int], due: int, schedules: int, reps: int) -> list[dict[str, float]]:
    """Every size's store is built first; the repetitions then alternate between sizes (a load change on the
    shared machine hits both alike)."""
    stores = [Store(p, due) for p in sizes]
    sched: list[list[Sample]] = [[] for _ in sizes]
    fire: list[list[Sample]] = [[] for _ in sizes]
    for _ in range(reps):
        for i, st in enumerate(stores):
            sched[i].append(_schedule(st, schedules))
            fire[i].append(_fire(st))

    def med(runs: list[Sample], i: int, scale: float = 1e6) -> float:
        return round(statistics.median(r[i] for r in runs) * scale, 2)

    return [{"pending": float(p), "due": float(due), "store_entries": float(st.entries),
             "build_s": round(st.build_s, 1),
             "schedule_cpu_us": med(s, 0), "schedule_wall_us": med(s, 1), "schedule_store_ops": med(s, 2, 1),
             "fire_cpu_us": med(f, 0), "fire_wall_us": med(f, 1), "fire_store_ops": med(f, 2, 1)}
            for p, st, s, f in zip(sizes, stores, sched, fire, strict=True)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pending", default="1000,1000000", help="comma-separated P values; the first is the baseline")
    p.add_argument("--due", type=int, default=1_000)
    p.add_argument("--schedules", type=int, default=2_000)
    p.add_argument("--reps", type=int, default=7)
    a = p.parse_args()
    results = measure([int(x) for x in a.pending.split(",")], a.due, a.schedules, a.reps)
    base, last = results[0], results[-1]
    ratio = {k: round(last[k] / base[k], 2) for k in ("schedule_cpu_us", "schedule_wall_us", "schedule_store_ops",
                                                        "fire_cpu_us", "fire_wall_us", "fire_store_ops")}
    out = {
        "benchmark": "cip1_scheduler",
        "baseline": base,
        "results": results,
        "ratio": ratio,
        "goals": {"ratio_max": 1.2, "met_schedule": ratio["schedule_cpu_us"] <= 1.2,
                  "met_fire": ratio["fire_cpu_us"] <= 1.2},
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
