"""End-of-Block step 3 "ExecuteMailbox" (seeds/000 EOB-3, seeds/001 §10).

Pending Mailbox entries run in increasing ``deliver_seq`` — messages from
``send_message`` and timer fires materialised by DeliverTimers alike — under a
per-block budget: at most :data:`MAX_ENTRIES_PER_BLOCK` entries, and an entry is
admitted only if its ``gas_limit`` fits what is left of
:data:`MAILBOX_CYCLES_PER_BLOCK` (the first entry of a block always is). The first
entry that does not fit ends the step; it and the rest run first next block.
Entries appended while the step runs (a handler sending a message) wait for the
next block: a message never runs in the block that sent it.

Each entry is paid like a CIP-5 fire (seeds/003 §6.3): ``max_cost = gas_limit ×
cycle_basefee + max_cells_per_fire × cell_basefee`` is debited from the entry's
fee payer, the handler runs under its own checkpoint (reverted unless it
succeeds), the unused part is refunded and the used part burned (no tip). A fee
payer that cannot cover ``max_cost`` gets the entry dropped unrun (a watch
timer is then removed, as an unfunded timer is). **Who pays**: for a timer fire
its ``fee_payer``; for a message the *target* — the sender already paid the
``send_message`` host call (1,000 cycles + 72 + len(payload) cells) in its
transaction, and the target's own code decides how much a message costs it.

Events: ``timer.fired`` (timer entries, as in FIFO delivery),
``mailbox.delivered`` ``{0: deliver_id, 1: deliver_seq, 2: ok, 3: cycles, 4: cells, 5: fee (u128), 6: error_code}``
(messages), ``timer.cancelled_insufficient_funds`` / ``mailbox.dropped``
``{0: deliver_id, 1: fee_payer, 2: required (u128), 3: available (u128)}`` for drops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from cowboy_node.execution import mailbox
from cowboy_node.execution.actors.invoke import run_callback, run_checkpointed_fire, run_message, take_sdk_reply
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.jobs.sdk_jobs import Reply
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.system_state import get_account, get_timer_config
from cowboy_node.execution.timers import deliver, watch
from cowboy_node.execution.timers.deliver import FireOutcome
from cowboy_node.execution.timers.timer_record import Timer
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import encode
from cowboy_protocol.types.fields import encode_u128

MAILBOX_CYCLES_PER_BLOCK = 10_000_000
"""Cycles Mailbox entries may use per block (the same size as the timer lane, ``LANE_TIMER_CYCLES``)."""
MAX_ENTRIES_PER_BLOCK = 1_024
"""Entries visited (run or dropped) per block: bounds the step's work even when every entry is dropped."""
TOPIC_DELIVERED = "mailbox.delivered"
TOPIC_DROPPED = "mailbox.dropped"

RunFire = Callable[[WorldState, BlockContext, Timer, Meter], FireOutcome]
"""Runs one timer fire (``actors.invoke.run_checkpointed_fire``: it runs inside ``charged_run``'s checkpoint)."""


class RunMessage(Protocol):
    """Runs one message (``actors.invoke.run_message``)."""

    def __call__(self, world: WorldState, ctx: BlockContext, *, sender: bytes, target: bytes, payload: bytes,
                 meter: Meter) -> FireOutcome:
        """Deliver ``payload`` to ``target.handle_message``; never raises for actor failures."""
        ...


def _default_run_fire() -> RunFire:
    # Imported on use: the actor runtime imports the Mailbox, which this package owns.
    return run_checkpointed_fire


def _default_run_message() -> RunMessage:
    return run_message


def execute_mailbox(world: WorldState, ctx: BlockContext, *, run_fire: RunFire | None = None,
                    run_message: RunMessage | None = None, cycles_budget: int = MAILBOX_CYCLES_PER_BLOCK,
                    max_entries: int = MAX_ENTRIES_PER_BLOCK) -> None:
    """Run pending Mailbox entries in ``deliver_seq`` order under the per-block budget (module docstring)."""
    cells_limit = get_timer_config(world).max_cells_per_fire
    used = visited = 0
    next_head: int | None = None
    left_at: int | None = None
    for seq, entry in mailbox.pending(world):
        if visited >= max_entries or (visited and entry.gas_limit > cycles_budget - used):
            left_at = seq
            break
        visited += 1
        next_head = seq + 1
        mailbox.remove(world, seq, entry)
        # an SDK job's reply consumes its record before the handler's checkpoint (exactly once, even if the
        # resume leg fails or the entry is dropped unpaid)
        reply = (take_sdk_reply(world, sender=entry.sender, target=entry.target, payload=entry.payload)
                 if entry.kind == mailbox.KIND_JOB_CALLBACK else None)
        cost = entry.gas_limit * ctx.cycle_basefee + cells_limit * ctx.cell_basefee
        available = get_account(world, entry.fee_payer).balance
        if available < cost:
            _drop(world, ctx, entry, cost, available)
            continue
        used += _run(world, ctx, seq, entry, cost, cells_limit, run_fire, run_message, reply)
        ctx.eob.mailbox_delivered += 1
    head = left_at if left_at is not None else next_head
    if head is not None:
        mailbox.set_head(world, head)
    ctx.eob.mailbox_left = mailbox.next_seq(world) - mailbox.head(world)


def _drop(world: WorldState, ctx: BlockContext, entry: mailbox.MailboxEntry, cost: int, available: int) -> None:
    ctx.eob.mailbox_dropped += 1
    if entry.kind == mailbox.KIND_TIMER and entry.timer_id is not None:
        ctx.eob.timers_self_destructed += 1
        w = watch.get_watch(world, entry.timer_id)
        if w is not None:
            watch.remove_watch(world, entry.timer_id, w)
        data = {0: entry.timer_id, 1: entry.fee_payer, 2: encode_u128(cost), 3: encode_u128(available)}
        ctx.events.append(Event(entry.target, deliver.TOPIC_INSUFFICIENT_FUNDS, encode(data)))
        return
    data = {0: entry.deliver_id, 1: entry.fee_payer, 2: encode_u128(cost), 3: encode_u128(available)}
    ctx.events.append(Event(entry.target, TOPIC_DROPPED, encode(data)))


def _run(world: WorldState, ctx: BlockContext, seq: int, entry: mailbox.MailboxEntry, cost: int, cells_limit: int,
         run_fire: RunFire | None, run_message: RunMessage | None, reply: Reply | None) -> int:
    """Pre-charge, execute, refund, burn; returns the cycles used."""
    run = deliver.charged_run(world, ctx, fee_payer=entry.fee_payer, cost=cost, gas_limit=entry.gas_limit,
                              cells_limit=cells_limit,
                              run=lambda meter: _dispatch(world, ctx, entry, meter, run_fire, run_message, reply))
    outcome, cycles, cells, actual = run.outcome, run.cycles, run.cells, run.actual
    if outcome.ok:
        ctx.events.extend(outcome.events)
    if entry.kind == mailbox.KIND_TIMER:
        ctx.eob.timers_fired += 1
        data = {0: entry.timer_id, 1: outcome.ok, 2: cycles, 3: cells, 4: encode_u128(actual), 5: outcome.error_code}
        ctx.events.append(Event(entry.target, deliver.TOPIC_FIRED, encode(data)))
    else:
        data = {0: entry.deliver_id, 1: seq, 2: outcome.ok, 3: cycles, 4: cells, 5: encode_u128(actual),
                6: outcome.error_code}
        ctx.events.append(Event(entry.target, TOPIC_DELIVERED, encode(data)))
    return cycles


def _dispatch(world: WorldState, ctx: BlockContext, entry: mailbox.MailboxEntry, meter: Meter,
              run_fire: RunFire | None, run_message: RunMessage | None, reply: Reply | None) -> FireOutcome:
    if entry.kind == mailbox.KIND_TIMER:
        fire = run_fire or _default_run_fire()
        timer = Timer(actor_address=entry.target, height=entry.height, payload=entry.payload,
                      timer_id=entry.timer_id or b"", handler=entry.handler, fee_payer=entry.fee_payer,
                      gas_limit_per_fire=entry.gas_limit, expires_at=entry.height, seq=0)
        return fire(world, ctx, deliver.route(timer), meter)
    if entry.kind == mailbox.KIND_JOB_CALLBACK:
        return run_callback(world, ctx, sender=entry.sender, target=entry.target, handler=entry.handler,
                            payload=entry.payload, meter=meter, reply=reply)
    send = run_message or _default_run_message()
    return send(world, ctx, sender=entry.sender, target=entry.target, payload=entry.payload, meter=meter)
