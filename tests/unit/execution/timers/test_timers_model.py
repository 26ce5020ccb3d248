"""CIP-5 §3.1/§3.3: the Timer record's canonical encoding and the timer id derivation (golden vectors)."""

from __future__ import annotations

import pytest
from Crypto.Hash import keccak

from cowboy_node.execution.timers.timer_record import Timer, derive_timer_id, timer_id_preimage
from cowboy_protocol.codec import CodecError
from cowboy_protocol.types.validation_errors import DecodeError

ACTOR = bytes([0x11]) * 20
PAYER = bytes([0x33]) * 20
TID = bytes([0x22]) * 32

TIMER = Timer(actor_address=ACTOR, height=100, payload=b"hi", timer_id=TID, handler="handle_timer",
              fee_payer=PAYER, gas_limit_per_fire=550_000, expires_at=2_592_100, seq=7)

# Assembled by hand from the documented layout (docs/timers.md §3): a CBOR map of 9 integer keys.
TIMER_GOLDEN = bytes.fromhex(
    "a9"
    "00" "54" + "11" * 20 +                            # 0: actor_address, bytes(20)
    "01" "1864" +                                      # 1: height 100
    "02" "42" "6869" +                                 # 2: payload b"hi"
    "03" "5820" + "22" * 32 +                          # 3: timer_id, bytes(32)
    "04" "6c" + b"handle_timer".hex() +                # 4: handler, text(12)
    "05" "54" + "33" * 20 +                            # 5: fee_payer, bytes(20)
    "06" "1a00086470" +                                # 6: gas_limit_per_fire 550000 = 0x086470
    "07" "1a00278d64" +                                # 7: expires_at 2592100 = 0x278d64
    "08" "07"                                          # 8: seq 7
)


def test_timer_encoding_golden_bytes() -> None:
    assert TIMER.encode() == TIMER_GOLDEN
    assert Timer.decode(TIMER_GOLDEN) == TIMER


def test_timer_id_preimage_is_actor_height_payload_nonce() -> None:
    assert timer_id_preimage(ACTOR, 100, b"hi", 0) == (
        ACTOR + bytes.fromhex("0000000000000064") + b"hi" + bytes.fromhex("0000000000000000"))


def test_timer_id_derivation_golden_vector() -> None:
    preimage = ACTOR + (100).to_bytes(8, "big") + b"hi" + (0).to_bytes(8, "big")
    expected = keccak.new(digest_bits=256, data=preimage).digest()
    assert derive_timer_id(ACTOR, 100, b"hi", 0) == expected
    assert expected.hex() == "2244a3951ab446fd34433477490a85500e5f087b61667eed08b315dbc80ef28c"


def test_timer_id_depends_on_every_input() -> None:
    base = derive_timer_id(ACTOR, 100, b"hi", 0)
    assert len({base, derive_timer_id(PAYER, 100, b"hi", 0), derive_timer_id(ACTOR, 101, b"hi", 0),
                derive_timer_id(ACTOR, 100, b"hj", 0), derive_timer_id(ACTOR, 100, b"hi", 1)}) == 5


def test_timer_id_rejects_out_of_range_inputs() -> None:
    with pytest.raises(ValueError):
        derive_timer_id(ACTOR[:19], 1, b"", 0)
    with pytest.raises(ValueError):
        derive_timer_id(ACTOR, 2**64, b"", 0)


@pytest.mark.parametrize("mutate", [
    lambda m: m.pop(8),                      # missing key
    lambda m: m.update({9: 0}),              # extra key
    lambda m: m.update({0: b"\x11" * 19}),   # short actor
    lambda m: m.update({2: b"x" * (1_048_576 + 1)}),  # payload over 1 MiB
    lambda m: m.update({3: b"x" * 257}),     # timer_id over 256 bytes
    lambda m: m.update({4: "h" * 257}),      # handler over 256 bytes
    lambda m: m.update({6: -1}),             # negative gas
    lambda m: m.update({7: True}),           # bool is not an integer
])
def test_timer_decode_is_strict(mutate: object) -> None:
    from cowboy_protocol.codec import encode

    m = TIMER.to_cbor()
    mutate(m)  # type: ignore[operator]
    with pytest.raises(DecodeError):
        Timer.decode(encode(m))


def test_timer_decode_rejects_non_canonical_bytes() -> None:
    # height 100 written with a 2-byte head (19 0064) instead of 18 64
    bad = TIMER_GOLDEN.replace(bytes.fromhex("011864"), bytes.fromhex("01190064"), 1)
    with pytest.raises(CodecError):
        Timer.decode(bad)
