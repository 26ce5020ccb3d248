"""CIP-11 Mode A wire forms (docs/protocol.md §2 kind 0x33, §8.5): PresenceReceipt map, SubmitPresenceCertificate
instruction, and the receipt's signed digest — golden bytes assembled by hand (RFC 8949 heads, literal keys,
pycryptodome keccak), never by the encoders under test."""

from __future__ import annotations

from dataclasses import replace

import pytest
from Crypto.Hash import keccak

from cowboy_protocol.codec import decode, encode
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.transport.preimages import ValidatorKey
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.types.instructions import instruction_from_cbor, instruction_to_cbor
from cowboy_protocol.types.presence_instructions import MAX_RECEIPTS, PresenceReceipt, SubmitPresenceCertificate
from cowboy_protocol.types.validation_errors import DecodeError

R_PK = bytes.fromhex("01" "0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")  # 0x01 ‖ G
V_PK = b"\x02" + b"\x11" * 32
VSH = b"\x22" * 32
SIG64 = b"\x77" * 64
RUNNER = b"\xdd" * 20
RECEIPT = PresenceReceipt(R_PK, V_PK, 0, VSH, 1000, 7, True, SIG64)

RECEIPT_GOLDEN = bytes.fromhex(
    "a8"                           # map(8)
    "00" "5822" + R_PK.hex() +     # 0: runner_pubkey bstr(34)
    "01" "5821" + V_PK.hex() +     # 1: validator_pubkey bstr(33)
    "02" "00"                      # 2: subset_epoch 0
    "03" "5820" + VSH.hex() +      # 3: validator_set_hash bstr(32)
    "04" "1903e8"                  # 4: block_height 1000
    "05" "07"                      # 5: nonce_echo 7
    "06" "f5"                      # 6: accepting_new true
    "07" "5840" + SIG64.hex()      # 7: validator_signed bstr(64)
)
INSTRUCTION_GOLDEN = bytes.fromhex(
    "a3"                           # map(3)
    "00" "1833"                    # 0: kind 0x33
    "01" "54" + RUNNER.hex() +     # 1: runner bstr(20)
    "02" "81"                      # 2: array(1)
) + RECEIPT_GOLDEN


def _k(b: bytes) -> bytes:
    return keccak.new(digest_bits=256, data=b).digest()


def test_receipt_and_instruction_golden_bytes_round_trip() -> None:
    assert encode(RECEIPT.to_cbor()) == RECEIPT_GOLDEN
    ins = SubmitPresenceCertificate(RUNNER, (RECEIPT,))
    assert encode(instruction_to_cbor(ins)) == INSTRUCTION_GOLDEN
    assert instruction_from_cbor(decode(INSTRUCTION_GOLDEN)) == ins


def test_receipt_digest_is_the_presence_receipt_domain_over_the_chain_id_and_epoch_inputs() -> None:
    # keccak256(domain ‖ role 0x02 ‖ scheme 0x02 ‖ cbor("cowboy-test") ‖ runner_pk ‖ validator_pk ‖ u64 epoch
    #           ‖ vsh ‖ u64 block_height ‖ u64 nonce_echo ‖ u8 accepting_new)   (docs/protocol.md §8.3)
    fields = (b"\x6bcowboy-test" + R_PK + V_PK + (0).to_bytes(8, "big") + VSH + (1000).to_bytes(8, "big")
              + (7).to_bytes(8, "big") + b"\x01")
    want = _k(b"cowboy-cip11-presence-receipt-v1" + b"\x02\x02" + fields)
    assert RECEIPT.digest("cowboy-test") == want
    # the same inputs as docs/protocol.md §9 ``preimage/presence_receipt``
    assert want.hex() == "2a1d5b9e5f470e302b566c6fe84b2b0a20f72c22c5ed894d36093163f6ed65c9"


@pytest.mark.parametrize("field,value", [("subset_epoch", 1), ("validator_set_hash", b"\x23" * 32),
                                         ("block_height", 1001), ("nonce_echo", 8), ("accepting_new", False)])
def test_receipt_digest_binds_every_field(field: str, value: object) -> None:
    assert replace(RECEIPT, **{field: value}).digest("cowboy-test") != RECEIPT.digest("cowboy-test")
    assert RECEIPT.digest("other-chain") != RECEIPT.digest("cowboy-test")


def test_issued_receipt_verifies_under_the_validator_peer_key() -> None:
    key = ValidatorKey(b"\x05" * 32)
    r = PresenceReceipt.issue("cowboy-test", key, PubKey.from_bytes(R_PK), 3, VSH, 50, 9, True)
    assert r.validator_pubkey == b"\x02" + key.pubkey.key and r.runner_pubkey == R_PK
    assert ed25519.verify(key.pubkey.key, r.digest("cowboy-test"), r.validator_signed)


def _bad(**changes: object) -> dict[int, object]:
    m: dict[int, object] = dict(decode(INSTRUCTION_GOLDEN))  # type: ignore[arg-type]
    receipt: dict[int, object] = dict(m[2][0])  # type: ignore[index]
    for k, v in changes.items():
        if k.startswith("r"):
            receipt[int(k[1:])] = v
        else:
            m[int(k[1:])] = v
    m[2] = changes.get("k2", [receipt])
    return m


@pytest.mark.parametrize("changes", [
    {"k2": []},                                  # no receipt
    {"k2": [dict(decode(RECEIPT_GOLDEN))] * (MAX_RECEIPTS + 1)},  # too many
    {"k1": b"\xdd" * 19},                        # runner not 20 bytes
    {"r6": 1},                                   # accepting_new not a bool
    {"r4": -1},                                  # negative height
    {"r8": 0},                                   # extra key
    {"r7": b"\x00" * 129},                       # signature beyond the decode bound
])
def test_structurally_malformed_certificates_do_not_decode(changes: dict[str, object]) -> None:
    with pytest.raises(DecodeError):
        instruction_from_cbor(_bad(**changes))
