"""The state tree cut into 256 slots: what lets a snapshot chunk be verified against a state root on its own.

A *slot* is the subtree at a depth-2 nibble path of the state tree (``state/tree.py``), i.e. every key whose hash
``H(k)`` begins with one given byte. Per slot, a :class:`Slot` holds what sits at that path: nothing, one leaf, or an
internal node, with its hash. The 256 slots determine the root: :func:`root_from_slots` applies the tree's own shape
rules above depth 2 (a path with one leaf below it holds that leaf; with two or more, an internal node over the
children present). And one slot's ``(key, value)`` pairs determine that slot: :func:`slot_of_entries`.

So a snapshot's manifest lists the 256 slots; the receiver checks ``root_from_slots(manifest) == state_root`` of the
finalized header once, then checks every chunk (the entries of some slots) against those slots as it arrives — a
chunk that does not verify is refused alone, without downloading the rest.

Pure functions over their arguments (DESIGN.md §3 rule 1): nothing here reads a store.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cowboy_node.state.tree import EMPTY_ROOT, keccak256, new_hasher

SLOTS = 256
"""Subtrees at depth 2 (two nibbles = the first byte of ``H(k)``)."""
EMPTY, LEAF, INTERNAL = 0, 1, 2
"""What sits at a path: nothing, one leaf, an internal node (two or more leaves below it)."""
_LEAF_TAG = b"\x00"
_INTERNAL_TAG = b"\x01"


@dataclass(frozen=True, slots=True)
class Slot:
    """What sits at one depth-2 path of the state tree."""

    kind: int
    """:data:`EMPTY`, :data:`LEAF` or :data:`INTERNAL`."""
    digest: bytes
    """The leaf's or internal node's hash (32 bytes; empty for :data:`EMPTY`)."""


EMPTY_SLOT = Slot(EMPTY, b"")


def slot_index(key_hash: bytes) -> int:
    """The slot of a key whose hash is ``key_hash``: its first byte."""
    return key_hash[0]


def leaf_hash(key_hash: bytes, value: bytes) -> bytes:
    """``H(0x00 ‖ H(k) ‖ H(v))``, the tree's leaf hash."""
    return keccak256(_LEAF_TAG + key_hash + keccak256(value))


def _nibble(kh: bytes, depth: int) -> int:
    b = kh[depth >> 1]
    return b >> 4 if depth % 2 == 0 else b & 15


def _combine(children: Sequence[tuple[int, bytes]]) -> tuple[int, bytes]:
    """The node over 16 children (by nibble), each ``(kind, digest)``, under the tree's shape rules."""
    present = [(n, c) for n, c in enumerate(children) if c[0] != EMPTY]
    if not present:
        return EMPTY, b""
    if len(present) == 1 and present[0][1][0] == LEAF:
        return present[0][1]  # one leaf below this path: the leaf sits here
    bitmap = 0
    for n, _ in present:
        bitmap |= 1 << n
    return INTERNAL, keccak256(_INTERNAL_TAG + bitmap.to_bytes(2, "big") + b"".join(c[1] for _, c in present))


def _subtree(depth: int, leaves: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
    """What sits at a path of ``depth`` nibbles above ``leaves`` (``(key hash, leaf hash)``, all under that path)."""
    if not leaves:
        return EMPTY, b""
    if len(leaves) == 1:
        return LEAF, leaves[0][1]
    groups: list[list[tuple[bytes, bytes]]] = [[] for _ in range(16)]
    for item in leaves:
        groups[_nibble(item[0], depth)].append(item)
    # Two or more leaves: an internal node, even over a single internal child (no extension nodes).
    return _combine([_subtree(depth + 1, g) for g in groups])


def slot_of_entries(entries: Iterable[tuple[bytes, bytes]]) -> Slot:
    """The slot holding exactly these ``(key, value)`` state entries (all of one slot; the caller checks that)."""
    h = new_hasher()
    leaves = sorted((kh, h(_LEAF_TAG + kh + h(v))) for kh, v in ((h(k), v) for k, v in entries))
    return slot_of_leaves(leaves)


def slot_of_leaves(leaves: list[tuple[bytes, bytes]]) -> Slot:
    """The slot holding exactly these leaves, ``(key hash, leaf hash)`` in ascending key-hash order."""
    kind, digest = _subtree(2, leaves)
    return Slot(kind, digest)


def root_from_slots(slots: Sequence[Slot]) -> bytes:
    """The state root of a tree whose 256 depth-2 slots are ``slots``."""
    if len(slots) != SLOTS:
        raise ValueError(f"expected {SLOTS} slots, got {len(slots)}")
    level1 = [_combine([(s.kind, s.digest) for s in slots[16 * i:16 * i + 16]]) for i in range(16)]
    kind, digest = _combine(level1)
    return EMPTY_ROOT if kind == EMPTY else digest


__all__ = ["EMPTY", "EMPTY_SLOT", "INTERNAL", "LEAF", "SLOTS", "Slot", "leaf_hash", "root_from_slots",
           "slot_index", "slot_of_entries", "slot_of_leaves"]
