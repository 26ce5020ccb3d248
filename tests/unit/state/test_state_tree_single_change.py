"""One change per update: the walk-down / splice-up path of ``prepare`` at every kind of slot.

Each update here changes one key in a tree deep enough for several internal levels, so it takes the
single-change path (a new leaf in an empty slot, a leaf's new or same value, a leaf split by a new key,
a delete that removes or collapses nodes, a delete of an absent key next to a leaf). After every update
the root must equal the independent reference and the stored records must equal those of a tree built
from scratch holding the same keys (so the storage layout is also what a fresh build writes).
"""

from __future__ import annotations

import random

import pytest
from Crypto.Hash import keccak

from cowboy_node.state import tree as tree_mod
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.tree import StateTree, keccak256
from tests.unit.state.test_state_tree import PREFIX, apply, nodes, nodes_of, ref_root


def _keys_sharing(prefix_nibbles: int, count: int, rng: random.Random) -> list[bytes]:
    """``count`` keys whose hashes share their first ``prefix_nibbles`` nibbles (found by search)."""
    groups: dict[str, list[bytes]] = {}
    while True:
        k = rng.randbytes(8)
        group = groups.setdefault(keccak256(k).hex()[:prefix_nibbles], [])
        group.append(k)
        if len(group) == count:
            return group


def test_each_single_change_matches_the_reference_and_a_fresh_build() -> None:
    rng = random.Random(20)
    store = MemoryStore()
    tree = StateTree(store, PREFIX)
    model = {rng.randbytes(8): rng.randbytes(12) for _ in range(600)}
    # Keys sharing 3 to 5 nibbles make one-child chains (on insert, in both key orders) and collapses
    # on delete.
    deep = _keys_sharing(3, 3, rng)
    for shared in (4, 4, 4, 5, 5):
        deep += _keys_sharing(shared, 2, rng)
    model.update({k: b"deep" for k in deep})
    apply(store, tree, dict(model))
    steps: list[tuple[bytes, bytes | None]] = []
    for k in deep:  # remove the deep ones one at a time (collapses), then put them back (splits)
        steps.append((k, None))
    for k in deep:
        steps.append((k, b"back"))
    present = list(model)
    for i in range(300):
        kind = i % 5
        if kind == 0:
            steps.append((rng.randbytes(8), rng.randbytes(5)))  # new key: empty slot or a split
        elif kind == 1:
            k = present[rng.randrange(len(present))]
            steps.append((k, rng.randbytes(7)))  # new value
        elif kind == 2:
            k = present[rng.randrange(len(present))]
            steps.append((k, model.get(k, b"x")))  # same value (no change) or re-insert
        elif kind == 3:
            steps.append((present[rng.randrange(len(present))], None))  # delete (maybe already gone)
        else:
            steps.append((rng.randbytes(8), None))  # delete of an absent key
    for i, (k, v) in enumerate(steps):
        if v is None:
            model.pop(k, None)
        else:
            model[k] = v
            present.append(k)
        root = apply(store, tree, {k: v})
        assert root == ref_root(model)
        if i % 40 == 0:
            assert nodes(store) == nodes_of(model)
    assert nodes(store) == nodes_of(model)


def test_single_changes_down_to_the_last_two_keys() -> None:
    rng = random.Random(21)
    store = MemoryStore()
    tree = StateTree(store, PREFIX)
    model = {rng.randbytes(4): rng.randbytes(3) for _ in range(120)}
    apply(store, tree, dict(model))
    for k in list(model)[:-1]:
        del model[k]
        assert apply(store, tree, {k: None}) == ref_root(model)
        if len(model) % 17 == 0:
            assert nodes(store) == nodes_of(model)
    # one key left: the root is its leaf and only the leaf record and the root pointer remain
    assert set(nodes(store)) == set(nodes_of(model))


def test_prefix_hasher_hashes_exactly_the_first_bytes() -> None:
    h = tree_mod._new_hasher()
    prefix = tree_mod._prefix_hasher(h)
    data = bytes(range(256)) * 3
    for size in (0, 1, 67, 135, 136, 137, 515, len(data)):
        assert prefix(data, size) == keccak.new(digest_bits=256, data=data[:size]).digest()
    calls: list[bytes] = []

    def plain(d: bytes) -> bytes:  # a hasher without the native in-place variant: sliced, then hashed
        calls.append(d)
        return h(d)

    assert tree_mod._prefix_hasher(plain)(data, 67) == h(data[:67]) and calls == [data[:67]]
    if getattr(h, "prefix", None) is not None:
        with pytest.raises(ValueError):
            prefix(data, len(data) + 1)  # never reads past the buffer
        with pytest.raises(ValueError):
            prefix(data, -1)
