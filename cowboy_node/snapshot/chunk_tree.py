"""A snapshot chunk verified by building its part of the state tree once (issue 34 §1, join time).

A chunk holds every state entry of slots ``first_slot..last_slot`` (``state/slots.py``): the subtrees of the state
tree below those depth-2 paths depend on those entries alone. So the receiver builds them exactly as the node's own
tree would store them (``StateTree.prepare`` over a tree holding only this chunk's entries: the records at depth 2
and below, and the leaf records, are the full tree's), compares each slot's hash with the verified manifest's
(so with the finalized state root), and writes what it built. Hashing each key, value and node once serves both the
verification and the install; before, the chunk was checked (per-slot subtree rebuilt in ``slots.py``) and then
inserted into the tree (everything hashed again).

The records above the slots (the root and the 16 depth-1 nodes) are built last from the 256 slots
(:func:`top_ops`), following the tree's storage layout (``state/tree.py`` docstring, "Storage"). A pure function
of its arguments: it can run in a worker process.
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_node.chain.blockstore import STATE_PREFIX, TREE_PREFIX
from cowboy_node.snapshot.manifest import Manifest, SnapshotError, decode_chunk
from cowboy_node.snapshot.verify import check_digest
from cowboy_node.state.derived import is_derived
from cowboy_node.state.kv_store import WriteOp
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.slots import EMPTY, INTERNAL, LEAF, SLOTS, Slot
from cowboy_node.state.tree import EMPTY_ROOT, StateTree, keccak256, new_hasher

_LEAF_TAG = b"\x00"
_INTERNAL_TAG = b"\x01"
_SKIP = len(TREE_PREFIX)
_DEPTH1 = TREE_PREFIX + b"\x01"
_DEPTH2 = TREE_PREFIX + b"\x02"
_ROOT_PATH = TREE_PREFIX + b"\x00"
_ROOT_POINTER = TREE_PREFIX + b"\xff"


@dataclass(frozen=True, slots=True)
class ChunkWrites:
    """A chunk that verified, as the store writes that install it."""

    index: int
    """The chunk's index in the manifest."""
    entries: int
    """State entries it holds."""
    ops: list[WriteOp]
    """Its state entries, and the tree records of its slots (nodes at depth ≥ 2 and leaf records)."""
    leaf_keys: dict[int, bytes]
    """Key hash of the single leaf of each of its slots that holds one leaf (the record above names it)."""


def verify_and_build(m: Manifest, index: int, raw: bytes) -> ChunkWrites:
    """Check chunk ``index`` of the verified manifest ``m`` and build its writes; :class:`SnapshotError`
    (``chunk_digest``, ``bad_chunk``, ``slot_mismatch``: the codes of ``snapshot/verify.py``)."""
    check_digest(m, index, raw)
    info = m.chunks[index]
    entries = decode_chunk(raw)
    h = new_hasher()
    counts = [0] * SLOTS
    single: dict[int, tuple[bytes, bytes]] = {}
    last_kh = b""
    for k, v in entries:
        if is_derived(k):  # never committed, so never in a snapshot: the installer rebuilds these keys
            raise SnapshotError("bad_chunk", f"chunk {index}: a derived key {k[:8].hex()}… (state/derived.py)")
        kh = h(k)
        if kh <= last_kh:
            raise SnapshotError("bad_chunk", f"chunk {index}: entries not in ascending key-hash order")
        last_kh = kh
        s = kh[0]
        if not info.first_slot <= s <= info.last_slot:
            raise SnapshotError("bad_chunk", f"chunk {index}: an entry of slot {s} outside "
                                             f"{info.first_slot}..{info.last_slot}")
        counts[s] += 1
        if counts[s] == 1:
            single[s] = (kh, v)
    update = StateTree(MemoryStore(), TREE_PREFIX, cache_size=0).prepare(dict(entries)) if entries else None
    nodes = update.nodes if update is not None else {}
    leaf_keys: dict[int, bytes] = {}
    for s in range(info.first_slot, info.last_slot + 1):
        want = m.slots[s]
        if counts[s] == 0:
            got = Slot(EMPTY, b"")
        elif counts[s] == 1:
            kh, v = single[s]
            got = Slot(LEAF, h(_LEAF_TAG + kh + h(v)))
            leaf_keys[s] = kh
        else:
            rec = nodes.get(_DEPTH2 + bytes((s,)))
            if rec is None:  # two or more leaves always make an internal node at the slot's path
                raise SnapshotError("slot_mismatch", f"chunk {index}: slot {s} has no internal node")
            got = Slot(INTERNAL, h(rec[:3 + 32 * ((rec[1] << 8) | rec[2]).bit_count()]))
        if got != want:
            raise SnapshotError("slot_mismatch", f"chunk {index}: slot {s} does not match the manifest (state root)")
    ops: list[WriteOp] = [(STATE_PREFIX + k, v) for k, v in entries]
    if update is not None:
        # Keep the records at depth ≥ 2 and the leaf records; the root, the depth-1 nodes and the root pointer of
        # this partial tree are not the full tree's (top_ops writes those).
        ops.extend((k, v) for k, v in update.ops if v is not None and k[_SKIP] >= 2 and k != _ROOT_POINTER)
    return ChunkWrites(index, len(entries), ops, leaf_keys)


def _node(children: list[tuple[Slot, bytes | None]]) -> tuple[Slot, bytes | None, bytes | None]:
    """What sits above 16 children ``(slot, key hash of a leaf child)``: the slot, the key hash when it is a lone
    leaf moved up, and the internal record (None unless an internal node sits there)."""
    present = [(n, c, kh) for n, (c, kh) in enumerate(children) if c.kind != EMPTY]
    if not present:
        return Slot(EMPTY, b""), None, None
    if len(present) == 1 and present[0][1].kind == LEAF:
        return present[0][1], present[0][2], None
    bitmap = leafmap = 0
    hashes: list[bytes] = []
    khs: list[bytes] = []
    for n, c, kh in present:
        bitmap |= 1 << n
        hashes.append(c.digest)
        if c.kind == LEAF:
            if kh is None:
                raise SnapshotError("bad_chunk", "a leaf slot's key is unknown")
            leafmap |= 1 << n
            khs.append(kh)
    hashed = _INTERNAL_TAG + bitmap.to_bytes(2, "big") + b"".join(hashes)
    return Slot(INTERNAL, keccak256(hashed)), None, hashed + leafmap.to_bytes(2, "big") + b"".join(khs)


def top_ops(slots: tuple[Slot, ...], leaf_keys: dict[int, bytes]) -> tuple[bytes, list[WriteOp]]:
    """The state root and the writes of the records above the 256 slots (the root node, the depth-1 nodes, the
    root pointer); ``leaf_keys`` names the key hash of every slot that holds a single leaf."""
    level1: list[tuple[Slot, bytes | None]] = []
    ops: list[WriteOp] = []
    for i in range(16):
        slot, kh, rec = _node([(slots[s], leaf_keys.get(s)) for s in range(16 * i, 16 * i + 16)])
        if rec is not None:
            ops.append((_DEPTH1 + bytes((i << 4,)), rec))
        level1.append((slot, kh))
    slot, kh, rec = _node(level1)
    if slot.kind == EMPTY:
        return EMPTY_ROOT, ops
    if rec is not None:
        ops.append((_ROOT_PATH, rec))
    ops.append((_ROOT_POINTER, slot.digest if kh is None else slot.digest + kh))
    return slot.digest, ops


__all__ = ["ChunkWrites", "top_ops", "verify_and_build"]
