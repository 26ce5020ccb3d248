"""Leader election (commonware ``elector.rs``): round-robin, or random from the previous round's seed.

Round-robin: ``(epoch + view) mod n``. Random: view 1 of an epoch is round-robin; view ``v > 1`` takes
``SHA-256("cowboy-simplex-leader-v1:" ‖ seed(v − 1)) mod n``. The seed of a round is the unique group
signature over it, identical in its notarization, nullification and finalization, so every honest validator
elects the same leader whichever certificate of ``v − 1`` it entered ``v`` with.
"""

from __future__ import annotations

import hashlib
from enum import Enum

from cowboy_node.types.block import Round

__all__ = ["Election", "elect"]

LEADER_DOMAIN = b"cowboy-simplex-leader-v1:"


class Election(Enum):
    ROUND_ROBIN = "round_robin"
    RANDOM = "random"


def elect(election: Election, round_: Round, n: int, previous_seed: bytes | None) -> int | None:
    """Leader index of ``round_``; None when the random elector still lacks the previous round's seed."""
    if election is Election.ROUND_ROBIN or round_.view <= 1:
        return (round_.epoch + round_.view) % n
    if previous_seed is None:
        return None
    return int.from_bytes(hashlib.sha256(LEADER_DOMAIN + previous_seed).digest(), "big") % n
