"""``candidates_snapshot_root`` (CIP-11 §9.2): a binary Merkle root over the block-T candidate snapshot.

Leaves follow the candidate order after the filter chain (address ascending). Leaf (project choice: the
field list is CIP-11's, the byte layout was lost from the seed text)::

    keccak256("cowboy-candidates-leaf-v1" ‖ index_be4 ‖ address20 ‖ effective_stake_be16
              ‖ reputation_x1e9_be8 ‖ base_weight_be16)

``index`` is the position in the ordered snapshot (not the registry index). Tree, exactly per §9.2: empty
root ``keccak256("cowboy-candidates-empty-v1")``; one leaf ⇒ the root is that leaf; inner node
``keccak256("cowboy-candidates-inner-v1" ‖ left ‖ right)``; an odd level duplicates its last node.
"""

from __future__ import annotations

from collections.abc import Sequence

from cowboy_node.execution.jobs.weights import base_weights, effective_stake
from cowboy_node.types.merkle import merkle_root
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.fields import ADDRESS_LEN, U32_MAX, U64_MAX, U128_MAX
from cowboy_protocol.types.params import RunnerConfig
from cowboy_protocol.types.runner import RunnerRecord

LEAF_DOMAIN = b"cowboy-candidates-leaf-v1"
"""Leaf domain (project choice)."""
EMPTY_DOMAIN = b"cowboy-candidates-empty-v1"
"""Root of an empty snapshot is keccak256 of this."""
INNER_DOMAIN = b"cowboy-candidates-inner-v1"
"""Inner node domain."""


def candidate_leaf(index: int, address: bytes, effective_stake: int, reputation_x1e9: int, base_weight: int) -> bytes:
    """The 32-byte leaf of the candidate at ``index`` of the ordered snapshot."""
    if len(address) != ADDRESS_LEN:
        raise ValueError("address must be 20 bytes")
    if not 0 <= index <= U32_MAX or not 0 <= reputation_x1e9 <= U64_MAX:
        raise ValueError("index or reputation out of range")
    if not 0 <= effective_stake <= U128_MAX or not 0 <= base_weight <= U128_MAX:
        raise ValueError("stake or weight out of u128 range")
    return keccak256(LEAF_DOMAIN + index.to_bytes(4, "big") + address + effective_stake.to_bytes(16, "big")
                     + reputation_x1e9.to_bytes(8, "big") + base_weight.to_bytes(16, "big"))


def root_of_leaves(leaves: Sequence[bytes]) -> bytes:
    """Root of the candidates tree over ``leaves`` in order."""
    return merkle_root(leaves, empty_domain=EMPTY_DOMAIN, inner_domain=INNER_DOMAIN)


SnapshotRow = tuple[bytes, int, int, int]
"""(address, effective_stake, reputation_x1e9, base_weight) of one candidate of the ordered snapshot."""


def root_of_rows(rows: Sequence[SnapshotRow]) -> bytes:
    """Root over snapshot rows in their stored order (row ``k`` is leaf ``k``)."""
    return root_of_leaves([candidate_leaf(k, a, st, rep, w) for k, (a, st, rep, w) in enumerate(rows)])


def candidates_snapshot_root(candidates: Sequence[RunnerRecord], cfg: RunnerConfig,
                             weights: Sequence[int] | None = None) -> bytes:
    """Root over the ordered candidates; ``weights`` (paired with them) are computed from ``cfg`` if omitted."""
    ws = base_weights(candidates, cfg) if weights is None else weights
    if len(ws) != len(candidates):
        raise ValueError("one weight per candidate required")
    return root_of_leaves([candidate_leaf(k, r.address, effective_stake(r), r.reputation_x1e9, w)
                           for k, (r, w) in enumerate(zip(candidates, ws, strict=True))])
