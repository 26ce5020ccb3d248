"""EIP-55 checksummed addresses: the EIP's own test vectors and strict parsing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cowboy_protocol.crypto.address import InvalidAddress, parse_address, to_checksum_address

# From EIP-55 ("Test Cases"): all-caps, all-lower and normal mixed-case examples.
EIP55_VECTORS = [
    "0x52908400098527886E0F7030069857D2E4169EE7",
    "0x8617E340B3D01FA5F11F306F4090FD50E238070D",
    "0xde709f2102306220921060314715629080e2fb77",
    "0x27b1fdb04752bbc536007a920d24acb045561c26",
    "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
    "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
    "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
    "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
]


@pytest.mark.parametrize("text", EIP55_VECTORS)
def test_eip55_vectors(text: str) -> None:
    raw = bytes.fromhex(text[2:])
    assert to_checksum_address(raw) == text
    assert parse_address(text) == raw


@pytest.mark.parametrize("text", EIP55_VECTORS[4:])
def test_all_lower_and_all_upper_are_accepted(text: str) -> None:
    raw = bytes.fromhex(text[2:])
    assert parse_address("0x" + text[2:].lower()) == raw
    assert parse_address("0x" + text[2:].upper()) == raw


@pytest.mark.parametrize("text", EIP55_VECTORS[4:])
def test_wrong_checksum_is_rejected(text: str) -> None:
    body = list(text[2:])
    i = next(k for k, c in enumerate(body) if c.isalpha())
    body[i] = body[i].swapcase()  # still mixed case, now with one wrong letter
    with pytest.raises(InvalidAddress, match="bad checksum"):
        parse_address("0x" + "".join(body))


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "0x"),
        ("0X5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "0x"),
        ("", "0x"),
        ("0x", "40 hex digits"),
        ("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAe", "40 hex digits"),
        ("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed00", "40 hex digits"),
        ("0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaeg", "non-hex"),
        ("0x5aaeb6053f3e94c9b9a09f33669435e7ef1bea d", "non-hex"),
        ("0x 5aaeb6053f3e94c9b9a09f33669435e7ef1bead", "non-hex"),
        ("0x+aaeb6053f3e94c9b9a09f33669435e7ef1beaed", "non-hex"),
        ("0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaeé", "non-hex"),
    ],
)
def test_malformed_text_is_rejected(text: str, match: str) -> None:
    with pytest.raises(InvalidAddress, match=match):
        parse_address(text)


def test_non_string_is_rejected() -> None:
    with pytest.raises(InvalidAddress):
        parse_address(b"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed")  # type: ignore[arg-type]


@pytest.mark.parametrize("length", [0, 19, 21, 32])
def test_to_checksum_rejects_wrong_length(length: int) -> None:
    with pytest.raises(InvalidAddress):
        to_checksum_address(bytes(length))


def test_invalid_address_is_a_value_error() -> None:
    assert issubclass(InvalidAddress, ValueError)


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=20, max_size=20))
def test_round_trip(raw: bytes) -> None:
    text = to_checksum_address(raw)
    assert text.startswith("0x") and len(text) == 42
    assert text[2:].lower() == raw.hex()
    assert parse_address(text) == raw


def test_matches_eth_utils_if_installed() -> None:
    eth_utils = pytest.importorskip("eth_utils")
    for i in range(20):
        raw = bytes((i * 37 + k * 11) & 0xFF for k in range(20))
        assert to_checksum_address(raw) == eth_utils.to_checksum_address(raw)
