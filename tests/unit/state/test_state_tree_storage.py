"""The state tree's storage layout (not consensus): leaves by key hash, parents carry leaf key hashes.

The layout is in tree.py's module docstring; the expected bytes here are assembled by hand from it.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from Crypto.Hash import keccak

from cowboy_node.state.kv_store import StateStore
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.tree import StateTree, TreeError, verify_proof

PREFIX = b"n/"
Changes = dict[bytes, bytes | None]


def H(data: bytes) -> bytes:
    return keccak.new(digest_bits=256, data=data).digest()


def apply(store: StateStore, tree: StateTree, changes: Changes) -> bytes:
    update = tree.prepare(changes)
    store.write_batch(update.ops)
    tree.commit(update)
    return update.root


class CountingStore(MemoryStore):
    """A MemoryStore that records every key ``get`` is asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.gets: list[bytes] = []

    def get(self, key: bytes) -> bytes | None:
        self.gets.append(key)
        return super().get(key)


def test_two_key_tree_is_stored_as_documented() -> None:
    # keccak("a") starts with nibble 3, keccak("b") with nibble 0xb (see test_state_tree's golden roots).
    ha, hb = H(b"a"), H(b"b")
    leaf_a, leaf_b = H(b"\x00" + ha + H(b"1")), H(b"\x00" + hb + H(b"2"))
    bitmap = ((1 << 0x3) | (1 << 0xB)).to_bytes(2, "big")
    hashed = b"\x01" + bitmap + leaf_a + leaf_b
    root = H(hashed)
    store = MemoryStore()
    assert apply(store, StateTree(store, PREFIX), {b"a": b"1", b"b": b"2"}) == root
    assert dict(store.iterate(PREFIX)) == {
        PREFIX + b"\x00": hashed + bitmap + ha + hb,  # both children are leaves: leafmap == bitmap
        PREFIX + b"\xfe" + ha: H(b"1") + b"1",
        PREFIX + b"\xfe" + hb: H(b"2") + b"2",
        PREFIX + b"\xff": root,
    }


def test_every_parent_record_matches_the_leaf_records() -> None:
    rng = random.Random(3)
    store = MemoryStore()
    tree = StateTree(store, PREFIX)
    kv = {rng.randbytes(5): rng.randbytes(rng.randint(0, 12)) for _ in range(2000)}
    apply(store, tree, dict(kv))
    gone = dict.fromkeys(list(kv)[:700])
    apply(store, tree, gone)
    for k in gone:
        del kv[k]
    stored = dict(store.iterate(PREFIX))
    leaves = {k[len(PREFIX) + 1:]: v for k, v in stored.items() if k[len(PREFIX)] == 0xFE}
    assert leaves == {H(k): H(v) + v for k, v in kv.items()}  # one record per live key, nothing orphaned
    seen = set()
    for key, rec in stored.items():
        if key[len(PREFIX)] >= 0xFE:
            continue
        bitmap = (rec[1] << 8) | rec[2]
        end = 3 + 32 * bitmap.bit_count()
        leafmap = (rec[end] << 8) | rec[end + 1]
        assert rec[0] == 1 and leafmap & ~bitmap == 0 and len(rec) == end + 2 + 32 * leafmap.bit_count()
        hashes = [rec[3 + 32 * i:35 + 32 * i] for i in range(bitmap.bit_count())]
        khs = iter(rec[end + 2 + 32 * i:end + 34 + 32 * i] for i in range(leafmap.bit_count()))
        for i, n in enumerate(c for c in range(16) if bitmap >> c & 1):
            if leafmap >> n & 1:
                kh = next(khs)
                assert hashes[i] == H(b"\x00" + kh + leaves[kh][:32])
                seen.add(kh)
    assert seen == set(leaves)  # every leaf hangs under exactly the parent that names it


def test_prepare_never_reads_a_leaf_record() -> None:
    rng = random.Random(6)
    store = CountingStore()
    tree = StateTree(store, PREFIX, cache_size=0)  # every node read goes to the store
    keys = [rng.randbytes(8) for _ in range(1500)]
    apply(store, tree, dict.fromkeys(keys, b"v"))
    store.gets.clear()
    changes: Changes = dict.fromkeys(keys[:200], b"w")  # updates
    changes.update(dict.fromkeys(keys[200:300]))  # deletes (siblings collapse upwards)
    changes.update({rng.randbytes(8): b"n" for _ in range(200)})  # inserts (leaves split downwards)
    tree.prepare(changes)
    assert store.gets  # it did read internal nodes
    assert not [k for k in store.gets if k[len(PREFIX)] >= 0xFE]


def test_only_the_changed_keys_leaf_records_are_written() -> None:
    rng = random.Random(7)
    store = MemoryStore()
    tree = StateTree(store, PREFIX)
    keys = [rng.randbytes(8) for _ in range(3000)]
    apply(store, tree, dict.fromkeys(keys, b"v"))
    new = [rng.randbytes(8) for _ in range(300)]
    changes: Changes = {**dict.fromkeys(new, b"n"), **dict.fromkeys(keys[:300]), keys[400]: b"w", keys[401]: b"v"}
    update = tree.prepare(changes)
    leaf_ops = {k: v for k, v in update.ops if k[len(PREFIX)] == 0xFE}
    expected: dict[bytes, bytes | None] = {PREFIX + b"\xfe" + H(k): H(b"n") + b"n" for k in new}
    expected.update({PREFIX + b"\xfe" + H(k): None for k in keys[:300]})
    expected[PREFIX + b"\xfe" + H(keys[400])] = H(b"w") + b"w"  # keys[401] is unchanged: no op
    assert leaf_ops == expected


def test_single_leaf_root_survives_a_reopen(tmp_path: Path) -> None:
    store = LevelDBStore(tmp_path / "db")
    root = apply(store, StateTree(store, PREFIX), {b"only": b"1"})
    assert root == H(b"\x00" + H(b"only") + H(b"1"))
    store.close()
    again = LevelDBStore(tmp_path / "db")
    try:
        tree = StateTree(again, PREFIX)
        assert tree.root() == root and tree.get(b"only") == b"1" and tree.get(b"other") is None
        assert verify_proof(root, tree.prove(b"only")) and verify_proof(root, tree.prove(b"other"))
        two = apply(again, tree, {b"a": b"1"})
        hk, ha = H(b"only"), H(b"a")
        children = sorted([(hk[0] >> 4, H(b"\x00" + hk + H(b"1"))), (ha[0] >> 4, H(b"\x00" + ha + H(b"1")))])
        assert children[0][0] != children[1][0]  # they differ in the first nibble
        bitmap = ((1 << children[0][0]) | (1 << children[1][0])).to_bytes(2, "big")
        assert two == H(b"\x01" + bitmap + children[0][1] + children[1][1])
        assert apply(again, tree, {b"a": None}) == root  # back to a single-leaf root
        assert again.get(PREFIX + b"\xff") == root + hk
    finally:
        again.close()


@pytest.mark.parametrize("pointer", [b"", b"x" * 31, b"x" * 33, b"x" * 65])
def test_corrupt_root_pointer_is_refused(pointer: bytes) -> None:
    store = MemoryStore()
    store.write_batch([(PREFIX + b"\xff", pointer)])
    with pytest.raises(TreeError, match="root pointer is corrupt"):
        StateTree(store, PREFIX)


def test_missing_leaf_record_is_reported_not_guessed() -> None:
    store = MemoryStore()
    tree = StateTree(store, PREFIX)
    apply(store, tree, {b"a": b"1", b"b": b"2"})
    store.write_batch([(PREFIX + b"\xfe" + H(b"a"), None)])
    with pytest.raises(TreeError, match="leaf"):
        tree.prove(b"a")


@pytest.mark.parametrize("cache", [0, 1000])
def test_node_record_of_another_layout_is_refused_and_changes_nothing(cache: int) -> None:
    store = MemoryStore()
    apply(store, StateTree(store, PREFIX), {b"a": b"1", b"b": b"2"})
    rec = store.get(PREFIX + b"\x00")
    assert rec is not None
    store.write_batch([(PREFIX + b"\x00", rec[:-66])])  # the hashed bytes alone: the layout before leafmap
    before = dict(store.iterate())
    tree = StateTree(store, PREFIX, cache_size=cache)
    with pytest.raises(TreeError, match="corrupt"):
        tree.prepare({b"c": b"3", b"d": b"4"})
    with pytest.raises(TreeError, match="corrupt"):
        tree.prove(b"a")
    assert dict(store.iterate()) == before
