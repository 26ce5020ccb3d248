"""The two signature operations of every heartbeat, called straight through the libraries' cffi bindings.

A HeartbeatPing's check is a secp256k1 public-key recovery compared with the connection's runner key, and the
HeartbeatPong is an Ed25519 signature by the validator's key. Through coincurve's and PyNaCl's public objects
each carries a few µs of Python set-up (key and signature objects, format conversions, a combined-mode
``SignedMessage``) on top of the C call; here the same C functions are called with the same inputs:

* :func:`recovers_to` — ``secp256k1_ecdsa_recover`` of ``r ‖ s ‖ v`` (after the range, low-s and ``v`` checks of
  :func:`cowboy_protocol.crypto.secp256k1.recover_public_key`), the recovered point serialized compressed and
  compared with the expected 33-byte key;
* :func:`ed25519_signer` — libsodium's ``crypto_sign`` over a key pair derived once from the seed, the 64-byte
  signature cut from its output (what ``nacl.signing.SigningKey.sign(...).signature`` returns).

Both reach into bindings that are not the libraries' documented API, so each is used only after a self-test at
import (or at key preparation) against the public path gave identical answers; otherwise the public path is
used. No answer, and no signature byte, differs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cowboy_protocol.crypto import ed25519, secp256k1

__all__ = ["ed25519_signer", "recovers_to"]


def _recovers_to_public(digest: bytes, signature: bytes, key: bytes) -> bool:
    try:
        point = secp256k1.recover_public_key(digest, signature)
    except secp256k1.InvalidSignature:
        return False
    return bytes([2 | (point[64] & 1)]) + point[1:33] == key


def _make_recovers_to() -> Callable[[bytes, bytes, bytes], bool] | None:
    try:
        from coincurve._libsecp256k1 import ffi, lib
        from coincurve.context import GLOBAL_CONTEXT

        ctx: Any = GLOBAL_CONTEXT.ctx
        parse: Any = lib.secp256k1_ecdsa_recoverable_signature_parse_compact
        recover: Any = lib.secp256k1_ecdsa_recover
        serialize: Any = lib.secp256k1_ec_pubkey_serialize
        compressed: int = lib.SECP256K1_EC_COMPRESSED
    except (ImportError, AttributeError):
        return None
    new, buffer = ffi.new, ffi.buffer
    n_bytes = secp256k1.N.to_bytes(32, "big")
    half_n = secp256k1.HALF_N.to_bytes(32, "big")
    zero = bytes(32)

    def recovers_to(digest: bytes, signature: bytes, key: bytes) -> bool:
        if type(signature) is not bytes:
            signature = bytes(signature)
        if len(digest) != 32 or len(signature) != 65 or signature[64] > 1:
            return False
        # Equal-length big-endian byte strings compare as the numbers they encode.
        r, s = signature[:32], signature[32:64]
        if r == zero or r >= n_bytes or s == zero or s > half_n:
            return False
        # Fresh buffers per call: cffi releases the GIL inside C calls, so shared ones could race.
        sig = new("secp256k1_ecdsa_recoverable_signature *")
        if not parse(ctx, sig, signature, signature[64]):
            return False
        point = new("secp256k1_pubkey *")
        if not recover(ctx, point, sig, bytes(digest)):
            return False
        out = new("unsigned char[33]")
        serialize(ctx, out, new("size_t *", 33), point, compressed)
        return buffer(out, 33)[:] == key  # type: ignore[no-any-return]

    return recovers_to


def _self_test(fast: Callable[[bytes, bytes, bytes], bool]) -> bool:
    """Fast and public paths agree on valid, wrong-key, wrong-v, high-s and out-of-range signatures."""
    sk = bytes(range(7, 39))
    key = secp256k1.private_key_to_public_key(sk, compressed=True)
    other = secp256k1.private_key_to_public_key(bytes(range(8, 40)), compressed=True)
    n = secp256k1.N
    cases: list[tuple[bytes, bytes, bytes]] = []
    for i in range(8):
        digest = bytes([i]) * 32
        sig = secp256k1.sign_recoverable(sk, digest)
        s = int.from_bytes(sig[32:64], "big")
        cases += [(digest, sig, key), (digest, sig, other), (digest, sig[:64] + bytes([sig[64] ^ 1]), key),
                  (digest, sig[:64] + b"\x02", key), (digest, sig[:32] + (n - s).to_bytes(32, "big") + sig[64:], key),
                  (digest, bytes(32) + sig[32:], key), (digest, n.to_bytes(32, "big") + sig[32:], key),
                  (digest, sig[:32] + bytes(32) + sig[64:], key), (digest[:31], sig, key), (digest, sig[:64], key)]
    try:
        return all(fast(d, s, k) == _recovers_to_public(d, s, k) for d, s, k in cases) and fast(*cases[0])
    except Exception:
        return False


_fast_recover = _make_recovers_to()
recovers_to: Callable[[bytes, bytes, bytes], bool] = (
    _fast_recover if _fast_recover is not None and _self_test(_fast_recover) else _recovers_to_public)
"""``recovers_to(digest, signature, key)``: True iff the 65-byte recoverable ``signature`` over the 32-byte
``digest`` passes the checks of :func:`cowboy_protocol.crypto.secp256k1.recover_public_key` and recovers to the
33-byte compressed ``key``; never raises."""


def ed25519_signer(seed: bytes) -> Callable[[bytes], bytes]:
    """A function signing messages with the Ed25519 key of ``seed``: byte-identical to
    :meth:`cowboy_protocol.crypto.ed25519.PreparedSigner.sign` (checked on a probe; that is returned otherwise)."""
    prepared = ed25519.PreparedSigner(seed)  # validates the seed length
    try:
        import nacl._sodium
        from nacl.bindings import crypto_sign_seed_keypair

        ffi: Any = nacl._sodium.ffi
        sign: Any = nacl._sodium.lib.crypto_sign
        _, secret = crypto_sign_seed_keypair(bytes(seed))
    except (ImportError, AttributeError):
        return prepared.sign
    new, buffer, null = ffi.new, ffi.buffer, ffi.NULL

    def sign_fast(message: bytes) -> bytes:
        if type(message) is not bytes:
            message = bytes(message)
        out = new("unsigned char[]", 64 + len(message))  # combined mode: signature ‖ message
        if sign(out, null, message, len(message), secret) != 0:
            raise ValueError("crypto_sign failed")
        return buffer(out, 64)[:]  # type: ignore[no-any-return]

    try:
        probes = (b"", bytes(32), bytes(range(32)), b"x" * 100)
        if all(sign_fast(m) == prepared.sign(m) for m in probes):
            return sign_fast
    except Exception:  # any failure of the direct path: the public one
        pass
    return prepared.sign
