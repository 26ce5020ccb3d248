"""Wire form of the Runner Registry instructions (kinds 0x20..0x24) and of the RunnerRecord.

Golden bytes are written by hand from the schemas (``cowboy_protocol/types/runner_instructions.py``,
``cowboy_protocol/types/runner.py``, docs/runners.md §2–§3), never produced by the encoder under test.
"""

from __future__ import annotations

from typing import Any

import pytest

from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.instructions import Instruction, instruction_from_cbor, instruction_to_cbor
from cowboy_protocol.types.runner import Capabilities, Health, Rate, RateCard, RunnerRecord
from cowboy_protocol.types.runner_instructions import (
    RunnerDeregister,
    RunnerHeartbeat,
    RunnerRegister,
    RunnerUpdateCapabilities,
    RunnerUpdateRateCard,
)
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validation_errors import DecodeError
from tests.helpers import ALICE, ALICE_SK

CAPS = Capabilities(job_kinds=(1,), regions=("eu",), http_domains=("example.com",), max_concurrent_jobs=4)
CAPS_HEX = (
    "a6"                                # map(6)
    "00" "81" "01"                      # 0: job kinds [http 0x01]
    "01" "81" "62" "6575"               # 1: regions ["eu"]
    "02" "81" "6b" "6578616d706c652e636f6d"  # 2: http domains ["example.com"]
    "03" "04"                           # 3: max_concurrent_jobs 4
    "04" "80"                           # 4: tee types []
    "05" "80"                           # 5: pools []
)
CARD = RateCard(((1, Rate(base_price=1000, price_per_unit=0)),))
CARD_HEX = (
    "a1" "01"                                  # {http 0x01:
    "a2" "00" "50" + "00" * 14 + "03e8" +      #   {0: base_price u128 1000,
    "01" "50" + "00" * 16                      #    1: price_per_unit u128 0}}
)
STAKE = 10**18
STAKE_HEX = "50" "0000000000000000" "0de0b6b3a7640000"  # u128 10^18 = 0x0de0b6b3a7640000

GOLDEN: list[tuple[Instruction, bytes]] = [
    (RunnerRegister(stake=STAKE, capabilities=CAPS, rate_card=CARD),
     bytes.fromhex("a4" "00" "1820" "01" + STAKE_HEX + "02" + CAPS_HEX + "03" + CARD_HEX)),
    (RunnerHeartbeat(accepting=True), bytes.fromhex("a2" "00" "1821" "01" "f5")),
    (RunnerHeartbeat(accepting=False), bytes.fromhex("a2" "00" "1821" "01" "f4")),
    (RunnerUpdateCapabilities(CAPS), bytes.fromhex("a2" "00" "1822" "01" + CAPS_HEX)),
    (RunnerUpdateRateCard(CARD), bytes.fromhex("a2" "00" "1823" "01" + CARD_HEX)),
    (RunnerDeregister(), bytes.fromhex("a1" "00" "1824")),
]
IDS = ["register", "heartbeat", "heartbeat_paused", "update_capabilities", "update_rate_card", "deregister"]


def test_runner_instruction_kinds_are_pinned() -> None:
    assert [RunnerRegister.KIND, RunnerHeartbeat.KIND, RunnerUpdateCapabilities.KIND, RunnerUpdateRateCard.KIND,
            RunnerDeregister.KIND] == [0x20, 0x21, 0x22, 0x23, 0x24]


def test_every_runner_instruction_kind_has_a_golden_vector() -> None:
    assert sorted({ins.KIND for ins, _ in GOLDEN}) == list(range(0x20, 0x25))


@pytest.mark.parametrize("ins,golden", GOLDEN, ids=IDS)
def test_runner_instruction_encodes_to_the_golden_bytes(ins: Instruction, golden: bytes) -> None:
    assert encode(instruction_to_cbor(ins)) == golden


@pytest.mark.parametrize("ins,golden", GOLDEN, ids=IDS)
def test_runner_instruction_golden_bytes_decode_back(ins: Instruction, golden: bytes) -> None:
    assert instruction_from_cbor(decode(golden)) == ins


@pytest.mark.parametrize("ins,golden", GOLDEN, ids=IDS)
def test_runner_instruction_round_trips_inside_a_signed_transaction(ins: Instruction, golden: bytes) -> None:
    tx = Transaction(chain_id="c", nonce=0, sender=ALICE, instruction=ins, cycles_limit=1, cells_limit=1,
                     max_fee_per_cycle=1, max_priority_fee_per_cycle=0, max_fee_per_cell=1,
                     max_priority_fee_per_cell=0).signed(ALICE_SK)
    assert Transaction.from_bytes(tx.to_bytes()) == tx


def _register_map() -> dict[int, Any]:
    m: dict[int, Any] = dict(decode(GOLDEN[0][1]))  # type: ignore[arg-type]
    return m


@pytest.mark.parametrize("mutate", [
    lambda m: m.update({4: 0}),                                  # extra key
    lambda m: m.pop(3),                                          # missing rate card
    lambda m: m.update({1: STAKE}),                              # stake as an int, not u128 bytes
    lambda m: m.update({1: b"\x00" * 15}),                       # stake of the wrong width
    lambda m: m[2].update({0: [1, 1]}),                          # duplicate job kind
    lambda m: m[2].update({0: []}),                              # no job kind
    lambda m: m[2].update({0: [0x06]}),                          # unknown job kind
    lambda m: m[2].update({1: ["us", "eu"]}),                    # unsorted regions
    lambda m: m[2].update({3: 0}),                               # max_concurrent_jobs 0
    lambda m: m.update({3: {1: {0: b"\x00" * 16, 1: b"\x00" * 16}, "x": 1}}),  # mixed rate-card key types
    lambda m: m.update({3: {9: {0: b"\x00" * 16, 1: b"\x00" * 16}}}),          # unknown job kind in rate card
], ids=["extra", "missing", "int_stake", "short_stake", "dup_kind", "no_kind", "unknown_kind", "unsorted",
        "zero_concurrency", "mixed_keys", "unknown_rate_kind"])
def test_runner_register_decode_is_strict(mutate: Any) -> None:
    m = _register_map()
    mutate(m)
    with pytest.raises(DecodeError):
        instruction_from_cbor(m)


@pytest.mark.parametrize("value", [1, 0, None, "yes"])
def test_runner_heartbeat_accepting_must_be_a_bool(value: object) -> None:
    with pytest.raises(DecodeError):
        instruction_from_cbor({0: 0x21, 1: value})


def test_runner_deregister_takes_no_fields() -> None:
    with pytest.raises(DecodeError):
        instruction_from_cbor({0: 0x24, 1: b""})


def test_runner_instruction_json_views() -> None:
    assert GOLDEN[0][0].to_json() == {
        "kind": "runner_register", "stake": str(STAKE),
        "capabilities": {"job_types": ["http"], "regions": ["eu"], "http_domains": ["example.com"],
                         "max_concurrent_jobs": 4, "tee_types": [], "pools": []},
        "rate_card": {"http": {"base_price": "1000", "price_per_unit": "0"}}}
    assert RunnerHeartbeat(False).to_json() == {"kind": "runner_heartbeat", "accepting": False}
    assert RunnerDeregister().to_json() == {"kind": "runner_deregister"}


RECORD = RunnerRecord(address=b"\x11" * 20, index=2, stake=STAKE, capabilities=CAPS, rate_card=CARD,
                      health=Health.PAUSED, registered_at=5, last_heartbeat=7, reputation_x1e9=50_000_000_000,
                      active_jobs=1, unbonding_until=0)
RECORD_HEX = (
    "ab"                        # map(11)
    "00" "54" + "11" * 20 +     # 0: address
    "01" "02"                   # 1: index 2
    "02" + STAKE_HEX +          # 2: stake u128
    "03" + CAPS_HEX +           # 3: capabilities
    "04" + CARD_HEX +           # 4: rate card
    "05" "02"                   # 5: health PAUSED
    "06" "05"                   # 6: registered_at 5
    "07" "07"                   # 7: last_heartbeat 7
    "08" "1b" "0000000ba43b7400"  # 8: reputation 50e9 = 0xba43b7400
    "09" "01"                   # 9: active_jobs 1
    "0a" "00"                   # 10: unbonding_until 0
)


def test_runner_record_encodes_to_the_golden_bytes() -> None:
    assert RECORD.encode() == bytes.fromhex(RECORD_HEX)
    assert RunnerRecord.decode(bytes.fromhex(RECORD_HEX)) == RECORD


def test_runner_record_decode_rejects_an_unknown_health_byte() -> None:
    raw = bytes.fromhex(RECORD_HEX.replace("05" "02" "06", "05" "04" "06"))
    with pytest.raises(DecodeError):
        RunnerRecord.decode(raw)


def test_health_bytes_are_pinned() -> None:
    assert [int(h) for h in (Health.HEALTHY, Health.UNHEALTHY, Health.PAUSED, Health.DEREGISTERED)] == [0, 1, 2, 3]
