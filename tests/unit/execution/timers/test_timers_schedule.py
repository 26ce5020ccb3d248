"""CIP-5 §4.2 constraints, §5.4 cancel/extend paths and §6.1 costs of the timer host calls."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cowboy_node.execution.meter import Meter
from cowboy_node.execution.system_state import BASEFEE_ACTOR, set_timer_config, system_address
from cowboy_node.execution.timers import (
    cancel_timer,
    extend_timer,
    schedule_timer,
    system_cancel_timer,
    system_extend_timer,
)
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Event
from cowboy_protocol.types.params import TimerConfig
from tests.unit.execution.timers.test_timers_store import ACTOR, OTHER, SENDER, big_meter, commit, make_ctx, make_world

NOW = 10
TTL = 2_592_000  # TimerConfig default max_ttl_blocks
MAX_GAS = 550_000  # TimerConfig default max_cycles_per_fire
THIRD = bytes([0xD4]) * 20


def sched(world: WorldState, meter: Meter | None = None, *, actor: bytes = ACTOR, tx_sender: bytes = SENDER,
          height: int = NOW + 5, handler: str = "handle_timer", payload: bytes = b"p", now: int = NOW,
          **kw: object) -> bytes:
    return schedule_timer(world, make_ctx(now), meter or big_meter(), actor=actor, tx_sender=tx_sender,
                          height=height, handler=handler, payload=payload, **kw)  # type: ignore[arg-type]


def committed_world(cfg: TimerConfig | None = None) -> WorldState:
    world = make_world()
    if cfg is not None:
        set_timer_config(world, cfg)
    sched(world, payload=b"existing")
    commit(world)
    return world


def assert_rejected(code: str, call: Callable[[WorldState], object], cfg: TimerConfig | None = None) -> None:
    """``call`` raises TxFailed(code) and writes nothing (not even before the caller reverts)."""
    world = committed_world(cfg)
    with pytest.raises(TxFailed) as e:
        call(world)
    assert e.value.code == code
    assert world.changes() == {}


# -- §4.2: future height only (§5.3 same-block prohibition) ------------------------------------

@pytest.mark.parametrize("height", [NOW, NOW - 1, 0])
def test_height_must_be_strictly_future(height: int) -> None:
    assert_rejected("timer_height_not_future", lambda w: sched(w, height=height))


def test_next_height_is_accepted() -> None:
    world = make_world()
    tid = sched(world, height=NOW + 1)
    assert store.timers_at(world, NOW + 1) == [tid]


def test_height_beyond_u64_is_invalid_input() -> None:
    assert_rejected("timer_invalid_input", lambda w: sched(w, height=2**64))


# -- payload and handler sizes ------------------------------------------------------------------

def test_payload_over_one_mib_is_rejected() -> None:
    assert_rejected("timer_payload_too_large", lambda w: sched(w, payload=b"x" * (1_048_576 + 1)))


def test_payload_of_exactly_one_mib_is_accepted() -> None:
    world = make_world()
    t = store.get_timer(world, sched(world, payload=b"x" * 1_048_576))
    assert t is not None and len(t.payload) == 1_048_576


@pytest.mark.parametrize("handler", ["h" * 257, "é" * 129, "", "\ud800"])
def test_handler_name_limits(handler: str) -> None:
    assert_rejected("timer_handler_invalid", lambda w: sched(w, handler=handler))


@pytest.mark.parametrize("handler", ["h" * 256, "é" * 128])
def test_handler_name_of_256_bytes_is_accepted(handler: str) -> None:
    world = make_world()
    t = store.get_timer(world, sched(world, handler=handler))
    assert t is not None and t.handler == handler


# -- fee_payer ------------------------------------------------------------------------------------

def test_fee_payer_zero_address_is_rejected() -> None:
    assert_rejected("timer_fee_payer_zero", lambda w: sched(w, fee_payer=bytes(20)))


@pytest.mark.parametrize("low", range(0x01, 0x10))
def test_fee_payer_in_reserved_system_band_is_rejected(low: int) -> None:
    assert_rejected("timer_fee_payer_reserved", lambda w: sched(w, fee_payer=system_address(low)))


def test_reserved_fee_payer_is_rejected_even_when_it_is_the_sender() -> None:
    gov = system_address(0x09)
    assert_rejected("timer_fee_payer_reserved", lambda w: sched(w, tx_sender=gov, fee_payer=gov))


def test_reserved_actor_cannot_default_to_paying_for_itself() -> None:
    assert_rejected("timer_fee_payer_reserved", lambda w: sched(w, actor=BASEFEE_ACTOR))


@pytest.mark.parametrize("payer", [THIRD, system_address(0x10), OTHER])
def test_third_party_fee_payer_is_rejected(payer: bytes) -> None:
    assert_rejected("timer_fee_payer_not_allowed", lambda w: sched(w, fee_payer=payer))


def test_fee_payer_may_be_the_actor_or_the_tx_sender_and_defaults_to_the_actor() -> None:
    world = make_world()
    payers = [store.get_timer(world, sched(world, payload=bytes([i]), fee_payer=payer))
              for i, payer in enumerate([None, ACTOR, SENDER])]
    assert [t.fee_payer for t in payers if t is not None] == [ACTOR, ACTOR, SENDER]


def test_malformed_fee_payer_is_invalid_input() -> None:
    assert_rejected("timer_invalid_input", lambda w: sched(w, fee_payer=b"\x01" * 19))


# -- gas_limit and expires_at --------------------------------------------------------------------

def test_gas_limit_above_max_cycles_per_fire_is_rejected() -> None:
    assert_rejected("timer_gas_limit_too_high", lambda w: sched(w, gas_limit=MAX_GAS + 1))


def test_gas_limit_zero_is_rejected() -> None:
    assert_rejected("timer_gas_limit_zero", lambda w: sched(w, gas_limit=0))


def test_gas_limit_follows_governed_config() -> None:
    cfg = TimerConfig(max_cycles_per_fire=1_000)
    assert_rejected("timer_gas_limit_too_high", lambda w: sched(w, gas_limit=1_001), cfg)
    world = make_world()
    set_timer_config(world, cfg)
    t = store.get_timer(world, sched(world))
    assert t is not None and t.gas_limit_per_fire == 1_000  # default = max_cycles_per_fire


@pytest.mark.parametrize("value", [-1, True, "5"])
def test_gas_limit_of_wrong_type_is_invalid_input(value: object) -> None:
    assert_rejected("timer_invalid_input", lambda w: sched(w, gas_limit=value))


def test_expiry_beyond_max_ttl_is_rejected() -> None:
    assert_rejected("timer_expiry_too_far", lambda w: sched(w, expires_at=NOW + TTL + 1))


@pytest.mark.parametrize("expiry", [NOW, NOW - 1])
def test_expiry_not_in_the_future_is_rejected(expiry: int) -> None:
    assert_rejected("timer_expiry_not_future", lambda w: sched(w, expires_at=expiry))


def test_expiry_defaults_to_current_plus_max_ttl_and_that_bound_is_accepted() -> None:
    world = make_world()
    a = store.get_timer(world, sched(world, payload=b"a"))
    b = store.get_timer(world, sched(world, payload=b"b", expires_at=NOW + TTL))
    assert a is not None and b is not None and a.expires_at == b.expires_at == NOW + TTL


# -- per-actor cap ---------------------------------------------------------------------------------

def test_per_actor_cap_rejects_the_next_timer_and_frees_a_slot_on_cancel() -> None:
    cfg = TimerConfig(max_timers_per_actor=3)
    world = make_world()
    set_timer_config(world, cfg)
    ids = [sched(world, payload=bytes([i])) for i in range(3)]
    sched(world, actor=OTHER, payload=b"other actors are independent")
    commit(world)
    with pytest.raises(TxFailed) as e:
        sched(world, payload=b"fourth")
    assert e.value.code == "timer_actor_cap_reached" and world.changes() == {}
    assert cancel_timer(world, make_ctx(NOW), big_meter(), actor=ACTOR, timer_id=ids[0])
    sched(world, payload=b"fourth")
    assert store.get_meta(world, ACTOR).live == 3


def test_default_per_actor_cap_is_1024() -> None:
    world = make_world()
    for i in range(1_024):
        sched(world, payload=i.to_bytes(2, "big"))
    with pytest.raises(TxFailed) as e:
        sched(world, payload=b"one too many")
    assert e.value.code == "timer_actor_cap_reached"


# -- §6.1 costs -------------------------------------------------------------------------------------

def test_schedule_charges_200_cycles_and_the_bytes_it_writes() -> None:
    world = make_world()
    meter = big_meter()
    sched(world, meter, height=12, payload=b"p")
    # Bytes written (docs/timers.md §2/§6), for payload b"p", handler "handle_timer", height 12, seq 0,
    # gas 550000, expires_at 10 + 2592000 = 2592010 (0x278d0a):
    #   height  key 8+8+8=24, value the record a9|00 54+20|01 0c|02 41 70|03 58 20+32|04 6c+12|05 54+20|
    #           06 1a+4|07 1a+4|08 00 = 1+22+2+3+35+14+22+6+6+2 = 113                 -> 137
    #   pointer key 8+32=40, value height 8 BE + seq 8 BE = 16                          ->  56
    #   actor   key 8+20+32=60, value 0c = 1                                          ->  61
    #   meta    key 8+20=28, value a2 00 01 01 01 = 5                                 ->  33
    #   seq     key 9, value 01 = 1                                                   ->  10
    # (before the S16 layout the record sat at timer/t/<id> and the entry held the id: 153 + 58 + 61 + 33 + 10)
    assert (meter.cycles_used, meter.cells_used) == (200, 137 + 56 + 61 + 33 + 10)


def test_a_rejected_schedule_still_costs_its_200_cycles() -> None:
    world = make_world()
    meter = big_meter()
    with pytest.raises(TxFailed):
        sched(world, meter, height=NOW)
    assert (meter.cycles_used, meter.cells_used) == (200, 0)


def test_out_of_cycles_or_cells_writes_nothing() -> None:
    world = committed_world()
    with pytest.raises(TxFailed) as e:
        sched(world, Meter(199, 10**9))
    assert e.value.code == "out_of_cycles" and world.changes() == {}
    with pytest.raises(TxFailed) as e:
        sched(world, Meter(10**9, 296))  # needs 297 cells (see the test above)
    assert e.value.code == "out_of_cells" and world.changes() == {}


def test_cancel_and_extend_cost_a_flat_200_cycles() -> None:
    world = make_world()
    tid = sched(world)
    m1, m2 = big_meter(), big_meter()
    extend_timer(world, make_ctx(NOW), m1, actor=ACTOR, timer_id=tid, new_expires_at=NOW + 100)
    cancel_timer(world, make_ctx(NOW), m2, actor=ACTOR, timer_id=tid)
    assert (m1.cycles_used, m1.cells_used) == (200, 0)
    assert (m2.cycles_used, m2.cells_used) == (200, 0)


# -- cancel ------------------------------------------------------------------------------------------

def test_cancel_of_another_actors_timer_is_unauthorized() -> None:
    world = make_world()
    tid = sched(world)
    commit(world)
    with pytest.raises(TxFailed) as e:
        cancel_timer(world, make_ctx(NOW), big_meter(), actor=OTHER, timer_id=tid)
    assert e.value.code == "timer_unauthorized" and world.changes() == {}


def test_cancel_removes_everything_and_is_idempotent() -> None:
    world = make_world()
    tid = sched(world)
    commit(world)
    assert cancel_timer(world, make_ctx(NOW), big_meter(), actor=ACTOR, timer_id=tid) is True
    assert store.get_timer(world, tid) is None and store.timers_at(world, NOW + 5) == []
    assert store.actor_timers(world, ACTOR) == [] and store.get_meta(world, ACTOR).live == 0
    snapshot = world.changes()
    assert cancel_timer(world, make_ctx(NOW), big_meter(), actor=ACTOR, timer_id=tid) is False
    assert world.changes() == snapshot


def test_cancel_in_a_reverted_transaction_keeps_the_timer() -> None:
    world = make_world()
    tid = sched(world)
    commit(world)
    cp = world.checkpoint()
    cancel_timer(world, make_ctx(NOW), big_meter(), actor=ACTOR, timer_id=tid)
    world.revert(cp)
    assert store.timers_at(world, NOW + 5) == [tid] and world.changes() == {}


# -- extend ------------------------------------------------------------------------------------------

def extend(world: WorldState, tid: bytes, new: int, *, actor: bytes = ACTOR, now: int = NOW) -> None:
    extend_timer(world, make_ctx(now), big_meter(), actor=actor, timer_id=tid, new_expires_at=new)


def test_extend_by_another_actor_is_unauthorized() -> None:
    world = make_world()
    tid = sched(world, expires_at=NOW + 10)
    commit(world)
    with pytest.raises(TxFailed) as e:
        extend(world, tid, NOW + 50, actor=OTHER)
    assert e.value.code == "timer_unauthorized" and world.changes() == {}


def test_extend_of_an_absent_timer_is_not_found() -> None:
    with pytest.raises(TxFailed) as e:
        extend(make_world(), bytes(32), NOW + 50)
    assert e.value.code == "timer_not_found"


@pytest.mark.parametrize("new", [NOW, NOW - 1])
def test_extend_must_target_a_future_height(new: int) -> None:
    world = make_world()
    tid = sched(world, expires_at=NOW + 10)
    commit(world)
    with pytest.raises(TxFailed) as e:
        extend(world, tid, new)
    assert e.value.code == "timer_expiry_not_future" and world.changes() == {}


def test_extend_raises_ttl_clamped_to_current_plus_max_ttl_and_is_idempotent() -> None:
    world = make_world()
    tid = sched(world, expires_at=NOW + 10)

    def expiry() -> int:
        t = store.get_timer(world, tid)
        assert t is not None
        return t.expires_at

    extend(world, tid, NOW + 50)
    assert expiry() == NOW + 50
    extend(world, tid, NOW + 50)
    assert expiry() == NOW + 50
    extend(world, tid, NOW + 20)  # extend never shortens
    assert expiry() == NOW + 50
    extend(world, tid, 10**12, now=NOW + 7)  # clamped to the extending block's height + max_ttl
    assert expiry() == NOW + 7 + TTL


# -- system instructions (§5.4) ----------------------------------------------------------------------

def test_system_cancel_removes_any_actors_timer_idempotently_with_events() -> None:
    world = make_world()
    tid = sched(world)
    events: list[Event] = []
    assert system_cancel_timer(world, make_ctx(NOW), timer_id=tid, events=events) is True
    assert store.get_timer(world, tid) is None and store.get_meta(world, ACTOR).live == 0
    assert system_cancel_timer(world, make_ctx(NOW), timer_id=tid, events=events) is False
    # data {0: timer_id, 1: removed}: a2 | 00 58 20 <id> | 01 f5 (true) / f4 (false)
    assert events == [
        Event(BASEFEE_ACTOR, "timer.cancelled_by_governance", bytes.fromhex("a2005820") + tid + b"\x01\xf5"),
        Event(BASEFEE_ACTOR, "timer.cancelled_by_governance", bytes.fromhex("a2005820") + tid + b"\x01\xf4"),
    ]


def test_system_extend_clamps_never_shortens_and_ignores_absent_timers() -> None:
    world = make_world()
    tid = sched(world, expires_at=NOW + 10)
    events: list[Event] = []
    system_extend_timer(world, make_ctx(NOW + 3), timer_id=tid, new_expires_at=10**15, events=events)
    t = store.get_timer(world, tid)
    assert t is not None and t.expires_at == NOW + 3 + TTL
    system_extend_timer(world, make_ctx(NOW + 3), timer_id=tid, new_expires_at=NOW + 20, events=events)
    t = store.get_timer(world, tid)
    assert t is not None and t.expires_at == NOW + 3 + TTL
    before = world.changes()
    system_extend_timer(world, make_ctx(NOW), timer_id=bytes(32), new_expires_at=NOW + 20, events=events)
    assert world.changes() == before
    exp = NOW + 3 + TTL  # 2592013 = 0x278d0d
    assert [e.data for e in events] == [
        bytes.fromhex("a2005820") + tid + bytes.fromhex("011a00278d0d"),
        bytes.fromhex("a2005820") + tid + bytes.fromhex("011a00278d0d"),
        bytes.fromhex("a2005820") + bytes(32) + bytes.fromhex("01f6"),  # null: no such timer
    ]
    assert {e.topic for e in events} == {"timer.extended_by_governance"} and exp == 2_592_013


def test_system_extend_rejects_a_past_ttl() -> None:
    world = make_world()
    tid = sched(world)
    with pytest.raises(TxFailed) as e:
        system_extend_timer(world, make_ctx(NOW), timer_id=tid, new_expires_at=NOW)
    assert e.value.code == "timer_expiry_not_future"


# -- §4.3: side effects follow the transaction -------------------------------------------------------

def test_scheduled_timer_persists_only_if_the_transaction_commits() -> None:
    world = make_world()
    cp = world.checkpoint()
    tid = sched(world)
    world.revert(cp)
    assert store.get_timer(world, tid) is None and world.changes() == {}
    cp = world.checkpoint()
    tid = sched(world)
    world.release(cp)
    commit(world)
    assert store.timers_at(world, NOW + 5) == [tid]
