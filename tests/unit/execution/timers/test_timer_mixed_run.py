"""The long mixed timer run (``timer_mixed_scenario``) writes, emits and charges exactly what it did before the
timer-fire fast paths (issue 20 item 4), under any hash seed.

``BEFORE`` is the scenario's digest (per block: the net state changes, the receipts' canonical bytes, the block
events and the End-of-Block counters). It covers plain, failing, out-of-cycles, scheduling, cancelling and
balance-moving fires, envelopes, sender-paid timers, lane deferral, expiry and the GC budget (see the scenario's
docstring). It was first computed by the code at 8cb54ba (before the fast paths) and was re-pinned once, by the
S16 timer layout change (the Timer record moved into its height-index entry ``timer/h/<height><seq>``,
``timer/t/<timer_id>`` became a 16-byte pointer; docs/timers.md §2): that change alters the timer keys and values,
so the cells a schedule writes (18 fewer per timer), hence the fees, the cell basefee, the burned total and the
balances, all inside this digest. Before re-pinning, the run was compared with the code at fe1f1af (the commit
before the change) through ``timer_mixed_layout_view``, which keeps everything the layout must not change — every
fire in order with its outcome and cycles, every handler's and transaction's writes, the receipts' status, cycles,
errors and events, every live timer's record bytes, the counters — and leaves out only the cell- and
fee-dependent fields: the two runs give the same view, digest ``LAYOUT_VIEW`` (pinned below, computed at fe1f1af).
"""

from __future__ import annotations

import json

from tests.helpers import run_under_hash_seeds
from tests.unit.execution.timers import timer_mixed_layout_view
from tests.unit.execution.timers.timer_mixed_scenario import run

BEFORE = "af903d4761148e38d91385db8808a9abf12a6c607f17be9fa5c1e30d6a5e9db2"
"""The digest since the S16 layout change; 8cb54ba to fe1f1af it was f3d7b5a5...911037db (see the docstring)."""
LAYOUT_VIEW = "ee2ba4ac60a6d3434b1822006f13b7c0b1960414783a3c3175369f8578edd0ac"
"""``timer_mixed_layout_view.run()["digest"]`` as computed at fe1f1af (the old layout) and after the change."""


def test_the_mixed_run_is_the_one_before_the_fast_paths() -> None:
    out = run()
    assert out["digest"] == BEFORE, json.dumps(out["blocks"], indent=1)
    counts = [b["counts"] for b in out["blocks"]]  # type: ignore[attr-defined]
    # the scenario still reaches the paths it is for: expiry after lane deferral, the GC budget, failed fires
    assert any(c[3] for c in counts) and any(c[4] for c in counts) and any(c[6] for c in counts)


def test_the_mixed_run_does_what_it_did_with_the_old_timer_layout_but_the_cell_dependent_figures() -> None:
    out = timer_mixed_layout_view.run()
    assert out["digest"] == LAYOUT_VIEW, json.dumps(out["blocks"], indent=1)[:20_000]


def test_the_mixed_run_does_not_depend_on_the_hash_seed() -> None:
    script = "from tests.unit.execution.timers.timer_mixed_scenario import run; print(run()['digest'])"
    assert [line.strip() for line in run_under_hash_seeds(script)] == [BEFORE, BEFORE]
