"""What the mixed timer run (``timer_mixed_scenario``) does that no timer state layout may change.

The S16 layout change (issue 20 item 4: the record moved into its height-index entry, ``timer/t/<id>`` became a
pointer) changes the timer keys and values, hence the cells a schedule writes, hence fees, the cell basefee, the
burned total and the balances. This view of the run leaves exactly those out and keeps, per block:

* every event, with ``timer.fired`` reduced to (timer id, ok, cycles, error) — its cells and fee fields are
  cell-dependent — and ``timer.cancelled_insufficient_funds`` to (timer id, fee payer) — its max cost and the
  balance it saw are fee-dependent;
* every receipt's status, cycles, error code and events (reduced as above);
* every state change outside ``timer/``, the accounts and the two fee-controller keys (basefee state, burned
  total): what the handlers and transactions wrote;
* every live timer as ``(height, seq, record bytes)``, read through the layout of the checkout it runs in;
* the End-of-Block counters (fired, deferred, expired, self-destructed, GC-deferred) and the event count.

Run ``python -m tests.unit.execution.timers.timer_mixed_layout_view`` in two checkouts to compare them (it reads both
layouts); ``test_timer_mixed_run.py`` pins its digest as computed at fe1f1af (before the layout change).
"""

from __future__ import annotations

import hashlib
import json

from cowboy_node.chain.chain import STATE_PREFIX
from cowboy_node.execution.block import start_block
from cowboy_node.execution.context import BlockEnv
from cowboy_node.execution.end_of_block import EOB_STEPS, run_end_of_block
from cowboy_node.execution.system_state import BASEFEE_ACTOR
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.transactions import execute_transaction
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import ACCOUNT_PREFIX
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import decode
from tests.unit.execution.timers import timer_mixed_scenario as scenario

FEE_KEYS = frozenset({b"actor/" + BASEFEE_ACTOR + b"/kv/system:basefee_state", b"sys/burned_total"})
"""State the cell charges move through the fee controller."""


def _live_timers(world: WorldState) -> list[list[str]]:
    rows = []
    for key, value in world.iterate(store.HEIGHT_PREFIX):
        if hasattr(store, "PARKED_PREFIX"):  # the entry holds the record (S16 layout)
            record = value
        else:  # the entry holds CBOR bytes(timer_id), the record is at timer/t/<timer_id> (before S16)
            raw = world.get(b"timer/t/" + bytes(decode(value)))
            assert raw is not None
            record = raw
        rows.append([key[len(store.HEIGHT_PREFIX):].hex(), record.hex()])
    return rows


def _event(e: Event) -> list[object]:
    if e.topic == "timer.fired":
        d = decode(e.data)
        return [e.emitter.hex(), e.topic, d[0].hex(), d[1], d[2], d[5]]
    if e.topic == "timer.cancelled_insufficient_funds":
        d = decode(e.data)
        return [e.emitter.hex(), e.topic, d[0].hex(), d[1].hex()]
    return [e.emitter.hex(), e.topic, e.data.hex()]


def _block(self: scenario._Run, height: int, instructions: list[object]) -> None:
    """``timer_mixed_scenario._Run.block`` without the tree, recording the view above."""
    env = BlockEnv(chain_id=scenario.CHAIN_ID, height=height, timestamp_ms=1_700_000_000_000 + height * 1_000,
                   fee_recipient=scenario.FEE_RECIPIENT, beacon=b"", parent_beacon=b"")
    world = self.world
    ctx = start_block(world, env, strict_presence=False)
    receipts = [execute_transaction(world, self.tx(i), ctx) for i in instructions]  # type: ignore[arg-type]
    run_end_of_block(world, ctx, steps=tuple(s for s in EOB_STEPS if s[0] != "commit"))
    changes = sorted(world.changes().items())
    events = [e for e in ctx.events if isinstance(e, Event)]
    eob = ctx.eob
    self.blocks.append({
        "height": height,
        "events": [_event(e) for e in events],
        "receipts": [[r.status, r.cycles_used, r.error_code, [_event(e) for e in r.events]] for r in receipts],
        "changes": [[k.hex(), None if v is None else v.hex()] for k, v in changes
                    if not k.startswith((b"timer/", ACCOUNT_PREFIX)) and k not in FEE_KEYS],
        "live_timers": _live_timers(world),
        "counts": [len(events), eob.timers_fired, eob.timers_deferred, eob.timers_expired,
                   eob.timers_self_destructed, eob.timers_gc_deferred],
    })
    self.chain.store.write_batch([(STATE_PREFIX + k, v) for k, v in changes], sync=False)
    self.world = self.chain.world()


def run() -> dict[str, object]:
    """The scenario's blocks as this view sees them, and one SHA-256 digest of them all."""
    saved = scenario._Run.block
    scenario._Run.block = _block  # type: ignore[assignment, method-assign]
    try:
        blocks = scenario.run()["blocks"]
    finally:
        scenario._Run.block = saved  # type: ignore[method-assign]
    digest = hashlib.sha256(json.dumps(blocks, sort_keys=True).encode()).hexdigest()
    return {"digest": digest, "blocks": blocks}


if __name__ == "__main__":
    print(run()["digest"])
