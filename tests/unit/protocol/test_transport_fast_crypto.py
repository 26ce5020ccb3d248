"""``transport/fast_crypto``: the heartbeat's recovery check and Ed25519 signer give exactly the answers of the
public paths (``crypto.secp256k1.recover_public_key`` compared with the key; ``crypto.ed25519.sign``) on random
and malformed inputs, and the direct paths are the ones in use on this build."""

from __future__ import annotations

import random

import pytest

from cowboy_protocol.crypto import ed25519, secp256k1
from cowboy_protocol.transport import fast_crypto
from cowboy_protocol.transport.enums import Role
from cowboy_protocol.transport.preimages import ValidatorKey, verify_signature
from cowboy_protocol.transport.protocol_errors import SignatureError
from cowboy_protocol.transport.pubkeys import PubKey

N = secp256k1.N


def _public_answer(digest: bytes, sig: bytes, key: bytes) -> bool:
    try:
        point = secp256k1.recover_public_key(digest, sig)
    except secp256k1.InvalidSignature:
        return False
    return bytes([2 | (point[64] & 1)]) + point[1:33] == key


def _mutations(rng: random.Random, digest: bytes, sig: bytes) -> list[tuple[bytes, bytes]]:
    s = int.from_bytes(sig[32:64], "big")
    flip = bytearray(sig)
    flip[rng.randrange(64)] ^= 1 << rng.randrange(8)
    return [(digest, sig), (digest, sig[:64] + bytes([sig[64] ^ 1])),
            (digest, sig[:64] + bytes([rng.randrange(2, 256)])),
            (digest, sig[:32] + (N - s).to_bytes(32, "big") + sig[64:]),
            (digest, sig[:32] + (N - s).to_bytes(32, "big") + bytes([sig[64] ^ 1])),  # high-s twin: same key
            (digest, bytes(32) + sig[32:]), (digest, sig[:32] + bytes(32) + sig[64:]),
            (digest, N.to_bytes(32, "big") + sig[32:]), (digest, (N + 1).to_bytes(32, "big") + sig[32:]),
            (digest, sig[:32] + (N // 2 + 1).to_bytes(32, "big") + sig[64:]),  # just above n/2
            (digest, sig[:32] + (N // 2).to_bytes(32, "big") + sig[64:]),  # n/2 itself: allowed, other key
            (digest, bytes(flip)), (bytes(rng.randbytes(32)), sig), (digest[:31], sig), (digest, sig[:64]),
            (digest, sig + b"\x00"), (digest, b"\xff" * 65)]


def test_recovery_check_matches_the_public_path() -> None:
    rng = random.Random(11)
    assert fast_crypto.recovers_to is not fast_crypto._recovers_to_public  # the direct path passed its self-test
    checked = accepted = 0
    for _ in range(60):
        sk = rng.randbytes(32)
        key = secp256k1.private_key_to_public_key(sk, compressed=True)
        other = secp256k1.private_key_to_public_key(rng.randbytes(32), compressed=True)
        digest = rng.randbytes(32)
        for d, s in _mutations(rng, digest, secp256k1.sign_recoverable(sk, digest)):
            for k in (key, other):
                got = fast_crypto.recovers_to(d, s, k)
                assert got == _public_answer(d, s, k), (d.hex(), s.hex(), k.hex())
                checked += 1
                accepted += got
    assert accepted == 60 and checked == 60 * 17 * 2  # exactly the untouched signature under its own key


def test_ed25519_signer_is_byte_identical() -> None:
    rng = random.Random(5)
    for _ in range(20):
        seed = rng.randbytes(32)
        sign = fast_crypto.ed25519_signer(seed)
        assert getattr(sign, "__name__", "") == "sign_fast"  # the direct path passed its probe
        for m in (b"", rng.randbytes(32), rng.randbytes(rng.randrange(1, 300))):
            assert sign(m) == ed25519.sign(seed, m)
            assert ValidatorKey(seed).sign(m) == ed25519.sign(seed, m)


def test_ed25519_signer_refuses_a_bad_seed() -> None:
    with pytest.raises(ValueError):
        fast_crypto.ed25519_signer(b"\x01" * 31)


def test_verify_signature_rejects_the_other_v() -> None:
    sk = bytes(range(3, 35))
    key = PubKey.runner(secp256k1.private_key_to_public_key(sk, compressed=True))
    digest = bytes(range(32))
    sig = secp256k1.sign_recoverable(sk, digest)
    verify_signature(Role.RUNNER, key, digest, sig)
    with pytest.raises(SignatureError):
        verify_signature(Role.RUNNER, key, digest, sig[:64] + bytes([sig[64] ^ 1]))
