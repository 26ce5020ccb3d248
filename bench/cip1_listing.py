"""Cost of the CIP-1 part of ``GET /actor/{a}/timers`` (``rpc/actor_queries.actor_timers_view``) as the number of
CIP-1 timers of *other* actors grows (prints JSON).

The node builds this view under its state lock, so its cost is time the block producer may wait. The scheduler's
state has no per-actor index of CIP-1 timers, so the listing scans records (``scheduler/listing.py``): one page
reads at most ``SCAN_RECORDS`` (2,048) of them. For each size P (CIP-1 timers of 1,000 filler actors) the store
also holds:

* actor **Y** with no CIP-1 timer (and two seeds/003 timers): the **baseline** — the seeds/003 listing plus the
  three reads the CIP-1 summary costs;
* actor **X** with 3 CIP-1 timers (ids spread over the key space): **first page** (what one request costs, the
  UI snapshot included) and **all pages** (what a client following ``cip1.next`` to the end pays in total).

Figures: median of ``--reps`` alternating runs, thread CPU µs per call, records scanned; ``ratio`` = each figure
over the baseline of the same size and run. Expected: the first page is bounded (its ratio stops growing past
2,048 records), following every page grows with P — the price of having no per-actor index.

Usage: python bench/cip1_listing.py [--pending 1000,100000] [--reps 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cowboy_node.execution.actors import actor_state as actor_store
from cowboy_node.execution.actors.actor_record import ActorRecord
from cowboy_node.execution.scheduler import queue
from cowboy_node.execution.scheduler import timer_layout as model
from cowboy_node.execution.scheduler.timer_layout import Cip1Timer
from cowboy_node.execution.timers import timer_state as timer_store
from cowboy_node.execution.timers.policy import set_timer_policy
from cowboy_node.execution.timers.timer_record import Timer
from cowboy_node.rpc.actor_queries import actor_timers_view
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.tree import StateTree
from cowboy_node.state.world import WorldState
from cowboy_protocol.codec import encode
from cowboy_protocol.types.timer_policy import MODE_CIP1, TimerPolicy

DATA = b"s/"
HEIGHT = 1_000
GBA = bytes([0xD0]) + bytes(19)
X = bytes([0xA1]) + bytes(19)
Y = bytes([0xA2]) + bytes(19)
FILLERS = 1_000


def _filler(n: int) -> bytes:
    return (0xF00000 + n).to_bytes(20, "big")


def build(pending: int) -> MemoryStore:
    store = MemoryStore()
    setup = WorldState(store, StateTree(store, b"n/"), data_prefix=DATA)
    set_timer_policy(setup, TimerPolicy(mode=MODE_CIP1))
    for a in (X, Y, GBA):
        actor_store.put_actor(setup, a, ActorRecord(bytes(32), bytes(20), 1, ("h",)))
    for i in range(2):  # Y's seeds/003 timers: the baseline lists something
        t = Timer(actor_address=Y, height=HEIGHT + 10 + i, payload=b"p", timer_id=bytes([i]) * 32,
                  handler="handle_timer", fee_payer=Y, gas_limit_per_fire=1_000, expires_at=HEIGHT + 100, seq=i)
        timer_store.apply_writes(setup, timer_store.insert_writes(t, timer_store.get_meta(setup, Y)))
    ops: list[tuple[bytes, bytes | None]] = [(DATA + k, v) for k, v in setup.changes().items()]
    seq = 0
    owners = [(X, 3)] + [(_filler(n), pending // FILLERS) for n in range(FILLERS)]
    for actor, count in owners:
        for j in range(count):
            h = HEIGHT + 1 + (seq * 7_919) % 100_000
            tid = model.derive_timeout_id(actor, h, j)
            rec = Cip1Timer(actor, h, GBA, "on_timeout", b"", 1_000, h + 10**6, seq)
            ops += [(DATA + model.record_key(tid), rec.encode()), (DATA + queue.tier_key(h, seq, HEIGHT), tid)]
            seq += 1
        ops.append((DATA + model.meta_key(actor), queue.encode_meta(queue.Meta(count, count))))
    ops.append((DATA + model.KEY_SEQ, encode(seq)))
    store.write_batch(ops)
    return store


def _world(store: MemoryStore) -> WorldState:
    return WorldState(store, StateTree(store, b"n/"), data_prefix=DATA)


def _call(store: MemoryStore, actor: bytes, after: bytes | None) -> tuple[float, dict[str, Any]]:
    world = _world(store)
    c0 = time.thread_time()
    doc = actor_timers_view(world, actor, height=HEIGHT, cip1_after=after)
    return time.thread_time() - c0, doc  # type: ignore[return-value]


def _all_pages(store: MemoryStore) -> tuple[float, int, int, int]:
    total, scanned, pages, found = 0.0, 0, 0, 0
    after: bytes | None = None
    while True:
        dt, doc = _call(store, X, after)
        total += dt
        pages += 1
        scanned += doc["cip1"]["scanned"]
        found += len(doc["cip1"]["timers"])
        if doc["cip1"]["next"] is None:
            return total, scanned, pages, found
        after = bytes.fromhex(doc["cip1"]["next"][2:])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pending", default="1000,100000")
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    sizes = [int(x) for x in args.pending.split(",")]
    stores = [build(p) for p in sizes]
    base: list[list[float]] = [[] for _ in sizes]
    first: list[list[float]] = [[] for _ in sizes]
    full: list[list[float]] = [[] for _ in sizes]
    meta: list[dict[str, int]] = [{} for _ in sizes]
    for _ in range(args.reps):
        for i, st in enumerate(stores):
            base[i].append(_call(st, Y, None)[0])
            dt, doc = _call(st, X, None)
            first[i].append(dt)
            tot, scanned, pages, found = _all_pages(st)
            full[i].append(tot)
            meta[i] = {"first_page_scanned": doc["cip1"]["scanned"], "all_pages_scanned": scanned,
                       "pages": pages, "found": found}
    out = []
    for i, p in enumerate(sizes):
        b, f, a = (statistics.median(x) * 1e6 for x in (base[i], first[i], full[i]))
        out.append({"pending_other_actors": p, "baseline_cpu_us": round(b, 1), "first_page_cpu_us": round(f, 1),
                    "all_pages_cpu_us": round(a, 1), "first_page_ratio": round(f / b, 2),
                    "all_pages_ratio": round(a / b, 2), **meta[i]})
    print(json.dumps({"bench": "cip1_listing", "reps": args.reps, "results": out}, indent=2))


if __name__ == "__main__":
    main()
