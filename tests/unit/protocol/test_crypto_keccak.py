"""Keccak-256: published known answers, an independent pure-Python Keccak, and "not SHA3"."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cowboy_protocol.crypto import keccak as keccak_module
from cowboy_protocol.crypto.keccak import keccak256

# Well-known values (e.g. Ethereum's empty-code hash is keccak256(b"")).
EMPTY = "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
ABC = "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45"
SHA3_256_EMPTY = "a7ffc6f8bf1ed76651c14756a061d662f580ff4de43b49fa82d80a4b80f8434a"  # FIPS 202


# --- independent reference: Keccak-f[1600] sponge written from the Keccak specification ---
_RC = [
    0x0000000000000001, 0x0000000000008082, 0x800000000000808A, 0x8000000080008000,
    0x000000000000808B, 0x0000000080000001, 0x8000000080008081, 0x8000000000008009,
    0x000000000000008A, 0x0000000000000088, 0x0000000080008009, 0x000000008000000A,
    0x000000008000808B, 0x800000000000008B, 0x8000000000008089, 0x8000000000008003,
    0x8000000000008002, 0x8000000000000080, 0x000000000000800A, 0x800000008000000A,
    0x8000000080008081, 0x8000000000008080, 0x0000000080000001, 0x8000000080008008,
]  # fmt: skip
_ROT = [[0, 36, 3, 41, 18], [1, 44, 10, 45, 2], [62, 6, 43, 15, 61], [28, 55, 25, 21, 56], [27, 20, 39, 8, 14]]
_M = (1 << 64) - 1


def _rol(v: int, n: int) -> int:
    return ((v << n) | (v >> (64 - n))) & _M if n else v


def _keccak_f(a: list[list[int]]) -> None:
    for rc in _RC:
        c = [a[x][0] ^ a[x][1] ^ a[x][2] ^ a[x][3] ^ a[x][4] for x in range(5)]
        d = [c[(x - 1) % 5] ^ _rol(c[(x + 1) % 5], 1) for x in range(5)]
        for x in range(5):
            for y in range(5):
                a[x][y] ^= d[x]
        b = [[0] * 5 for _ in range(5)]
        for x in range(5):
            for y in range(5):
                b[y][(2 * x + 3 * y) % 5] = _rol(a[x][y], _ROT[x][y])
        for x in range(5):
            for y in range(5):
                a[x][y] = b[x][y] ^ (~b[(x + 1) % 5][y] & b[(x + 2) % 5][y])
        a[0][0] ^= rc


def _reference_keccak256(data: bytes) -> bytes:
    rate = 136
    pad = rate - len(data) % rate  # pad10*1 with Keccak's 0x01 domain bits
    padded = bytes(data) + (b"\x81" if pad == 1 else b"\x01" + b"\x00" * (pad - 2) + b"\x80")
    a = [[0] * 5 for _ in range(5)]
    for off in range(0, len(padded), rate):
        block = padded[off : off + rate]
        for i in range(rate // 8):
            a[i % 5][i // 5] ^= int.from_bytes(block[8 * i : 8 * i + 8], "little")
        _keccak_f(a)
    return b"".join(a[i % 5][i // 5].to_bytes(8, "little") for i in range(4))


def test_reference_implementation_matches_published_values() -> None:
    assert _reference_keccak256(b"").hex() == EMPTY
    assert _reference_keccak256(b"abc").hex() == ABC


def test_known_answers() -> None:
    assert keccak256(b"").hex() == EMPTY
    assert keccak256(b"abc").hex() == ABC


def test_is_not_sha3_256() -> None:
    assert hashlib.sha3_256(b"").hexdigest() == SHA3_256_EMPTY
    assert keccak256(b"") != hashlib.sha3_256(b"").digest()


@pytest.mark.parametrize("length", [0, 1, 31, 32, 64, 134, 135, 136, 137, 271, 272, 273, 1000])
def test_rate_boundaries_match_reference(length: int) -> None:
    data = bytes((7 * i + 3) & 0xFF for i in range(length))
    assert keccak256(data) == _reference_keccak256(data)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=600))
def test_random_inputs_match_reference_and_public_api(data: bytes) -> None:
    digest = keccak256(data)
    assert digest == _reference_keccak256(data)
    assert digest == keccak_module._keccak256_public(data)
    assert len(digest) == 32 and type(digest) is bytes


def test_matches_eth_hash_if_installed() -> None:
    eth_hash_auto = pytest.importorskip("eth_hash.auto")
    for data in (b"", b"abc", bytes(range(256)) * 2):
        assert keccak256(data) == eth_hash_auto.keccak(data)


def test_accepts_bytearray_and_memoryview() -> None:
    assert keccak256(bytearray(b"abc")).hex() == ABC
    assert keccak256(memoryview(b"abc")).hex() == ABC  # type: ignore[arg-type]
