"""The round beacon: a threshold BLS signature over the consensus round (its message: :mod:`cowboy_node.types.seed`).

With one validator the threshold is 1 and the beacon is that validator's share signature (Lagrange recovery
of one share is the identity).
"""

from __future__ import annotations

from cowboy_node.crypto import bls
from cowboy_node.types.block import Round
from cowboy_node.types.seed import round_message


def sign_beacon(share_secret: int, r: Round) -> bytes:
    """This validator's beacon for round ``r`` (threshold 1: the full signature)."""
    return bls.sign(share_secret, round_message(r))


def verify_beacon(group_public_key: bytes, r: Round, beacon: bytes) -> bool:
    """True iff ``beacon`` is the group signature over round ``r``."""
    return bls.verify(group_public_key, round_message(r), beacon)
