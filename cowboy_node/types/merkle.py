"""Binary Merkle roots over ordered lists of 32-byte leaves (tx and receipt roots).

Same construction as the CIP-11 §9.2 candidates tree, with its own domains:
empty root = keccak256(empty_domain); one leaf -> that leaf; inner node =
keccak256(inner_domain ‖ left ‖ right); an odd level duplicates its last node.
"""

from __future__ import annotations

from collections.abc import Sequence

from cowboy_protocol.crypto.keccak import keccak256


def merkle_root(leaves: Sequence[bytes], *, empty_domain: bytes, inner_domain: bytes) -> bytes:
    """Root of the binary tree over ``leaves`` in the given order."""
    if not leaves:
        return keccak256(empty_domain)
    level = list(leaves)
    while len(level) > 1:
        if len(level) % 2:
            level.append(level[-1])
        level = [keccak256(inner_domain + level[i] + level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def tx_root(tx_hashes: Sequence[bytes]) -> bytes:
    """Root over the block's transaction hashes in block order."""
    return merkle_root(tx_hashes, empty_domain=b"cowboy-txs-empty-v1", inner_domain=b"cowboy-txs-inner-v1")


def receipts_root(receipt_hashes: Sequence[bytes]) -> bytes:
    """Root over the block's receipt hashes in block order."""
    return merkle_root(receipt_hashes, empty_domain=b"cowboy-receipts-empty-v1",
                       inner_domain=b"cowboy-receipts-inner-v1")
