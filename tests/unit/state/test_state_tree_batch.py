"""Large batch updates: golden roots and proofs pinned from the code before the batch fast paths (issue 33 §3/§4),
and batch-vs-one-at-a-time equivalence (roots, stored nodes, proofs)."""

from __future__ import annotations

import json
import random

import pytest

from cowboy_node.state.kv_store import StateStore
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.tree import StateTree, keccak256, verify_proof

PREFIX = b"n/"
Changes = dict[bytes, bytes | None]


def _apply(store: StateStore, tree: StateTree, changes: Changes) -> bytes:
    update = tree.prepare(changes)
    store.write_batch(update.ops)
    tree.commit(update)
    return update.root


def _proof_digest(tree: StateTree, keys: list[bytes]) -> str:
    """keccak256 of the proofs' canonical JSON: pins every sibling hash, bitmap and leaf of each proof."""
    blob = json.dumps([tree.prove(k).to_json() for k in keys], sort_keys=True).encode()
    return keccak256(blob).hex()


def _golden_history() -> list[tuple[str, str, str]]:
    """A 4,000-key tree, then a timer-like block (3,000 deletes + 1,000 inserts), then mixed batches."""
    store = MemoryStore()
    tree = StateTree(store, PREFIX)
    base = {b"g%d" % i: b"v%d" % i for i in range(4000)}
    probe = [b"g%d" % i for i in range(0, 4000, 97)] + [b"new%d" % i for i in range(0, 1000, 91)] + [b"absent"]
    out: list[tuple[str, str, str]] = []

    def snap(name: str) -> None:
        out.append((name, tree.root().hex(), _proof_digest(tree, probe)))

    _apply(store, tree, dict(base))
    snap("build")
    timer_block: Changes = dict.fromkeys(b"g%d" % i for i in range(0, 4000, 4))
    timer_block.update(dict.fromkeys(b"g%d" % i for i in range(1, 4000, 4)))
    timer_block.update(dict.fromkeys(b"g%d" % i for i in range(2, 4000, 4)))
    timer_block.update({b"new%d" % i: b"1" for i in range(1000)})
    _apply(store, tree, timer_block)
    snap("deletes_and_inserts")
    mixed: Changes = {b"g%d" % i: b"w%d" % i for i in range(3, 4000, 8)}
    mixed.update(dict.fromkeys(b"g%d" % i for i in range(7, 4000, 8)))
    mixed.update(dict.fromkeys(b"new%d" % i for i in range(0, 1000, 3)))
    mixed.update({b"more%d" % i: b"x" * (i % 50) for i in range(1500)})
    _apply(store, tree, mixed)
    snap("mixed")
    _apply(store, tree, dict.fromkeys([*(b"more%d" % i for i in range(1500)), *(b"new%d" % i for i in range(1000))]))
    snap("delete_down")
    return out


# Computed by the tree before the batch fast paths (commit c31b903's cowboy_node/state/tree.py).
GOLDEN = {
    "build": (
        "438da468eaf3037e3f18624539fe1eed8b17dfb6fc948a242db152f635ec045e",
        "ea912d3bde00afbdc7ba0b0e59656ba1c7bffe759602f846f30a1c0cf0614f79"),
    "deletes_and_inserts": (
        "368ce8c649608682be84bbaca59c58db5ae67c8f50cd21dea62802aa1d2c696e",
        "323a36b5a6ef08f1110696a8b41eba7a9cd6fcb13eedb0f394180a51d1d2b093"),
    "mixed": (
        "c2b4aad52752fb8d7cf012e3cbeaa0fc4cbd4a3d2f286e3b122069bb8fbdd6a5",
        "5d445da15fd5732d6157446a18d53e5aecb910abe0bc31991c8dc11d7e3206e5"),
    "delete_down": (
        "3d3961970ef04243be2523d692604ca1a05d768807ac028574bc090ab0846c34",
        "2bdf7414525e82d4611391b59c15593e3f30ce990e80563955863fd357e30547"),
}


def test_batch_updates_keep_the_golden_roots_and_proofs() -> None:
    assert {name: (root, proof) for name, root, proof in _golden_history()} == GOLDEN


def _random_changes(rng: random.Random, live: list[bytes], n: int, p_delete: float, p_update: float) -> Changes:
    ch: Changes = {}
    for _ in range(n):
        r = rng.random()
        if live and r < p_delete:
            ch[rng.choice(live)] = None
        elif live and r < p_delete + p_update:
            ch[rng.choice(live)] = rng.randbytes(rng.randint(0, 24))
        else:
            ch[rng.randbytes(rng.randint(1, 12))] = rng.randbytes(rng.randint(0, 24))
    ch[b"never-there-%d" % rng.randrange(10**6)] = None  # deleting an absent key is a no-op
    return ch


@pytest.mark.parametrize(("seed", "size", "batch", "p_delete", "p_update"), [
    (1, 3000, 1200, 0.75, 0.0),   # timer-like: mostly deletes, some inserts
    (2, 2000, 2000, 0.45, 0.3),   # mixed
    (3, 600, 590, 0.98, 0.0),     # deletes down to a handful of keys (collapses up to the root)
    (4, 1500, 300, 0.1, 0.5),     # updates and inserts
])
def test_one_batch_equals_the_same_changes_one_at_a_time(seed: int, size: int, batch: int, p_delete: float,
                                                         p_update: float) -> None:
    rng = random.Random(seed)
    kv = {rng.randbytes(rng.randint(1, 12)): rng.randbytes(rng.randint(0, 24)) for _ in range(size)}
    stores = [MemoryStore(), MemoryStore()]
    trees = [StateTree(s, PREFIX) for s in stores]
    for s, t in zip(stores, trees, strict=True):
        _apply(s, t, dict(kv))
    for _round in range(2):
        ch = _random_changes(rng, list(kv), batch, p_delete, p_update)
        _apply(stores[0], trees[0], ch)
        for k, v in ch.items():
            _apply(stores[1], trees[1], {k: v})
            if v is None:
                kv.pop(k, None)
            else:
                kv[k] = v
        assert trees[0].root() == trees[1].root()
        assert dict(stores[0].iterate(PREFIX)) == dict(stores[1].iterate(PREFIX))
        probe = list(ch)[:200] + rng.sample(list(kv), min(100, len(kv)))
        for k in probe:
            proof = trees[0].prove(k)
            assert proof == trees[1].prove(k)
            assert proof.value == kv.get(k)
            assert verify_proof(trees[0].root(), proof)
