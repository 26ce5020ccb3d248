"""CIP-5 §5–§6: End-of-Block DeliverTimers — exit paths, FIFO, fees, lane and GC budgets, routing."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import pytest

from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.system_state import get_account, put_account, set_timer_config
from cowboy_node.execution.timers import FireOutcome, Timer, cancel_timer, deliver_timers, extend_timer, schedule_timer
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import Account
from cowboy_node.types.receipt import Event
from cowboy_protocol.types.params import TimerConfig
from tests.unit.execution.timers.test_timers_store import (
    ACTOR,
    OTHER,
    PROPOSER,
    SENDER,
    CountingStore,
    big_meter,
    commit,
    make_ctx,
    make_world,
)

CB, CELLB = 10, 2  # cycle and cell basefees of every delivery block below
MAX_CELLS = 500
CFG = TimerConfig(max_cells_per_fire=MAX_CELLS, max_timers_per_actor=1_000_000)
GAS = 1_000
MAX_COST = GAS * CB + MAX_CELLS * CELLB  # §6.3 step 2: 1000·10 + 500·2 = 11,000
FUNDS = 1_000_000
H = 100  # delivery height


def u128(n: int) -> bytes:
    return n.to_bytes(16, "big")


def setup_world(cfg: TimerConfig = CFG, st: MemoryStore | None = None) -> WorldState:
    world = make_world(st)
    set_timer_config(world, cfg)
    for who in (ACTOR, OTHER, SENDER):
        put_account(world, who, Account(FUNDS, 0))
    return world


def sched(world: WorldState, height: int = H, payload: bytes = b"", *, actor: bytes = ACTOR, now: int | None = None,
          gas: int = GAS, **kw: object) -> bytes:
    return schedule_timer(world, make_ctx(height - 1 if now is None else now), big_meter(), actor=actor,
                          tx_sender=SENDER, height=height, handler=kw.pop("handler", "handle_timer"),  # type: ignore[arg-type]
                          payload=payload, gas_limit=gas, **kw)  # type: ignore[arg-type]


def dctx(height: int = H) -> BlockContext:
    return make_ctx(height, cycle_basefee=CB, cell_basefee=CELLB)


def balance(world: WorldState, who: bytes) -> int:
    return get_account(world, who).balance


class Runner:
    """Fake run_handler: records each fire, writes one key, returns a fixed outcome."""

    def __init__(self, cycles: int = 300, cells: int = 40, ok: bool = True, error: str | None = None,
                 action: Callable[[WorldState, Timer, Meter], None] | None = None) -> None:
        self.cycles, self.cells, self.ok, self.error, self.action = cycles, cells, ok, error, action
        self.calls: list[Timer] = []
        self.meters: list[Meter] = []

    def __call__(self, world: WorldState, timer: Timer, meter: Meter) -> FireOutcome:
        self.calls.append(timer)
        self.meters.append(meter)
        world.set(b"fired/" + timer.timer_id, b"1")
        if self.action is not None:
            self.action(world, timer, meter)
        return FireOutcome(self.ok, self.cycles, self.cells, self.error)

    @property
    def ids(self) -> list[bytes]:
        return [t.timer_id for t in self.calls]


def fired_event(tid: bytes, ok: bool, cycles: int, cells: int, fee: int, error: str | None) -> Event:
    """timer.fired data {0: id, 1: ok, 2: cycles, 3: cells, 4: fee u128, 5: error} (docs/timers.md §7)."""
    from cowboy_protocol.codec import encode

    return Event(ACTOR, "timer.fired", encode({0: tid, 1: ok, 2: cycles, 3: cells, 4: u128(fee), 5: error}))


# -- path 1: natural fire, §6.3 fee settlement -----------------------------------------------------

def test_natural_fire_precharges_refunds_burns_and_pays_no_tip() -> None:
    world = setup_world()
    tid = sched(world)
    commit(world)
    seen: dict[str, object] = {}

    def during(w: WorldState, t: Timer, m: Meter) -> None:
        seen["balance"] = balance(w, ACTOR)
        seen["timer_still_stored"] = store.get_timer(w, t.timer_id) is not None
        seen["limits"] = (m.cycles_limit, m.cells_limit)

    run = Runner(cycles=300, cells=40, action=during)
    ctx = dctx()
    report = deliver_timers(world, ctx, run)
    assert run.ids == [tid] and report.fired == 1
    assert seen == {"balance": FUNDS - 11_000, "timer_still_stored": False, "limits": (GAS, MAX_CELLS)}
    actual = 300 * CB + 40 * CELLB  # 3,080
    assert balance(world, ACTOR) == FUNDS - 3_080 == FUNDS - actual
    assert (ctx.burned, ctx.tips, ctx.cycles_used, ctx.cells_used) == (3_080, 0, 300, 40)
    assert balance(world, PROPOSER) == 0
    assert world.get(b"fired/" + tid) == b"1"
    assert store.get_timer(world, tid) is None and store.timers_at(world, H) == []
    assert store.get_meta(world, ACTOR).live == 0
    # a6 | 00 5820<id> | 01 f5 | 02 19012c (300) | 03 1828 (40) | 04 50 <u128 3080 = 0x0c08> | 05 f6
    golden = (bytes.fromhex("a6005820") + tid + bytes.fromhex("01f5" "0219012c" "031828" "0450")
              + bytes(14) + bytes.fromhex("0c08") + bytes.fromhex("05f6"))
    assert report.events == (Event(ACTOR, "timer.fired", golden),)
    assert ctx.events == [Event(ACTOR, "timer.fired", golden)]


def test_fee_payer_named_by_the_sender_is_the_one_charged() -> None:
    world = setup_world()
    sched(world, fee_payer=SENDER)
    deliver_timers(world, dctx(), Runner(cycles=300, cells=40))
    assert balance(world, SENDER) == FUNDS - 3_080 and balance(world, ACTOR) == FUNDS


def test_reverting_handler_is_charged_and_its_writes_discarded() -> None:
    world = setup_world()
    tid = sched(world)
    ctx = dctx()
    report = deliver_timers(world, ctx, Runner(cycles=700, cells=10, ok=False, error="boom"))
    assert report.fired == 1
    assert world.get(b"fired/" + tid) is None  # handler write reverted
    assert store.get_timer(world, tid) is None  # one-shot: removed even though it reverted
    assert balance(world, ACTOR) == FUNDS - (700 * CB + 10 * CELLB) == FUNDS - 7_020
    assert ctx.burned == 7_020
    assert report.events == (fired_event(tid, False, 700, 10, 7_020, "boom"),)


def test_handler_raising_txfailed_is_charged_its_meter_usage() -> None:
    world = setup_world()
    tid = sched(world)

    def exhaust(w: WorldState, t: Timer, m: Meter) -> None:
        m.charge_cells(5)
        m.charge_cycles(GAS + 1)  # raises out_of_cycles, pinned at the limit

    deliver_timers(world, dctx(), Runner(action=exhaust))
    assert world.get(b"fired/" + tid) is None
    assert balance(world, ACTOR) == FUNDS - (GAS * CB + 5 * CELLB)


def test_usage_reported_above_the_limits_is_clamped() -> None:
    world = setup_world()
    sched(world)
    ctx = dctx()
    deliver_timers(world, ctx, Runner(cycles=10**9, cells=10**9))
    assert balance(world, ACTOR) == FUNDS - MAX_COST and ctx.burned == MAX_COST


def test_handler_events_are_kept_only_on_success() -> None:
    world = setup_world()
    a, b = sched(world, payload=b"a"), sched(world, payload=b"b")
    mine = Event(ACTOR, "custom", b"\x01")

    def run(w: WorldState, t: Timer, m: Meter) -> FireOutcome:
        ok = t.timer_id == a
        return FireOutcome(ok, 1, 1, None if ok else "x", (mine,))

    report = deliver_timers(world, dctx(), run)
    assert [e.topic for e in report.events] == ["custom", "timer.fired", "timer.fired"]
    assert b in report.events[2].data


# -- path 2: insufficient funds -------------------------------------------------------------------

def test_insufficient_funds_self_destructs_without_executing() -> None:
    world = setup_world()
    put_account(world, ACTOR, Account(MAX_COST - 1, 3))
    tid = sched(world)
    run = Runner()
    ctx = dctx()
    report = deliver_timers(world, ctx, run)
    assert run.calls == [] and report.self_destructed == 1 and report.fired == 0
    assert get_account(world, ACTOR) == Account(MAX_COST - 1, 3)
    assert store.get_timer(world, tid) is None and store.get_meta(world, ACTOR).live == 0
    assert (ctx.burned, ctx.cycles_used) == (0, 0)
    # a4 | 00 5820<id> | 01 54<payer> | 02 50<u128 11000 = 0x2af8> | 03 50<u128 10999 = 0x2af7>
    data = (bytes.fromhex("a4005820") + tid + bytes.fromhex("0154") + ACTOR + bytes.fromhex("0250") + bytes(14)
            + bytes.fromhex("2af8") + bytes.fromhex("0350") + bytes(14) + bytes.fromhex("2af7"))
    assert report.events == (Event(ACTOR, "timer.cancelled_insufficient_funds", data),)


def test_balance_exactly_max_cost_fires() -> None:
    world = setup_world()
    put_account(world, ACTOR, Account(MAX_COST, 0))
    sched(world)
    report = deliver_timers(world, dctx(), Runner(cycles=GAS, cells=MAX_CELLS))
    assert report.fired == 1 and balance(world, ACTOR) == 0


def test_each_fire_checks_funds_after_the_previous_fires() -> None:
    world = setup_world()
    put_account(world, ACTOR, Account(MAX_COST + 3_080 - 1, 0))  # first fire costs 3,080
    a, b = sched(world, payload=b"a"), sched(world, payload=b"b")
    run = Runner(cycles=300, cells=40)
    report = deliver_timers(world, dctx(), run)
    assert run.ids == [a] and report.self_destructed == 1 and store.get_timer(world, b) is None


# -- path 3: TTL expiry -------------------------------------------------------------------------------

def test_ttl_expired_timer_is_removed_without_executing() -> None:
    world = setup_world()
    tid = sched(world, now=H - 10, expires_at=H - 3)
    run = Runner()
    ctx = dctx()
    report = deliver_timers(world, ctx, run)
    assert run.calls == [] and report.expired == 1 and balance(world, ACTOR) == FUNDS
    assert store.get_timer(world, tid) is None and store.actor_timers(world, ACTOR) == []
    # a3 | 00 5820<id> | 01 1861 (97) | 02 1864 (100)
    data = bytes.fromhex("a3005820") + tid + bytes.fromhex("011861" "021864")
    assert report.events == (Event(ACTOR, "timer.expired", data),)


def test_expiry_is_checked_before_funds() -> None:
    world = setup_world()
    put_account(world, ACTOR, Account(0, 0))
    sched(world, now=H - 10, expires_at=H - 3)
    report = deliver_timers(world, dctx(), Runner())
    assert (report.expired, report.self_destructed) == (1, 0)


def test_timer_fires_at_its_expiry_height() -> None:
    world = setup_world()
    sched(world, now=H - 10, expires_at=H)
    assert deliver_timers(world, dctx(), Runner()).fired == 1


# -- FIFO, same-block prohibition ---------------------------------------------------------------------

def test_fifo_within_a_height_across_transactions_and_blocks() -> None:
    world = setup_world()
    order: list[bytes] = []
    for block in (H - 3, H - 2, H - 1):
        for i in range(3):
            cp = world.checkpoint()
            order.append(sched(world, payload=bytes([block % 256, i]), actor=(ACTOR, OTHER)[i % 2], now=block))
            sched(world, H + 1, payload=b"later", now=block)
            world.release(cp)
        commit(world)
    run = Runner()
    report = deliver_timers(world, dctx(), run)
    assert run.ids == order and report.fired == 9
    assert len(store.timers_at(world, H + 1)) == 9  # next height untouched


def test_timer_scheduled_by_a_handler_for_the_current_height_is_refused() -> None:
    world = setup_world()
    sched(world)
    codes: list[str] = []
    later: list[bytes] = []

    def reschedule(w: WorldState, t: Timer, m: Meter) -> None:
        ctx = dctx()
        try:
            schedule_timer(w, ctx, m, actor=t.actor_address, tx_sender=t.actor_address, height=H, handler="h",
                           payload=b"again")
        except TxFailed as e:
            codes.append(e.code)
        later.append(schedule_timer(w, ctx, m, actor=t.actor_address, tx_sender=t.actor_address, height=H + 1,
                                    handler="h", payload=b"next", gas_limit=GAS))

    run = Runner(action=reschedule)
    assert deliver_timers(world, dctx(), run).fired == 1
    assert codes == ["timer_height_not_future"] and len(run.calls) == 1
    assert store.timers_at(world, H) == [] and store.timers_at(world, H + 1) == later
    run2 = Runner()
    deliver_timers(world, dctx(H + 1), run2)
    assert run2.ids == later


def test_handler_cancelling_a_later_due_timer_prevents_its_fire() -> None:
    world = setup_world()
    a, b, c = (sched(world, payload=bytes([i])) for i in range(3))
    commit(world)

    def cancel_b(w: WorldState, t: Timer, m: Meter) -> None:
        if t.timer_id == a:
            assert cancel_timer(w, dctx(), m, actor=ACTOR, timer_id=b)

    run = Runner(action=cancel_b)
    report = deliver_timers(world, dctx(), run)
    assert run.ids == [a, c] and report.fired == 2


@pytest.mark.parametrize("committed", [True, False])
def test_handler_cancel_of_a_later_due_timer_is_seen_whether_or_not_the_index_was_committed(committed: bool) -> None:
    # The scan's iterator holds the index as it was when the scan began (committed entries and pending ones); the
    # cancelled entry must not fire in either part.
    world = setup_world()
    a, b, c = (sched(world, payload=bytes([i])) for i in range(3))
    if committed:
        commit(world)

    def cancel_b(w: WorldState, t: Timer, m: Meter) -> None:
        if t.timer_id == a:
            assert cancel_timer(w, dctx(), m, actor=ACTOR, timer_id=b)

    run = Runner(action=cancel_b)
    assert deliver_timers(world, dctx(), run).fired == 2 and run.ids == [a, c]
    assert store.get_timer(world, b) is None


def test_a_cancel_by_a_failed_handler_is_reverted_and_the_timer_still_fires() -> None:
    world = setup_world()
    a, b = sched(world, payload=b"a"), sched(world, payload=b"b")
    commit(world)

    def cancel_b(w: WorldState, t: Timer, m: Meter) -> None:
        if t.timer_id == a:
            assert cancel_timer(w, dctx(), m, actor=ACTOR, timer_id=b)

    run = Runner(ok=False, error="boom", action=cancel_b)  # every fire fails: its writes are reverted
    assert deliver_timers(world, dctx(), run).fired == 2 and run.ids == [a, b]


def test_a_later_due_timer_extended_by_a_handler_fires_with_its_new_expiry() -> None:
    # b is due at H but expires at H - 3: left alone it is removed as expired. a's handler extends it first, which
    # rewrites b's record in its height-index entry after the scan's iterator read it: the scan must use the new
    # record (b fires) and not the one its iterator holds (b would expire).
    world = setup_world()
    a = sched(world, payload=b"a", now=H - 10)
    b = sched(world, payload=b"b", now=H - 10, expires_at=H - 3)
    commit(world)

    def extend_b(w: WorldState, t: Timer, m: Meter) -> None:
        if t.timer_id == a:
            extend_timer(w, dctx(), m, actor=ACTOR, timer_id=b, new_expires_at=H + 5)

    run = Runner(action=extend_b)
    report = deliver_timers(world, dctx(), run)
    assert (report.fired, report.expired) == (2, 0) and run.ids == [a, b]
    assert run.calls[1].expires_at == H + 5


def test_timer_config_is_read_once_per_delivery() -> None:
    world = setup_world()
    sched(world, payload=b"a"), sched(world, payload=b"b")

    def change(w: WorldState, t: Timer, m: Meter) -> None:
        set_timer_config(w, TimerConfig(max_cells_per_fire=1, max_timers_per_actor=1_000_000))

    run = Runner(action=change)
    deliver_timers(world, dctx(), run)
    assert [m.cells_limit for m in run.meters] == [MAX_CELLS, MAX_CELLS]


# -- `_handler` payload convention ---------------------------------------------------------------------

def routed(payload: bytes, handler: str = "handle_timer") -> tuple[str, bytes]:
    world = setup_world()
    sched(world, payload=payload, handler=handler)
    run = Runner()
    deliver_timers(world, dctx(), run)
    return run.calls[0].handler, run.calls[0].payload


def test_handler_json_payload_routes_to_the_named_handler() -> None:
    inner = b"\x00\xffinner"
    doc = {"_handler": "on_tick", "_payload": base64.b64encode(inner).decode(), "extra": 1}
    assert routed(json.dumps(doc).encode()) == ("on_tick", inner)
    assert routed(b'  {"_payload": "", "_handler": "x"}') == ("x", b"")
    big = b'{"_handler": "h", "_payload": "YQ==", "n": [' + b"9" * 5_000 + b', 1.5e308, {"k": []}]}'
    assert routed(big) == ("h", b"a")  # numbers are not converted; 3 brackets are fine


@pytest.mark.parametrize("payload", [
    b"plain bytes",
    b'{"_handler": "on_tick"}',                             # no _payload
    b'{"_handler": "on_tick", "_payload": "***"}',          # not base64
    b'{"_handler": "on_tick", "_payload": "YWJj"',          # not JSON
    b'{"_handler": 5, "_payload": "YWJj"}',                 # handler not a string
    b'{"_handler": "", "_payload": "YWJj"}',                # empty handler
    b'["_handler", "_payload"]',                            # not an object
    b'{"_handler": "\xff", "_payload": "YWJj"}',            # not UTF-8
    b'{"_handler": "a", "_handler": "b", "_payload": ""}',  # duplicate key
    b'{"_handler": "a", "_payload": "", "x": NaN}',         # not RFC 8259 JSON
    b'{"_handler": "a", "_payload": "", "x": ' + b"[" * 64 + b"]" * 64 + b"}",  # 65 brackets
    b'{"_handler": "\\ud800", "_payload": ""}',            # lone surrogate escape
    b'{"_handler": "a", "_payload": "YWJj\\n"}',           # not strict base64
])
def test_payload_not_following_the_convention_goes_to_handle_timer(payload: bytes) -> None:
    assert routed(payload) == ("handle_timer", payload)


def test_explicit_handler_receives_the_payload_verbatim() -> None:
    payload = b'{"_handler": "on_tick", "_payload": "YWJj"}'
    assert routed(payload, handler="custom") == ("custom", payload)


# -- §6.5 lane budget ------------------------------------------------------------------------------------

def test_lane_deferral_moves_the_rest_to_the_next_block_in_order() -> None:
    world = setup_world()
    due = [sched(world, payload=bytes([i])) for i in range(7)]
    nxt = [sched(world, H + 1, payload=bytes([i])) for i in range(2)]
    commit(world)
    run = Runner(cycles=GAS)  # each fire uses its whole gas limit
    r1 = deliver_timers(world, dctx(H), run, lane_timer_cycles=3 * GAS)
    assert run.ids == due[:3] and r1.deferred and r1.lane_cycles_used == 3 * GAS
    assert store.timers_at(world, H) == due[3:]
    commit(world)
    r2 = deliver_timers(world, dctx(H + 1), run, lane_timer_cycles=3 * GAS)
    r3 = deliver_timers(world, dctx(H + 2), run, lane_timer_cycles=3 * GAS)
    assert (r2.deferred, r3.deferred) == (True, False)
    assert run.ids == due + nxt  # backlog first, none lost or fired twice


def test_lane_counts_cycles_actually_used() -> None:
    world = setup_world()
    for i in range(10):
        sched(world, payload=bytes([i]))
    report = deliver_timers(world, dctx(), Runner(cycles=GAS // 4), lane_timer_cycles=3 * GAS)
    # 3000 lane: fires while gas_limit (1000) ≤ remaining; 250 used each → 9 fit (2750 used, 250 left)
    assert report.fired == 9 and report.deferred and report.lane_cycles_used == 2_250


def test_first_fire_of_a_block_is_admitted_even_above_the_lane_budget() -> None:
    world = setup_world()
    a, b = sched(world, payload=b"a"), sched(world, payload=b"b")
    run = Runner(cycles=GAS)
    assert deliver_timers(world, dctx(H), run, lane_timer_cycles=10).fired == 1
    assert deliver_timers(world, dctx(H + 1), run, lane_timer_cycles=10).fired == 1
    assert run.ids == [a, b]


def test_deferred_timer_that_passes_its_expiry_is_expired_next_block() -> None:
    world = setup_world()
    a = sched(world, payload=b"a", now=H - 5, expires_at=H)
    b = sched(world, payload=b"b", now=H - 5, expires_at=H)
    run = Runner(cycles=GAS)
    deliver_timers(world, dctx(H), run, lane_timer_cycles=GAS)
    r2 = deliver_timers(world, dctx(H + 1), run, lane_timer_cycles=GAS)
    assert run.ids == [a] and r2.expired == 1 and store.get_timer(world, b) is None


# -- §6.5 GC budget isolation ------------------------------------------------------------------------------

def test_expiry_storm_does_not_block_live_fires() -> None:
    cfg = TimerConfig(max_cells_per_fire=MAX_CELLS, max_timers_per_actor=1_000_000, gc_cycles_per_block=10_000)
    world = setup_world(cfg)  # GC budget: 10,000 / 5,000 per removal = 2 removals per block
    stale = [sched(world, payload=b"old" + bytes([i]), actor=OTHER, now=H - 20, expires_at=H - 10)
             for i in range(6)]
    live = [sched(world, payload=b"live" + bytes([i]), now=H - 1) for i in range(3)]
    commit(world)
    run = Runner()
    r1 = deliver_timers(world, dctx(H), run)
    assert run.ids == live  # all live timers fired though they were queued behind the storm
    assert (r1.fired, r1.expired, r1.gc_deferred, r1.gc_cycles_used) == (3, 2, 4, 10_000)
    assert [t for t in stale if store.get_timer(world, t) is not None] == stale[2:]
    commit(world)
    r2 = deliver_timers(world, dctx(H + 1), run)
    r3 = deliver_timers(world, dctx(H + 2), run)
    assert (r2.expired, r2.gc_deferred, r3.expired, r3.gc_deferred) == (2, 2, 2, 0)
    assert all(store.get_timer(world, t) is None for t in stale) and run.ids == live
    assert store.get_meta(world, OTHER).live == 0


def test_unfunded_timers_are_cleared_under_the_gc_budget() -> None:
    cfg = TimerConfig(max_cells_per_fire=MAX_CELLS, max_timers_per_actor=1_000_000, gc_cycles_per_block=5_000)
    world = setup_world(cfg)
    put_account(world, OTHER, Account(0, 0))
    broke = [sched(world, payload=bytes([i]), actor=OTHER) for i in range(2)]
    live = sched(world, payload=b"live")
    run = Runner()
    r1 = deliver_timers(world, dctx(H), run)
    assert (r1.self_destructed, r1.gc_deferred, r1.fired) == (1, 1, 1) and run.ids == [live]
    assert store.get_timer(world, broke[1]) is not None
    put_account(world, OTHER, Account(FUNDS, 0))  # funded again before the next block: it fires late
    deliver_timers(world, dctx(H + 1), run)
    assert run.ids == [live, broke[1]]


# -- cursor and scan cost --------------------------------------------------------------------------------------

def test_an_empty_delivery_writes_nothing() -> None:
    world = setup_world()
    sched(world, H + 5)
    commit(world)
    report = deliver_timers(world, dctx(), Runner())
    assert world.changes() == {} and report.events == () and not report.deferred


def test_cursor_skips_delivered_entries_and_stays_below_every_remaining_one() -> None:
    world = setup_world()
    due = [sched(world, payload=bytes([i])) for i in range(4)]
    deliver_timers(world, dctx(), Runner(cycles=GAS), lane_timer_cycles=2 * GAS)
    t = store.get_timer(world, due[2])
    assert t is not None and store.get_cursor(world) == (H, t.seq)
    deliver_timers(world, dctx(H + 1), Runner(cycles=GAS), lane_timer_cycles=2 * GAS)
    assert store.get_cursor(world) == (H + 2, 0)


@pytest.mark.parametrize("others", [0, 4_000])
def test_delivery_reads_do_not_depend_on_timers_stored_at_other_heights(others: int) -> None:
    st = CountingStore()
    world = setup_world(st=st)
    sched(world, H + 1_000, b"sentinel", actor=OTHER, now=H - 1)
    for i in range(others):
        sched(world, H + 1 + i % 500, i.to_bytes(4, "big"), actor=OTHER, now=H - 1)
    for i in range(20):
        sched(world, payload=bytes([i]), now=H - 1)
    commit(world)
    world = WorldState(st, world.tree, data_prefix=b"s/")
    st.reads = 0
    assert deliver_timers(world, dctx(), Runner()).fired == 20
    # 1 per fire (the index entry, which holds the record: no read by id) + the first future index entry +
    # config + cursor + the fee payer's account once (read for the classification and handed to the
    # pre-charge; pending afterwards) + the actor's meta once (pending afterwards)
    assert st.reads == 20 + 1 + 1 + 1 + 1 + 1


# -- storm -------------------------------------------------------------------------------------------------------

def test_storm_of_20000_due_timers_drains_exactly_once_in_fifo_order() -> None:
    world = setup_world()
    senders = [bytes([0x40 + i % 8]) * 20 for i in range(8)]
    for who in senders:
        put_account(world, who, Account(10**15, 0))
    order = [schedule_timer(world, make_ctx(H - 1), big_meter(), actor=senders[i % 8], tx_sender=senders[i % 8],
                            height=H, handler="handle_timer", payload=i.to_bytes(3, "big"), gas_limit=GAS)
             for i in range(20_000)]
    commit(world)
    run = Runner(cycles=GAS)
    height = H
    while True:
        report = deliver_timers(world, dctx(height), run, lane_timer_cycles=101 * GAS)
        commit(world)
        height += 1
        if not report.deferred:
            break
    assert height - H == 199  # ceil(20,000 / 101 per block) = 199 blocks
    assert run.ids == order and len(set(run.ids)) == 20_000
    assert store.timers_at(world, H) == [] and all(store.get_meta(world, s).live == 0 for s in senders)


def test_delivery_is_deterministic_replay_gives_the_same_root_and_events() -> None:
    def scenario() -> tuple[bytes, tuple[Event, ...]]:
        world = setup_world()
        put_account(world, OTHER, Account(5, 0))
        for i in range(30):
            sched(world, payload=bytes([i]), actor=(ACTOR, OTHER)[i % 3 == 0], now=H - 5,
                  expires_at=H - 1 if i % 7 == 0 else H + 50)
        report = deliver_timers(world, dctx(), Runner(cycles=GAS), lane_timer_cycles=10 * GAS)
        return world.state_root_preview(), report.events

    assert scenario() == scenario()
