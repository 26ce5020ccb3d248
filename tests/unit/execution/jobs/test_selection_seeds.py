"""Selection seeds (CIP-11 §9.2): beacon_hash_v1, v3/v2 selection seeds, re-selection seeds, advance_round.

Each golden value was assembled by hand from the documented layout (preimage hex below) and hashed once.
"""

from __future__ import annotations

import pytest

from cowboy_node.execution.jobs.seeds import (
    MODE_DELAYED,
    MODE_IMMEDIATE,
    advance_round,
    beacon_hash_v1,
    mode_for,
    reselection_seed,
    selection_seed_v2,
    selection_seed_v3,
)
from cowboy_node.types import seed as chain_beacon
from cowboy_node.types.block import Round
from cowboy_protocol.crypto.keccak import keccak256

SIG = bytes(range(48))
SEED = bytes([0x11]) * 32
JOB = bytes([0x22]) * 32
SUBMITTED_AT = 0x0102030405060708

BEACON_PREIMAGE = (
    "636f77626f792d626561636f6e2d76313a"   # "cowboy-beacon-v1:"
    "0000000000000001"                     # epoch_be8 = 1
    "0000000000000002"                     # view_be8 = 2
    "01"                                   # scheme_id: BLS12-381 MinSig
    "0030"                                 # sig_len_be2 = 48
    + SIG.hex()
)
BEACON_GOLDEN = "949cbf3452f4924ca7a87cf8820c0924f7219d26fb362129c752faab48c67d1b"


def test_beacon_hash_v1_golden() -> None:
    assert keccak256(bytes.fromhex(BEACON_PREIMAGE)).hex() == BEACON_GOLDEN
    assert beacon_hash_v1(1, 2, SIG).hex() == BEACON_GOLDEN


def test_beacon_hash_v1_matches_the_chain_beacon_module() -> None:
    # the producer computes the beacon hash in consensus/beacon.py; execution must derive the identical bytes
    assert beacon_hash_v1(7, 99, SIG) == chain_beacon.beacon_hash_v1(Round(7, 99), SIG)


def test_beacon_hash_v1_requires_a_48_byte_minsig_signature() -> None:
    with pytest.raises(ValueError):
        beacon_hash_v1(0, 0, bytes(96))


@pytest.mark.parametrize(("mode", "golden"), [
    (MODE_IMMEDIATE, "baed0c1fceace7b89396135e92378fac411da737f2ed174bbf854621454b3d12"),
    (MODE_DELAYED, "ce4baed788f3d6967ea10a2e5e9fcc3873b387f953de7aa2888822714b114f30"),
])
def test_selection_seed_v3_golden(mode: int, golden: str) -> None:
    preimage = (b"cowboy-runner-select-v3:".hex() + f"{mode:02x}" + SEED.hex() + JOB.hex()
                + "0807060504030201")  # submitted_at little-endian
    assert keccak256(bytes.fromhex(preimage)).hex() == golden
    assert selection_seed_v3(mode, SEED, JOB, SUBMITTED_AT).hex() == golden


def test_selection_seed_v2_golden_has_its_own_domain_and_no_mode_byte() -> None:
    golden = "a48fe42841dc4c2d94bacd191fc237288d04b8caab548729f47c9bd284fcdc50"
    preimage = b"cowboy-runner-select-v2:".hex() + SEED.hex() + JOB.hex() + "0807060504030201"
    assert keccak256(bytes.fromhex(preimage)).hex() == golden
    assert selection_seed_v2(SEED, JOB, SUBMITTED_AT).hex() == golden
    assert selection_seed_v2(SEED, JOB, SUBMITTED_AT) not in {
        selection_seed_v3(m, SEED, JOB, SUBMITTED_AT) for m in (MODE_IMMEDIATE, MODE_DELAYED)}


def test_legacy_v2_seed_from_a_48_byte_parent_beacon_golden() -> None:
    """Phases 0/1 (CIP-11 selection off): the v2 preimage takes the 32-byte canonical seed bytes of the parent
    beacon, never the raw 48-byte MinSig signature (which used to raise inside block execution)."""
    golden = "bdaf46fb8fe37cd1eacfd17948bf731bd66a8a7c872a50abd0d91d290c07f789"
    preimage = b"cowboy-runner-select-v2:".hex() + BEACON_GOLDEN + JOB.hex() + "0807060504030201"
    assert keccak256(bytes.fromhex(preimage)).hex() == golden
    assert selection_seed_v2(beacon_hash_v1(1, 2, SIG), JOB, SUBMITTED_AT).hex() == golden
    with pytest.raises(ValueError):
        selection_seed_v2(SIG, JOB, SUBMITTED_AT)  # a raw signature is not seed bytes


def test_reselection_seed_golden() -> None:
    golden = "fae8530cc76ff0cf2d3daf9c1132885e10a3fa68e0e6e29ac98d61e1c9019a18"
    preimage = "33" * 32 + b"retry".hex() + "0200000000000000"
    assert keccak256(bytes.fromhex(preimage)).hex() == golden
    assert reselection_seed(bytes([0x33]) * 32, 2).hex() == golden
    with pytest.raises(ValueError):
        reselection_seed(SEED, 0)


def test_mode_byte_is_0x00_for_one_runner_and_0x01_above() -> None:
    assert (MODE_IMMEDIATE, MODE_DELAYED) == (0x00, 0x01)
    assert mode_for(1) == 0x00 and mode_for(2) == 0x01 and mode_for(9) == 0x01
    with pytest.raises(ValueError):
        selection_seed_v3(0x02, SEED, JOB, 1)


def test_seed_inputs_have_exact_lengths_and_ranges() -> None:
    with pytest.raises(ValueError):
        selection_seed_v3(0, SEED[:31], JOB, 1)
    with pytest.raises(ValueError):
        selection_seed_v3(0, SEED, JOB + b"x", 1)
    with pytest.raises(ValueError):
        selection_seed_v2(SEED, JOB, 2**64)


def test_advance_round_adds_views_within_the_single_epoch() -> None:
    assert advance_round(0, 10, 3) == (0, 13)
    assert advance_round(4, 0, 0) == (4, 0)
    with pytest.raises(ValueError):
        advance_round(0, 2**64 - 2, 3)
