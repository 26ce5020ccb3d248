"""Verified reads: check a node's answer without trusting the node, against the genesis group key only.

A verified read (``GET /state/proof``, ``GET /account/{a}?proof=true``, ``GET /actor/{a}/state?key=…&proof=true``)
carries, beside the value and its state proof, the canonical bytes of the head header whose ``state_root`` the
proof is against and the encoded finalization certificate of that header (docs/api.md, "Verified reads"). The
chain finalizes with one threshold BLS signature under the group key fixed in genesis, so checking a read is:

1. the certificate decodes as a ``Finalization`` whose proposal payload is the header's digest
   (``keccak256(b"cowboy-block-v1:" ‖ header bytes)``) and whose round is the header's;
2. its signature verifies over ``b"cowboy-simplex-v1:finalize:" ‖ CBOR(proposal)`` under the group key
   (one pairing check, MinSig: signature in G1, key in G2);
3. the state proof walks from the header's ``state_root`` to the key and the claimed value (or its absence).

No validator set is tracked. This module is the client side and imports nothing of the node: it re-states the
three encodings above and the tree's hashing rules (``cowboy_node/state/tree.py``, module docstring), and
``tests/unit/rpc/test_verified_reads.py`` checks it against the node's own code.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from py_arkworks_bls12381 import GT, G1Point, G2Point

from cowboy_protocol.codec import CodecError, decode, encode
from cowboy_protocol.crypto.keccak import keccak256

__all__ = [
    "ACCOUNT_PREFIX",
    "BadCertificate",
    "BadProof",
    "CertifiedHeader",
    "Uncertified",
    "ValueMismatch",
    "VerificationError",
    "actor_state_key",
    "decode_account",
    "verify_certified_header",
    "verify_proof",
    "verify_read",
]

BLOCK_DIGEST_DOMAIN = b"cowboy-block-v1:"
FINALIZE_DOMAIN = b"cowboy-simplex-v1:finalize:"
DST = b"BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_"
ACCOUNT_PREFIX = b"acct/"
"""State key of an account: ``acct/ ‖ address``."""
_FINALIZATION_KIND = 6
_EMPTY_ROOT = keccak256(b"cowboy-state-empty-v1")
_MAX_DEPTH = 64
_G2_GEN = G2Point()


class VerificationError(Exception):
    """A read that does not verify; ``code`` is stable (``bad_certificate``, ``bad_proof``, ``value_mismatch``,
    ``uncertified``)."""

    code = "unverified"

    def __init__(self, message: str) -> None:
        super().__init__(f"{self.code}: {message}")
        self.message = message


class BadCertificate(VerificationError):
    """The certificate does not finalize the header under the group key (forged, other block, undecodable)."""

    code = "bad_certificate"


class BadProof(VerificationError):
    """The state proof does not lead from the certified state root to the claimed key and value."""

    code = "bad_proof"


class ValueMismatch(VerificationError):
    """The answer's value (or key) is not the one its proof proves."""

    code = "value_mismatch"


class Uncertified(VerificationError):
    """The answer carries no certificate (its head is final only through a descendant not committed yet:
    asking again shortly gets one)."""

    code = "uncertified"


@dataclass(frozen=True, slots=True)
class CertifiedHeader:
    """A header checked against its finalization certificate."""

    height: int
    """Block height."""
    digest: bytes
    """The header digest (block hash) the certificate finalizes."""
    state_root: bytes
    """The state root every proof of the read is checked against."""


@lru_cache(maxsize=16)
def _group_point(group_key: bytes) -> G2Point | None:
    """The decoded, checked group key (a client checks against one key: decode and subgroup-check it once)."""
    if len(group_key) != 96 or group_key[0] & 0xC0 != 0x80:
        return None
    try:
        pk = G2Point.from_compressed_bytes(group_key)
    except Exception:  # off the curve
        return None
    if not pk.is_in_subgroup() or bytes(pk.to_compressed_bytes()) != group_key:
        return None
    return pk


def _bls_verify(group_key: bytes, message: bytes, signature: bytes) -> bool:
    """``e(sig, G2) == e(H(m), pk)`` with strict decoding (compressed, canonical, in the subgroup, not identity)."""
    pk = _group_point(bytes(group_key))
    if pk is None:
        return False
    try:
        if len(signature) != 48 or signature[0] & 0xC0 != 0x80:
            return False
        sig = G1Point.from_compressed_bytes(bytes(signature))
        if not sig.is_in_subgroup() or bytes(sig.to_compressed_bytes()) != bytes(signature):
            return False
        h = G1Point.hash_to_curve(bytes(message), DST)
        return bool(GT.pairing_check([sig, -h], [_G2_GEN, pk]))
    except Exception:  # arkworks raises on points off the curve; any such input is simply not a signature
        return False


def _unhex(text: object, what: str, error: type[VerificationError]) -> bytes:
    if not isinstance(text, str) or not text.startswith("0x"):
        raise error(f"{what}: expected 0x-hex")
    try:
        return bytes.fromhex(text[2:])
    except ValueError:
        raise error(f"{what}: invalid hex") from None


def verify_certified_header(header_bytes: bytes, certificate_bytes: bytes, group_key: bytes) -> CertifiedHeader:
    """Check that ``certificate_bytes`` finalizes the header ``header_bytes`` under ``group_key``; raises
    :class:`BadCertificate`."""
    try:
        header = decode(header_bytes)
        cert = decode(certificate_bytes)
    except CodecError as e:
        raise BadCertificate(f"header or certificate is not canonical CBOR: {e}") from None
    height = header.get(1) if isinstance(header, dict) else None
    state_root = header.get(7) if isinstance(header, dict) else None
    if not isinstance(header, dict) or not isinstance(height, int) or not isinstance(state_root, bytes) \
            or len(state_root) != 32:
        raise BadCertificate("header is not a block header map")
    if not isinstance(cert, dict) or cert.get(0) != _FINALIZATION_KIND or set(cert) != {0, 1, 2, 3}:
        raise BadCertificate("certificate is not a finalization")
    proposal, signature = cert[1], cert[2]
    if not isinstance(proposal, dict) or not isinstance(signature, bytes):
        raise BadCertificate("certificate is not a finalization")
    digest = keccak256(BLOCK_DIGEST_DOMAIN + bytes(header_bytes))
    if proposal.get(3) != digest:
        raise BadCertificate("certificate finalizes another block")
    if proposal.get(0) != header.get(3):
        raise BadCertificate("certificate is of another round than the header")
    if not _bls_verify(group_key, FINALIZE_DOMAIN + encode(proposal), signature):
        raise BadCertificate("signature does not verify under the genesis group key")
    return CertifiedHeader(height=height, digest=digest, state_root=bytes(state_root))


def _nibble(kh: bytes, depth: int) -> int:
    b = kh[depth >> 1]
    return b >> 4 if depth % 2 == 0 else b & 15


def verify_proof(root: bytes, proof: dict[str, Any]) -> tuple[bytes, bytes | None]:
    """Check the JSON state proof ``proof`` against ``root``; returns ``(key, value or None)``; raises
    :class:`BadProof`."""
    if not isinstance(proof, dict):
        raise BadProof("proof: expected an object")
    key = _unhex(proof.get("key"), "proof.key", BadProof)
    value = None if proof.get("value") is None else _unhex(proof.get("value"), "proof.value", BadProof)
    steps, leaf = proof.get("steps"), proof.get("leaf")
    if not isinstance(steps, list) or len(steps) > _MAX_DEPTH:
        raise BadProof("proof.steps: expected at most 64 steps")
    kh = keccak256(key)
    current: bytes | None
    if leaf is None:
        if value is not None:
            raise BadProof("an inclusion proof needs a leaf")
        if not steps:
            if root != _EMPTY_ROOT:
                raise BadProof("an empty proof proves absence only in the empty tree")
            return key, None
        current = None
    else:
        if not isinstance(leaf, dict):
            raise BadProof("proof.leaf: expected an object")
        lk = _unhex(leaf.get("key_hash"), "leaf.key_hash", BadProof)
        lv = _unhex(leaf.get("value_hash"), "leaf.value_hash", BadProof)
        if len(lk) != 32 or len(lv) != 32:
            raise BadProof("leaf hashes must be 32 bytes")
        if value is not None and (lk != kh or lv != keccak256(value)):
            raise BadProof("the leaf is not the key's value")
        if value is None and lk == kh:
            raise BadProof("an exclusion proof ends at the key's own leaf")
        if any(_nibble(lk, d) != _nibble(kh, d) for d in range(len(steps))):
            raise BadProof("the leaf is off the key's path")
        current = keccak256(b"\x00" + lk + lv)
    for d in range(len(steps) - 1, -1, -1):
        step = steps[d]
        if not isinstance(step, dict):
            raise BadProof(f"steps[{d}]: expected an object")
        bitmap, sibs = step.get("bitmap"), step.get("siblings")
        if isinstance(bitmap, bool) or not isinstance(bitmap, int) or not 0 < bitmap <= 0xFFFF \
                or not isinstance(sibs, list):
            raise BadProof(f"steps[{d}]: bad bitmap or siblings")
        n = _nibble(kh, d)
        has = bool(bitmap & (1 << n))
        if has != (current is not None) or len(sibs) != bitmap.bit_count() - has:
            raise BadProof(f"steps[{d}]: the node does not fit the path")
        it = iter(_unhex(s, f"steps[{d}].siblings", BadProof) for s in sibs)
        parts = [b"\x01", bitmap.to_bytes(2, "big")]
        for c in range(16):
            if bitmap & (1 << c):
                h = current if c == n else next(it)
                if h is None or len(h) != 32:
                    raise BadProof(f"steps[{d}]: a child hash is not 32 bytes")
                parts.append(h)
        current = keccak256(b"".join(parts))
    if current != root:
        raise BadProof("the proof does not lead to the certified state root")
    return key, value


def verify_read(doc: dict[str, Any], group_key: bytes, *, key: bytes) -> tuple[CertifiedHeader, bytes | None]:
    """Verify a verified-read answer ``doc`` (``header``, ``certificate``, ``proof``) for the raw state ``key``:
    returns the certified header and the proven value (None: the key is absent at that head). Raises a
    :class:`VerificationError` subclass."""
    if doc.get("certificate") is None:
        raise Uncertified("the answer carries no finalization certificate")
    header = verify_certified_header(_unhex(doc.get("header"), "header", BadCertificate),
                                     _unhex(doc.get("certificate"), "certificate", BadCertificate), group_key)
    proof = doc.get("proof")
    if not isinstance(proof, dict):
        raise BadProof("the answer carries no proof")
    proven_key, value = verify_proof(header.state_root, proof)
    if proven_key != key:
        raise ValueMismatch("the proof is for another key")
    return header, value


def actor_state_key(actor: bytes, key: bytes) -> bytes:
    """State key of an actor's storage entry: ``actor/ ‖ address ‖ /kv/ ‖ key``."""
    return b"actor/" + bytes(actor) + b"/kv/" + bytes(key)


def decode_account(raw: bytes | None) -> tuple[int, int]:
    """``(balance, nonce)`` of a stored account (``{0: u128 as 16 bytes, 1: nonce}``); absent reads as zero."""
    if raw is None:
        return 0, 0
    try:
        m = decode(raw)
    except CodecError:
        raise ValueMismatch("the proven account value does not decode") from None
    if not isinstance(m, dict) or set(m) != {0, 1} or not isinstance(m[0], bytes) or len(m[0]) != 16 \
            or isinstance(m[1], bool) or not isinstance(m[1], int):
        raise ValueMismatch("the proven account value is not an account")
    return int.from_bytes(m[0], "big"), m[1]
