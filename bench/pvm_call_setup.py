"""Per-call set-up cost of ``pvm.call_handler``: reused sandboxes vs a build for every call (prints JSON).

Three handlers, each called many times in a row (thread CPU per call, ``time.thread_time``):

* ``trivial`` — ``def fire(p): return b""`` (what the sandbox costs by itself);
* ``one_write`` — imports ``pvm_host`` and writes one key through it (a timer fire's shape);
* ``loop`` — a 20,000-iteration arithmetic loop (the charge fast path; must not get slower).

Variants, measured in the same run, in separate worker processes (round-robin, so the shared machine's
load drift hits all alike):

* ``new`` — this checkout (``runtime.Sandbox`` objects reused from a free list);
* ``base`` — the tree given by ``--base`` (default ``/tmp/h1base``, a ``git worktree`` of 8cb54ba, whose
  ``call_handler`` built every helper for every call); skipped when that directory does not exist;
* ``fresh`` — this checkout with a new Sandbox for every call (the same helpers built per call: what the
  reuse saves, without the worktree).

``ratio_*`` = median(new) / median(other); cycles per call must be equal across variants.
Usage: python bench/pvm_call_setup.py [--rounds 5] [--calls 20000] [--base /tmp/h1base]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

HANDLERS = {
    "trivial": ("def fire(p):\n    return b''\n", b""),
    "one_write": ("import pvm_host\n\ndef fire(p):\n    pvm_host.set_state(b'k', p)\n    return b''\n", b"v" * 32),
    "loop": ("def fire(p):\n    t = 0\n    for i in range(int(p)):\n        t = t + i * 3\n    return b''\n", b"20000"),
}
#: calls per round for each handler, relative to --calls
SCALE = {"trivial": 1.0, "one_write": 1.0, "loop": 0.005}


def worker(calls: int, fresh: bool) -> dict[str, Any]:
    """Run in the child: per-call thread CPU and cycles of each handler with this process's cowboy_node."""
    from cowboy_node.execution.meter import Meter
    from cowboy_node.execution.pvm import call_handler, compile_actor

    if fresh:
        from cowboy_node.execution.pvm import runtime, sandbox
        sandbox._take_sandbox = runtime.Sandbox
    store: dict[bytes, bytes] = {}
    host = types.SimpleNamespace(set_state=store.__setitem__)
    modules = {"pvm_host": host}
    out: dict[str, Any] = {}
    for name, (src, payload) in HANDLERS.items():
        actor = compile_actor(src)
        n = max(1, int(calls * SCALE[name]))
        for _ in range(min(n, 200)):  # warm up
            call_handler(actor, "fire", payload, meter=Meter(10**9, 0), modules=modules)
        t0 = time.thread_time()
        for _ in range(n):
            meter = Meter(10**9, 0)
            call_handler(actor, "fire", payload, meter=meter, modules=modules)
        out[name] = {"us": (time.thread_time() - t0) / n * 1e6, "cycles": meter.cycles_used}
    return out


def run_worker(tree: Path, calls: int, fresh: bool) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--calls", str(calls)]
    if fresh:
        cmd.append("--fresh")
    done = subprocess.run(cmd, env=env, cwd=str(tree), capture_output=True, text=True, check=True, timeout=600)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20_000)
    ap.add_argument("--base", type=Path, default=Path("/tmp/h1base"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--fresh", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.calls, args.fresh)))
        return
    variants: dict[str, tuple[Path, bool]] = {"new": (ROOT, False), "fresh": (ROOT, True)}
    if (args.base / "cowboy_node").is_dir():
        variants["base"] = (args.base.resolve(), False)
    samples: dict[str, dict[str, list[float]]] = {v: {h: [] for h in HANDLERS} for v in variants}
    cycles: dict[str, dict[str, int]] = {v: {} for v in variants}
    for r in range(args.rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        for v in order:
            tree, fresh = variants[v]
            got = run_worker(tree, args.calls, fresh)
            for h in HANDLERS:
                samples[v][h].append(got[h]["us"])
                cycles[v][h] = got[h]["cycles"]
    for v in variants:
        if cycles[v] != cycles["new"]:
            raise SystemExit(f"cycles per call differ: {v} {cycles[v]} vs new {cycles['new']}")
    med = {v: {h: statistics.median(samples[v][h]) for h in HANDLERS} for v in variants}
    out: dict[str, Any] = {
        "benchmark": "pvm_call_setup",
        "rounds": args.rounds,
        "calls": {h: max(1, int(args.calls * SCALE[h])) for h in HANDLERS},
        "base_tree": str(variants["base"][0]) if "base" in variants else None,
        "cycles_per_call": cycles["new"],
        "thread_cpu_us_per_call": {v: {h: round(us, 2) for h, us in m.items()} for v, m in med.items()},
    }
    for other in [v for v in variants if v != "new"]:
        out[f"ratio_new_over_{other}"] = {h: round(med["new"][h] / med[other][h], 3) for h in HANDLERS}
    out["goal_trivial_us_max"] = 10
    out["met_trivial"] = med["new"]["trivial"] <= 10
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
