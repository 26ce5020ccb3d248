"""Ed25519: RFC 8032 §7.1 known answers and "verify never raises, only says no"."""

from __future__ import annotations

import pytest

from cowboy_protocol.crypto.ed25519 import PreparedSigner, generate_seed, public_key_from_seed, sign, verify

# RFC 8032 section 7.1, TEST 1 and TEST 2: (SECRET KEY, PUBLIC KEY, MESSAGE, SIGNATURE).
RFC8032 = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
]
L = 2**252 + 27742317777372353535851937790883648493  # order of the base point (RFC 8032)


@pytest.mark.parametrize(("seed", "public", "message", "signature"), RFC8032)
def test_rfc8032_vectors(seed: str, public: str, message: str, signature: str) -> None:
    sd, pk, msg, sig = (bytes.fromhex(x) for x in (seed, public, message, signature))
    assert public_key_from_seed(sd) == pk
    assert sign(sd, msg) == sig
    assert verify(pk, msg, sig)


@pytest.mark.parametrize(("seed", "public", "message", "signature"), RFC8032)
def test_prepared_signer_gives_the_rfc8032_answers(seed: str, public: str, message: str, signature: str) -> None:
    signer = PreparedSigner(bytes.fromhex(seed))
    assert signer.public_key.hex() == public
    assert signer.sign(bytes.fromhex(message)).hex() == signature
    assert signer.sign(bytes.fromhex(message)).hex() == signature  # reusable


def test_prepared_signer_rejects_a_bad_seed_length() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        PreparedSigner(b"\x01" * 31)


@pytest.mark.parametrize(("seed", "public", "message", "signature"), RFC8032)
def test_tampering_is_rejected(seed: str, public: str, message: str, signature: str) -> None:
    pk, msg, sig = (bytes.fromhex(x) for x in (public, message, signature))
    assert not verify(pk, msg + b"\x00", sig)
    for i in (0, 31, 32, 63):
        bad = bytearray(sig)
        bad[i] ^= 0x01
        assert not verify(pk, msg, bytes(bad))
    other_pk = bytes.fromhex(RFC8032[0][1] if pk != bytes.fromhex(RFC8032[0][1]) else RFC8032[1][1])
    assert not verify(other_pk, msg, sig)


def test_non_canonical_s_is_rejected() -> None:
    _, public, message, signature = RFC8032[0]
    pk, msg, sig = (bytes.fromhex(x) for x in (public, message, signature))
    s = int.from_bytes(sig[32:], "little")
    assert not verify(pk, msg, sig[:32] + (s + L).to_bytes(32, "little"))  # same value mod L


@pytest.mark.parametrize(
    ("pk", "sig"),
    [
        (b"", b""),
        (bytes(31), bytes(64)),
        (bytes(33), bytes(64)),
        (None, bytes(63)),
        (None, bytes(65)),
        (bytes(32), None),  # small-order (identity-ish) key
        (b"\xff" * 32, None),  # not a valid point encoding
        (bytes([1]) + bytes(31), None),  # the identity point
    ],
)
def test_malformed_inputs_give_false(pk: bytes | None, sig: bytes | None) -> None:
    _, public, message, signature = RFC8032[1]
    pk = bytes.fromhex(public) if pk is None else pk
    sig = bytes.fromhex(signature) if sig is None else sig
    assert verify(pk, bytes.fromhex(message), sig) is False


def test_non_bytes_inputs_give_false() -> None:
    assert verify("x" * 32, b"", "y" * 64) is False  # type: ignore[arg-type]
    assert verify(None, b"", None) is False  # type: ignore[arg-type]


def test_generated_seed_round_trip() -> None:
    seed = generate_seed()
    assert len(seed) == 32 and seed != generate_seed()
    pk = public_key_from_seed(seed)
    sig = sign(seed, b"block")
    assert len(pk) == 32 and len(sig) == 64
    assert verify(pk, b"block", sig)
    assert not verify(pk, b"block!", sig)


@pytest.mark.parametrize("length", [0, 31, 33, 64])
def test_bad_seed_length_raises(length: int) -> None:
    with pytest.raises(ValueError):
        public_key_from_seed(bytes(length))
    with pytest.raises(ValueError):
        sign(bytes(length), b"m")
