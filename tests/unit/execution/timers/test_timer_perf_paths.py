"""Fast paths of a timer fire (issue 20 item 4) give exactly what the plain paths give.

* ``Timer.decode`` walks the one canonical record layout by hand and hands anything else to the strict
  decoder: for every input its result (value or error) must be the strict decoder's.
* The per-actor counter cache, DeliverTimers' fee-payer account cache and
  the actor-record cache of a run only skip decoding bytes already decoded; a value changed behind
  them (by a handler, an upgrade) must be seen.
"""

from __future__ import annotations

import pytest

from cowboy_node.execution.actors import actor_state as actor_store
from cowboy_node.execution.actors import invoke
from cowboy_node.execution.actors.actor_record import ActorRecord
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.system_state import get_account, put_account
from cowboy_node.execution.timers import FireOutcome, Timer, deliver_timers
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.timers.timer_record import MAX_PAYLOAD_BYTES
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import Account
from cowboy_protocol.codec import CodecError, decode
from cowboy_protocol.types.validation_errors import DecodeError
from tests.unit.execution.timers.test_timers_deliver import (
    CB,
    CELLB,
    FUNDS,
    MAX_COST,
    Runner,
    dctx,
    sched,
    setup_world,
)
from tests.unit.execution.timers.test_timers_store import ACTOR

ADDR = bytes(range(1, 21))
PAYER = bytes(range(101, 121))
TID = bytes(range(32))

# Canonical record written by hand from the model.py layout: a9 (map of 9), then key, value in key order.
GOLDEN = (bytes.fromhex("a9" "0054") + ADDR          # 0: actor_address, bytes(20)
          + bytes.fromhex("01" "1a000f4240")         # 1: height 1,000,000 (4-byte head)
          + bytes.fromhex("02" "43") + b"abc"        # 2: payload, bytes(3)
          + bytes.fromhex("03" "5820") + TID         # 3: timer_id, bytes(32)
          + bytes.fromhex("04" "6c") + b"handle_timer"  # 4: handler, text(12)
          + bytes.fromhex("05" "54") + PAYER         # 5: fee_payer, bytes(20)
          + bytes.fromhex("06" "19044c")             # 6: gas_limit_per_fire 1,100 (2-byte head)
          + bytes.fromhex("07" "1b0000000100000000")  # 7: expires_at 2**32 (8-byte head)
          + bytes.fromhex("08" "17"))                # 8: seq 23 (in the initial byte)
EXPECTED = Timer(ADDR, 1_000_000, b"abc", TID, "handle_timer", PAYER, 1_100, 1 << 32, 23)


def strict(raw: bytes) -> object:
    """What the strict path gives: the Timer, or the error's type and text."""
    try:
        return Timer.from_cbor(decode(raw))
    except (CodecError, DecodeError) as e:
        return (type(e), str(e))


def fast(raw: bytes) -> object:
    try:
        return Timer.decode(raw)
    except (CodecError, DecodeError) as e:
        return (type(e), str(e))


def test_golden_record_decodes_on_the_fast_path() -> None:
    assert EXPECTED.encode() == GOLDEN  # the hand layout is the encoder's
    assert Timer.decode(GOLDEN) == EXPECTED
    from cowboy_node.execution.timers.timer_record import _decode_canonical
    assert _decode_canonical(GOLDEN) == EXPECTED  # taken without the strict decoder


def test_every_byte_change_truncation_and_extension_decodes_as_the_strict_path() -> None:
    variants = [GOLDEN[:i] for i in range(len(GOLDEN))] + [GOLDEN + b"\x00", GOLDEN + b"\xf6"]
    for i in range(len(GOLDEN)):
        for b in (0x00, 0x01, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x40, 0x54, 0x58, 0x60, 0x6c, 0x80, 0xa9,
                  0xf4, 0xf6, 0xff, GOLDEN[i] ^ 0x01, GOLDEN[i] ^ 0x20):
            variants.append(GOLDEN[:i] + bytes([b]) + GOLDEN[i + 1:])
    for raw in variants:
        assert fast(raw) == strict(raw), raw.hex()


@pytest.mark.parametrize("raw", [
    # height 10 with a 1-byte head (non-shortest: 10 fits the initial byte)
    GOLDEN.replace(bytes.fromhex("011a000f4240"), bytes.fromhex("01180a")),
    # height 1,000,000 with an 8-byte head (non-shortest)
    GOLDEN.replace(bytes.fromhex("011a000f4240"), bytes.fromhex("011b00000000000f4240")),
    # gas 1,100 with a 4-byte head (non-shortest)
    GOLDEN.replace(bytes.fromhex("0619044c"), bytes.fromhex("061a0000044c")),
    # payload length 3 with a 1-byte length head (non-shortest)
    GOLDEN.replace(bytes.fromhex("0243") + b"abc", bytes.fromhex("025803") + b"abc"),
    # handler not UTF-8
    GOLDEN.replace(bytes.fromhex("046c") + b"handle_timer", bytes.fromhex("0462") + b"\xc3\x28"),
    # handler as bytes, not text
    GOLDEN.replace(bytes.fromhex("046c") + b"handle_timer", bytes.fromhex("044c") + b"handle_timer"),
    # 19-byte actor address
    bytes.fromhex("a90053") + ADDR[:19] + GOLDEN[23:],
    # seq negative (major 1)
    GOLDEN[:-1] + bytes.fromhex("20"),
    # an indefinite-length payload
    GOLDEN.replace(bytes.fromhex("0243") + b"abc", bytes.fromhex("025f43") + b"abc" + b"\xff"),
])
def test_non_canonical_or_mistyped_fields_fail_as_the_strict_path(raw: bytes) -> None:
    out = fast(raw)
    assert out == strict(raw)
    assert not isinstance(out, Timer)


def test_bounds_are_the_strict_paths() -> None:
    at_max = Timer(ADDR, 1, b"\x00" * MAX_PAYLOAD_BYTES, b"\x01" * 256, "h" * 256, PAYER, 0, 0, 0)
    assert Timer.decode(at_max.encode()) == at_max
    # one byte over each bound (payload 1 MiB + 1, id 257, handler 257 UTF-8 bytes) is refused the same way
    for over in (Timer(ADDR, 1, b"\x00" * (MAX_PAYLOAD_BYTES + 1), TID, "h", PAYER, 0, 0, 0),
                 Timer(ADDR, 1, b"", b"\x01" * 257, "h", PAYER, 0, 0, 0),
                 Timer(ADDR, 1, b"", TID, "é" * 128 + "h", PAYER, 0, 0, 0)):
        raw = over.encode()
        out = fast(raw)
        assert out == strict(raw) and isinstance(out, tuple) and out[0] is DecodeError
    top = Timer(ADDR, (1 << 64) - 1, b"", TID, "", PAYER, (1 << 64) - 1, (1 << 64) - 1, (1 << 64) - 1)
    assert Timer.decode(top.encode()) == top


# -- per-actor counters -----------------------------------------------------------------------------

def test_counter_cache_returns_what_the_bytes_say() -> None:
    raw = store._encode_meta(5, 9)
    assert raw == bytes.fromhex("a2" "0005" "0109")  # {0: 5, 1: 9}
    assert store._decode_meta(raw) == store.ActorTimerMeta(5, 9)
    other = bytes.fromhex("a2" "0006" "0109")  # written by someone else: decoded, not taken from the cache
    assert store._decode_meta(other) == store.ActorTimerMeta(6, 9)


def test_a_burst_of_one_actors_fires_leaves_the_exact_counters() -> None:
    world = setup_world()
    ids = [sched(world, payload=bytes([i])) for i in range(5)]
    assert store.get_meta(world, ACTOR) == store.ActorTimerMeta(5, 5)
    deliver_timers(world, dctx(), Runner(cycles=300, cells=40))
    assert store.get_meta(world, ACTOR) == store.ActorTimerMeta(0, 5)
    assert all(store.get_timer(world, t) is None for t in ids)


# -- fee payer account cache ----------------------------------------------------------------------------

def test_a_handler_changing_its_payers_account_is_seen_by_the_refund_and_the_next_fire() -> None:
    world = setup_world()
    a, b, c = (sched(world, payload=p) for p in (b"a", b"b", b"c"))
    actual = 300 * CB + 40 * CELLB  # 3,080
    seen: list[Account] = []

    def run(w: WorldState, t: Timer, m: Meter) -> FireOutcome:
        seen.append(get_account(w, ACTOR))
        if t.timer_id == a:  # leaves actual - 1 (nonce moved): after the refund, 1 short of the next max_cost
            put_account(w, ACTOR, Account(actual - 1, 7))
        return FireOutcome(True, 300, 40, None)

    report = deliver_timers(world, dctx(), run)
    assert seen == [Account(FUNDS - MAX_COST, 0)]
    # the refund lands on the handler's account: actual - 1 + (MAX_COST - actual) = MAX_COST - 1
    assert get_account(world, ACTOR) == Account(MAX_COST - 1, 7)
    # so b and c cannot pay max_cost: removed without running
    assert (report.fired, report.self_destructed) == (1, 2)
    assert store.get_timer(world, b) is None and store.get_timer(world, c) is None


def test_a_reverted_handlers_account_change_is_not_seen() -> None:
    world = setup_world()
    sched(world, payload=b"a")
    sched(world, payload=b"b")
    seen: list[Account] = []

    def run(w: WorldState, t: Timer, m: Meter) -> FireOutcome:
        seen.append(get_account(w, ACTOR))
        put_account(w, ACTOR, Account(1, 99))  # reverted below (ok=False)
        return FireOutcome(False, 300, 40, "boom")

    deliver_timers(world, dctx(), run)
    actual = 300 * CB + 40 * CELLB
    assert seen == [Account(FUNDS - MAX_COST, 0), Account(FUNDS - actual - MAX_COST, 0)]
    assert get_account(world, ACTOR) == Account(FUNDS - 2 * actual, 0)


# -- actor record cache ---------------------------------------------------------------------------------

def test_run_reads_the_current_actor_record() -> None:
    world = setup_world()
    addr = bytes([0x42]) * 20
    assert invoke._get_actor(world, addr) is None
    first = ActorRecord(bytes(32), ACTOR, 1, ("handle_timer",), 10)
    actor_store.put_actor(world, addr, first)
    assert invoke._get_actor(world, addr) == first == actor_store.get_actor(world, addr)
    second = ActorRecord(bytes([1]) * 32, ACTOR, 2, ("handle_timer", "other"), 20)
    actor_store.put_actor(world, addr, second)  # e.g. an upgrade between two fires
    assert invoke._get_actor(world, addr) == second
    actor_store.put_actor(world, addr, first)
    assert invoke._get_actor(world, addr) == first


# -- small maps a fire writes ------------------------------------------------------------------------------

@pytest.mark.parametrize("values", [
    (),
    (0,),
    (TID, True, 300, 40, (3_080).to_bytes(16, "big"), None),
    (TID, False, 0, (1 << 64) - 1, bytes(16), "out_of_cycles"),
    (5, 9),
    (-1, "é", 1.5, [1, 2], {3: b"x"}),
    tuple(range(23)),
])
def test_encode_indexed_is_the_generic_encoding_of_the_int_keyed_map(values: tuple[object, ...]) -> None:
    from cowboy_node.execution.timers.timer_record import encode_indexed
    from cowboy_protocol.codec import encode

    assert encode_indexed(*values) == encode(dict(enumerate(values)))


def test_fired_event_data_golden() -> None:
    from cowboy_node.execution.timers.timer_record import encode_indexed

    # {0: id, 1: false, 2: 1100, 3: 0, 4: u128 0, 5: "boom"}, by hand
    golden = (bytes.fromhex("a6" "005820") + TID + bytes.fromhex("01f4" "0219044c" "0300" "0450") + bytes(16)
              + bytes.fromhex("0564") + b"boom")
    assert encode_indexed(TID, False, 1_100, 0, bytes(16), "boom") == golden


@pytest.mark.parametrize("account", [Account(), Account(1, 0), Account((1 << 128) - 1, (1 << 64) - 1),
                                     Account(10**30, 23), Account(7, 24)])
def test_account_cache_writes_what_put_account_writes(account: Account) -> None:
    from cowboy_node.execution.timers.deliver import AccountCache
    from cowboy_node.types.account import account_key

    world = setup_world()
    AccountCache().put(world, PAYER, account)
    assert world.get(account_key(PAYER)) == account.encode()
    assert AccountCache().get(world, PAYER) == account == get_account(world, PAYER)
