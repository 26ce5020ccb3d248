"""EOB step 3 ExecuteMailbox: deliver_seq order, per-block budget, who pays, drops, no same-block messages."""

from __future__ import annotations

from cowboy_node.execution import mailbox
from cowboy_node.execution.eob.execute_mailbox import execute_mailbox
from cowboy_node.execution.mailbox import KIND_TIMER, MailboxEntry
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.timers.deliver import FireOutcome
from cowboy_node.execution.timers.timer_record import Timer
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Event
from tests.unit.eob_helpers import ACTOR, OTHER, FakeRunner, balance, fund, make_ctx, make_world

MAX_COST = 550_000 * 10 + 550_000 * 1  # gas_limit × 10 + max_cells_per_fire × 1


def test_messages_run_in_deliver_seq_order_and_the_target_pays() -> None:
    world = make_world()
    fund(world, OTHER, 10**9)
    ctx = make_ctx(4)
    for p in (b"one", b"two"):
        mailbox.enqueue(world, ctx, sender=ACTOR, target=OTHER, payload=p)
    runner = FakeRunner(cycles=300, cells=40)
    execute_mailbox(world, ctx, run_message=runner.message)
    assert runner.messages == [(ACTOR, OTHER, b"one"), (ACTOR, OTHER, b"two")]
    assert balance(world, OTHER) == 10**9 - 2 * (300 * 10 + 40)
    assert ctx.burned == 2 * 3040 and ctx.cycles_used == 600 and ctx.cells_used == 80
    assert ctx.eob.mailbox_delivered == 2 and ctx.eob.mailbox_left == 0
    assert list(mailbox.pending(world)) == [] and mailbox.head(world) == 2
    did = mailbox.message_deliver_id(4, ctx.env.parent_state_root, 0)
    ev = ctx.events[0]
    assert isinstance(ev, Event) and ev.topic == "mailbox.delivered" and ev.emitter == OTHER
    assert ev.data == (bytes.fromhex("a7 00 5820") + did + bytes.fromhex("01 00 02 f5 03 19012c 04 1828 05 50")
                       + (3040).to_bytes(16, "big") + bytes.fromhex("06 f6"))


def test_budget_leaves_the_rest_for_next_block_in_order() -> None:
    world = make_world()
    fund(world, OTHER)
    ctx = make_ctx(4)
    for p in (b"1", b"2", b"3"):
        mailbox.enqueue(world, ctx, sender=ACTOR, target=OTHER, payload=p)
    runner = FakeRunner(cycles=500_000)
    execute_mailbox(world, ctx, run_message=runner.message, cycles_budget=1_000_000)
    # the first entry is always admitted; the second's 550,000 limit does not fit the 500,000 left
    assert [m[2] for m in runner.messages] == [b"1"]
    assert ctx.eob.mailbox_left == 2 and mailbox.head(world) == 1
    ctx2 = make_ctx(5)
    execute_mailbox(world, ctx2, run_message=runner.message, max_entries=1)
    assert [m[2] for m in runner.messages] == [b"1", b"2"] and ctx2.eob.mailbox_left == 1


def test_unfunded_fee_payer_drops_the_entry_with_an_event() -> None:
    world = make_world()
    fund(world, OTHER, MAX_COST - 1)
    ctx = make_ctx(4)
    mailbox.enqueue(world, ctx, sender=ACTOR, target=OTHER, payload=b"x")
    runner = FakeRunner()
    execute_mailbox(world, ctx, run_message=runner.message)
    assert runner.messages == [] and ctx.eob.mailbox_dropped == 1 and ctx.eob.mailbox_left == 0
    ev = ctx.events[-1]
    assert isinstance(ev, Event) and ev.topic == "mailbox.dropped"
    assert balance(world, OTHER) == MAX_COST - 1


def test_message_sent_during_execution_waits_for_next_block() -> None:
    world = make_world()
    fund(world, OTHER)
    ctx = make_ctx(4)
    mailbox.enqueue(world, ctx, sender=ACTOR, target=OTHER, payload=b"ping")
    seen: list[bytes] = []

    def run(w: WorldState, c: object, *, sender: bytes, target: bytes, payload: bytes, meter: Meter) -> FireOutcome:
        seen.append(payload)
        mailbox.enqueue(w, ctx, sender=target, target=OTHER, payload=b"pong")
        return FireOutcome(True, 1, 1, None)

    execute_mailbox(world, ctx, run_message=run)
    assert seen == [b"ping"] and ctx.eob.mailbox_left == 1
    execute_mailbox(world, make_ctx(5), run_message=run)
    assert seen == [b"ping", b"pong"]


def test_timer_entry_is_routed_and_a_failure_reverts_its_writes() -> None:
    world = make_world()
    fund(world, ACTOR)
    tid = bytes([0x22]) * 32
    env = bytes.fromhex("a2 68 5f68616e646c6572 67 6f6e5f7469636b 68 5f7061796c6f6164 42 7879")
    mailbox.materialize(world, MailboxEntry(deliver_id=bytes(32), kind=KIND_TIMER, sender=ACTOR, target=ACTOR,
                                            handler="handle_timer", payload=env, gas_limit=1000, fee_payer=ACTOR,
                                            height=3, timer_id=tid))
    got: list[Timer] = []

    def fire(w: WorldState, c: object, t: Timer, m: Meter) -> FireOutcome:
        got.append(t)
        w.set(b"actor/x/kv/side", b"1")
        return FireOutcome(False, 50, 5, "handler_error")

    ctx = make_ctx(4)
    execute_mailbox(world, ctx, run_fire=fire)
    assert (got[0].handler, got[0].payload, got[0].timer_id) == ("on_tick", b"xy", tid)
    assert world.get(b"actor/x/kv/side") is None
    ev = ctx.events[-1]
    assert isinstance(ev, Event) and ev.topic == "timer.fired"
    assert ctx.eob.timers_fired == 1 and ctx.burned == 50 * 10 + 5
