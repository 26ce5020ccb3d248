"""Transaction encoding, signing hash, tx_bytes framing and strict decoding."""

from __future__ import annotations

import pytest
from Crypto.Hash import keccak

from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validation_errors import DecodeError, ValidationError
from tests.helpers import ALICE, ALICE_SK, BOB


def _k(data: bytes) -> bytes:
    return keccak.new(digest_bits=256, data=data).digest()


def _unsigned() -> Transaction:
    return Transaction(chain_id="c", nonce=1, sender=ALICE, instruction=Transfer(to=BOB, amount=1000),
                       cycles_limit=50_000, cells_limit=2_000, max_fee_per_cycle=200_000,
                       max_priority_fee_per_cycle=1_000, max_fee_per_cell=200_000, max_priority_fee_per_cell=1_000)


# Payload assembled by hand from the documented schema (docs/protocol.md), not by the encoder:
GOLDEN_PAYLOAD = bytes.fromhex(
    "aa"                                    # map(10)
    "00" "6163"                             # 0: "c"
    "01" "01"                               # 1: nonce 1
    "02" "54" + ALICE.hex() +               # 2: sender bytes(20)
    "03" "a3" "00" "00" "01" "54" + BOB.hex() +  # 3: {0: kind 0, 1: to,
    "02" "50" + (1000).to_bytes(16, "big").hex() +  # 2: amount u128}
    "04" "19c350"                           # 4: cycles_limit 50000 (16-bit form)
    "05" "1907d0"                           # 5: cells_limit 2000
    "06" "1a00030d40"                       # 6: max_fee_per_cycle 200000
    "07" "1903e8"                           # 7: priority 1000
    "08" "1a00030d40"                       # 8: max_fee_per_cell
    "09" "1903e8"                           # 9: priority per cell
)


def test_payload_bytes_match_golden_encoding() -> None:
    assert _unsigned().payload_bytes() == GOLDEN_PAYLOAD


def test_signing_hash_is_keccak_of_domain_and_payload() -> None:
    assert _unsigned().signing_hash() == _k(b"cowboy-tx-v1:" + GOLDEN_PAYLOAD)


def test_tx_bytes_is_u32_be_length_then_body_with_signature_under_key_10() -> None:
    tx = _unsigned().signed(ALICE_SK)
    raw = tx.to_bytes()
    body = raw[4:]
    assert int.from_bytes(raw[:4], "big") == len(body)
    # Body = same map with 11 entries: header byte 0xab, the payload entries, then 0x0a ‖ bytes(65).
    assert body == b"\xab" + GOLDEN_PAYLOAD[1:] + b"\x0a\x58\x41" + tx.signature
    assert tx.tx_hash() == _k(body)
    assert Transaction.from_bytes(raw) == tx
    assert tx.recover_sender() == ALICE


def test_signature_by_another_key_is_rejected() -> None:
    tx = _unsigned().signed((7).to_bytes(32, "big"))
    with pytest.raises(ValidationError) as e:
        tx.verify_signature()
    assert e.value.code == "bad_signature"


def test_tampered_field_breaks_signature() -> None:
    tx = _unsigned().signed(ALICE_SK)
    body = bytearray(tx.body())
    i = body.index(bytes.fromhex("01" "01"))  # nonce 1 -> nonce 2
    body[i + 1] = 0x02
    tampered = Transaction.from_body(bytes(body))
    with pytest.raises(ValidationError):
        tampered.verify_signature()


@pytest.mark.parametrize("mutate,code", [
    (lambda b: b[:-1], "malformed"),                          # truncated
    (lambda b: b + b"\x00", "malformed"),                     # trailing byte
    (lambda b: b"\xac" + b[1:] + b"\x0b\x00", "malformed"),   # extra key 11
])
def test_malformed_bodies_are_rejected(mutate, code) -> None:  # type: ignore[no-untyped-def]
    body = _unsigned().signed(ALICE_SK).body()
    with pytest.raises(DecodeError) as e:
        Transaction.from_body(mutate(body))
    assert e.value.code == code


def test_missing_field_is_rejected_naming_it() -> None:
    tx = _unsigned().signed(ALICE_SK)
    from cowboy_protocol.codec import encode

    m = tx.payload_map()
    m[10] = tx.signature
    del m[4]
    with pytest.raises(DecodeError) as e:
        Transaction.from_body(encode(m))
    assert "missing keys [4]" in str(e.value)


def test_wrong_signature_length_is_rejected() -> None:
    from cowboy_protocol.codec import encode

    tx = _unsigned()
    m = tx.payload_map()
    m[10] = b"\x00" * 64
    with pytest.raises(DecodeError) as e:
        Transaction.from_body(encode(m))
    assert e.value.field == "signature"


def test_length_prefix_must_match_body() -> None:
    raw = _unsigned().signed(ALICE_SK).to_bytes()
    bad = (len(raw) - 3).to_bytes(4, "big") + raw[4:]
    with pytest.raises(DecodeError):
        Transaction.from_bytes(bad)
    with pytest.raises(DecodeError) as e:
        Transaction.from_bytes(raw, max_body=10)
    assert e.value.code == "tx_too_large"


def test_unknown_instruction_kind_is_rejected() -> None:
    from cowboy_protocol.codec import encode

    tx = _unsigned().signed(ALICE_SK)
    m = tx.payload_map()
    m[3] = {0: 0x7F}
    m[10] = tx.signature
    with pytest.raises(DecodeError) as e:
        Transaction.from_body(encode(m))
    assert e.value.code == "unknown_instruction"


def test_amount_must_be_16_bytes() -> None:
    from cowboy_protocol.codec import encode

    tx = _unsigned().signed(ALICE_SK)
    m = tx.payload_map()
    m[3] = {0: 0, 1: BOB, 2: 1000}  # a CBOR int instead of the u128 byte string
    m[10] = tx.signature
    with pytest.raises(DecodeError):
        Transaction.from_body(encode(m))
