"""Actor-developer workflow benchmark (prints JSON): the event index's query cost, and a dry run's cost.

1. Event index (LevelDB): one actor A with N events (N = --small, then --large; half under topic ``hot``,
   half ``cold``, a quarter of the blocks also remove a timer of A for insufficient funds), interleaved with
   events of 100 other emitters. Measured: one ``GET /events`` page of 100 (topic ``hot``, from the middle
   of the chain), one unfiltered page, and the 50 most recent terminal timers. Baseline: the same queries at
   N = --small in the same run (large enough that every query fills its page); goal ``ratio_large_over_small``
   ≤ 1.2 (a page reads only what it returns).
2. Dry run vs read: ``simulate_view`` of a handler vs ``read_only_view`` of the same handler on the same world
   (the read is the same-run baseline; a dry run adds building the transaction and its intrinsic charge).

Usage: python bench/actor_workflow.py [--small 5000] [--large 100000] [--reps 200]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cowboy_node.chain.blockstore import KEY_HEAD
from cowboy_node.chain.chain import Chain
from cowboy_node.chain.event_index import index_ops
from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.execution.block import begin_block
from cowboy_node.execution.context import BlockEnv
from cowboy_node.execution.transactions import execute_transaction
from cowboy_node.node.devgenesis import create_dev_genesis
from cowboy_node.rpc.actor_queries import read_only_view
from cowboy_node.rpc.event_queries import events_view, terminal_timers_view
from cowboy_node.rpc.simulate import SimulateRequest, simulate_view
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.receipt import Event, Receipt
from cowboy_protocol.codec import encode
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.types.instructions import CallActor, DeployActor
from cowboy_protocol.types.transaction import Transaction

ACTOR = b"\xaa" * 20
PER_BLOCK = 10
"""Events of A per block."""


def _median_us(fn: Callable[[], object], reps: int) -> float:
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e6


def _fill(store: LevelDBStore, n: int) -> int:
    """Index n events of ACTOR (plus noise); returns the head height."""
    blocks = max(1, n // PER_BLOCK)
    batch: list[tuple[bytes, bytes]] = []
    for h in range(1, blocks + 1):
        events = [Event(ACTOR, "hot" if i % 2 else "cold", h.to_bytes(8, "big")) for i in range(PER_BLOCK)]
        noise = [Event(bytes([i]) * 20, "hot", b"x") for i in range(1, 101)]
        eob = [Event(ACTOR, "timer.cancelled_insufficient_funds",
                     encode({0: h.to_bytes(32, "big"), 1: ACTOR, 2: b"\x00" * 16, 3: b"\x00" * 16}))] \
            if h % 4 == 0 else []
        batch.extend(index_ops(h, [Receipt(0, 1, 1, 0, None, tuple(events + noise))], eob))
        if len(batch) > 50_000:
            store.write_batch(batch, sync=False)
            batch = []
    batch.append((KEY_HEAD, blocks.to_bytes(8, "big")))
    store.write_batch(batch, sync=True)
    return blocks


def bench_index(n: int, reps: int) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="cowboy-bench-events-"))
    try:
        store = LevelDBStore(tmp / "db")
        head = _fill(store, n)
        mid = head // 2
        out = {
            "page_topic_us": _median_us(lambda: events_view(store, ACTOR, topic="hot", from_height=mid,
                                                            to_height=None, after=None, limit=100), reps),
            "page_all_us": _median_us(lambda: events_view(store, ACTOR, topic=None, from_height=mid,
                                                          to_height=None, after=None, limit=100), reps),
            "terminal_50_us": _median_us(lambda: terminal_timers_view(store, ACTOR, limit=50), reps),
        }
        store.close()
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


SOURCE = """import pvm_host


def bump(payload):
    raw = pvm_host.get_state(b"n")
    n = 0 if raw is None else int(raw)
    for i in range(200):
        n = n + i
    pvm_host.set_state(b"n", str(n).encode())
    return str(n).encode()
"""


def bench_dry_run(reps: int) -> dict[str, float]:
    sk = (0x1234).to_bytes(32, "big")
    me = private_key_to_address(sk)
    dev = create_dev_genesis(chain_id="bench", balances={me: 10**27}, system_deployers=(me,), fee_recipient=me,
                             genesis_time_ms=1_700_000_000_000, entropy=bytes(range(96)))
    chain = Chain(MemoryStore(), dev.genesis)
    world = chain.world()
    env = BlockEnv(chain_id="bench", height=1, timestamp_ms=1_700_000_001_000, fee_recipient=me, beacon=b"",
                   parent_beacon=b"")
    ctx = begin_block(world, env)
    tx = Transaction(chain_id="bench", nonce=0, sender=me,
                     instruction=DeployActor(source=SOURCE, salt=b"", init_handler="", init_payload=b""),
                     cycles_limit=5_000_000, cells_limit=200_000, max_fee_per_cycle=10**6,
                     max_priority_fee_per_cycle=0, max_fee_per_cell=10**6, max_priority_fee_per_cell=0).signed(sk)
    assert execute_transaction(world, tx, ctx).status == 0
    actor = derive_actor_address(me, b"", SOURCE)
    req = SimulateRequest(me, CallActor(actor=actor, handler="bump", payload=b""), 1_000_000, None)

    def sim() -> None:
        cp = world.checkpoint()
        try:
            assert simulate_view(world, ctx, req, height=1)["status"] == "success"
        finally:
            world.revert(cp)

    def read() -> None:
        assert read_only_view(world, ctx, actor=actor, handler="bump", payload=b"", cycles_limit=1_000_000,
                              height=1) is not None

    for _ in range(20):
        sim()
        read()
    return {"simulate_us": _median_us(sim, reps), "read_baseline_us": _median_us(read, reps)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", type=int, default=5_000)
    ap.add_argument("--large", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=200)
    a = ap.parse_args()
    small, large = bench_index(a.small, a.reps), bench_index(a.large, a.reps)
    ratios = {k: large[k] / small[k] for k in small}
    dry = bench_dry_run(a.reps)
    print(json.dumps({
        "event_index": {"small_events": a.small, "large_events": a.large, "small": small, "large": large,
                        "ratio_large_over_small": ratios,
                        "goal_ratio_le_1_2": all(r <= 1.2 for r in ratios.values())},
        "dry_run": {**dry, "simulate_over_read": dry["simulate_us"] / dry["read_baseline_us"]},
    }, indent=2))


if __name__ == "__main__":
    main()
