"""Wire form of the CIP-11 governance instructions (kinds 0x45 GovernanceSetPhase, 0x46 GovernanceSetParam).

Golden bytes written by hand from ``{0: kind, 1..: fields}`` (canonical CBOR), never produced by the encoder
under test. The kinds are appended to the instruction table: every earlier kind keeps its byte.
"""

from __future__ import annotations

from typing import Any

import pytest

from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.governance_instructions import GovernanceSetParam, GovernanceSetPhase
from cowboy_protocol.types.instructions import _REGISTRY, Instruction, instruction_from_cbor, instruction_to_cbor
from cowboy_protocol.types.validation_errors import DecodeError

SET_PHASE = (GovernanceSetPhase(phase=2, activation_height=1000), bytes.fromhex(
    "a3"            # map(3)
    "00" "1845"     # 0: kind 0x45
    "01" "02"       # 1: phase 2
    "02" "1903e8"   # 2: activation_height 1000
))
SET_PARAM = (GovernanceSetParam(name="OVERLAP_BLOCKS", value=200, activation_height=70_000), bytes.fromhex(
    "a4"                                    # map(4)
    "00" "1846"                             # 0: kind 0x46
    "01" "6e" "4f5645524c41505f424c4f434b53"  # 1: "OVERLAP_BLOCKS" (text(14))
    "02" "18c8"                             # 2: value 200
    "03" "1a00011170"                       # 3: activation_height 70_000
))
GOLDEN = [SET_PHASE, SET_PARAM]
IDS = ["governance_set_phase", "governance_set_param"]


@pytest.mark.parametrize("ins,golden", GOLDEN, ids=IDS)
def test_governance_instruction_encodes_to_the_golden_bytes(ins: Instruction, golden: bytes) -> None:
    assert encode(instruction_to_cbor(ins)) == golden


@pytest.mark.parametrize("ins,golden", GOLDEN, ids=IDS)
def test_governance_golden_bytes_decode_back(ins: Instruction, golden: bytes) -> None:
    assert instruction_from_cbor(decode(golden)) == ins


def test_governance_kinds_are_appended_after_every_earlier_kind() -> None:
    assert (GovernanceSetPhase.KIND, GovernanceSetParam.KIND) == (0x45, 0x46)
    earlier = [k for k in _REGISTRY if k not in (0x45, 0x46, 0x47, 0x48)]
    assert max(k for k in earlier if k < 0x50) == 0x44  # the system band 0x40.. ends at 0x44 before them
    assert list(_REGISTRY)[-4:] == [0x45, 0x46, 0x47, 0x48]  # appended, nothing renumbered


def _with(golden: bytes, **changes: Any) -> dict[int, Any]:
    m: dict[int, Any] = dict(decode(golden))  # type: ignore[arg-type]
    for k, v in changes.items():
        m[int(k.removeprefix("k"))] = v
    return m


@pytest.mark.parametrize("value", [
    _with(SET_PHASE[1], k1=-1),
    _with(SET_PHASE[1], k2="1000"),
    {0: 0x45, 1: 2},
    _with(SET_PARAM[1], k1=""),
    _with(SET_PARAM[1], k1="X" * 65),
    _with(SET_PARAM[1], k2=2**64),
    {**_with(SET_PARAM[1]), 4: 0},
], ids=["negative_phase", "height_text", "missing_height", "empty_name", "long_name", "value_over_u64", "extra"])
def test_malformed_governance_instruction_is_a_decode_error(value: dict[int, Any]) -> None:
    with pytest.raises(DecodeError):
        instruction_from_cbor(value)


def test_out_of_range_phase_still_decodes_and_is_refused_at_execution() -> None:
    # A phase above 3 is a failed receipt (invalid_phase), not a malformed transaction.
    assert instruction_from_cbor({0: 0x45, 1: 7, 2: 10}) == GovernanceSetPhase(7, 10)
