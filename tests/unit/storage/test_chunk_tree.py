"""A snapshot chunk verified by building its part of the state tree (``snapshot/chunk_tree.py``, issue 34 §1): the
records it writes, with the records above the slots, are exactly the tree the node builds itself from the same
entries, byte for byte (whatever the tree's shape: a lone leaf at the root or at depth 1, empty and single-leaf
slots); a chunk that is not the state of the manifest's slots is refused."""

from __future__ import annotations

import random

import pytest

from cowboy_node.chain.blockstore import STATE_PREFIX, TREE_PREFIX
from cowboy_node.snapshot.chunk_tree import top_ops, verify_and_build
from cowboy_node.snapshot.manifest import ChunkInfo, Manifest, SnapshotError, encode_chunk
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.slots import EMPTY_SLOT, SLOTS, slot_index, slot_of_entries
from cowboy_node.state.tree import StateTree, keccak256


def _snapshot(entries: dict[bytes, bytes], slots_per_chunk: int) -> tuple[Manifest, list[bytes]]:
    """The manifest slots and chunks of ``entries``, computed with ``state/slots.py`` (not the code under test)."""
    by_slot: list[list[tuple[bytes, bytes]]] = [[] for _ in range(SLOTS)]
    for k, v in entries.items():
        by_slot[slot_index(keccak256(k))].append((k, v))
    slots, chunks, raws = [], [], []
    for first in range(0, SLOTS, slots_per_chunk):
        items: list[tuple[bytes, bytes]] = []
        for s in range(first, first + slots_per_chunk):
            its = sorted(by_slot[s], key=lambda kv: keccak256(kv[0]))
            slots.append(slot_of_entries(its) if its else EMPTY_SLOT)
            items.extend(its)
        raw = encode_chunk(items)
        raws.append(raw)
        chunks.append(ChunkInfo(first, first + slots_per_chunk - 1, len(raw), keccak256(raw)))
    return Manifest("c", b"\0" * 32, 1, b"", b"", tuple(slots), tuple(chunks), len(entries)), raws


def _reference(entries: dict[bytes, bytes]) -> tuple[bytes, dict[bytes, bytes]]:
    """The node's own tree over ``entries`` (``StateTree.prepare`` of them all): its root and its records."""
    store = MemoryStore()
    tree = StateTree(store, TREE_PREFIX)
    update = tree.prepare(entries)
    store.write_batch([*((STATE_PREFIX + k, v) for k, v in entries.items()), *update.ops])
    return update.root, dict(store.iterate(b""))


@pytest.mark.parametrize("n", [1, 2, 3, 17, 40, 700])
def test_chunks_and_top_records_rebuild_the_nodes_own_tree_byte_for_byte(n: int) -> None:
    rnd = random.Random(n)
    entries = {rnd.randbytes(rnd.randint(1, 40)): rnd.randbytes(rnd.randint(0, 60)) for _ in range(n)}
    root, want = _reference(entries)
    m, raws = _snapshot(entries, 32)
    store = MemoryStore()
    leaf_keys: dict[int, bytes] = {}
    for i, raw in enumerate(raws):
        chunk = verify_and_build(m, i, raw)
        store.write_batch(chunk.ops)
        leaf_keys.update(chunk.leaf_keys)
    got_root, ops = top_ops(m.slots, leaf_keys)
    store.write_batch(ops)
    assert got_root == root
    assert dict(store.iterate(b"")) == want
    assert StateTree(store, TREE_PREFIX).root() == root


def test_a_chunk_whose_value_differs_from_its_slot_is_refused() -> None:
    entries = {bytes([i]) * 3: bytes([i]) for i in range(50)}
    m, raws = _snapshot(entries, 256)
    key = next(iter(entries))
    forged = dict(entries)
    forged[key] = b"forged"
    _, forged_raws = _snapshot(forged, 256)
    listed = Manifest(m.chain_id, m.genesis_hash, m.height, m.block, m.finalization, m.slots,
                      (ChunkInfo(0, 255, len(forged_raws[0]), keccak256(forged_raws[0])),), m.entries)
    verify_and_build(m, 0, raws[0])
    with pytest.raises(SnapshotError) as e:
        verify_and_build(listed, 0, forged_raws[0])  # its digest is listed: only the slot check can catch it
    assert e.value.code == "slot_mismatch"


def test_a_chunk_missing_an_entry_of_a_single_leaf_slot_is_refused() -> None:
    entries = {bytes([i]) * 3: bytes([i]) for i in range(50)}
    m, _ = _snapshot(entries, 256)
    lone = next(k for k in entries if sum(slot_index(keccak256(j)) == slot_index(keccak256(k)) for j in entries) == 1)
    short = {k: v for k, v in entries.items() if k != lone}
    _, raws = _snapshot(short, 256)
    listed = Manifest(m.chain_id, m.genesis_hash, m.height, m.block, m.finalization, m.slots,
                      (ChunkInfo(0, 255, len(raws[0]), keccak256(raws[0])),), m.entries)
    with pytest.raises(SnapshotError) as e:
        verify_and_build(listed, 0, raws[0])
    assert e.value.code == "slot_mismatch"
