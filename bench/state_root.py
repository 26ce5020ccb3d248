"""State-root benchmark (prints JSON).

For each size N: build a LevelDB-backed state tree holding N random 32-byte
keys with 64-byte values (in big prepare() batches, unsynced), then time
block-sized updates of ``writes`` random writes (half updates of existing
keys, half new keys). One block = ``prepare()`` + one synced write batch
holding the tree ops and the raw key/values (what a node writes per block) +
``commit()``. Reported per write (µs), median over ``--blocks`` blocks, next to
the baseline measured in the same run: raw plyvel synced batch writes of the
same number of 32/64-byte key/values. The build ends with a full LevelDB
compaction so blocks are timed in the steady state. ``prepare_cpu_us_per_write``
is the CPU time of the thread running ``prepare()`` (LevelDB's background
compaction threads excluded; load from other processes on a shared machine
inflates wall time, much less this); ``block_cpu_us_per_write`` the same for
the whole block. ``cold_cache_us_per_write``
is one more block after dropping the tree's node cache (nodes re-read from
LevelDB).

Goal (issue: foundation): ≤ 30 µs per write at 10^6 keys.

Usage: python bench/state_root.py [--sizes 10000,100000,1000000] [--writes 2000] [--blocks 5]
       python bench/state_root.py --sizes 10000,1000000 --compare-tree OLD/cowboy_node/state/tree.py
       (``--compare-tree``: thread-CPU A/B against another StateTree, each on its own store, same blocks)
       python bench/state_root.py --sizes 10000,1000000 --base /work/wt-base
       (``--base``: the same measurement of another checkout's code -- each point run in a subprocess importing
       that checkout's ``cowboy_node``, interleaved with this code's, same seeds -- and the growth ratios the
       issue names, 10^6 ÷ 10^4 per write, for both)
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# ``--code DIR`` (set by ``--base``): import ``cowboy_node`` from that checkout instead of this one
sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--code") + 1] if "--code" in sys.argv
                            else Path(__file__).resolve().parents[1]).resolve()))

import plyvel

from cowboy_node.state.kv_store import WriteOp
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_node.state.tree import StateTree

TREE_PREFIX = b"n/"
DATA_PREFIX = b"s/"
BUILD_BATCH = 100_000


def _block(store: LevelDBStore, tree: StateTree, changes: dict[bytes, bytes | None]) -> tuple[float, ...]:
    """Seconds for (prepare, synced write of tree ops and raw values, commit, total), the tree op count, and
    the CPU seconds of prepare and of the whole block, this thread only (steadier than wall time on a shared
    machine)."""
    c0 = time.thread_time()
    t0 = time.perf_counter()
    update = tree.prepare(changes)
    t1 = time.perf_counter()
    c1 = time.thread_time()
    ops: list[WriteOp] = [(DATA_PREFIX + k, v) for k, v in changes.items()]
    ops.extend(update.ops)
    store.write_batch(ops, sync=True)
    t2 = time.perf_counter()
    tree.commit(update)
    t3 = time.perf_counter()
    c3 = time.thread_time()
    return t1 - t0, t2 - t1, t3 - t2, t3 - t0, float(len(update.ops)), c1 - c0, c3 - c0


def _baseline(path: str, rng: random.Random, writes: int, blocks: int) -> float:
    """Median seconds for one synced plyvel batch of ``writes`` fresh 32/64-byte key/values."""
    db = plyvel.DB(path, create_if_missing=True)
    times = []
    for _ in range(blocks):
        items = [(rng.randbytes(32), rng.randbytes(64)) for _ in range(writes)]
        t0 = time.perf_counter()
        with db.write_batch(transaction=True, sync=True) as wb:
            for k, v in items:
                wb.put(k, v)
        times.append(time.perf_counter() - t0)
    db.close()
    return statistics.median(times)


def measure(n_keys: int, writes: int = 2000, path: str | None = None, *, blocks: int = 5,
            seed: int = 1) -> dict[str, float]:
    """Build a tree of ``n_keys`` keys under ``path`` (a fresh temp dir if None) and time blocks."""
    tmp = None
    if path is None:
        tmp = tempfile.mkdtemp(prefix="state-root-bench-")
        path = tmp
    rng = random.Random(seed)
    try:
        store = LevelDBStore(Path(path) / "state")
        tree = StateTree(store, TREE_PREFIX)
        keys: list[bytes] = []
        t0 = time.perf_counter()
        done = 0
        while done < n_keys:
            size = min(BUILD_BATCH, n_keys - done)
            batch = {rng.randbytes(32): rng.randbytes(64) for _ in range(size)}
            keys.extend(batch)
            update = tree.prepare(batch)
            store.write_batch([*((DATA_PREFIX + k, v) for k, v in batch.items()), *update.ops], sync=False)
            tree.commit(update)
            done += size
        store.compact()  # measure the steady state, not the tail of the bulk load's compactions
        build_s = time.perf_counter() - t0

        def block_changes() -> dict[bytes, bytes | None]:
            changes: dict[bytes, bytes | None] = {k: rng.randbytes(64) for k in rng.sample(keys, writes // 2)}
            fresh = {rng.randbytes(32): rng.randbytes(64) for _ in range(writes - writes // 2)}
            keys.extend(fresh)
            changes.update(fresh)
            return changes

        runs = [_block(store, tree, block_changes()) for _ in range(blocks)]
        tree.clear_cache()
        cold = _block(store, tree, block_changes())
        store.close()
        base = _baseline(str(Path(path) / "baseline"), rng, writes, blocks)

        def us(seconds: float) -> float:
            return round(seconds / writes * 1e6, 2)

        total = statistics.median(r[3] for r in runs)
        return {
            "keys": float(n_keys),
            "writes_per_block": float(writes),
            "build_s": round(build_s, 2),
            "us_per_write": us(total),
            "prepare_us_per_write": us(statistics.median(r[0] for r in runs)),
            "prepare_cpu_us_per_write": us(statistics.median(r[5] for r in runs)),
            "block_cpu_us_per_write": us(statistics.median(r[6] for r in runs)),
            "write_us_per_write": us(statistics.median(r[1] for r in runs)),
            "commit_us_per_write": us(statistics.median(r[2] for r in runs)),
            "cold_cache_us_per_write": us(cold[3]),
            "tree_ops_per_block": statistics.median(r[4] for r in runs),
            "baseline_leveldb_us_per_write": us(base),
            "ratio": round(total / base, 2),
        }
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def compare_trees(n_keys: int, other_tree_py: str, writes: int = 2000, blocks: int = 6,
                  seed: int = 1) -> dict[str, object]:
    """Thread-CPU A/B: this tree vs the ``StateTree`` of another ``tree.py`` (e.g. an older commit's, from
    ``git show <rev>:cowboy_node/state/tree.py``), each on its own LevelDB store (the storage layouts may
    differ), fed the same build and blocks, in alternating order; every block's root must be identical.
    Reports the CPU time of ``prepare()`` and of the whole block (prepare + synced write + commit) of the
    thread running it, and the tree's store ops per block."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("other_state_tree", other_tree_py)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {other_tree_py}")
    other = importlib.util.module_from_spec(spec)
    sys.modules["other_state_tree"] = other
    spec.loader.exec_module(other)
    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="state-root-ab-")
    try:
        stores = {name: LevelDBStore(Path(tmp) / name) for name in ("this", "other")}
        trees = {"this": StateTree(stores["this"], TREE_PREFIX), "other": other.StateTree(stores["other"], TREE_PREFIX)}
        keys: list[bytes] = []
        done = 0
        while done < n_keys:
            size = min(BUILD_BATCH, n_keys - done)
            batch = {rng.randbytes(32): rng.randbytes(64) for _ in range(size)}
            keys.extend(batch)
            roots = set()
            for name, t in trees.items():
                update = t.prepare(batch)
                stores[name].write_batch([*((DATA_PREFIX + k, v) for k, v in batch.items()), *update.ops],
                                         sync=False)
                t.commit(update)
                roots.add(update.root)
            if len(roots) != 1:
                raise RuntimeError("the two trees disagree")
            done += size
        for st in stores.values():
            st.compact()
        cpu: dict[str, list[float]] = {name: [] for name in trees}
        block_cpu: dict[str, list[float]] = {name: [] for name in trees}
        ops: dict[str, list[float]] = {name: [] for name in trees}
        for b in range(blocks):
            changes: dict[bytes, bytes | None] = {k: rng.randbytes(64) for k in rng.sample(keys, writes // 2)}
            fresh = {rng.randbytes(32): rng.randbytes(64) for _ in range(writes - writes // 2)}
            keys.extend(fresh)
            changes.update(fresh)
            roots = set()
            for name in (("this", "other") if b % 2 else ("other", "this")):
                r = _block(stores[name], trees[name], changes)
                cpu[name].append(r[5])
                block_cpu[name].append(r[6])
                ops[name].append(r[4])
                roots.add(trees[name].root())
            if len(roots) != 1:
                raise RuntimeError("the two trees disagree")
        for st in stores.values():
            st.close()

        def med(v: list[float]) -> float:
            return round(statistics.median(v) / writes * 1e6, 2)

        return {"keys": n_keys, "writes_per_block": writes, "blocks": blocks,
                "prepare_cpu_us_per_write": {name: med(v) for name, v in cpu.items()},
                "block_cpu_us_per_write": {name: med(v) for name, v in block_cpu.items()},
                "tree_ops_per_block": {name: statistics.median(v) for name, v in ops.items()}}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


GROWTH_KEYS = ("block_cpu_us_per_write", "prepare_cpu_us_per_write", "us_per_write")
"""Per-write figures whose growth from the smallest to the largest size is reported."""


def _point(code: str, n: int, writes: int, blocks: int) -> dict[str, float]:
    """``measure(n)`` with ``code``'s ``cowboy_node``, in a fresh interpreter (same seed, hence same blocks)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--code", code, "--point", str(n), "--writes", str(writes),
           "--blocks", str(blocks)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    result: dict[str, float] = json.loads(out)
    tree_py = str(result.pop("tree_py"))
    if not tree_py.startswith(code + "/"):
        raise RuntimeError(f"the point meant for {code} imported {tree_py}")
    return result


def compare_checkouts(base: str, sizes: list[int], writes: int, blocks: int) -> dict[str, object]:
    """Every size measured with ``base``'s code and with this code, alternating which goes first, and the growth
    of each :data:`GROWTH_KEYS` figure from the smallest to the largest size on each side (same run)."""
    this = str(Path(__file__).resolve().parents[1])
    sides: dict[str, dict[str, dict[str, float]]] = {"base": {}, "this": {}}
    for i, n in enumerate(sizes):
        for side in (("base", "this") if i % 2 == 0 else ("this", "base")):
            sides[side][str(n)] = _point(base if side == "base" else this, n, writes, blocks)
    lo, hi = str(min(sizes)), str(max(sizes))
    growth = {side: {k: round(r[hi][k] / r[lo][k], 3) for k in GROWTH_KEYS} for side, r in sides.items()}
    return {"base_code": base, "this_code": this, "sizes": sizes, "writes_per_block": writes, "blocks": blocks,
            "results": sides, f"growth_{hi}_over_{lo}": growth,
            "goal_growth_max": 1.5}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated key counts")
    ap.add_argument("--writes", type=int, default=2000, help="writes per block")
    ap.add_argument("--blocks", type=int, default=5, help="timed blocks per size (median reported)")
    ap.add_argument("--path", default=None, help="directory for the databases (default: a temp dir)")
    ap.add_argument("--compare-tree", default=None, metavar="TREE_PY",
                    help="instead: thread-CPU A/B of prepare() against the StateTree in this tree.py file")
    ap.add_argument("--base", default=None, metavar="CHECKOUT",
                    help="instead: A/B against another checkout's code (subprocesses, interleaved), with growth ratios")
    ap.add_argument("--code", default=None, help=argparse.SUPPRESS)  # read before the imports, see the top
    ap.add_argument("--point", type=int, default=None, help=argparse.SUPPRESS)  # one measure() as JSON
    args = ap.parse_args()
    if args.point is not None:
        import cowboy_node.state.tree as tree_module

        print(json.dumps({"tree_py": tree_module.__file__, **measure(args.point, args.writes, blocks=args.blocks)}))
        return
    if args.base:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
        print(json.dumps(compare_checkouts(str(Path(args.base).resolve()), sizes, args.writes, args.blocks),
                         indent=2))
        return
    if args.compare_tree:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
        print(json.dumps({"compare_tree": args.compare_tree,
                          "results": [compare_trees(n, args.compare_tree, args.writes, max(args.blocks, 2))
                                      for n in sizes]}, indent=2))
        return
    out: dict[str, object] = {"goal_us_per_write_at_1e6": 30.0, "results": {}}
    results: dict[str, dict[str, float]] = {}
    for n in (int(s) for s in args.sizes.split(",") if s.strip()):
        sub = None if args.path is None else str(Path(args.path) / str(n))
        results[str(n)] = measure(n, args.writes, sub, blocks=args.blocks)
    out["results"] = results
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
