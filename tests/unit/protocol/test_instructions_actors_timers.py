"""Wire form of the actor and timer instructions (kinds 0x10, 0x11, 0x41, 0x42, 0x43).

Golden bytes are written by hand from the schema in ``cowboy_protocol/types/instructions.py``
(``{0: kind, 1..: fields}``, canonical CBOR), never produced by the encoder under test.
"""

from __future__ import annotations

from typing import Any

import pytest

from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.instructions import (
    CallActor,
    CancelTimer,
    DeployActor,
    ExtendTimer,
    Instruction,
    UpdateTimerConfig,
    instruction_from_cbor,
    instruction_to_cbor,
)
from cowboy_protocol.types.params import TimerConfig
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validation_errors import DecodeError, ValidationError
from tests.helpers import ALICE, ALICE_SK

ACTOR = b"\xaa" * 20
TIMER_ID = bytes(range(32))

# -- golden instruction maps -------------------------------------------------------------------
DEPLOY_NO_INIT = (DeployActor(source="x=1", salt=b"\x01\x02", init_handler="", init_payload=b""), bytes.fromhex(
    "a5"                # map(5)
    "00" "10"           # 0: kind 0x10
    "01" "63" "783d31"  # 1: source "x=1"
    "02" "42" "0102"    # 2: salt h'0102'
    "03" "60"           # 3: init handler "" (none)
    "04" "40"           # 4: init payload h''
))
DEPLOY_WITH_INIT = (DeployActor(source="x=1", salt=b"", init_handler="init", init_payload=b"\xff"), bytes.fromhex(
    "a5" "00" "10" "01" "63" "783d31"
    "02" "40"             # 2: empty salt
    "03" "64" "696e6974"  # 3: "init"
    "04" "41" "ff"        # 4: h'ff'
))
CALL = (CallActor(actor=ACTOR, handler="ping", payload=b"\x01\x02\x03"), bytes.fromhex(
    "a4"                        # map(4)
    "00" "11"                   # 0: kind 0x11
    "01" "54" + "aa" * 20 +     # 1: actor bytes(20)
    "02" "64" "70696e67"        # 2: handler "ping"
    "03" "43" "010203"          # 3: payload
))
UPDATE_TIMER_CONFIG = (UpdateTimerConfig(TimerConfig()), bytes.fromhex(
    "a2"
    "00" "1841"          # 0: kind 0x41 (one-byte uint form)
    "01" "a5"            # 1: TimerConfig map(5), seeds/003 §6.4 defaults
    "00" "1a00278d00"    # max_ttl_blocks 2_592_000
    "01" "1a00086470"    # max_cycles_per_fire 550_000
    "02" "1a00086470"    # max_cells_per_fire 550_000
    "03" "190400"        # max_timers_per_actor 1_024
    "04" "1a004c4b40"    # gc_cycles_per_block 5_000_000
))
CANCEL = (CancelTimer(timer_id=TIMER_ID), bytes.fromhex(
    "a2" "00" "1842" "01" "5820" + TIMER_ID.hex()
))
EXTEND = (ExtendTimer(timer_id=TIMER_ID, new_expires_at=1000), bytes.fromhex(
    "a3" "00" "1843" "01" "5820" + TIMER_ID.hex() +
    "02" "1903e8"        # 2: new_expires_at 1000
))
GOLDEN = [DEPLOY_NO_INIT, DEPLOY_WITH_INIT, CALL, UPDATE_TIMER_CONFIG, CANCEL, EXTEND]
IDS = ["deploy", "deploy_init", "call", "update_timer_config", "cancel_timer", "extend_timer"]


@pytest.mark.parametrize("ins,golden", GOLDEN, ids=IDS)
def test_instruction_map_encodes_to_the_golden_bytes(ins: Instruction, golden: bytes) -> None:
    assert encode(instruction_to_cbor(ins)) == golden


@pytest.mark.parametrize("ins,golden", GOLDEN, ids=IDS)
def test_golden_bytes_decode_back_to_the_instruction(ins: Instruction, golden: bytes) -> None:
    assert instruction_from_cbor(decode(golden)) == ins


def test_kinds_are_the_documented_table_entries() -> None:
    assert [DeployActor.KIND, CallActor.KIND, UpdateTimerConfig.KIND, CancelTimer.KIND, ExtendTimer.KIND] == \
        [0x10, 0x11, 0x41, 0x42, 0x43]


def test_call_actor_inside_a_signed_transaction_body() -> None:
    tx = Transaction(chain_id="c", nonce=1, sender=ALICE, instruction=CALL[0], cycles_limit=50_000,
                     cells_limit=2_000, max_fee_per_cycle=200_000, max_priority_fee_per_cycle=1_000,
                     max_fee_per_cell=200_000, max_priority_fee_per_cell=1_000)
    payload = bytes.fromhex(
        "aa" "00" "6163" "01" "01" "02" "54" + ALICE.hex() +
        "03" + CALL[1].hex() +                              # 3: the instruction map, verbatim
        "04" "19c350" "05" "1907d0" "06" "1a00030d40" "07" "1903e8" "08" "1a00030d40" "09" "1903e8")
    assert tx.payload_bytes() == payload
    signed = tx.signed(ALICE_SK)
    assert signed.body() == b"\xab" + payload[1:] + b"\x0a\x58\x41" + signed.signature
    back = Transaction.from_bytes(signed.to_bytes())
    assert back.instruction == CALL[0] and back.recover_sender() == ALICE


# -- decoder rejections --------------------------------------------------------------------------
def _with(golden: bytes, **changes: Any) -> dict[int, Any]:
    m: dict[int, Any] = dict(decode(golden))  # type: ignore[arg-type]
    for k, v in changes.items():
        key = int(k.removeprefix("k"))
        if v is _DROP:
            del m[key]
        else:
            m[key] = v
    return m


_DROP = object()

REJECTIONS: list[tuple[str, dict[int, Any], str, str]] = [
    # (case, map, code, field)
    ("unknown kind 0x1f", {0: 0x1F, 1: b""}, "unknown_instruction", "instruction.kind"),
    ("deploy missing init payload", _with(DEPLOY_NO_INIT[1], k4=_DROP), "malformed", "instruction"),
    ("deploy extra key 5", _with(DEPLOY_NO_INIT[1], k5=b""), "malformed", "instruction"),
    ("call missing payload", _with(CALL[1], k3=_DROP), "malformed", "instruction"),
    ("call extra key 4", _with(CALL[1], k4=0), "malformed", "instruction"),
    ("update config extra key", _with(UPDATE_TIMER_CONFIG[1], k2=0), "malformed", "instruction"),
    ("cancel extra key", _with(CANCEL[1], k2=0), "malformed", "instruction"),
    ("extend missing expiry", _with(EXTEND[1], k2=_DROP), "malformed", "instruction"),
    ("salt of 33 bytes", _with(DEPLOY_NO_INIT[1], k2=b"\x00" * 33), "malformed", "instruction.salt"),
    ("salt as text", _with(DEPLOY_NO_INIT[1], k2="ab"), "malformed", "instruction.salt"),
    ("source as bytes", _with(DEPLOY_NO_INIT[1], k1=b"x=1"), "malformed", "instruction.source"),
    ("init payload without init handler", _with(DEPLOY_NO_INIT[1], k4=b"\x00"), "malformed",
     "instruction.init_payload"),
    ("init handler of 257 bytes", _with(DEPLOY_WITH_INIT[1], k3="h" * 257), "malformed", "instruction.init_handler"),
    ("call handler empty", _with(CALL[1], k2=""), "malformed", "instruction.handler"),
    ("call handler of 257 bytes", _with(CALL[1], k2="h" * 257), "malformed", "instruction.handler"),
    # 129 two-byte characters: 129 characters but 258 UTF-8 bytes; the limit is in bytes
    ("call handler of 258 utf-8 bytes", _with(CALL[1], k2="é" * 129), "malformed", "instruction.handler"),
    ("call actor of 19 bytes", _with(CALL[1], k1=b"\xaa" * 19), "malformed", "instruction.actor"),
    ("cancel timer_id of 31 bytes", _with(CANCEL[1], k1=b"\x00" * 31), "malformed", "instruction.timer_id"),
    ("cancel timer_id of 33 bytes", _with(CANCEL[1], k1=b"\x00" * 33), "malformed", "instruction.timer_id"),
    ("extend timer_id of 31 bytes", _with(EXTEND[1], k1=b"\x00" * 31), "malformed", "instruction.timer_id"),
    ("extend negative expiry", _with(EXTEND[1], k2=-1), "malformed", "instruction.new_expires_at"),
    ("extend bool expiry", _with(EXTEND[1], k2=True), "malformed", "instruction.new_expires_at"),
    ("timer config missing a field", _with(UPDATE_TIMER_CONFIG[1], k1={0: 1, 1: 2, 2: 3, 3: 4}), "malformed",
     "TimerConfig"),
]


@pytest.mark.parametrize("case,value,code,field", REJECTIONS, ids=[r[0] for r in REJECTIONS])
def test_decoder_rejects_with_a_stable_code_naming_the_field(case: str, value: dict[int, Any], code: str,
                                                             field: str) -> None:
    with pytest.raises(DecodeError) as e:
        instruction_from_cbor(value)
    assert (e.value.code, e.value.field) == (code, field)


def test_handler_limit_counts_utf8_bytes_not_characters() -> None:
    ok = instruction_from_cbor(_with(CALL[1], k2="é" * 128))  # exactly 256 bytes
    assert isinstance(ok, CallActor) and ok.handler == "é" * 128
    salt32 = instruction_from_cbor(_with(DEPLOY_NO_INIT[1], k2=b"\x07" * 32))
    assert isinstance(salt32, DeployActor) and salt32.salt == b"\x07" * 32


def test_timer_config_above_u32_cap_is_refused_at_decode_with_invalid_config() -> None:
    value = _with(UPDATE_TIMER_CONFIG[1], k1={0: 1, 1: 2, 2: 3, 3: 2**32, 4: 5})
    with pytest.raises(ValidationError) as e:
        instruction_from_cbor(value)
    assert e.value.code == "invalid_config"


def test_a_transaction_carrying_a_bad_instruction_is_malformed() -> None:
    tx = Transaction(chain_id="c", nonce=0, sender=ALICE, instruction=CANCEL[0], cycles_limit=50_000,
                     cells_limit=2_000, max_fee_per_cycle=200_000, max_priority_fee_per_cycle=1_000,
                     max_fee_per_cell=200_000, max_priority_fee_per_cell=1_000).signed(ALICE_SK)
    body = tx.body()
    bad = body.replace(bytes.fromhex("5820") + TIMER_ID, bytes.fromhex("581f") + TIMER_ID[:31])
    assert bad != body
    with pytest.raises(DecodeError) as e:
        Transaction.from_body(bad)
    assert (e.value.code, e.value.field) == ("malformed", "instruction.timer_id")
