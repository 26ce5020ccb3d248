"""secp256k1 recoverable signatures: known addresses, round trips, py_ecc cross-check, rejections."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from py_ecc.secp256k1 import secp256k1 as ref

from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.crypto.secp256k1 import (
    HALF_N,
    InvalidKey,
    InvalidSignature,
    N,
    generate_private_key,
    private_key_to_address,
    private_key_to_public_key,
    public_key_to_address,
    recover_address,
    recover_public_key,
    sign_recoverable,
)

P = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC2F  # field prime (SEC 2)
# SEC 2 generator G = public key of private key 1.
G_UNCOMPRESSED = (
    "0479be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
    "483ada7726a3c4655da4fbfc0e1108a8fd17b448a68554199c47d08ffb10d4b8"
)
SK_ONE = (1).to_bytes(32, "big")
# web3.py / eth-account documentation example key.
SK_WEB3 = bytes.fromhex("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318")
DIGEST = bytes(range(32))

keys = st.integers(min_value=1, max_value=N - 1).map(lambda k: k.to_bytes(32, "big"))
digests = st.binary(min_size=32, max_size=32)


def _parts(sig: bytes) -> tuple[int, int, int]:
    return int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:64], "big"), sig[64]


def _make(r: int, s: int, v: int) -> bytes:
    return r.to_bytes(32, "big") + s.to_bytes(32, "big") + bytes([v])


def test_constants() -> None:
    assert N == 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141  # SEC 2
    assert N == ref.N
    assert HALF_N == N // 2


def test_private_key_one_is_the_generator() -> None:
    assert private_key_to_public_key(SK_ONE).hex() == G_UNCOMPRESSED
    assert private_key_to_public_key(SK_ONE, compressed=True).hex() == "02" + G_UNCOMPRESSED[2:66]


def test_well_known_addresses() -> None:
    assert to_checksum_address(private_key_to_address(SK_ONE)) == "0x7E5F4552091A69125d5DfCb7b8C2659029395Bdf"
    assert to_checksum_address(private_key_to_address(SK_WEB3)) == "0x2c7536E3605D9C16a7a3D7b1898e529396a65c23"


def test_address_from_compressed_and_uncompressed_key_agree() -> None:
    for sk in (SK_ONE, SK_WEB3):
        a = public_key_to_address(private_key_to_public_key(sk))
        assert public_key_to_address(private_key_to_public_key(sk, compressed=True)) == a
        assert a == private_key_to_address(sk)


def test_signature_layout_matches_py_ecc() -> None:
    # py_ecc signs with the same RFC 6979 nonce but returns (27 + v, r, s) and does not
    # normalise s; libsecp256k1 does, flipping v when it negates s.
    sig = sign_recoverable(SK_WEB3, DIGEST)
    r, s, v = _parts(sig)
    ref_v, ref_r, ref_s = ref.ecdsa_raw_sign(DIGEST, SK_WEB3)
    assert r == ref_r
    if ref_s <= HALF_N:
        assert (s, v) == (ref_s, ref_v - 27)
    else:
        assert (s, v) == (N - ref_s, 1 - (ref_v - 27))


@settings(max_examples=40, deadline=None)
@given(keys, digests)
def test_sign_recover_round_trip(sk: bytes, digest: bytes) -> None:
    sig = sign_recoverable(sk, digest)
    assert len(sig) == 65
    r, s, v = _parts(sig)
    assert v in (0, 1) and 0 < r < N and 0 < s <= HALF_N
    pub = private_key_to_public_key(sk)
    assert recover_public_key(digest, sig) == pub
    assert recover_address(digest, sig) == private_key_to_address(sk)
    # independent recovery by py_ecc (pure Python)
    x, y = ref.ecdsa_raw_recover(digest, (v + 27, r, s))
    assert pub == b"\x04" + x.to_bytes(32, "big") + y.to_bytes(32, "big")


def test_signing_is_deterministic_and_does_not_hash() -> None:
    assert sign_recoverable(SK_ONE, DIGEST) == sign_recoverable(SK_ONE, DIGEST)
    with pytest.raises(ValueError):
        sign_recoverable(SK_ONE, DIGEST[:31])
    with pytest.raises(ValueError):
        sign_recoverable(SK_ONE, DIGEST + b"\x00")


def test_other_key_or_other_digest_recovers_a_different_address() -> None:
    sig = sign_recoverable(SK_ONE, DIGEST)
    assert recover_address(DIGEST, sign_recoverable(SK_WEB3, DIGEST)) != private_key_to_address(SK_ONE)
    assert recover_address(bytes(31) + b"\x01", sig) != private_key_to_address(SK_ONE)


def test_high_s_twin_is_rejected_although_mathematically_valid() -> None:
    sig = sign_recoverable(SK_WEB3, DIGEST)
    r, s, v = _parts(sig)
    twin = _make(r, N - s, v ^ 1)
    # the twin is a valid ECDSA signature for the same key (py_ecc accepts it) ...
    x, y = ref.ecdsa_raw_recover(DIGEST, (27 + (v ^ 1), r, N - s))
    assert b"\x04" + x.to_bytes(32, "big") + y.to_bytes(32, "big") == private_key_to_public_key(SK_WEB3)
    # ... but non-canonical, so it is refused
    with pytest.raises(InvalidSignature, match="high-s"):
        recover_public_key(DIGEST, twin)
    with pytest.raises(InvalidSignature):
        recover_address(DIGEST, twin)


@pytest.mark.parametrize("length", [0, 64, 66, 130])
def test_rejects_wrong_length(length: int) -> None:
    sig = sign_recoverable(SK_ONE, DIGEST)
    bad = (sig * 3)[:length]
    with pytest.raises(InvalidSignature, match="65 bytes"):
        recover_public_key(DIGEST, bad)


@pytest.mark.parametrize("v", [2, 3, 27, 28, 255])
def test_rejects_bad_recovery_id(v: int) -> None:
    sig = sign_recoverable(SK_ONE, DIGEST)
    with pytest.raises(InvalidSignature, match="recovery id"):
        recover_public_key(DIGEST, sig[:64] + bytes([v]))


@pytest.mark.parametrize(
    ("r", "s", "match"),
    [
        (0, 1, "r out of range"),
        (N, 1, "r out of range"),
        (N + 1, 1, "r out of range"),
        (2**256 - 1, 1, "r out of range"),
        (1, 0, "s out of range"),
        (1, N, "s out of range"),
        (1, HALF_N + 1, "high-s"),
        (1, 2**256 - 1, "s out of range"),
    ],
)
def test_rejects_out_of_range_r_s(r: int, s: int, match: str) -> None:
    for v in (0, 1):
        with pytest.raises(InvalidSignature, match=match):
            recover_public_key(DIGEST, _make(r, s, v))


def test_boundary_s_half_n_is_accepted_by_the_range_check() -> None:
    # s = n/2 (floor) is the largest low-s value; the result is some key, not an error
    r = _parts(sign_recoverable(SK_ONE, DIGEST))[0]
    assert len(recover_public_key(DIGEST, _make(r, HALF_N, 0))) == 65


def test_rejects_r_that_is_no_curve_x() -> None:
    r = 5
    assert pow(r**3 + 7, (P - 1) // 2, P) != 1  # 5³ + 7 is a non-residue: no point has x = 5
    for v in (0, 1):
        with pytest.raises(InvalidSignature, match="recovery failed"):
            recover_public_key(DIGEST, _make(r, 1, v))


def test_rejects_wrong_digest_length_on_recover() -> None:
    sig = sign_recoverable(SK_ONE, DIGEST)
    with pytest.raises(InvalidSignature):
        recover_public_key(DIGEST[:31], sig)


def test_generate_private_key() -> None:
    keys_ = {generate_private_key() for _ in range(8)}
    assert len(keys_) == 8
    for k in keys_:
        assert len(k) == 32 and 0 < int.from_bytes(k, "big") < N
        assert len(private_key_to_address(k)) == 20


@pytest.mark.parametrize("sk", [bytes(32), N.to_bytes(32, "big"), b"\xff" * 32, b"\x01" * 31, b"\x01" * 33])
def test_rejects_invalid_private_keys(sk: bytes) -> None:
    with pytest.raises(InvalidKey):
        private_key_to_public_key(sk)
    with pytest.raises(InvalidKey):
        sign_recoverable(sk, DIGEST)


def test_rejects_invalid_public_keys() -> None:
    pub = private_key_to_public_key(SK_ONE)
    with pytest.raises(InvalidKey):
        public_key_to_address(pub[1:])  # 64 bytes
    with pytest.raises(InvalidKey):
        public_key_to_address(pub[:-1] + bytes([pub[-1] ^ 1]))  # off the curve
    with pytest.raises(InvalidKey):
        public_key_to_address(b"\x05" + pub[1:33])  # bad prefix
