"""The long mixed timer run (``timer_mixed_scenario``) writes, emits and charges exactly what it did before the
timer-fire fast paths (issue 20 item 4), under any hash seed.

``BEFORE`` is the scenario's digest as computed by the code at 8cb54ba (the scenario module run from a worktree
of that commit): per block, the net state changes, the receipts' canonical bytes, the block events and the
End-of-Block counters. It covers plain, failing, out-of-cycles, scheduling, cancelling and balance-moving fires,
envelopes, sender-paid timers, lane deferral, expiry and the GC budget (see the scenario's docstring).
"""

from __future__ import annotations

import json

from tests.helpers import run_under_hash_seeds
from tests.unit.execution.timer_mixed_scenario import run

BEFORE = "f3d7b5a56615db74895c6bc5d1ab1353cc8f747cb43d504e5d526307911037db"


def test_the_mixed_run_is_the_one_before_the_fast_paths() -> None:
    out = run()
    assert out["digest"] == BEFORE, json.dumps(out["blocks"], indent=1)
    counts = [b["counts"] for b in out["blocks"]]  # type: ignore[attr-defined]
    # the scenario still reaches the paths it is for: expiry after lane deferral, the GC budget, failed fires
    assert any(c[3] for c in counts) and any(c[4] for c in counts) and any(c[6] for c in counts)


def test_the_mixed_run_does_not_depend_on_the_hash_seed() -> None:
    script = "from tests.unit.execution.timer_mixed_scenario import run; print(run()['digest'])"
    assert [line.strip() for line in run_under_hash_seeds(script)] == [BEFORE, BEFORE]
