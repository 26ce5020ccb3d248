"""Prints the golden bytes of the validators' TCP link (``tests/unit/p2p/test_peer_tcp.py``, ``docs/protocol.md``).

Independent of the code under test: it imports nothing of ``cowboy_node``. The X25519 keys and their shared secret
are RFC 7748 §6.1's (Alice dials, Bob listens), HKDF-SHA256 is written out from RFC 5869 with ``hmac``, and the
AEAD is ``cryptography``'s ChaCha20-Poly1305 primitive (RFC 8439). Run: ``python tests/vectors/p2p/tcp_link_golden.py``.
"""

import hashlib
import hmac
import struct

from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

A_PUB = bytes.fromhex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
B_PUB = bytes.fromhex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
SHARED = bytes.fromhex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")


def hkdf_sha256(salt: bytes, ikm: bytes, info: bytes, length: int) -> bytes:
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    okm, block = b"", b""
    for i in range(1, -(-length // 32) + 1):
        block = hmac.new(prk, block + info + bytes([i]), hashlib.sha256).digest()
        okm += block
    return okm[:length]


def record(key: bytes, number: int, rtype: int, plaintext: bytes) -> bytes:
    header = struct.pack(">IB", len(plaintext) + 16, rtype)
    return header + ChaCha20Poly1305(key).encrypt(bytes(4) + number.to_bytes(8, "big"), plaintext, header)


def main() -> None:
    okm = hkdf_sha256(b"cowboy-p2p-tcp-1", SHARED, A_PUB + B_PUB, 96)
    k_d2l, k_l2d, binding = okm[:32], okm[32:64], okm[64:]
    frame = (5).to_bytes(4, "big") + b"hello"
    print("dialer preamble   ", (b"CWBYTCP1" + A_PUB).hex())
    print("dialer->listener  ", k_d2l.hex())
    print("listener->dialer  ", k_l2d.hex())
    print("channel binding   ", binding.hex())
    print("d->l record 0 data", record(k_d2l, 0, 0, frame).hex())
    print("d->l record 1 ping", record(k_d2l, 1, 1, b"").hex())
    print("l->d record 0 pong", record(k_l2d, 0, 2, b"").hex())


if __name__ == "__main__":
    main()
