"""Simplex wire messages: golden bytes, round trips, strict decoding."""

from __future__ import annotations

import pytest

from cowboy_node.consensus.simplex.types import (
    Fetch,
    Finalization,
    Finalize,
    Message,
    Notarization,
    Notarize,
    Nullification,
    Nullify,
    Proposal,
    decode_message,
    encode_message,
    finalize_message,
    notarize_message,
    nullify_message,
    seed_message,
)
from cowboy_node.types.block import Round
from cowboy_node.types.seed import round_message
from cowboy_protocol.codec import encode
from cowboy_protocol.types.validation_errors import DecodeError

R = Round(0, 2)
P = Proposal(R, 1, b"\x11" * 32, b"\x22" * 32)
S, Z = b"\xaa" * 48, b"\xbb" * 48
# {0: {0: 0, 1: 2}, 1: 1, 2: h'11'*32, 3: h'22'*32}
P_HEX = "a400a2000001020101025820" + "11" * 32 + "035820" + "22" * 32
R_HEX = "a200000102"
SIGS_VOTE = "035830" + "aa" * 48 + "045830" + "bb" * 48
SIGS_CERT = "025830" + "aa" * 48 + "035830" + "bb" * 48

GOLDEN: list[tuple[Message, str]] = [
    (Notarize(P, 3, S, Z), "a5" + "0001" + "01" + P_HEX + "0203" + SIGS_VOTE),
    (Nullify(R, 1, S, Z), "a5" + "0002" + "01" + R_HEX + "0201" + SIGS_VOTE),
    (Finalize(P, 0, S, Z), "a5" + "0003" + "01" + P_HEX + "0200" + SIGS_VOTE),
    (Notarization(P, S, Z), "a4" + "0004" + "01" + P_HEX + SIGS_CERT),
    (Nullification(R, S, Z), "a4" + "0005" + "01" + R_HEX + SIGS_CERT),
    (Finalization(P, S, Z), "a4" + "0006" + "01" + P_HEX + SIGS_CERT),
    (Fetch(0, (1, 2, 300)), "a3000701000283010219012c"),
]


@pytest.mark.parametrize(("message", "golden"), GOLDEN, ids=[type(m).__name__ for m, _ in GOLDEN])
def test_golden_bytes_and_round_trip(message: Message, golden: str) -> None:
    assert encode_message(message).hex() == golden
    assert decode_message(bytes.fromhex(golden)) == message


def test_signed_messages() -> None:
    assert notarize_message(P) == b"cowboy-simplex-v1:notarize:" + bytes.fromhex(P_HEX)
    assert finalize_message(P) == b"cowboy-simplex-v1:finalize:" + bytes.fromhex(P_HEX)
    assert nullify_message(R) == b"cowboy-simplex-v1:nullify:" + bytes.fromhex(R_HEX)
    assert seed_message(R) == round_message(R) == b"cowboy-seed-v1:" + bytes(15) + b"\x02"
    assert len({notarize_message(P), finalize_message(P), nullify_message(R), seed_message(R)}) == 4


@pytest.mark.parametrize("value", [
    {0: 9, 1: 0, 2: [1]},  # unknown kind
    {1: 0},  # no kind
    [1, 2],  # not a map
    {0: 1, 1: P.to_cbor(), 2: 0, 3: S, 4: Z, 5: 0},  # extra key
    {0: 1, 1: P.to_cbor(), 2: 0, 3: S[:47], 4: Z},  # short signature
    {0: 1, 1: P.to_cbor(), 2: 0x10000, 3: S, 4: Z},  # signer out of range
    {0: 4, 1: {**P.to_cbor(), 1: 2}, 2: S, 3: Z},  # parent_view not below view
    {0: 4, 1: {**P.to_cbor(), 3: b"\x22" * 31}, 2: S, 3: Z},  # short payload
    {0: 2, 1: P.to_cbor(), 2: 0, 3: S, 4: Z},  # nullify of a proposal
    {0: 7, 1: 0, 2: []},  # empty fetch
    {0: 7, 1: 0, 2: [2, 2]},  # fetch views not increasing
    {0: 7, 1: 0, 2: list(range(65))},  # too many views
])
def test_strict_decoding_rejects(value: object) -> None:
    with pytest.raises(DecodeError):
        decode_message(encode(value))


def test_non_canonical_bytes_are_rejected() -> None:
    good = encode_message(Nullify(R, 1, S, Z))
    assert decode_message(good) == Nullify(R, 1, S, Z)
    with pytest.raises(DecodeError):
        decode_message(bytes.fromhex("a5" + "1800" + good.hex()[4:]))  # kind key 0 in a non-shortest form
    with pytest.raises(DecodeError):
        decode_message(good + b"\x00")


def test_a_relayed_certificate_is_decoded_once_per_distinct_bytes() -> None:
    """Every peer relays each certificate (byte-identical: the group signature is unique), so a validator decodes
    one copy and reuses it; bytes that do not decode are refused every time, and votes are not memoised."""
    cert = Finalization(P, S, Z)
    first = decode_message(bytes(encode_message(cert)))
    assert first == cert
    assert decode_message(bytes(encode_message(cert))) is first  # another peer's copy: the same decoded object
    bad = encode_message(cert)[:-1]  # a truncated certificate (still starts with the map of four)
    for _ in range(2):
        with pytest.raises(DecodeError):
            decode_message(bad)
    vote = Finalize(P, 0, S, Z)
    assert decode_message(encode_message(vote)) == vote
    assert decode_message(encode_message(vote)) is not decode_message(encode_message(vote))
