"""BLS12-381 MinSig: cross-checked against py_ecc (reference), RFC 9380 and EIP-2333 known answers.

py_ecc is pure Python (a pairing check costs ~0.15 s), so it is used on a handful of
inputs only.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from py_arkworks_bls12381 import G1Point, Scalar
from py_ecc.bls import G2ProofOfPossession
from py_ecc.bls.hash_to_curve import hash_to_G1
from py_ecc.bls.point_compression import compress_G1, compress_G2, modular_squareroot_in_FQ2
from py_ecc.fields import optimized_bls12_381_FQ as FQ
from py_ecc.fields import optimized_bls12_381_FQ2 as FQ2
from py_ecc.fields import optimized_bls12_381_FQ12 as FQ12
from py_ecc.optimized_bls12_381 import (
    G2,
    b,
    b2,
    curve_order,
    field_modulus,
    final_exponentiate,
    is_inf,
    is_on_curve,
    multiply,
    neg,
    pairing,
)

from cowboy_node.crypto.bls import (
    DST_G1_SIG,
    InvalidBlsKey,
    R,
    hash_to_g1,
    public_key,
    secret_key_from_bytes,
    secret_key_from_seed,
    secret_key_to_bytes,
    sign,
    verify,
)

SK = 0x2B8D7C21E0F0E2C5C0F1D4A38B6E5F7A9C3D2E1F0A4B5C6D7E8F90123456789  # arbitrary, < r
MSG = b"cowboy beacon round 1"


def _g1_bytes(point: Any) -> bytes:
    return int(compress_G1(point)).to_bytes(48, "big")


def _g2_bytes(point: Any) -> bytes:
    z1, z2 = compress_G2(point)
    return int(z1).to_bytes(48, "big") + int(z2).to_bytes(48, "big")


def _ref_hash(message: bytes, dst: bytes = DST_G1_SIG) -> Any:
    return hash_to_G1(message, dst, hashlib.sha256)


# --------------------------------------------------------------------------- constants


def test_constants() -> None:
    assert curve_order == R
    assert DST_G1_SIG == b"BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_"


# --------------------------------------------------------------------------- hash to G1


@pytest.mark.parametrize(
    ("message", "x", "y"),
    [
        # RFC 9380, Appendix J.9.1 (suite BLS12381G1_XMD:SHA-256_SSWU_RO_), affine P.
        (
            b"",
            0x052926ADD2207B76CA4FA57A8734416C8DC95E24501772C814278700EED6D1E4E8CF62D9C09DB0FAC349612B759E79A1,
            0x08BA738453BFED09CB546DBB0783DBB3A5F1F566ED67BB6BE0E8C67E2E81A4CC68EE29813BB7994998F3EAE0C9C6A265,
        ),
        (
            b"abc",
            0x03567BC5EF9C690C2AB2ECDF6A96EF1C139CC0B2F284DCA0A9A7943388A49A3AEE664BA5379A7655D3C68900BE2F6903,
            0x0B9C15F3FE6E5CF4211F346271D7B01C8F3B28BE689C8429C85B67AF215533311F0B8DFAAA154FA6B88176C229F2885D,
        ),
    ],
)
def test_hash_to_g1_rfc9380_vectors(message: bytes, x: int, y: int) -> None:
    # sign() with sk = 1 returns H(m) itself, compressed: x with the compression flag, and
    # the sign flag when y is the lexicographically larger root.
    dst = b"QUUX-V01-CS02-with-BLS12381G1_XMD:SHA-256_SSWU_RO_"
    expected = (x | (1 << 383) | ((1 << 381) if y > field_modulus - y else 0)).to_bytes(48, "big")
    assert sign(1, message, dst) == expected
    assert _g1_bytes(_ref_hash(message, dst)) == expected  # and py_ecc agrees with the RFC


@pytest.mark.parametrize("message", [b"", b"abc", MSG, bytes(range(256))])
def test_hash_to_g1_matches_py_ecc(message: bytes) -> None:
    assert sign(1, message) == _g1_bytes(_ref_hash(message))


# --------------------------------------------------------------------------- keys and signatures vs py_ecc


@pytest.mark.parametrize("sk", [1, 2, SK, R - 1])
def test_public_key_matches_py_ecc(sk: int) -> None:
    assert public_key(sk) == _g2_bytes(multiply(G2, sk))


def test_generator_encoding() -> None:
    # the standard compressed G2 generator
    assert public_key(1).hex() == (
        "93e02b6052719f607dacd3a088274f65596bd0d09920b61ab5da61bbdc7f5049334cf11213945d57e5ac7d055d042b7e"
        "024aa2b2f08f0a91260805272dc51051c6e47ad4fa403b02b4510b647ae3d1770bac0326a805bbefd48056c8c121bdb8"
    )


@pytest.mark.parametrize("sk", [2, SK])
def test_signature_matches_py_ecc(sk: int) -> None:
    assert sign(sk, MSG) == _g1_bytes(multiply(_ref_hash(MSG), sk))


@pytest.mark.parametrize("message", [MSG, b""])
def test_signature_verifies_with_py_ecc_pairing(message: bytes) -> None:
    sig_point = multiply(_ref_hash(message), SK)
    assert sign(SK, message) == _g1_bytes(sig_point)
    pk_point = multiply(G2, SK)
    # e(sig, G2) · e(H(m), −pk) == 1, with a single final exponentiation
    product = pairing(G2, sig_point, final_exponentiate=False) * pairing(
        neg(pk_point), _ref_hash(message), final_exponentiate=False
    )
    assert final_exponentiate(product) == FQ12.one()
    assert verify(public_key(SK), message, sign(SK, message))


# --------------------------------------------------------------------------- KeyGen


def test_keygen_eip2333_vectors() -> None:
    # EIP-2333 test cases 0 and 1: derive_master_SK(seed) is the IETF KeyGen.
    seed0 = bytes.fromhex(
        "c55257c360c07c72029aebc1b53c05ed0362ada38ead3e3e9efa3708e5349553"
        "1f09a6987599d18264c1e1c92f2cf141630c7a3c4ab7c81b2f001698e7463b04"
    )
    assert secret_key_from_seed(seed0) == 6083874454709270928345386274498605044986640685124978867557563392430687146096
    seed1 = bytes.fromhex("3141592653589793238462643383279502884197169399375105820974944592")
    assert secret_key_from_seed(seed1) == 29757020647961307431480504535336562678282505419141012933316116377660817309383


@settings(max_examples=25, deadline=None)
@given(st.binary(min_size=32, max_size=80))
def test_keygen_matches_py_ecc(seed: bytes) -> None:
    sk = secret_key_from_seed(seed)
    assert sk == G2ProofOfPossession.KeyGen(seed)
    assert 0 < sk < R


def test_keygen_rejects_short_seed() -> None:
    with pytest.raises(InvalidBlsKey):
        secret_key_from_seed(bytes(31))


# --------------------------------------------------------------------------- secret key encoding


def test_secret_key_bytes_round_trip() -> None:
    for sk in (1, SK, R - 1):
        data = secret_key_to_bytes(sk)
        assert len(data) == 32 and int.from_bytes(data, "big") == sk
        assert secret_key_from_bytes(data) == sk


@pytest.mark.parametrize("data", [bytes(32), R.to_bytes(32, "big"), b"\xff" * 32, bytes(31), b"\x01" * 33])
def test_secret_key_from_bytes_rejects(data: bytes) -> None:
    with pytest.raises(InvalidBlsKey):
        secret_key_from_bytes(data)


@pytest.mark.parametrize("sk", [0, R, R + 1, -1, True])
def test_out_of_range_secret_keys_are_refused(sk: int) -> None:
    with pytest.raises(InvalidBlsKey):
        public_key(sk)
    with pytest.raises(InvalidBlsKey):
        sign(sk, MSG)
    with pytest.raises(InvalidBlsKey):
        secret_key_to_bytes(sk)


# --------------------------------------------------------------------------- verify: accepts and rejects


def test_round_trip_and_lengths() -> None:
    pk, sig = public_key(SK), sign(SK, MSG)
    assert len(pk) == 96 and len(sig) == 48
    assert verify(pk, MSG, sig)


def test_rejects_wrong_message_key_and_dst() -> None:
    pk, sig = public_key(SK), sign(SK, MSG)
    assert not verify(pk, MSG + b"!", sig)
    assert not verify(public_key(SK + 1), MSG, sig)
    assert not verify(pk, MSG, sign(SK + 1, MSG))
    other_dst = b"BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_POP_"
    assert not verify(pk, MSG, sig, other_dst)
    assert verify(pk, MSG, sign(SK, MSG, other_dst), other_dst)


def test_rejects_garbage_and_wrong_lengths() -> None:
    pk, sig = public_key(SK), sign(SK, MSG)
    assert not verify(pk, MSG, b"\x00" * 48)
    assert not verify(pk, MSG, b"\xff" * 48)  # non-canonical infinity encoding
    assert not verify(b"\x00" * 96, MSG, sig)
    assert not verify(b"\xff" * 96, MSG, sig)
    assert not verify(pk, MSG, sig[:47])
    assert not verify(pk, MSG, sig + b"\x00")
    assert not verify(pk[:95], MSG, sig)
    assert not verify(pk + b"\x00", MSG, sig)
    assert not verify(sig, MSG, pk)  # swapped
    assert not verify(pk, MSG, bytes([sig[0] & 0x7F]) + sig[1:])  # compression flag cleared
    assert not verify(pk, MSG, bytes([sig[0] ^ 0x20]) + sig[1:])  # sign flag flipped: −sig
    assert not verify(None, MSG, sig)  # type: ignore[arg-type]
    assert not verify(pk, None, sig)  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None)
@given(st.binary(min_size=48, max_size=48), st.binary(min_size=96, max_size=96))
def test_random_bytes_never_raise(sig: bytes, pk: bytes) -> None:
    assert verify(pk, MSG, sig) is False
    assert verify(public_key(SK), MSG, sig) is False


G1_IDENTITY = bytes([0xC0]) + bytes(47)
G2_IDENTITY = bytes([0xC0]) + bytes(95)


def test_rejects_identity_points() -> None:
    pk, sig = public_key(SK), sign(SK, MSG)
    assert not verify(G2_IDENTITY, MSG, sig)
    assert not verify(pk, MSG, G1_IDENTITY)
    # the trivial "forgery": e(O, G2) == e(H(m), O) == 1 for every message
    assert not verify(G2_IDENTITY, MSG, G1_IDENTITY)


def _non_subgroup_g1() -> bytes:
    x = 0
    while True:
        x += 1
        y2 = FQ(x) ** 3 + b
        y = y2 ** ((field_modulus + 1) // 4)
        if y * y == y2:
            point = (FQ(x), y, FQ(1))
            if not is_inf(multiply(point, curve_order)):
                assert is_on_curve(point, b)
                return _g1_bytes(point)


def _non_subgroup_g2() -> bytes:
    x = 0
    while True:
        x += 1
        xx = FQ2([x, 1])
        y = modular_squareroot_in_FQ2(xx**3 + b2)
        if y is not None:
            point = (xx, y, FQ2.one())
            if not is_inf(multiply(point, curve_order)):
                assert is_on_curve(point, b2)
                return _g2_bytes(point)


def test_rejects_points_outside_the_subgroup() -> None:
    pk, sig = public_key(SK), sign(SK, MSG)
    bad_sig, bad_pk = _non_subgroup_g1(), _non_subgroup_g2()
    assert not verify(pk, MSG, bad_sig)
    assert not verify(bad_pk, MSG, sig)
    assert not verify(bad_pk, MSG, bad_sig)


def test_rejects_x_not_on_curve() -> None:
    x = 0
    while True:  # smallest x with x³ + 4 a non-residue: no point has this x
        x += 1
        if pow(x**3 + 4, (field_modulus - 1) // 2, field_modulus) != 1:
            break
    assert not verify(public_key(SK), MSG, (x | (1 << 383)).to_bytes(48, "big"))


def test_hash_to_g1_is_memoised_and_is_the_hash_to_curve() -> None:
    """Consensus hashes a view's few messages once for every signature made or checked over them: the memo must
    give exactly the hash-to-curve point, and signing and verifying through it must be unchanged."""
    msg = b"cowboy hash memo probe"
    hash_to_g1.cache_clear()
    first = hash_to_g1(msg)
    assert first == G1Point.hash_to_curve(msg, DST_G1_SIG)
    assert hash_to_g1(msg) == first and hash_to_g1.cache_info().hits == 1
    sk = secret_key_from_seed(b"\x07" * 32)
    sig = sign(sk, msg)
    assert sig == bytes((G1Point.hash_to_curve(msg, DST_G1_SIG) * Scalar(sk)).to_compressed_bytes())
    assert verify(public_key(sk), msg, sig) and not verify(public_key(sk), msg + b"!", sig)
