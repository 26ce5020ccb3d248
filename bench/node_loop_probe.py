"""Run ``cowboy-node run`` with an event-loop probe beside it (benchmarks only; nothing here ships in the node).

``python bench/node_loop_probe.py OUT.json run --home H`` runs the node exactly as ``cowboy-node run --home H``
(uvloop, the same ``run_node``), plus:

- a 5 ms ticker task on the node's loop: each tick records ``(wall time, how late it ran)``, so a benchmark can
  split the loop's lag by the phases it timed with its own wall clock (same machine, same clock);
- a sampler thread: while the ticker has not run for over ``STALL_MS``, it takes the loop thread's Python stack
  every few ms; each stall is written with its duration and its most frequent stack, which shows where the loop
  spent the time (a thread can only sample while the loop thread lets go of the GIL, which CPython forces every
  5 ms, so the stack is the one the loop is in while it stalls).

Each stall also says how the loop thread spent it, from the kernel's ``/proc/self/task/<tid>/schedstat``:
``cpu_ms`` on a CPU (the loop was computing: the stack is the cost), ``runqueue_ms`` runnable but waiting for a
CPU (other processes had the cores: the stack is only where it was), the rest blocked in a system call (disk
sync, ...). Garbage collections over 10 ms are recorded too (``gc``: wall time, ms, generation).

On exit (SIGTERM: the node stops cleanly) it writes ``OUT.json``: ``{"ticks": [[t, lag_ms], ...], "stalls":
[{"t", "ms", "cpu_ms", "runqueue_ms", "samples", "stack"}, ...], "gc": [[t, ms, generation], ...]}``.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import json
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TICK_S = 0.005
"""Ticker period."""
STALL_MS = 50.0
"""A loop that has not ticked for this long is stalled: the sampler records where it is."""
STACK_DEPTH = 14
"""Innermost frames kept per sample."""


class Probe:
    """The ticker's samples and the sampler's stalls."""

    def __init__(self) -> None:
        self.ticks: list[tuple[float, float]] = []
        """(wall time of the tick, lateness in ms)."""
        self.stalls: list[dict[str, Any]] = []
        """One per stall: start wall time, duration, sample count, most frequent stack."""
        self.last_tick = time.perf_counter()
        self.loop_thread = threading.get_ident()
        self.loop_native = threading.get_native_id()
        self.stop = threading.Event()
        self.cpu: list[tuple[float, float, float]] = []
        """(wall time, process CPU s, loop thread CPU s), about once a second."""
        self.gcs: list[tuple[float, float, int]] = []
        """(wall time, ms, generation) of collections over 10 ms."""
        self._gc_began = 0.0

    def on_gc(self, phase: str, info: dict[str, Any]) -> None:
        """``gc.callbacks`` hook: time each collection."""
        if phase == "start":
            self._gc_began = time.perf_counter()
        else:
            ms = (time.perf_counter() - self._gc_began) * 1000
            if ms > 10:
                self.gcs.append((time.time(), round(ms, 1), int(info.get("generation", -1))))

    def schedstat(self) -> tuple[float, float]:
        """The loop thread's (ms on a CPU, ms waiting for one) so far."""
        try:
            with open(f"/proc/self/task/{self.loop_native}/schedstat") as f:
                run_ns, wait_ns, _ = f.read().split()
            return int(run_ns) / 1e6, int(wait_ns) / 1e6
        except (OSError, ValueError):
            return 0.0, 0.0

    async def tick(self) -> None:
        """Sleep ``TICK_S`` again and again, recording how late each wake-up is (and, every 200 ticks, the
        process's CPU time and the loop thread's, for CPU use per phase)."""
        n = 0
        while True:
            t = time.perf_counter()
            await asyncio.sleep(TICK_S)
            now = time.perf_counter()
            self.last_tick = now
            self.ticks.append((time.time(), round((now - t - TICK_S) * 1000, 2)))
            n += 1
            if n % 200 == 0:
                self.cpu.append((time.time(), time.process_time(), self.schedstat()[0] / 1000))

    def sample(self) -> None:
        """Sampler thread: stacks of the loop thread while it is stalled."""
        stall: collections.Counter[tuple[str, ...]] | None = None
        began = 0.0
        while not self.stop.wait(0.002):
            late = (time.perf_counter() - self.last_tick) * 1000
            if late > STALL_MS:
                if stall is None:
                    stall, began = collections.Counter(), time.time() - late / 1000
                    cpu0, wait0 = self.schedstat()  # from when the stall was seen (up to STALL_MS after it began)
                frame = sys._current_frames().get(self.loop_thread)
                if frame is not None:
                    stack = traceback.extract_stack(frame)[-STACK_DEPTH:]
                    stall[tuple(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in stack)] += 1
            elif stall is not None:
                top = stall.most_common(1)
                cpu1, wait1 = self.schedstat()
                self.stalls.append({"t": round(began, 3), "ms": round((time.time() - began) * 1000, 1),
                                    "cpu_ms": round(cpu1 - cpu0, 1), "runqueue_ms": round(wait1 - wait0, 1),
                                    "samples": sum(stall.values()), "stack": list(top[0][0]) if top else [],
                                    "other_stacks": [list(s)[-4:] for s, _ in stall.most_common(4)[1:]]})
                stall = None


def main() -> int:
    """Run the node's CLI ``run`` with the probe; write the probe's file on exit."""
    out = Path(sys.argv[1])
    argv = sys.argv[2:]
    from cowboy_node.cli import main as cli
    from cowboy_node.node import startup

    probe = Probe()
    run_node = startup.run_node

    async def probed(*args: Any, **kwargs: Any) -> int:
        probe.loop_thread = threading.get_ident()
        probe.loop_native = threading.get_native_id()
        ticker = asyncio.get_running_loop().create_task(probe.tick())
        try:
            return await run_node(*args, **kwargs)
        finally:
            ticker.cancel()

    startup.run_node = probed  # type: ignore[assignment]  # cmd_run imports it from the module when it runs
    gc.callbacks.append(probe.on_gc)
    sampler = threading.Thread(target=probe.sample, daemon=True)
    sampler.start()
    try:
        return int(cli.main(argv) or 0)
    finally:
        probe.stop.set()
        sampler.join(timeout=2)
        out.write_text(json.dumps({"ticks": probe.ticks, "stalls": probe.stalls, "gc": probe.gcs, "cpu": probe.cpu,
                                   "gc_stats": gc.get_stats(), "objects_at_exit": len(gc.get_objects())}))


if __name__ == "__main__":
    sys.exit(main())
