"""PVM cost of the interruptible cycle fast path (prints JSON).

The PVM's inline ``charge`` compares the cycles used with ``meter.ceiling`` on every charge, so that
:meth:`Meter.interrupt` (called by the RPC read pool's watchdog from another thread) stops a read at its next
charge. Before, the limit was cached in a closure variable. This benchmark runs tight-loop actors with both
versions of ``runtime.Sandbox`` (the reusable helpers ``call_handler`` takes from its free list) in the same
process, interleaved (ABAB...), so that the shared machine's load drift hits both alike:

* ``current`` — ``cowboy_node.execution.pvm.runtime`` as it is;
* ``cached`` — the same source with the limit read into a closure variable when a call's meter is bound (the
  previous fast path), loaded as a separate module and patched into ``sandbox.Sandbox`` for its rounds (the
  free list is emptied around each round, so each round's sandbox is of its variant).

``ratio`` = median(current) / median(cached) of per-round CPU seconds (``time.process_time``); 1.00 means no
cost. Usage: python bench/pvm_interrupt_cost.py [--rounds 15] [--iterations 300000]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import textwrap
import time
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cowboy_node.execution.meter import Meter
from cowboy_node.execution.pvm import call_handler, compile_actor, runtime, sandbox

ACTORS = {
    "while_counter": """
        def handler(payload):
            n = 0
            while n < int(payload):
                n += 1
            return b""
    """,
    "for_sum": """
        def handler(payload):
            total = 0
            for i in range(int(payload)):
                total = total + i * 2
            return b""
    """,
}
_FAST = "        if used <= meter.ceiling:\n"
_BIND_HEAD = "        nonlocal meter, charge_cycles, max_depth\n"
_BIND_METER = "\n        meter = ctx.meter\n"
_BUILD_METER = "\n    meter = ctx.meter\n"  # the leading newline tells it from the indented one in ``bind``


def cached_runtime() -> ModuleType:
    """``runtime`` with the previous fast path: the cycles limit cached in a closure variable."""
    src = Path(runtime.__file__).read_text()
    edits = {  # each must occur exactly once: the limit is bound with the call's meter, then compared
        _FAST: "        if used <= cycles_limit:\n",
        _BIND_HEAD: _BIND_HEAD.replace("max_depth\n", "max_depth, cycles_limit\n"),
        _BIND_METER: _BIND_METER + "        cycles_limit = meter.cycles_limit\n",
        _BUILD_METER: _BUILD_METER + "    cycles_limit = meter.cycles_limit\n",
    }
    for old, new in edits.items():
        if src.count(old) != 1:
            raise SystemExit("runtime.py's charge/bind no longer has the expected shape; update this benchmark")
        src = src.replace(old, new)
    spec = importlib.util.spec_from_loader("_pvm_runtime_cached", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(src, "<runtime cached>", "exec"), module.__dict__)
    return module


def run_once(actor: object, iterations: int) -> tuple[float, int]:
    meter = Meter(10**12, 0)
    t0 = time.process_time()
    call_handler(actor, "handler", str(iterations).encode(), meter=meter)  # type: ignore[arg-type]
    return time.process_time() - t0, meter.cycles_used


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--iterations", type=int, default=300_000)
    args = ap.parse_args()
    variants = {"current": runtime.Sandbox, "cached": cached_runtime().Sandbox}
    out: dict[str, object] = {"rounds": args.rounds, "iterations": args.iterations, "actors": {}}
    for name, source in ACTORS.items():
        actor = compile_actor(textwrap.dedent(source))
        times: dict[str, list[float]] = {v: [] for v in variants}
        cycles: dict[str, int] = {}
        for r in range(args.rounds + 1):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            for v in order:
                sandbox._IDLE.clear()
                sandbox.Sandbox = variants[v]  # type: ignore[attr-defined]
                try:
                    seconds, used = run_once(actor, args.iterations)
                finally:
                    sandbox.Sandbox = runtime.Sandbox  # type: ignore[attr-defined]
                    sandbox._IDLE.clear()
                if r > 0:  # round 0 warms up
                    times[v].append(seconds)
                cycles[v] = used
        if cycles["current"] != cycles["cached"]:
            raise SystemExit(f"{name}: cycle counts differ {cycles}")
        med = {v: statistics.median(ts) for v, ts in times.items()}
        out["actors"][name] = {  # type: ignore[index]
            "cycles": cycles["current"],
            "median_s": {v: round(s, 4) for v, s in med.items()},
            "mcycles_per_s": {v: round(cycles[v] / s / 1e6, 2) for v, s in med.items()},
            "ratio": round(med["current"] / med["cached"], 3),
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
