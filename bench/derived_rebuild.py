"""Rebuilding the derived timer indexes after a snapshot install (prints JSON).

A snapshot carries the committed state only; ``snapshot/install.rebuild_derived`` writes each timer's id pointer and
per-actor index entry from its record (``state/derived.py``, docs/timers.md §2). This bench fills a LevelDB store with
``--timers`` height-index records (1,000 actors, 100 timers per height), then times the rebuild. Baseline, same run and
store: one plain iteration over the same records (what any pass over them costs at least).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cowboy_node.chain.blockstore import STATE_PREFIX
from cowboy_node.execution.timers import timer_state
from cowboy_node.execution.timers.timer_record import Timer
from cowboy_node.snapshot.install import rebuild_derived
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_node.state.tree import keccak256


def measure(timers: int) -> dict[str, float]:
    """Fill, rebuild, then iterate; seconds and per-record figures."""
    tmp = Path(tempfile.mkdtemp(prefix="derived-rebuild-"))
    store = LevelDBStore(tmp)
    try:
        t0 = time.perf_counter()
        batch = []
        for i in range(timers):
            actor = (i % 1000).to_bytes(20, "big")
            t = Timer(actor_address=actor, height=1000 + i // 100, payload=b"p" + i.to_bytes(4, "big"),
                      timer_id=keccak256(i.to_bytes(8, "big")), handler="handle_timer", fee_payer=actor,
                      gas_limit_per_fire=1_100, expires_at=10**6, seq=i)
            batch.append((STATE_PREFIX + timer_state.height_key(t.height, t.seq), t.encode()))
            if len(batch) >= 50_000:
                store.write_batch(batch, sync=False)
                batch = []
        if batch:
            store.write_batch(batch, sync=False)
        t1 = time.perf_counter()
        c0 = time.thread_time()
        written = rebuild_derived(store)
        c1 = time.thread_time()
        t2 = time.perf_counter()
        seen = sum(1 for _ in store.iterate(STATE_PREFIX + timer_state.HEIGHT_PREFIX))
        t3 = time.perf_counter()
        if written != 2 * timers or seen != timers:
            raise RuntimeError(f"rebuilt {written} keys from {seen} records")
        return {"timers": float(timers), "derived_keys": float(written), "fill_s": round(t1 - t0, 1),
                "rebuild_s": round(t2 - t1, 2), "rebuild_thread_cpu_s": round(c1 - c0, 2),
                "rebuild_us_per_timer": round((t2 - t1) / timers * 1e6, 2),
                "baseline_iterate_s": round(t3 - t2, 2), "ratio_to_iterate": round((t2 - t1) / (t3 - t2), 1)}
    finally:
        store.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--timers", default="100000,1000000", help="comma-separated record counts")
    a = p.parse_args()
    print(json.dumps({"benchmark": "derived_rebuild",
                      "results": [measure(int(n)) for n in a.timers.split(",")]}, indent=2))


if __name__ == "__main__":
    main()
