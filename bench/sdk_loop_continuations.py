"""Awaits in loops (actors/fsm_loops.py) vs the same jobs written as top-level awaits (prints JSON).

Same-run baseline: ``UNROLLED`` does the work of ``LOOP`` with 3 top-level awaits, lowered by the SDK's own
generator (the path every non-loop continuation takes); ``LOOP`` awaits in ``for topic in topics`` under
``@bounded_loop``. Both run on a real chain (scripted runner, every block replayed by a follower):

* ``cycles``: the initial leg (its transaction) and each resume leg (Mailbox ``mailbox.delivered`` cycles),
  deterministic; ``record_bytes``: the continuation record after each suspension;
* ``compile``: deploy-time transform + policy + instrumentation, best of ``--reps`` (noisy; the ratio matters);
  ``lowered_chars``: size of the lowered module source;
* ``scaling``: cycles of the resume leg that starts iteration ``k`` for a loop of 8 (bounded: grows only with
  the carried locals).

Usage: python bench/sdk_loop_continuations.py [--reps 10]
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cowboy_sdk import codec as sdk_codec  # noqa: E402

from cowboy_node.execution.actors.fsm import lower_continuations  # noqa: E402
from cowboy_node.execution.actors.sdk_surface import transform  # noqa: E402
from cowboy_node.execution.pvm import compile_actor  # noqa: E402
from cowboy_protocol.codec import decode  # noqa: E402

LOOP = '''from cowboy_sdk import actor, bounded_loop, public, runner


@actor
class Loop:
    @public
    @bounded_loop(max_iterations=8)
    @runner.continuation
    async def crawl(self, topics):
        seen = []
        for topic in topics:
            answer = await runner.llm(f"About {topic}", model="stub-model", max_tokens=8)
            seen.append(answer.text)
            self.storage["seen"] = seen
        return b"done"
'''
UNROLLED = '''from cowboy_sdk import actor, capture, public, runner


@actor
class Unrolled:
    @public
    @runner.continuation
    async def crawl(self, topics):
        ctx = capture()
        ctx.topics = topics
        ctx.seen = []
        answer = await runner.llm(f"About {ctx.topics[0]}", model="stub-model", max_tokens=8)
        ctx.seen.append(answer.text)
        self.storage["seen"] = ctx.seen
        answer = await runner.llm(f"About {ctx.topics[1]}", model="stub-model", max_tokens=8)
        ctx.seen.append(answer.text)
        self.storage["seen"] = ctx.seen
        answer = await runner.llm(f"About {ctx.topics[2]}", model="stub-model", max_tokens=8)
        ctx.seen.append(answer.text)
        self.storage["seen"] = ctx.seen
        return b"done"
'''


def _best(fn: Any, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def run(source: str, topics: list[str]) -> dict[str, Any]:
    """Cycles of every leg and the record size after every suspension, for ``crawl(topics)``."""
    from cowboy_node.execution.actors.actor_state import scan_state
    from cowboy_node.execution.eob.execute_mailbox import TOPIC_DELIVERED
    from cowboy_protocol.types.instructions import CallActor
    from tests.helpers import ALICE_SK
    from tests.unit.execution.actors.test_sdk_continuations import _net, _pending_sdk_jobs, _reveal

    net, actor = _net(source)
    p = net.block([net.tx(ALICE_SK, CallActor(actor, "crawl", sdk_codec.encode(topics)))])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    legs = [p.result.receipts[0].cycles_used]
    records = []
    while _pending_sdk_jobs(net):
        records.append(sum(len(v) for _, v in scan_state(net.chain.world(), actor, b"__continuation:", 10)))
        [(job, _)] = _pending_sdk_jobs(net)
        p = _reveal(net, job, b"an answer")
        [used] = [decode(e.data)[3] for e in p.result.block_events if e.topic == TOPIC_DELIVERED]
        legs.append(used)
    assert sdk_codec.decode(scan_state(net.chain.world(), actor, b"seen", 1)[0][1]) == ["an answer"] * len(topics)
    return {"initial_leg_tx": legs[0], "resume_legs_mailbox": legs[1:], "total": sum(legs),
            "record_bytes": records}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    loop, unrolled = run(LOOP, ["x", "y", "z"]), run(UNROLLED, ["x", "y", "z"])
    loop_s = _best(lambda: compile_actor(LOOP, transform=transform), args.reps)
    unrolled_s = _best(lambda: compile_actor(UNROLLED, transform=transform), args.reps)
    size = {name: len(ast.unparse(lower_continuations(ast.parse(src), src)))
            for name, src in (("loop", LOOP), ("unrolled_baseline", UNROLLED))}
    eight = run(LOOP, [f"t{i}" for i in range(8)])
    print(json.dumps({
        "bench": "sdk_loop_continuations",
        "cycles": {"loop": loop, "unrolled_baseline": unrolled,
                   "ratio_total": round(loop["total"] / unrolled["total"], 3),
                   "ratio_mean_resume": round(sum(loop["resume_legs_mailbox"]) / sum(unrolled["resume_legs_mailbox"]),
                                              3)},
        "compile": {"loop_ms": round(loop_s * 1e3, 3), "unrolled_baseline_ms": round(unrolled_s * 1e3, 3),
                    "ratio": round(loop_s / unrolled_s, 3)},
        "lowered_chars": {**size, "ratio": round(size["loop"] / size["unrolled_baseline"], 3)},
        "scaling_8_iterations": {"resume_legs_mailbox": eight["resume_legs_mailbox"],
                                 "record_bytes": eight["record_bytes"]},
    }))


if __name__ == "__main__":
    main()
