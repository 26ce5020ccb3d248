"""CIP-1 scheduler (seeds/004; docs/timers.md §15) on a bare world with GBA and handler fakes: the policy
encoding, the timer record and id, tiers and epoch maintenance, GBA ordering, the budget and its slices,
deferral, bad GBAs, fees, expiry, cancel, and state roots under two hash seeds."""

from __future__ import annotations

import pytest

from cowboy_node.execution.meter import Meter
from cowboy_node.execution.scheduler import bidding, queue
from cowboy_node.execution.scheduler import timer_layout as model
from cowboy_node.execution.scheduler.timeout import cancel_timeout, set_timeout
from cowboy_node.execution.scheduler.timer_layout import Cip1Timer
from cowboy_node.execution.scheduler.weights import WeightRecord
from cowboy_node.execution.timers.policy import set_timer_policy
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_protocol.codec import decode
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.timer_policy import MODE_CIP1, MODE_FIFO, TimerPolicy
from cowboy_protocol.types.validation_errors import DecodeError
from tests.helpers import run_under_hash_seeds
from tests.unit.eob_helpers import FakeRunner, balance, big_meter, make_ctx, make_world
from tests.unit.execution.scheduler.cip1_helpers import (
    FakeGbas,
    bid,
    cip1_world,
    fund,
    gba_address,
    owner,
    run,
    timeout,
)

A, B, C = owner(1), owner(2), owner(3)
RICH = 10**15


# -- policy encoding ---------------------------------------------------------------------------------

def test_policy_with_a_cip1_parameter_changed_has_the_17_field_golden_bytes() -> None:
    p = TimerPolicy(mode=MODE_CIP1, cip1_budget_cycles=5_000_000)
    golden = bytes.fromhex(
        "b1"                                   # map of 17
        "0002" "0101" "0200" "03190100" "0410" "0508" "06190100" "071a00278d00"
        "081a004c4b40"                         # 8: budget 5,000,000
        "091a000186a0"                         # 9: gba cycles 100,000
        "0a190100"                             # 10: bids per block 256
        "0b190400"                             # 11: maintenance moves 1,024
        "0c1a00030d40"                         # 12: lambda 200,000 ppm
        "0d1a000186a0"                         # 13: weight min 100,000
        "0e1a00989680"                         # 14: weight max 10,000,000
        "0f1a001e8480"                         # 15: starvation floor 2,000,000
        "1008")                                # 16: starvation blocks 8
    assert p.encode() == golden
    assert TimerPolicy.decode(golden) == p


def test_cip1_mode_with_default_parameters_keeps_the_8_field_form() -> None:
    raw = bytes.fromhex("a8 0002 0101 0200 03190100 0410 0508 06190100 071a00278d00")
    assert TimerPolicy(mode=MODE_CIP1).encode() == raw and TimerPolicy.decode(raw).mode == MODE_CIP1
    assert TimerPolicy().mode == MODE_FIFO  # the default stays FIFO


def test_the_17_field_form_with_all_cip1_defaults_is_not_canonical() -> None:
    raw = bytes.fromhex("b1 0002 0101 0200 03190100 0410 0508 06190100 071a00278d00 081a00989680 091a000186a0"
                        "0a190100 0b190400 0c1a00030d40 0d1a000186a0 0e1a00989680 0f1a001e8480 1008")
    with pytest.raises(DecodeError):
        TimerPolicy.decode(raw)


@pytest.mark.parametrize("bad", [TimerPolicy(mode=3), TimerPolicy(cip1_budget_cycles=0),
                                 TimerPolicy(cip1_gba_cycles=0), TimerPolicy(cip1_lambda_ppm=1_000_001),
                                 TimerPolicy(cip1_weight_min=0), TimerPolicy(cip1_starvation_floor=20_000_000),
                                 TimerPolicy(cip1_weight_min=3_000_000), TimerPolicy(cip1_starvation_blocks=0)])
def test_out_of_range_cip1_parameters_are_refused(bad: TimerPolicy) -> None:
    with pytest.raises(DecodeError):
        set_timer_policy(make_world(), bad)


def test_update_timer_policy_instruction_carries_the_cip1_mode() -> None:
    from cowboy_protocol.codec import encode
    from cowboy_protocol.types.instructions import UpdateTimerPolicy, instruction_from_cbor, instruction_to_cbor

    ins = UpdateTimerPolicy(TimerPolicy(mode=MODE_CIP1))
    m = instruction_to_cbor(ins)
    assert encode(m) == bytes.fromhex("a2 00 1844 01 a8 0002 0101 0200 03190100 0410 0508 06190100 071a00278d00")
    assert instruction_from_cbor(m) == ins


# -- record, id, keys ------------------------------------------------------------------------------

def test_timer_record_golden_bytes() -> None:
    t = Cip1Timer(actor=b"\x11" * 20, height=100, gba=b"\x22" * 20, handler="h", payload=b"hi", gas_limit=1000,
                  expires_at=200, seq=7)
    golden = bytes.fromhex("a8" "0054" + "11" * 20 + "011864" "0254" + "22" * 20 + "036168" "04426869"
                           "051903e8" "0618c8" "0707")
    assert t.encode() == golden and Cip1Timer.decode(golden) == t


def test_timer_id_is_the_domain_separated_keccak_of_actor_height_and_nonce() -> None:
    expected = keccak256(b"cowboy/cip1/timeout/v1" + b"\x11" * 20 + bytes.fromhex("0000000000000064")
                         + bytes.fromhex("0000000000000002"))
    assert model.derive_timeout_id(b"\x11" * 20, 100, 2) == expected


def test_tier_keys_by_horizon() -> None:
    # current 10 is in epoch 0: the ring holds epochs 0-1, the epoch queue 2..25, overflow 26+
    seq = bytes.fromhex("0000000000000005")
    assert queue.tier_key(20, 5, 10) == b"cip1/r/" + bytes.fromhex("00000014 0000000000000014") + seq
    assert queue.tier_key(7_199, 5, 10) == b"cip1/r/" + bytes.fromhex("00001c1f 0000000000001c1f") + seq
    assert queue.tier_key(7_200 + 20, 5, 10) == b"cip1/e/" + bytes.fromhex("0000000000000002 0000000000001c34") + seq
    assert queue.tier_key(3_600 * 26 - 1, 5, 10)[:7] == b"cip1/e/"
    assert queue.tier_key(3_600 * 26, 5, 10) == b"cip1/o/" + bytes.fromhex("0000000000016da0") + seq
    # the ring slot wraps (H % 7200) but the key keeps H: two heights never share a bucket range
    assert queue.tier_key(7_220, 5, 3_600)[:11] == queue.tier_key(20, 5, 10)[:11]
    assert queue.tier_key(7_220, 5, 3_600) != queue.tier_key(20, 5, 10)


# -- set_timeout / cancel_timeout ------------------------------------------------------------------

def test_set_timeout_writes_record_tier_entry_counters_and_charges_the_bytes() -> None:
    world = cip1_world()
    meter = big_meter()
    tid = set_timeout(world, make_ctx(10), meter, actor=A, height=20, gba=gba_address(0), handler="on_timeout",
                      payload=b"p", gas_limit=1_000, expires_at=None)
    assert tid == model.derive_timeout_id(A, 20, 0)
    t = queue.get_timer(world, tid)
    assert t == Cip1Timer(A, 20, gba_address(0), "on_timeout", b"p", 1_000, 10 + 2_592_000, 0)
    assert world.get(queue.tier_key(20, 0, 10)) == tid
    assert queue.get_meta(world, A) == queue.Meta(1, 1)
    written = sum(len(k) + len(v) for k, v in queue.insert_writes(tid, t, queue.Meta(0, 0), 10))
    cursor = len(b"cip1/cur") + 1  # the first timer starts the collection cursor at 11 (CBOR 0x0b)
    assert world.get(model.KEY_CURSOR) == b"\x0b"
    assert meter.cycles_used == 200 and meter.cells_used == written + cursor


@pytest.mark.parametrize(("kw", "code"), [
    ({"height": 10}, "timer_height_not_future"),
    ({"height": -1}, "timer_invalid_input"),
    ({"height": True}, "timer_invalid_input"),
    ({"gba": b"short"}, "timer_invalid_input"),
    ({"gba": b"\x99" * 20}, "timer_gba_invalid"),
    ({"handler": ""}, "timer_handler_invalid"),
    ({"payload": "text"}, "timer_invalid_input"),
    ({"gas_limit": 0}, "timer_gas_limit_zero"),
    ({"gas_limit": 550_001}, "timer_gas_limit_too_high"),
    ({"expires_at": 10}, "timer_expiry_not_future"),
    ({"expires_at": 10 + 2_592_001}, "timer_expiry_too_far"),
])
def test_set_timeout_refusals_are_typed_cost_200_cycles_and_write_nothing(kw: dict[str, object], code: str) -> None:
    world = cip1_world()
    args: dict[str, object] = {"height": 20, "gba": gba_address(0), "handler": "h", "payload": b"", "gas_limit": 1,
                               "expires_at": None}
    args.update(kw)
    meter = big_meter()
    before = dict(world.changes())
    with pytest.raises(TxFailed) as e:
        set_timeout(world, make_ctx(10), meter, actor=A, **args)  # type: ignore[arg-type]
    assert e.value.code == code and meter.cycles_used == 200 and dict(world.changes()) == before


def test_set_timeout_is_refused_unless_the_policy_is_cip1() -> None:
    world = cip1_world(TimerPolicy())
    meter = big_meter()
    with pytest.raises(TxFailed) as e:
        set_timeout(world, make_ctx(10), meter, actor=A, height=20, gba=gba_address(0), handler="h", payload=b"")
    assert e.value.code == "timer_extension_disabled" and meter.cycles_used == 200
    assert list(world.iterate(b"cip1/")) == []


def test_the_per_actor_cap_applies_to_cip1_timers() -> None:
    from cowboy_node.execution.system_state import set_timer_config
    from cowboy_protocol.types.params import TimerConfig

    world = cip1_world()
    set_timer_config(world, TimerConfig(max_timers_per_actor=2))
    timeout(world, A, 20)
    timeout(world, A, 21)
    with pytest.raises(TxFailed) as e:
        timeout(world, A, 22)
    assert e.value.code == "timer_actor_cap_reached"


def test_cancel_timeout_removes_own_refuses_others_and_reports_absent() -> None:
    world = cip1_world()
    tid = timeout(world, A, 7_300)  # in the epoch queue
    with pytest.raises(TxFailed) as e:
        cancel_timeout(world, Meter(1_000, 0), actor=B, timer_id=tid)
    assert e.value.code == "timer_unauthorized" and queue.get_timer(world, tid) is not None
    assert cancel_timeout(world, Meter(1_000, 0), actor=A, timer_id=tid) is True
    assert queue.get_timer(world, tid) is None and list(world.iterate(model.EPOCH_PREFIX)) == []
    assert queue.get_meta(world, A).live == 0
    assert cancel_timeout(world, Meter(1_000, 0), actor=A, timer_id=tid) is False


# -- tiers and epoch maintenance -------------------------------------------------------------------

def _where(world: object, tid: bytes) -> str:
    for prefix, name in ((model.RING_PREFIX, "ring"), (model.EPOCH_PREFIX, "epoch"),
                         (model.OVERFLOW_PREFIX, "overflow"), (model.BACKLOG_PREFIX, "backlog")):
        if any(v == tid for _k, v in world.iterate(prefix)):  # type: ignore[attr-defined]
            return name
    return "gone"


def test_a_far_timer_moves_down_one_tier_per_epoch_boundary_and_fires_at_its_height() -> None:
    world = cip1_world()
    fund(world, A, RICH)
    far = 3_600 * 27 + 5  # epoch 27: overflow while the current epoch is 0
    tid = timeout(world, A, far)
    gbas = FakeGbas({gba_address(0): (bid(20, 1), None, 100)})
    assert _where(world, tid) == "overflow"
    run(world, 3_600, gbas)  # epoch 1: the epoch queue holds epochs 3..26
    assert _where(world, tid) == "overflow"
    run(world, 7_200, gbas)  # epoch 2: 27 <= 2 + 1 + 24 -> epoch queue
    assert _where(world, tid) == "epoch"
    run(world, 3_600 * 25, gbas)  # epoch 25: 27 > 25 + 1, stays
    assert _where(world, tid) == "epoch"
    run(world, 3_600 * 26, gbas)  # epoch 26: 27 <= 26 + 1 -> ring
    assert _where(world, tid) == "ring"
    for h in range(3_600 * 26 + 1, far):  # every block runs the step, as on a chain
        rep, _ctx, runner = run(world, h, gbas)
        assert rep.executed == 0
    assert _where(world, tid) == "ring"
    rep, _ctx, runner = run(world, far, gbas)
    assert rep.order == [tid] and runner.fires == [(tid, "on_timeout", b"p")] and _where(world, tid) == "gone"


def test_maintenance_moves_at_most_maint_per_block_entries_per_block() -> None:
    world = cip1_world(TimerPolicy(mode=MODE_CIP1, cip1_maint_per_block=2))
    ids = [timeout(world, A, 7_300 + i) for i in range(5)]  # epoch 2 -> epoch queue
    gbas = FakeGbas({})
    for h, in_ring in ((3_600, 2), (3_601, 4), (3_602, 5)):
        rep, _c, _r = run(world, h, gbas)
        assert [_where(world, t) for t in ids].count("ring") == in_ring
        assert rep.moved == in_ring - (0 if h == 3_600 else (2 if h == 3_601 else 4))
    assert gbas.calls == []


def test_an_entry_maintenance_reaches_after_its_bucket_was_collected_goes_straight_to_the_backlog() -> None:
    from cowboy_protocol.codec import encode

    world = cip1_world()
    tid = b"\x77" * 32
    world.set(model.epoch_key(7_201, 3), tid)  # lagging: its height is below the collection cursor
    world.set(model.KEY_CURSOR, encode(7_300))
    assert queue.maintain(world, 7_300, 10) == 1
    assert world.get(model.backlog_key(7_201, 3)) == tid and world.get(model.epoch_key(7_201, 3)) is None
    assert queue.backlog_head(world, 5) == [(model.backlog_key(7_201, 3), tid)]


def test_collection_after_a_gap_catches_up_64_heights_per_block_in_height_order() -> None:
    world = cip1_world()
    fund(world, A, RICH)
    gbas = FakeGbas({gba_address(0): (bid(20, 1), None, 100)})
    run(world, 20, gbas)  # cursor -> 21
    t30, t100 = timeout(world, A, 30, current=20), timeout(world, A, 100, current=20)
    rep, _c, _r = run(world, 100, gbas)  # visits 21..84 only
    assert rep.order == [t30] and _where(world, t100) == "ring"
    rep, _c, _r = run(world, 101, gbas)
    assert rep.order == [t100]


# -- bids, ordering, fees --------------------------------------------------------------------------

def test_the_gba_gets_the_context_and_the_owner_pays_gba_basefee_and_tip() -> None:
    world = cip1_world()
    fund(world, A, 10**12)
    tid = timeout(world, A, 20)
    gbas = FakeGbas({gba_address(0): (bid(20, 5), None, 300)})
    rep, ctx, _runner = run(world, 20, gbas)
    assert gbas.calls == [(gba_address(0), b'{"trigger_block_height":20,"current_block_height":20,"basefee_cycle":10,'
                                          b'"basefee_cell":1,"last_block_cycle_usage":0,'
                                          b'"owner_actor_balance":1000000000000}', 100_000)]
    # GBA: 300 cycles x 10; fire: 1,000 cycles x (10 + tip 5) + 10 cells x 1 (max_cost 1,000 x 15 + 550,000 refunded)
    assert balance(world, A) == 10**12 - 3_000 - 15_000 - 10
    assert (ctx.tips, ctx.burned, ctx.cycles_used, ctx.cells_used) == (5_000, 3_000 + 10_010, 1_300, 10)
    fired = [e for e in ctx.events if e.topic == "timer.fired"]  # type: ignore[attr-defined]
    assert [decode(e.data) for e in fired] == [  # type: ignore[attr-defined]
        {0: tid, 1: True, 2: 1_000, 3: 10, 4: (15_010).to_bytes(16, "big"), 5: None}]
    assert rep.order == [tid] and queue.get_timer(world, tid) is None and queue.get_meta(world, A).live == 0
    timeout(world, A, 22, current=20)
    run(world, 22, gbas)
    assert b'"last_block_cycle_usage":1300' in gbas.calls[-1][1]


def test_due_timers_run_in_effective_tip_order() -> None:
    world = cip1_world()
    for who in (A, B, C):
        fund(world, who, RICH)
    low, high, mid = timeout(world, A, 20, gba=0), timeout(world, B, 20, gba=1), timeout(world, C, 20, gba=2)
    # the effective tip is min(tip, max_fee - basefee): C offers tip 50 but caps max_fee at 17 -> 7
    gbas = FakeGbas({gba_address(0): (bid(100, 1), None, 10), gba_address(1): (bid(100, 30), None, 10),
                     gba_address(2): (bid(17, 50), None, 10)})
    rep, _c, _r = run(world, 20, gbas)
    assert rep.order == [high, mid, low]


def test_equal_tips_are_ordered_by_weight_then_trigger_height_then_insertion() -> None:
    world = cip1_world()
    for who in (A, B, C):
        fund(world, who, RICH)
    a1 = timeout(world, A, 19)
    b1 = timeout(world, B, 20)
    c1 = timeout(world, C, 19, gba=1)
    c2 = timeout(world, C, 20, gba=1)
    world.set(model.WEIGHT_PREFIX + B, WeightRecord(3_000_000, 0).encode())
    world.set(model.WEIGHT_PREFIX + C, WeightRecord(500_000, 0).encode())
    gbas = FakeGbas({gba_address(0): (bid(20, 5), None, 10), gba_address(1): (bid(20, 5), None, 10)})
    run(world, 18, gbas)
    rep, _c, _r = run(world, 20, gbas)
    assert rep.order == [b1, a1, c1, c2]


def test_the_budget_ends_execution_and_the_rest_runs_next_block() -> None:
    world = cip1_world(TimerPolicy(mode=MODE_CIP1, cip1_budget_cycles=2_500))
    fund(world, A, RICH)
    ids = [timeout(world, A, 20) for _ in range(3)]
    gbas = FakeGbas({gba_address(0): (bid(20, 1), None, 10)})
    rep, _ctx, _r = run(world, 20, gbas)
    assert rep.order == ids[:2] and rep.deferred == 1 and rep.budget_used == 2_000
    assert _where(world, ids[2]) == "backlog"
    rep, _c, _r = run(world, 21, gbas)
    assert rep.order == ids[2:]


def test_the_first_execution_of_a_block_is_admitted_even_above_the_budget() -> None:
    world = cip1_world(TimerPolicy(mode=MODE_CIP1, cip1_budget_cycles=500))
    fund(world, A, RICH)
    ids = [timeout(world, A, 20) for _ in range(2)]
    rep, _c, _r = run(world, 20, FakeGbas({gba_address(0): (bid(20, 1), None, 10)}))
    assert rep.order == ids[:1] and rep.deferred == 1


def test_budget_slices_let_a_lower_bidder_in_before_a_higher_bidders_overflow() -> None:
    world = cip1_world(TimerPolicy(mode=MODE_CIP1, cip1_budget_cycles=4_000))
    fund(world, A, RICH)
    fund(world, B, RICH)
    a = [timeout(world, A, 20, gba=0) for _ in range(4)]
    b = [timeout(world, B, 20, gba=1) for _ in range(4)]
    gbas = FakeGbas({gba_address(0): (bid(20, 10), None, 10), gba_address(1): (bid(20, 5), None, 10)})
    rep, _c, _r = run(world, 20, gbas)  # equal weights: slices of 2,000 cycles each
    assert rep.order == [a[0], a[1], b[0], b[1]] and rep.deferred == 4
    rep, _c, _r = run(world, 21, gbas)
    assert rep.order == [a[2], a[3], b[2], b[3]]


# -- deferral and refusals -------------------------------------------------------------------------

def test_insufficient_balance_for_the_bid_defers_until_funded() -> None:
    world = cip1_world(TimerPolicy(mode=MODE_CIP1, cip1_gba_cycles=1_000))  # a GBA call costs at most 10,000
    tid = timeout(world, A, 20)
    gbas = FakeGbas({gba_address(0): (bid(20, 5), None, 300)})
    fund(world, A, 9_999)  # cannot pay for the GBA call at its cap: the GBA is not asked
    rep, ctx, _r = run(world, 20, gbas)
    assert gbas.calls == [] and rep.deferred == 1 and _where(world, tid) == "backlog"
    assert [decode(e.data)[1] for e in ctx.events] == ["cip1_insufficient_balance"]  # type: ignore[attr-defined]
    # max_cost = 1,000 x (10 + 5) + 550,000 x 1 = 565,000; after the 3,000 GBA fee the owner has 1 less
    fund(world, A, 3_000 + 564_999)
    rep, ctx, _r = run(world, 21, gbas)
    assert rep.deferred == 1 and _where(world, tid) == "backlog" and balance(world, A) == 564_999
    ev = [decode(e.data) for e in ctx.events]  # type: ignore[attr-defined]
    assert ev == [{0: tid, 1: "gba_bid_exceeds_balance", 2: 300, 3: (3_000).to_bytes(16, "big"), 4: False}]
    fund(world, A, 3_000 + 565_000)
    rep, _c, _r = run(world, 22, gbas)
    assert rep.order == [tid] and balance(world, A) == 565_000 - 15_010


def test_a_bid_below_the_basefee_is_deferred_and_a_timer_past_its_ttl_expires() -> None:
    world = cip1_world()
    fund(world, A, RICH)
    tid = timeout(world, A, 20, expires_at=21)
    gbas = FakeGbas({gba_address(0): (bid(9, 5), None, 10)})
    for h in (20, 21):
        rep, ctx, _r = run(world, h, gbas)
        assert rep.deferred == 1 and decode(ctx.events[0].data)[1] == "gba_bid_below_basefee"  # type: ignore[attr-defined]
    rep, ctx, _r = run(world, 22, gbas)
    assert rep.expired == 1 and queue.get_timer(world, tid) is None and len(gbas.calls) == 2
    assert [(e.topic, decode(e.data)) for e in ctx.events] == [  # type: ignore[attr-defined]
        ("timer.expired", {0: tid, 1: 21, 2: 22})]


@pytest.mark.parametrize(("reply", "code", "charged"), [
    ((None, "out_of_cycles", 100_000), "gba_out_of_cycles", 100_000),  # loops: stopped at the cap
    ((None, "out_of_cycles", 10**9), "gba_out_of_cycles", 100_000),  # never charged above the cap
    ((None, "handler_error", 40), "gba_failed", 40),  # raises
    ((None, "actor_not_found", 0), "gba_failed", 0),
    ((b"garbage", None, 40), "gba_bad_bid", 40),
    ((b'{"max_fee_per_cycle": true, "tip_per_cycle": 1}', None, 40), "gba_bad_bid", 40),
    ((b'{"max_fee_per_cycle": 20.0, "tip_per_cycle": 1}', None, 40), "gba_bad_bid", 40),
    ((b'{"max_fee_per_cycle": 20, "tip_per_cycle": 1, "x": 0}', None, 40), "gba_bad_bid", 40),
    ((b'{"max_fee_per_cycle": 18446744073709551616, "tip_per_cycle": 1}', None, 40), "gba_bad_bid", 40),
    ((b'{"max_fee_per_cycle": 20, "max_fee_per_cycle": 20, "tip_per_cycle": 1}', None, 40), "gba_bad_bid", 40),
    ((b"[20, 1]", None, 40), "gba_bad_bid", 40),
])
def test_a_broken_gba_drops_its_timer_with_a_typed_code_and_a_bounded_charge(
        reply: tuple[bytes | None, str | None, int], code: str, charged: int) -> None:
    world = cip1_world()
    fund(world, A, RICH)
    tid = timeout(world, A, 20)
    other = timeout(world, B, 20, gba=1)
    fund(world, B, RICH)
    gbas = FakeGbas({gba_address(0): reply, gba_address(1): (bid(20, 1), None, 10)})
    rep, ctx, runner = run(world, 20, gbas)
    assert rep.dropped == 1 and rep.order == [other] and queue.get_timer(world, tid) is None
    assert queue.get_meta(world, A).live == 0 and balance(world, A) == RICH - charged * 10
    refused = [decode(e.data) for e in ctx.events if e.topic == "cip1.bid_refused"]  # type: ignore[attr-defined]
    assert refused == [{0: tid, 1: code, 2: charged, 3: (charged * 10).to_bytes(16, "big"), 4: True}]
    assert [f[0] for f in runner.fires] == [other]


def test_a_handler_failure_is_charged_reverted_and_not_retried() -> None:
    world = cip1_world()
    fund(world, A, RICH)
    tid = timeout(world, A, 20)

    def write(w: object, _tid: bytes) -> None:
        w.set(b"s/x", b"1")  # type: ignore[attr-defined]

    runner = FakeRunner(cycles=700, cells=5, ok=False, write=write)
    rep, ctx, _r = run(world, 20, FakeGbas({gba_address(0): (bid(20, 2), None, 10)}), runner)
    assert rep.order == [tid] and world.get(b"s/x") is None and queue.get_timer(world, tid) is None
    assert balance(world, A) == RICH - 100 - 700 * 12 - 5 and ctx.tips == 1_400


def test_a_bid_for_the_backlog_is_asked_for_at_most_max_bids_per_block_timers_oldest_first() -> None:
    world = cip1_world(TimerPolicy(mode=MODE_CIP1, cip1_max_bids_per_block=2))
    fund(world, A, RICH)
    later = timeout(world, A, 21)
    first = [timeout(world, A, 20) for _ in range(2)]
    gbas = FakeGbas({gba_address(0): (bid(20, 1), None, 10)})
    run(world, 20, gbas)
    rep, _c, _r = run(world, 21, gbas)
    assert rep.order == [later] and len(gbas.calls) == 3 and all(queue.get_timer(world, t) is None for t in first)


def test_deferred_timers_are_carried_behind_the_unvisited_so_they_cannot_hold_the_bid_window() -> None:
    world = cip1_world(TimerPolicy(mode=MODE_CIP1, cip1_max_bids_per_block=2))
    fund(world, A, RICH)
    fund(world, B, RICH)
    stuck = [timeout(world, A, 19, gba=0) for _ in range(3)]  # A's GBA bids below the basefee, every block
    waiting = timeout(world, B, 20, gba=1)
    gbas = FakeGbas({gba_address(0): (bid(9, 1), None, 10), gba_address(1): (bid(20, 1), None, 10)})
    orders = [run(world, h, gbas)[0].order for h in (20, 21)]
    assert orders == [[], [waiting]]  # block 20 asks two of A's; block 21 the third and B's
    asked = [gba for gba, _c, _cap in gbas.calls]
    assert asked == [gba_address(0)] * 3 + [gba_address(1)]
    # a carried-over timer is still found and removed by cancel (its carried key and locator go too)
    assert cancel_timeout(world, Meter(1_000, 0), actor=A, timer_id=stuck[0]) is True
    assert [v for _k, v in world.iterate(model.BACKLOG_PREFIX)] == stuck[1:]  # at (21, seq 1), (22, seq 2)
    assert world.get(model.defer_key(0)) is None and len(list(world.iterate(model.DEFER_PREFIX))) == 2


# -- determinism -----------------------------------------------------------------------------------

SCRIPT = """
from cowboy_node.execution.scheduler import deliver
from cowboy_node.execution.timers.policy import get_timer_policy
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.timer_policy import MODE_CIP1, TimerPolicy
from tests.unit.eob_helpers import FakeRunner, commit, make_ctx
from tests.unit.execution.scheduler.cip1_helpers import FakeGbas, bid, cip1_world, fund, gba_address, owner, timeout

world = cip1_world(TimerPolicy(mode=MODE_CIP1, cip1_budget_cycles=6_000), gbas=3)
actors = [owner(i) for i in range(12)]
for i, a in enumerate(actors):
    fund(world, a, 10**13 if i % 4 else 10**6)
    for j in range(4):
        timeout(world, a, 20 + (i * 7 + j) % 5, gba=i % 3, gas=500 + 100 * j)
commit(world)
tip = lambda c: (bid(40, keccak256(c)[0] % 25), None, 50)
gbas = FakeGbas({gba_address(0): tip, gba_address(1): (bid(30, 3), None, 20),
                 gba_address(2): (None, "out_of_cycles", 100_000)})
for h in range(20, 40):
    ctx = make_ctx(h)
    deliver.deliver(world, ctx, get_timer_policy(world), FakeRunner(cycles=450, cells=3).fire, bid_call=gbas)
    commit(world)
print(world.state_root_preview().hex())
"""


def test_state_roots_do_not_depend_on_the_hash_seed() -> None:
    outs = run_under_hash_seeds(SCRIPT)
    assert outs[0] == outs[1] and len(outs[0].strip()) == 64


def test_bidding_module_exports_the_documented_codes() -> None:
    assert {"gba_out_of_cycles", "gba_failed", "gba_bad_bid"} == bidding.BAD_GBA_CODES
    assert {"gba_bid_below_basefee", "gba_bid_exceeds_balance", "cip1_insufficient_balance"} == bidding.DEFER_CODES
