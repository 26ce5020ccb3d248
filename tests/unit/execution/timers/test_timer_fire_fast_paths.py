"""The second round of timer-fire fast paths (issue 20 item 4) give exactly what the plain paths give.

* ``model.encode_item`` / ``encode_indexed`` / ``deliver.fired_event_data``: the bytes (or the error) of the generic
  ``encode`` for every value, on a corpus of edge values and a random one.
* ``Timer.decode``: a second hand-written record whose heads take the 1-, 2- and 4-byte forms (long payload, the
  longest id, a 24-byte handler), every one-byte change, truncation and extension of it decoded as the strict path.
* ``AccountCache.add``: the bytes ``put_account`` writes for the new balance (or its error), reading the balance
  the store holds now, or the caller's just-made read.
* ``store`` counters: cached by their bytes only for what the strict decoder gives back.
"""

from __future__ import annotations

import enum
import random
from dataclasses import replace

import pytest

from cowboy_node.execution.system_state import get_account, put_account
from cowboy_node.execution.timers import Timer
from cowboy_node.execution.timers import timer_state as store
from cowboy_node.execution.timers.deliver import AccountCache, fired_event_data
from cowboy_node.execution.timers.timer_record import _decode_canonical, _make_timer, encode_indexed, encode_item
from cowboy_node.types.account import Account, account_key
from cowboy_protocol.codec import CodecError, decode, encode
from cowboy_protocol.types.fields import encode_u128
from cowboy_protocol.types.validation_errors import DecodeError
from tests.unit.execution.timers.test_timers_deliver import setup_world

ADDR = bytes(range(1, 21))
PAYER = bytes(range(101, 121))
U64 = (1 << 64) - 1
U128 = (1 << 128) - 1


class _Small(enum.IntEnum):
    SEVEN = 7


def _outcome(fn: object, *args: object) -> object:
    """The value, or the error's type and text."""
    try:
        return fn(*args)  # type: ignore[operator]
    except (CodecError, DecodeError, ValueError, TypeError, OverflowError) as e:
        return (type(e), str(e))


EDGE_VALUES: list[object] = [
    0, 1, 23, 24, 255, 256, 65_535, 65_536, (1 << 32) - 1, 1 << 32, U64, U64 + 1, -1, -24, -25, -(1 << 64),
    -(1 << 64) - 1, True, False, None, _Small.SEVEN,
    b"", b"x", bytes(23), bytes(24), bytes(255), bytes(256), bytes(65_536), bytearray(b"ab"), memoryview(b"cd"),
    "", "handle_timer", "é" * 12, "x" * 24, "\ud800", 1.5, [1, b"x"], (2,), {1: 2}, {"a": None}, object(),
]


@pytest.mark.parametrize("value", EDGE_VALUES, ids=lambda v: type(v).__name__)
def test_encode_item_is_encode(value: object) -> None:
    assert _outcome(encode_item, value) == _outcome(encode, value)


def _random_scalar(rng: random.Random) -> object:
    kind = rng.randrange(6)
    if kind == 0:
        return rng.choice([rng.randrange(24), rng.randrange(1 << rng.choice([8, 16, 32, 64, 65]))])
    if kind == 1:
        return rng.randbytes(rng.choice([0, 5, 23, 24, 32, 300]))
    if kind == 2:
        return rng.choice([True, False, None])
    if kind == 3:
        return "".join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randrange(30)))
    if kind == 4:
        return -rng.randrange(1, 1 << 65)
    return encode_u128(rng.randrange(1 << 128))


def test_encode_indexed_is_encode_of_the_int_keyed_map_on_a_random_corpus() -> None:
    rng = random.Random(20)
    for _ in range(3_000):
        values = tuple(_random_scalar(rng) for _ in range(rng.randrange(24)))
        assert _outcome(encode_indexed, *values) == _outcome(encode, dict(enumerate(values)))


def _plain_fired(timer_id: object, ok: object, cycles: object, cells: object, actual: int,
                 error_code: object) -> bytes:
    return encode({0: timer_id, 1: ok, 2: cycles, 3: cells, 4: encode_u128(actual), 5: error_code})


def test_fired_event_data_golden() -> None:
    tid = bytes(range(32))
    # {0: id, 1: true, 2: 1011, 3: 45, 4: u128 7077, 5: null}, by hand
    golden = (bytes.fromhex("a6" "005820") + tid + bytes.fromhex("01f5" "021903f3" "03182d" "0450")
              + (7_077).to_bytes(16, "big") + bytes.fromhex("05f6"))
    assert fired_event_data(tid, True, 1_011, 45, 7_077, None) == golden
    # {.., 1: false, 2: 0, 3: 2**32, 4: u128 0, 5: "out_of_cycles"}
    golden = (bytes.fromhex("a6" "005820") + tid + bytes.fromhex("01f4" "0200" "031b0000000100000000" "0450")
              + bytes(16) + bytes.fromhex("056d") + b"out_of_cycles")
    assert fired_event_data(tid, False, 0, 1 << 32, 0, "out_of_cycles") == golden


@pytest.mark.parametrize("args", [
    (bytes(32), True, 1_011, 45, 7_077, None),
    (bytes(32), False, 0, 0, 0, "boom"),
    (b"", True, U64, U64, U128, "é"),
    (bytes(300), False, 24, 23, 1, None),
    (bytes(32), True, U64 + 1, 0, 0, None),    # cycles beyond u64: the codec's error
    (bytes(32), True, -1, 0, 0, None),         # negative: encoded as a negative int, as encode does
    (bytes(32), True, 0, 0, -1, None),         # actual below 0: encode_u128's error
    (bytes(32), True, 0, 0, U128 + 1, None),   # actual beyond u128
    (bytes(32), True, 0, 0, 0, "\udc00"),      # error code not UTF-8
    (bytearray(3), 1, 0, 0, 0, None),          # other types: what encode makes of them
])
def test_fired_event_data_is_encode_of_the_map(args: tuple[object, ...]) -> None:
    assert _outcome(fired_event_data, *args) == _outcome(_plain_fired, *args)


# -- the record --------------------------------------------------------------------------------------------------

TID = bytes(range(256)) * 1  # the longest id: 256 bytes, a 2-byte length head
# Canonical record written by hand from the model.py layout, with the wider heads the first golden lacks.
GOLDEN_WIDE = (bytes.fromhex("a9" "0054") + ADDR          # 0: actor_address, bytes(20)
               + bytes.fromhex("01" "18" "18")             # 1: height 24 (1-byte head)
               + bytes.fromhex("02" "59012c") + bytes(range(100)) * 3  # 2: payload, bytes(300) (2-byte head)
               + bytes.fromhex("03" "590100") + TID        # 3: timer_id, bytes(256)
               + bytes.fromhex("04" "7818") + b"handle_timer_with_a_long"  # 4: handler, text(24) (1-byte head)
               + bytes.fromhex("05" "54") + PAYER          # 5: fee_payer, bytes(20)
               + bytes.fromhex("06" "1a00010000")          # 6: gas 65,536 (4-byte head)
               + bytes.fromhex("07" "00")                  # 7: expires_at 0
               + bytes.fromhex("08" "1bffffffffffffffff"))  # 8: seq 2**64-1
EXPECTED_WIDE = Timer(ADDR, 24, bytes(range(100)) * 3, TID, "handle_timer_with_a_long", PAYER, 65_536, 0, U64)


def _strict(raw: bytes) -> object:
    return _outcome(lambda r: Timer.from_cbor(decode(r)), raw)


def test_wide_golden_record_decodes_on_the_fast_path() -> None:
    assert EXPECTED_WIDE.encode() == GOLDEN_WIDE
    assert _decode_canonical(GOLDEN_WIDE) == EXPECTED_WIDE


def test_every_byte_change_of_the_wide_record_decodes_as_the_strict_path() -> None:
    variants = [GOLDEN_WIDE[:i] for i in range(len(GOLDEN_WIDE))] + [GOLDEN_WIDE + b"\x00"]
    for i in range(len(GOLDEN_WIDE)):
        for b in (0x00, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1f, 0x20, 0x40, 0x58, 0x59, 0x5a, 0x5b, 0x5f, 0x60,
                  0x78, 0x79, 0x7f, 0xa9, 0xf6, 0xff, GOLDEN_WIDE[i] ^ 0x01, GOLDEN_WIDE[i] ^ 0x80):
            variants.append(GOLDEN_WIDE[:i] + bytes([b]) + GOLDEN_WIDE[i + 1:])
    for raw in variants:
        assert _outcome(Timer.decode, raw) == _strict(raw), raw.hex()


@pytest.mark.parametrize(("head", "value"), [
    ("17", 23), ("1817", None), ("1818", 24), ("18ff", 255), ("1900ff", None), ("190100", 256),
    ("19ffff", 65_535), ("1a0000ffff", None), ("1a00010000", 65_536), ("1affffffff", (1 << 32) - 1),
    ("1b00000000ffffffff", None), ("1b0000000100000000", 1 << 32), ("1c", None), ("1f", None), ("20", None),
])
def test_each_head_width_at_its_shortest_form_boundary(head: str, value: int | None) -> None:
    # the gas field (key 06) and the payload length (key 02, over a payload of that many bytes when small)
    gas = GOLDEN_WIDE.replace(bytes.fromhex("061a00010000"), bytes.fromhex("06" + head))
    assert _outcome(Timer.decode, gas) == _strict(gas)
    if value is not None:
        assert _decode_canonical(gas) == replace(EXPECTED_WIDE, gas_limit_per_fire=value)
    if value is not None and value > 400:
        return
    n = 0 if value is None else value
    payload_head = bytes.fromhex("02" + head.replace("1", "5", 1) if head[0] == "1" else "02" + head)
    rec = GOLDEN_WIDE.replace(bytes.fromhex("0259012c") + bytes(range(100)) * 3, payload_head + bytes(n))
    assert _outcome(Timer.decode, rec) == _strict(rec)
    if value is not None:
        assert _decode_canonical(rec) == replace(EXPECTED_WIDE, payload=bytes(n))


def test_the_fast_constructor_fills_the_fields_in_declaration_order() -> None:
    assert Timer.__slots__ == ("actor_address", "height", "payload", "timer_id", "handler", "fee_payer",
                               "gas_limit_per_fire", "expires_at", "seq")
    args = (ADDR, 1, b"p", b"id", "h", PAYER, 2, 3, 4)
    made, plain = _make_timer(*args), Timer(*args)
    assert made == plain and hash(made) == hash(plain) and type(made) is Timer
    with pytest.raises(AttributeError):  # still frozen
        made.height = 5  # type: ignore[misc]


# -- fee payer accounts ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("account", "delta"), [
    (Account(10**18, 0), -(10**17)), (Account(10**18, 23), 5), (Account(10**18, 24), 0),
    (Account(U128 - 5, U64), 5), (Account(7, 1 << 32), -7),
    (Account(7, 3), -8),            # below zero: put_account's error
    (Account(U128, 3), 1),          # beyond u128
])
def test_add_writes_what_put_account_writes(account: Account, delta: int) -> None:
    def plain() -> bytes | None:
        world = setup_world()
        put_account(world, PAYER, account)
        put_account(world, PAYER, Account(account.balance + delta, account.nonce))
        return world.get(account_key(PAYER))

    def fast(just_read: bool) -> bytes | None:
        world = setup_world()
        put_account(world, PAYER, account)
        cache = AccountCache()
        assert cache.balance(world, PAYER) == account.balance
        cache.add(world, PAYER, delta, just_read=just_read)
        assert cache.get(world, PAYER) == get_account(world, PAYER)
        return world.get(account_key(PAYER))

    assert _outcome(fast, False) == _outcome(fast, True) == _outcome(plain)


def test_add_reads_the_store_unless_told_the_read_is_fresh() -> None:
    world = setup_world()
    put_account(world, PAYER, Account(100, 1))
    cache = AccountCache()
    assert cache.balance(world, PAYER) == 100
    put_account(world, PAYER, Account(50, 2))  # written behind the cache (e.g. by a handler)
    cache.add(world, PAYER, -10)
    assert get_account(world, PAYER) == Account(40, 2)
    assert cache.balance(world, PAYER) == 40


def test_add_to_an_absent_account_starts_from_zero() -> None:
    world = setup_world()
    AccountCache().add(world, PAYER, 9)
    assert world.get(account_key(PAYER)) == Account(9, 0).encode()


# -- per-actor counters -----------------------------------------------------------------------------------------

def test_counters_are_remembered_only_as_the_strict_decoder_reads_them() -> None:
    raw = store._encode_meta(-1, 3)  # never written by the node; encodes, but the strict decoder refuses it
    assert raw == encode({0: -1, 1: 3})
    with pytest.raises(DecodeError):
        store._decode_meta(raw)
    assert store._decode_meta(store._encode_meta(0, U64)) == store.ActorTimerMeta(0, U64)
    with pytest.raises(CodecError):
        store._encode_meta(U64 + 1, 0)
