"""End-of-Block timer benchmark (prints JSON).

For each number of stored timers T: a LevelDB-backed dev chain holds T timers,
M of them due at the block being executed (the rest spread over the next
10,000 heights, owned by 1,000 other actors). The due timers fire into a
deployed actor whose handler writes one key (the timer's payload). One
measured block = the DeliverTimers step for the M fires + the state commit of
what they wrote (``prepare_commit`` + one synced write batch), i.e. the part of
a block's time the timers add.

Baseline, measured in the same run on the same chain: the same M fires with a
native Python handler that writes the same key (no sandbox) — so
``pvm_over_native`` is what the sandbox adds per fire, and the T-ratio is the
growth from the smallest T to the largest (each point fires exactly ``--due`` timers; a T below it is
raised to it).

Goals (issue: actors and timers): ≤ 100 µs per fire, T-ratio ≤ 1.2, 10,000
due timers inside one 1-second block (``block_s`` for M = 10,000 ≤ 1).

``--profile`` adds one more PVM block per point with the steps wrapped and reports thread CPU per fire
of each (record read and decode, removal, fee account reads and writes, handler frame, sandbox call,
the rest), plus the state tree's part of the commit.

``machinery_cpu_us_per_fire`` (every run): the same PVM blocks with ``pvm.call_handler`` replaced by a stand-in
that makes the handler's one host call (``set_state(payload, b"1")``) and charges nothing: what a fire costs
outside the sandbox (DeliverTimers, the frame, the host call), unwrapped. The fires run through the node's
runner (``eob.deliver_timers.default_run_fire``), so the same script measures older code too.

Usage: python bench/eob_timers.py [--stored 10000,100000,1000000] [--due 10000] [--reps 3] [--profile]
       python bench/eob_timers.py --stored 1000,1000000 --due 1000 --base /work/wt-base
       (``--base``: the same points measured with another checkout's code -- each point in a subprocess importing
       that checkout's packages, interleaved with this code's -- and, for both, the T-ratios (largest ÷ smallest
       T, per fire: EOB, EOB thread CPU, block with its commit) and ``block_s`` ÷ 1 s at the largest T)
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# ``--code DIR`` (set by ``--base``): import the node's packages from that checkout instead of this one
sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--code") + 1] if "--code" in sys.argv
                            else Path(__file__).resolve().parents[1]).resolve()))

from cowboy_node.chain.chain import Chain
from cowboy_node.execution.actors import invoke
from cowboy_node.execution.actors.actor_record import ActorRecord, derive_actor_address, source_hash
from cowboy_node.execution.actors.actor_state import kv_key, put_actor, put_source
from cowboy_node.execution.block import begin_block
from cowboy_node.execution.context import BlockContext, BlockEnv
from cowboy_node.execution.eob import deliver_timers as eob_deliver_timers
from cowboy_node.execution.eob.deliver_timers import default_run_fire
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.system_state import put_account
from cowboy_node.execution.timers import deliver
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.timers.deliver import LANE_TIMER_CYCLES, FireOutcome, deliver_timers
from cowboy_node.execution.timers.timer_record import DEFAULT_HANDLER, Timer, derive_timer_id
from cowboy_node.node.devgenesis import create_dev_genesis
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import Account

ACTOR_SOURCE = """\
import pvm_host


def handle_timer(payload):
    pvm_host.set_state(payload, b"1")
    return b""
"""
GAS_PER_FIRE = 1_100
"""Declared gas limit of every bench timer (the handler uses about 1,011 cycles)."""
OPEN_LANE = 1 << 62
"""Lane budget for the per-fire figures: every due timer fires in the measured block."""
FILL_BATCH = 50_000
FILLER_ACTORS = 1_000
FILLER_SPREAD = 10_000
NATIVE_CYCLES = 100


def _commit(chain: Chain, world: WorldState, *, sync: bool) -> float:
    """Commit the world's pending writes; seconds taken."""
    t0 = time.perf_counter()
    _root, ops = world.prepare_commit()
    chain.store.write_batch(ops, sync=sync)
    world.mark_committed()
    return time.perf_counter() - t0


def _timer(actor: bytes, height: int, payload: bytes, nonce: int, seq: int) -> Timer:
    return Timer(actor_address=actor, height=height, payload=payload,
                 timer_id=derive_timer_id(actor, height, payload, nonce), handler=DEFAULT_HANDLER,
                 fee_payer=actor, gas_limit_per_fire=GAS_PER_FIRE, expires_at=height + 1_000_000, seq=seq)


def _insert(world: WorldState, timer: Timer, meta: store.ActorTimerMeta) -> store.ActorTimerMeta:
    store.apply_writes(world, store.insert_writes(timer, meta))
    return store.ActorTimerMeta(meta.live + 1, meta.next_nonce + 1)


class Bench:
    """A chain holding ``stored`` timers of which ``due`` are due at height ``height``."""

    def __init__(self, path: Path, stored: int, due: int, height: int = 10) -> None:
        dev = create_dev_genesis(chain_id="bench-eob", balances={}, system_deployers=(), fee_recipient=bytes(20),
                                 genesis_time_ms=0, entropy=bytes(96))
        self.db = LevelDBStore(path / "db")
        self.chain = Chain(self.db, dev.genesis)
        self.height, self.due = height, due
        world = self.chain.world()
        self.actor = derive_actor_address(bytes(19) + b"\x77", b"", ACTOR_SOURCE)
        put_source(world, source_hash(ACTOR_SOURCE), ACTOR_SOURCE)
        put_actor(world, self.actor, ActorRecord(source_hash(ACTOR_SOURCE), bytes(19) + b"\x77", 1,
                                                 ("handle_timer",)))
        put_account(world, self.actor, Account(10**30, 0))
        seq = 0
        meta = store.ActorTimerMeta(0, 0)
        for i in range(due):  # the due timers first: FIFO order = payload order
            meta = _insert(world, _timer(self.actor, height, i.to_bytes(8, "big"), meta.next_nonce, seq), meta)
            seq += 1
        self.filler_s = time.perf_counter()
        metas = [store.ActorTimerMeta(0, 0)] * FILLER_ACTORS
        for i in range(stored - due):
            a = i % FILLER_ACTORS
            actor = (0x100000 + a).to_bytes(20, "big")
            h = height + 1 + (i // FILLER_ACTORS) % FILLER_SPREAD
            metas[a] = _insert(world, _timer(actor, h, i.to_bytes(8, "big"), metas[a].next_nonce, seq), metas[a])
            seq += 1
            if seq % FILL_BATCH == 0:
                _commit(self.chain, world, sync=False)
        _commit(self.chain, world, sync=True)
        self.db.compact()
        self.filler_s = time.perf_counter() - self.filler_s

    def block(self, run: Callable[[WorldState, BlockContext], Callable[[WorldState, Timer, Meter], FireOutcome]],
              lane: int = OPEN_LANE) -> dict[str, float]:
        """Deliver the due timers once (on a throw-away view: the committed chain is left as it was)."""
        world = self.chain.world()
        env = BlockEnv(chain_id="bench-eob", height=self.height, timestamp_ms=0, fee_recipient=bytes(20),
                       beacon=b"", parent_beacon=b"")
        ctx = begin_block(world, env)
        c0 = time.thread_time()
        t0 = time.perf_counter()
        report = deliver_timers(world, ctx, run(world, ctx), lane_timer_cycles=lane)
        t1 = time.perf_counter()
        c1 = time.thread_time()
        if lane == OPEN_LANE and report.fired != self.due:
            raise RuntimeError(f"fired {report.fired} of {self.due} due timers")
        if world.get(kv_key(self.actor, (report.fired - 1).to_bytes(8, "big"))) is None:
            raise RuntimeError("the last handler did not write its key")
        c2 = time.thread_time()
        _root, ops = world.prepare_commit()
        t2 = time.perf_counter()
        c3 = time.thread_time()
        # Time the synced write on a scratch batch layout identical to a real commit, then drop it:
        # the committed chain must stay at "M due" for the next repetition.
        scratch = self.chain.store
        scratch.write_batch([(b"bench-scratch/" + k, v) for k, v in ops], sync=True)
        t3 = time.perf_counter()
        scratch.write_batch([(b"bench-scratch/" + k, None) for k, _v in ops], sync=False)
        return {"deliver_s": t1 - t0, "deliver_cpu_s": c1 - c0, "prepare_s": t2 - t1, "prepare_cpu_s": c3 - c2,
                "write_s": t3 - t2,
                "block_s": t3 - t0, "lane_cycles": float(report.lane_cycles_used), "fired": float(report.fired)}


PHASES: tuple[tuple[str, object, tuple[str, ...]], ...] = (
    # (label, module, attributes): inclusive thread CPU of every call of each attribute the code under test has
    # (older code has some, newer others: the same script profiles both), see ``phase_profile``
    # older code reads each fire's record by id (get_timer); since the S16 layout the scan's entry is the record
    # (decoded inline: not wrapped, it falls in rest_of_deliver) and the removal is remove_indexed
    ("record_read_decode", store, ("get_timer",)),
    ("record_removal", store, ("remove_timer", "remove_indexed")),
    # reads: get (older code, twice per fire) or balance (once); writes: put (twice) or add (twice, each with its
    # read of the store)
    ("fee_account_reads", deliver, ("AccountCache.get", "AccountCache.balance")),
    ("fee_account_writes", deliver, ("AccountCache.put", "AccountCache.add")),
    # the runner End of Block uses (eob.deliver_timers.default_run_fire returns it)
    ("handler_total", eob_deliver_timers, ("run_timer_fire", "run_checkpointed_fire")),
    ("handler_actor_record", invoke, ("_get_actor",)),
    ("handler_sandbox_call", invoke, ("call_handler",)),
)


def phase_profile(bench: Bench) -> dict[str, float]:
    """Thread CPU µs per fire of each step of one PVM block (one extra block, functions wrapped).

    ``handler_total`` includes ``handler_actor_record`` and ``handler_sandbox_call``;
    ``rest_of_deliver`` is the step minus the listed parts (index scan, classification, pre-charge and
    refund bookkeeping, checkpoint, ``timer.fired`` event, loop). Each wrapped call adds two thread-clock
    reads (about 1.2 µs each on the shared VM), so the profiled total is above an unwrapped block's.
    """
    spent: dict[str, int] = {label: 0 for label, _o, _a in PHASES}
    saved: list[tuple[object, str, object]] = []
    clock = time.thread_time_ns

    def wrap(label: str, fn: Callable[..., object]) -> Callable[..., object]:
        def timed(*args: object, **kwargs: object) -> object:
            t = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[label] += clock() - t
        return timed

    for label, module, attrs in PHASES:
        for dotted in attrs:
            owner: object = module
            attr = dotted
            if "." in dotted:
                cls_name, attr = dotted.split(".")
                owner = getattr(module, cls_name)
            if not hasattr(owner, attr):
                continue
            saved.append((owner, attr, getattr(owner, attr)))
            setattr(owner, attr, wrap(label, getattr(owner, attr)))
    try:
        r = bench.block(_pvm)
    finally:
        for owner, attr, fn in reversed(saved):
            setattr(owner, attr, fn)
    per_fire = {label: round(ns / bench.due / 1e3, 2) for label, ns in spent.items()}
    listed = sum(v for k, v in per_fire.items() if k not in ("handler_actor_record", "handler_sandbox_call"))
    per_fire["deliver_total"] = round(r["deliver_cpu_s"] / bench.due * 1e6, 2)
    per_fire["rest_of_deliver"] = round(per_fire["deliver_total"] - listed, 2)
    per_fire["commit_prepare_tree"] = round(r["prepare_cpu_s"] / bench.due * 1e6, 2)
    return per_fire


def _pvm(_world: WorldState, ctx: BlockContext) -> Callable[[WorldState, Timer, Meter], FireOutcome]:
    run_fire = default_run_fire()  # what End of Block runs
    return lambda w, t, m: run_fire(w, ctx, t, m)


def _stand_in_handler(_compiled: object, _handler: str, payload: bytes, *, meter: Meter,
                      modules: dict[str, object], **_kw: object) -> bytes:
    """In place of ``pvm.call_handler``: the bench handler's one host call, no sandbox."""
    host = modules["pvm_host"]
    host.set_state(payload, b"1")  # type: ignore[attr-defined]
    return b""


def machinery(bench: Bench, reps: int) -> float:
    """Median thread CPU µs per fire of PVM blocks whose sandbox call is :func:`_stand_in_handler`."""
    saved = invoke.call_handler  # type: ignore[attr-defined]
    invoke.call_handler = _stand_in_handler  # type: ignore[attr-defined, assignment]
    try:
        runs = [bench.block(_pvm) for _ in range(reps)]
    finally:
        invoke.call_handler = saved  # type: ignore[attr-defined]
    return round(statistics.median(r["deliver_cpu_s"] for r in runs) / bench.due * 1e6, 2)


def _native(_world: WorldState, _ctx: BlockContext) -> Callable[[WorldState, Timer, Meter], FireOutcome]:
    def run(w: WorldState, t: Timer, m: Meter) -> FireOutcome:
        m.charge_cycles(NATIVE_CYCLES)
        key = kv_key(t.actor_address, t.payload)
        w.set(key, b"1")
        m.charge_cells(len(key) + 1)
        return FireOutcome(True, m.cycles_used, m.cells_used, None)
    return run


def measure(stored: int, due: int, *, reps: int = 3, profile: bool = False) -> dict[str, object]:
    """Median per-fire figures for one (T, M) point, PVM handler and native baseline.

    The first PVM block is also reported alone: it is the only one whose timer records are not yet in
    LevelDB's block cache (every repetition fires the same due timers), as on a real chain where each
    record is read once, when it fires.
    """
    tmp = Path(tempfile.mkdtemp(prefix="eob-timers-bench-"))
    try:
        t0 = time.perf_counter()
        bench = Bench(tmp, stored, due)
        build_s = time.perf_counter() - t0
        pvm = [bench.block(_pvm) for _ in range(reps)]
        native = [bench.block(_native) for _ in range(reps)]
        machinery_us = machinery(bench, reps)
        default_lane = bench.block(_pvm, LANE_TIMER_CYCLES)
        phases = phase_profile(bench) if profile else None
        bench.chain.store.close()

        def med(runs: list[dict[str, float]], key: str) -> float:
            return statistics.median(r[key] for r in runs)

        def us_per_fire(runs: list[dict[str, float]], key: str) -> float:
            return round(med(runs, key) / due * 1e6, 2)

        out: dict[str, object] = {
            "stored": float(stored), "due": float(due), "build_s": round(build_s, 1),
            # EOB time: the DeliverTimers step (fee pre-charge, sandboxed handler, refund, index removal).
            "eob_us_per_fire": us_per_fire(pvm, "deliver_s"),
            # The same in thread CPU time (what load from other processes on a shared machine inflates less).
            "eob_cpu_us_per_fire": us_per_fire(pvm, "deliver_cpu_s"),
            # The first block alone (cold timer records, see above), thread CPU.
            "eob_cpu_us_per_fire_first_block": round(pvm[0]["deliver_cpu_s"] / due * 1e6, 2),
            "baseline_native_eob_cpu_us_per_fire": us_per_fire(native, "deliver_cpu_s"),
            # Everything but the sandbox (the handler's host call made by a stand-in), thread CPU.
            "machinery_cpu_us_per_fire": machinery_us,
            # The state tree's part of the commit (WorldState.prepare_commit), thread CPU.
            "commit_prepare_cpu_us_per_fire": us_per_fire(pvm, "prepare_cpu_s"),
            # The state commit of what the fires wrote (tree update + synced batch), paid at block commit.
            "commit_us_per_fire": round((med(pvm, "prepare_s") + med(pvm, "write_s")) / due * 1e6, 2),
            "block_us_per_fire": us_per_fire(pvm, "block_s"),
            "block_s": round(med(pvm, "block_s"), 3),
            "lane_cycles_used": med(pvm, "lane_cycles"),
            "baseline_native_eob_us_per_fire": us_per_fire(native, "deliver_s"),
            "pvm_over_native_eob": round(med(pvm, "deliver_s") / med(native, "deliver_s"), 2),
            "default_lane_cycles": float(LANE_TIMER_CYCLES),
            "default_lane_fired": default_lane["fired"],
            "default_lane_block_s": round(default_lane["block_s"], 3),
        }
        if phases is not None:
            out["phases_cpu_us_per_fire"] = phases
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def summary(results: list[dict[str, object]], due: int) -> dict[str, object]:
    """T-ratios (largest ÷ smallest T) and the goals, for ``results`` ordered by T."""
    def fig(r: dict[str, object], key: str) -> float:
        v = r[key]
        assert isinstance(v, float)
        return v

    first, last = results[0], results[-1]
    t_ratio = fig(last, "eob_us_per_fire") / fig(first, "eob_us_per_fire")
    t_ratio_cpu = fig(last, "eob_cpu_us_per_fire") / fig(first, "eob_cpu_us_per_fire")
    return {
        "t_ratio_eob": round(t_ratio, 2),
        "t_ratio_eob_cpu": round(t_ratio_cpu, 2),
        "t_ratio_eob_cpu_first_block": round(fig(last, "eob_cpu_us_per_fire_first_block")
                                             / fig(first, "eob_cpu_us_per_fire_first_block"), 2),
        "t_ratio_native_cpu": round(fig(last, "baseline_native_eob_cpu_us_per_fire")
                                    / fig(first, "baseline_native_eob_cpu_us_per_fire"), 2),
        "t_ratio_commit_prepare_cpu": round(fig(last, "commit_prepare_cpu_us_per_fire")
                                            / fig(first, "commit_prepare_cpu_us_per_fire"), 2),
        "t_ratio_block": round(fig(last, "block_us_per_fire") / fig(first, "block_us_per_fire"), 2),
        # the largest T's block (fires + commit) over a 1-second block
        "block_over_1s_at_largest_t": round(fig(last, "block_s") / 1.0, 3),
        "goals": {
            "eob_us_per_fire_max": 100, "t_ratio_max": 1.2, "t_ratio_block_max": 1.5, "due_in_1s_block": 10_000,
            "met_eob_us_per_fire": all(fig(r, "eob_us_per_fire") <= 100 for r in results),
            "met_eob_cpu_us_per_fire": all(fig(r, "eob_cpu_us_per_fire") <= 100 for r in results),
            "met_t_ratio_eob": t_ratio <= 1.2,
            "met_t_ratio_eob_cpu": t_ratio_cpu <= 1.2,
            "met_t_ratio_block": fig(last, "block_us_per_fire") / fig(first, "block_us_per_fire") <= 1.5,
            "met_1s_block_with_commit": due >= 10_000 and all(fig(r, "block_s") <= 1.0 for r in results),
            "met_due_in_default_lane": all(fig(r, "default_lane_fired") >= 10_000 for r in results),
        },
    }


def _point(code: str, stored: int, due: int, reps: int) -> dict[str, object]:
    """``measure(stored, due)`` with ``code``'s packages, in a fresh interpreter."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--code", code, "--point", str(stored), "--due", str(due),
           "--reps", str(reps)]
    result: dict[str, object] = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    deliver_py = str(result.pop("deliver_py"))
    if not deliver_py.startswith(code + "/"):
        raise RuntimeError(f"the point meant for {code} imported {deliver_py}")
    return result


def compare_checkouts(base: str, sizes: list[int], due: int, reps: int) -> dict[str, object]:
    """Every T measured with ``base``'s code and with this code (alternating which goes first), and each side's
    :func:`summary` (same run)."""
    this = str(Path(__file__).resolve().parents[1])
    sides: dict[str, list[dict[str, object]]] = {"base": [], "this": []}
    for i, t in enumerate(sizes):
        for side in (("base", "this") if i % 2 == 0 else ("this", "base")):
            sides[side].append(_point(base if side == "base" else this, t, due, reps))
    return {"benchmark": "eob_timers", "base_code": base, "this_code": this, "due": due, "reps": reps,
            "results": sides, "summary": {side: summary(r, due) for side, r in sides.items()}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stored", default="10000,100000,1000000",
                   help="comma-separated T values (each at least --due: a smaller one is raised to it)")
    p.add_argument("--due", type=int, default=10_000, help="M: timers due at the measured block")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--profile", action="store_true", help="add one wrapped PVM block per point: CPU per step")
    p.add_argument("--base", default=None, metavar="CHECKOUT",
                   help="instead: A/B against another checkout's code (subprocesses, interleaved)")
    p.add_argument("--code", default=None, help=argparse.SUPPRESS)  # read before the imports, see the top
    p.add_argument("--point", type=int, default=None, help=argparse.SUPPRESS)  # one measure() as JSON
    a = p.parse_args()
    due = a.due
    if a.point is not None:
        print(json.dumps({"deliver_py": deliver.__file__, **measure(max(a.point, due), due, reps=a.reps)}))
        return
    # Every point fires exactly --due timers: a size below it holds just the due timers (it used to cap the
    # due count at the smallest size, so 10,000 due timers were never measured).
    sizes = sorted({max(int(x), due) for x in a.stored.split(",")})
    if a.base:
        print(json.dumps(compare_checkouts(str(Path(a.base).resolve()), sizes, due, a.reps), indent=2))
        return
    results = [measure(t, due, reps=a.reps, profile=a.profile) for t in sizes]
    out = {"benchmark": "eob_timers", "gas_limit_per_fire": GAS_PER_FIRE, "results": results,
           **summary(results, due)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
