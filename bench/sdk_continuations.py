"""cowboy_sdk continuations: what the deploy-time lowering and a resume cost (prints JSON).

Same-run baselines:

* ``compile``: the weather actor (tests/vectors/sdk_actors/weather.py) compiled with the deploy-time transform
  (SDK name check + continuation lowering + policy + instrumentation) vs the same actor with the continuation
  written by hand as the two plain legs the lowering produces (policy + instrumentation only) — the lowering's
  own cost per deploy (the code cache keeps the result, so it is paid once per source per process);
* ``cycles``: cycles of each leg on a real chain (initial leg in its transaction, each resume in the Mailbox)
  vs a plain handler doing the same storage writes in one transaction — what the continuation machinery
  (record save/load, request encoding, job submission) costs in consensus cycles. Cycles are deterministic;
  times are the best of ``--reps``.

Usage: python bench/sdk_continuations.py [--reps 20]
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cowboy_sdk import codec as sdk_codec  # noqa: E402

from cowboy_node.execution.actors.fsm import lower_continuations  # noqa: E402
from cowboy_node.execution.actors.sdk_surface import transform  # noqa: E402
from cowboy_node.execution.pvm import compile_actor  # noqa: E402
from cowboy_protocol.types.instructions import CallActor, DeployActor, Transfer  # noqa: E402

WEATHER = (ROOT / "tests/vectors/sdk_actors/weather.py").read_text(encoding="utf-8")
PLAIN = '''from cowboy_sdk import actor, public


@actor
class Plain:
    @public
    def refresh(self, city):
        self.storage["page"] = {"text": "21C, sunny", "temp": 21}
        self.storage["summary"] = "Mild."
        self.storage["steps"] = self.storage.get("steps", 0) + 1
        return b"done"
'''


def _best(fn: object, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - t)
    return best


def compile_times(reps: int) -> dict[str, float]:
    hand_lowered = ast.unparse(lower_continuations(ast.parse(WEATHER), WEATHER))
    lowered_s = _best(lambda: compile_actor(WEATHER, transform=transform), reps)
    hand_s = _best(lambda: compile_actor(hand_lowered), reps)
    return {"with_lowering_ms": round(lowered_s * 1e3, 3), "hand_lowered_baseline_ms": round(hand_s * 1e3, 3),
            "lowering_overhead_ms": round((lowered_s - hand_s) * 1e3, 3)}


def leg_cycles() -> dict[str, int]:
    from cowboy_node.execution.actors.actor_record import derive_actor_address
    from cowboy_node.execution.eob import execute_mailbox
    from tests.helpers import ALICE, ALICE_SK
    from tests.unit.execution.actors.test_sdk_continuations import _net, _pending_sdk_jobs, _reveal

    cycles: list[int] = []
    original = execute_mailbox._run

    def recording(world, ctx, seq, entry, cost, cells_limit, run_fire, run_message):  # type: ignore[no-untyped-def]
        used = original(world, ctx, seq, entry, cost, cells_limit, run_fire, run_message)
        cycles.append(used)
        return used

    execute_mailbox._run = recording  # type: ignore[assignment]
    try:
        net, actor = _net()
        p = net.block([net.tx(ALICE_SK, CallActor(actor, "refresh", sdk_codec.encode("paris")))])
        initial = p.result.receipts[0].cycles_used
        [(job1, _)] = _pending_sdk_jobs(net)
        _reveal(net, job1, b'{"text": "21C, sunny", "temp": 21}')
        [(job2, _)] = _pending_sdk_jobs(net)
        _reveal(net, job2, b"Mild.")
        net.block([net.tx(ALICE_SK, DeployActor(PLAIN, b"", "", b""))])
        plain = derive_actor_address(ALICE, b"", PLAIN)
        net.block([net.tx(ALICE_SK, Transfer(plain, 10**20))])
        p = net.block([net.tx(ALICE_SK, CallActor(plain, "refresh", sdk_codec.encode("paris")))])
        baseline = p.result.receipts[0].cycles_used
    finally:
        execute_mailbox._run = original  # type: ignore[assignment]
    resumes = cycles[0::2]  # every block runs twice: built by the producer, replayed by the follower
    return {"initial_leg_tx": initial, "resume_1_mailbox": resumes[0], "resume_2_mailbox": resumes[1],
            "total": initial + sum(resumes), "plain_handler_baseline_tx": baseline}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    print(json.dumps({"bench": "sdk_continuations", "compile": compile_times(args.reps), "cycles": leg_cycles()}))


if __name__ == "__main__":
    main()
