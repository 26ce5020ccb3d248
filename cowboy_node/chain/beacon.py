"""The round beacon: a threshold BLS signature over the consensus round.

``round_message(r) = b"cowboy-seed-v1:" ‖ epoch_be8 ‖ view_be8``. With one
validator the threshold is 1 and the beacon is that validator's share
signature (Lagrange recovery of one share is the identity). CIP-11 §9.2
``beacon_hash_v1`` (the 32-byte canonical seed bytes used by selection) is
``keccak256(b"cowboy-beacon-v1:" ‖ epoch_be8 ‖ view_be8 ‖ 0x01 ‖ 0x0030 ‖ sig48)``.
"""

from __future__ import annotations

import struct

from cowboy_node.crypto import bls
from cowboy_node.crypto.keccak import keccak256
from cowboy_node.types.block import Round

SEED_DOMAIN = b"cowboy-seed-v1:"
BEACON_HASH_DOMAIN = b"cowboy-beacon-v1:"
SCHEME_MINSIG = 0x01
_BE8x2 = struct.Struct(">QQ")


def round_message(r: Round) -> bytes:
    """Bytes signed by the beacon of round ``r``."""
    return SEED_DOMAIN + _BE8x2.pack(r.epoch, r.view)


def sign_beacon(share_secret: int, r: Round) -> bytes:
    """This validator's beacon for round ``r`` (threshold 1: the full signature)."""
    return bls.sign(share_secret, round_message(r))


def verify_beacon(group_public_key: bytes, r: Round, beacon: bytes) -> bool:
    """True iff ``beacon`` is the group signature over round ``r``."""
    return bls.verify(group_public_key, round_message(r), beacon)


def beacon_hash_v1(r: Round, signature: bytes) -> bytes:
    """CIP-11 §9.2 canonical_seed_bytes of a MinSig seed."""
    return keccak256(BEACON_HASH_DOMAIN + _BE8x2.pack(r.epoch, r.view) + bytes([SCHEME_MINSIG])
                     + len(signature).to_bytes(2, "big") + signature)
