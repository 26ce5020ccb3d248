"""The bytes a round's seed (beacon) signs, and CIP-11 §9.2 ``beacon_hash_v1`` of a seed signature.

``round_message(r) = b"cowboy-seed-v1:" ‖ epoch_be8 ‖ view_be8``; ``beacon_hash_v1`` (the 32-byte canonical
seed bytes used by selection) is ``keccak256(b"cowboy-beacon-v1:" ‖ epoch_be8 ‖ view_be8 ‖ 0x01 ‖ 0x0030 ‖
sig48)``. Plain encodings (no keys): genesis checks its beacon with them, consensus signs and verifies.
"""

from __future__ import annotations

import struct

from cowboy_node.types.block import Round
from cowboy_protocol.crypto.keccak import keccak256

SEED_DOMAIN = b"cowboy-seed-v1:"
"""Domain of the message a round's seed signs."""
BEACON_HASH_DOMAIN = b"cowboy-beacon-v1:"
"""Domain of ``beacon_hash_v1``."""
SCHEME_MINSIG = 0x01
"""CIP-11 §9.2 scheme_id of BLS12-381 MinSig (48-byte signatures)."""
_BE8x2 = struct.Struct(">QQ")


def round_message(r: Round) -> bytes:
    """Bytes signed by the beacon of round ``r``."""
    return SEED_DOMAIN + _BE8x2.pack(r.epoch, r.view)


def beacon_hash_v1(r: Round, signature: bytes) -> bytes:
    """CIP-11 §9.2 canonical_seed_bytes of a MinSig seed."""
    return keccak256(BEACON_HASH_DOMAIN + _BE8x2.pack(r.epoch, r.view) + bytes([SCHEME_MINSIG])
                     + len(signature).to_bytes(2, "big") + signature)
