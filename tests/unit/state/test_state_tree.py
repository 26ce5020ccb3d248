"""The state tree: consensus hashing, history independence, persistence and proofs."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from Crypto.Hash import keccak
from hypothesis import given, settings
from hypothesis import strategies as st

from cowboy_node.state import tree as tree_mod
from cowboy_node.state.kv_store import StateStore
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.tree import (
    EMPTY_ROOT,
    ProofStep,
    StateProof,
    StateTree,
    TreeError,
    verify_proof,
)

PREFIX = b"n/"
Changes = dict[bytes, bytes | None]


# -- an independent reference, straight from the rules in tree.py's docstring ---------------------
def H(data: bytes) -> bytes:
    return keccak.new(digest_bits=256, data=data).digest()


def _nib(kh: bytes, d: int) -> int:
    return kh[d // 2] >> 4 if d % 2 == 0 else kh[d // 2] & 15


def ref_root(kv: dict[bytes, bytes]) -> bytes:
    """Root of ``kv`` computed from scratch (no path compression tricks, no storage)."""
    leaves = sorted((H(k), H(v)) for k, v in kv.items())

    def node(group: list[tuple[bytes, bytes]], d: int) -> bytes:
        if len(group) == 1:
            return H(b"\x00" + group[0][0] + group[0][1])
        children: dict[int, list[tuple[bytes, bytes]]] = {}
        for leaf in group:
            children.setdefault(_nib(leaf[0], d), []).append(leaf)
        bitmap = sum(1 << n for n in children)
        return H(b"\x01" + bitmap.to_bytes(2, "big") + b"".join(node(children[n], d + 1) for n in sorted(children)))

    return node(leaves, 0) if leaves else EMPTY_ROOT


# -- helpers ---------------------------------------------------------------------------------------
def apply(store: StateStore, tree: StateTree, changes: Changes) -> bytes:
    update = tree.prepare(changes)
    store.write_batch(update.ops)
    tree.commit(update)
    assert tree.root() == update.root
    return update.root


def fresh_root(kv: dict[bytes, bytes]) -> bytes:
    store = MemoryStore()
    return apply(store, StateTree(store, PREFIX), dict(kv))


def nodes(store: StateStore) -> dict[bytes, bytes]:
    return dict(store.iterate(PREFIX))


def random_workload(rng: random.Random, n_ops: int, n_keys: int, batches: int) -> list[Changes]:
    out: list[Changes] = []
    per = max(1, n_ops // batches)
    for _ in range(batches):
        ch: Changes = {}
        for _ in range(per):
            k = b"key-%d" % rng.randrange(n_keys)
            ch[k] = None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 40))
        out.append(ch)
    return out


def fold(model: dict[bytes, bytes], ch: Changes) -> None:
    for k, v in ch.items():
        if v is None:
            model.pop(k, None)
        else:
            model[k] = v


# -- consensus constants and golden vectors -------------------------------------------------------------
def test_empty_root_constant() -> None:
    assert H(b"cowboy-state-empty-v1") == EMPTY_ROOT
    assert EMPTY_ROOT.hex() == "68334b6e585a5c0625030f0c6cfb1a84c6c2ba9a7eb8447962be540e53d7f1a7"
    store = MemoryStore()
    tree = StateTree(store, PREFIX)
    assert tree.root() == EMPTY_ROOT
    assert tree.prepare({}).root == EMPTY_ROOT
    assert tree.prepare({b"absent": None}).root == EMPTY_ROOT


def test_golden_roots_computed_by_hand() -> None:
    # One key: the root is that key's leaf.
    leaf_a = H(b"\x00" + H(b"a") + H(b"1"))
    assert fresh_root({b"a": b"1"}) == leaf_a
    assert leaf_a.hex() == "c3fd1ef33b82b45747a4dfeaa6bd2bb314df989be8ade3eb7e4738c78db82912"
    # Two keys: keccak("a") starts with nibble 3, keccak("b") with nibble 0xb.
    assert H(b"a")[0] >> 4 == 0x3 and H(b"b")[0] >> 4 == 0xB
    leaf_b = H(b"\x00" + H(b"b") + H(b"2"))
    bitmap = (1 << 0x3) | (1 << 0xB)
    two = H(b"\x01" + bitmap.to_bytes(2, "big") + leaf_a + leaf_b)
    assert fresh_root({b"a": b"1", b"b": b"2"}) == two
    assert two.hex() == "c50762f2e0b43e344333c0a659c03de2274546105037e947c8d4f4266b42ec94"


def test_golden_root_for_keys_sharing_a_prefix_keeps_one_child_internal_nodes() -> None:
    # Find two keys whose hashes share their first two nibbles (deterministic search).
    seen: dict[int, bytes] = {}
    for i in range(100_000):
        k = b"k%d" % i
        first = H(k)[0]
        if first in seen:
            k1, k2 = seen[first], k
            break
        seen[first] = k
    h1, h2 = H(k1), H(k2)
    assert h1[0] == h2[0] and _nib(h1, 2) != _nib(h2, 2)
    l1, l2 = H(b"\x00" + h1 + H(b"v1")), H(b"\x00" + h2 + H(b"v2"))
    lo, hi = (l1, l2) if _nib(h1, 2) < _nib(h2, 2) else (l2, l1)
    depth2 = H(b"\x01" + ((1 << _nib(h1, 2)) | (1 << _nib(h2, 2))).to_bytes(2, "big") + lo + hi)
    depth1 = H(b"\x01" + (1 << _nib(h1, 1)).to_bytes(2, "big") + depth2)
    root = H(b"\x01" + (1 << _nib(h1, 0)).to_bytes(2, "big") + depth1)
    assert fresh_root({k1: b"v1", k2: b"v2"}) == root
    # Deleting one of them moves the other's leaf all the way up to the root.
    store = MemoryStore()
    tree = StateTree(store, PREFIX)
    apply(store, tree, {k1: b"v1", k2: b"v2", b"a": b"1"})
    assert apply(store, tree, {b"a": None, k2: None}) == l1
    # Storage: no internal node is left; the leaf record (by key hash) holds H(v) ‖ v, and the root
    # pointer is the root hash followed by the root leaf's key hash.
    assert nodes(store) == {PREFIX + b"\xfe" + h1: H(b"v1") + b"v1", PREFIX + b"\xff": l1 + h1}


# -- the root depends only on the final key/value set --------------------------------------------------
def test_root_matches_the_reference_through_a_random_workload() -> None:
    rng = random.Random(11)
    store = MemoryStore()
    tree = StateTree(store, PREFIX)
    model: dict[bytes, bytes] = {}
    for ch in random_workload(rng, 3000, 400, 40):
        fold(model, ch)
        assert apply(store, tree, ch) == ref_root(model)
    # the stored nodes are exactly those of a tree built in one go
    other = MemoryStore()
    apply(other, StateTree(other, PREFIX), dict(model))
    assert nodes(store) == nodes(other)


def test_order_batch_split_and_insert_then_delete_do_not_matter() -> None:
    rng = random.Random(5)
    final = {rng.randbytes(rng.randint(1, 8)): rng.randbytes(rng.randint(0, 20)) for _ in range(700)}
    expected = ref_root(final)
    items = list(final.items())
    for trial in range(4):
        rng.shuffle(items)
        store = MemoryStore()
        tree = StateTree(store, PREFIX, cache_size=[0, 7, 1000, 1_000_000][trial])
        junk = {rng.randbytes(9): rng.randbytes(5) for _ in range(300)}
        apply(store, tree, junk)  # inserted first, deleted later
        pos = 0
        while pos < len(items):
            step = rng.choice([1, 3, 50, 400])
            ch: Changes = dict(items[pos:pos + step])
            if rng.random() < 0.5:  # overwrite some keys with garbage, fixed again below
                for k in list(ch)[:2]:
                    apply(store, tree, {k: b"garbage"})
            apply(store, tree, ch)
            pos += step
        apply(store, tree, dict.fromkeys(junk))
        assert tree.root() == expected
        assert nodes(store) == nodes_of(final)


def nodes_of(kv: dict[bytes, bytes]) -> dict[bytes, bytes]:
    store = MemoryStore()
    apply(store, StateTree(store, PREFIX), dict(kv))
    return nodes(store)


_keys = st.sampled_from([b"k%d" % i for i in range(40)])
_batch = st.dictionaries(_keys, st.one_of(st.none(), st.binary(max_size=6)), max_size=12)


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(_batch, max_size=12), cache=st.sampled_from([0, 3, 100]))
def test_any_history_gives_the_reference_root(batches: list[Changes], cache: int) -> None:
    store = MemoryStore()
    tree = StateTree(store, PREFIX, cache_size=cache)
    model: dict[bytes, bytes] = {}
    for ch in batches:
        fold(model, ch)
        assert apply(store, tree, ch) == ref_root(model)
    assert nodes(store) == nodes_of(model) if model else set(nodes(store)) <= {PREFIX + b"\xff"}


def test_deleting_everything_leaves_only_the_root_pointer() -> None:
    store = MemoryStore()
    tree = StateTree(store, PREFIX)
    kv = {b"%d" % i: b"v" for i in range(300)}
    apply(store, tree, dict(kv))
    assert apply(store, tree, dict.fromkeys(kv)) == EMPTY_ROOT
    assert nodes(store) == {PREFIX + b"\xff": EMPTY_ROOT}
    assert apply(store, tree, {b"x": None}) == EMPTY_ROOT  # deleting an absent key is a no-op


def test_both_stores_give_identical_roots_on_a_random_workload(tmp_path: Path) -> None:
    rng = random.Random(2024)
    mem = MemoryStore()
    ldb = LevelDBStore(tmp_path / "db")
    ldb_nocache = LevelDBStore(tmp_path / "db2")
    trees = [(mem, StateTree(mem, PREFIX)), (ldb, StateTree(ldb, PREFIX)),
             (ldb_nocache, StateTree(ldb_nocache, PREFIX, cache_size=0))]
    model: dict[bytes, bytes] = {}
    try:
        for ch in random_workload(rng, 4000, 1500, 80):
            fold(model, ch)
            roots = {apply(s, t, ch) for s, t in trees}
            assert len(roots) == 1
        assert roots == {ref_root(model)}
        assert nodes(mem) == nodes(ldb) == nodes(ldb_nocache)
    finally:
        ldb.close()
        ldb_nocache.close()


def test_uncommitted_update_is_ignored_and_stale_commit_refused() -> None:
    store = MemoryStore()
    tree = StateTree(store, PREFIX)
    apply(store, tree, {b"a": b"1", b"b": b"2"})
    lost = tree.prepare({b"c": b"3", b"a": None})  # the caller's batch "failed": never written
    assert tree.root() == ref_root({b"a": b"1", b"b": b"2"})
    assert apply(store, tree, {b"d": b"4"}) == ref_root({b"a": b"1", b"b": b"2", b"d": b"4"})
    with pytest.raises(TreeError, match="different committed root"):
        tree.commit(lost)
    assert tree.root() == ref_root({b"a": b"1", b"b": b"2", b"d": b"4"})


def test_prepare_writes_nothing_and_ops_stay_under_the_prefix() -> None:
    store = MemoryStore()
    store.write_batch([(b"other", b"x")])
    tree = StateTree(store, PREFIX)
    before = dict(store.iterate())
    update = tree.prepare({b"%d" % i: b"v" for i in range(50)})
    assert dict(store.iterate()) == before
    keys = [k for k, _ in update.ops]
    assert len(keys) == len(set(keys)) and all(k.startswith(PREFIX) for k in keys)
    assert (PREFIX + b"\xff", update.root) in update.ops


def test_prepare_hashes_each_touched_node_once(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()
    tree = StateTree(store, PREFIX)
    apply(store, tree, {b"%d" % i: b"v" for i in range(3000)})
    calls = [0]
    real = tree_mod._new_hasher

    def counting() -> Callable[[bytes], bytes]:
        h = real()

        def wrapped(data: bytes) -> bytes:
            calls[0] += 1
            return h(data)

        return wrapped

    monkeypatch.setattr(tree_mod, "_new_hasher", counting)
    changes: Changes = {b"%d" % i: b"w" for i in range(0, 6000, 7)}
    update = tree.prepare(changes)
    # Exactly 3 per changed key (key, value, new leaf) + 1 per written internal node: no node is hashed
    # twice, and a leaf that moves (split or collapse) is not re-hashed (its parent carries its hash).
    assert calls[0] == 3 * len(changes) + len(update.nodes)


def test_cache_does_not_change_results() -> None:
    rng = random.Random(9)
    setups = [MemoryStore() for _ in range(3)]
    trees = [StateTree(s, PREFIX, cache_size=c) for s, c in zip(setups, [0, 5, 1_000_000], strict=True)]
    for ch in random_workload(rng, 2000, 300, 30):
        updates = [t.prepare(ch) for t in trees]
        assert len({u.ops for u in updates}) == 1
        for s, t, u in zip(setups, trees, updates, strict=True):
            s.write_batch(u.ops)
            t.commit(u)


def test_tree_reopened_from_leveldb_gives_same_root_and_proofs(tmp_path: Path) -> None:
    rng = random.Random(4)
    kv = {rng.randbytes(6): rng.randbytes(10) for _ in range(1500)}
    store = LevelDBStore(tmp_path / "db")
    tree = StateTree(store, PREFIX)
    root = apply(store, tree, dict(kv))
    probe = [*list(kv)[:50], *(rng.randbytes(6) for _ in range(50))]
    proofs = [tree.prove(k) for k in probe]
    store.close()
    again = LevelDBStore(tmp_path / "db")
    try:
        reopened = StateTree(again, PREFIX)
        assert reopened.root() == root
        assert [reopened.prove(k) for k in probe] == proofs
        ch: Changes = {k: None for k in list(kv)[:100]}
        ch.update({rng.randbytes(6): b"new" for _ in range(100)})
        fold(kv, ch)
        assert apply(again, reopened, ch) == ref_root(kv)
    finally:
        again.close()


def test_root_does_not_depend_on_the_hash_seed() -> None:
    script = """
import random
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.tree import StateTree
rng = random.Random(1)
store = MemoryStore()
tree = StateTree(store, b"n/")
keys = {rng.randbytes(5) for _ in range(2000)}          # set order depends on the seed
for batch in range(5):
    ch = {k: b"%d" % batch for k in keys if k[0] % 5 != batch}
    ch.update({k: None for k in keys if k[0] % 7 == batch})
    u = tree.prepare(ch)
    store.write_batch(u.ops)
    tree.commit(u)
print(tree.root().hex(), len(u.ops), hash(b"seed-probe"))
"""
    root = Path(__file__).resolve().parents[3]
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run([sys.executable, "-c", script], cwd=root, env=env, capture_output=True,
                              text=True, check=True, timeout=120)
        outs.append(proc.stdout.split())
    assert outs[0][2] != outs[1][2]  # the seeds really differ
    assert outs[0][:2] == outs[1][:2]


# -- proofs -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def proof_tree() -> tuple[StateTree, dict[bytes, bytes]]:
    rng = random.Random(8)
    kv = {b"acct-%d" % i: rng.randbytes(rng.randint(1, 30)) for i in range(600)}
    store = MemoryStore()
    tree = StateTree(store, PREFIX)
    apply(store, tree, dict(kv))
    return tree, kv


def test_inclusion_proofs_verify_and_reject_tampering(proof_tree: tuple[StateTree, dict[bytes, bytes]]) -> None:
    tree, kv = proof_tree
    root = tree.root()
    for key in list(kv)[:150]:
        proof = tree.prove(key)
        assert proof.value == kv[key]
        assert verify_proof(root, proof)
        assert not verify_proof(root, dataclasses.replace(proof, value=kv[key] + b"x"))
        assert not verify_proof(root, dataclasses.replace(proof, value=None))
        assert not verify_proof(H(b"other root"), proof)
        assert not verify_proof(root, dataclasses.replace(proof, key=key + b"!"))
        step = proof.steps[-1]
        if step.siblings:
            bad = (bytes([step.siblings[0][0] ^ 1]) + step.siblings[0][1:], *step.siblings[1:])
            tampered = (*proof.steps[:-1], ProofStep(step.bitmap, bad))
            assert not verify_proof(root, dataclasses.replace(proof, steps=tampered))
        assert not verify_proof(root, dataclasses.replace(proof, steps=proof.steps[1:]))
        again = StateProof.from_json(json.loads(json.dumps(proof.to_json())))
        assert again == proof and verify_proof(root, again)


def test_exclusion_proofs_verify_both_kinds(proof_tree: tuple[StateTree, dict[bytes, bytes]]) -> None:
    tree, kv = proof_tree
    root = tree.root()
    kinds = set()
    for i in range(400):
        key = b"absent-%d" % i
        proof = tree.prove(key)
        assert proof.value is None
        assert verify_proof(root, proof)
        kinds.add(proof.leaf is None)
        assert not verify_proof(root, dataclasses.replace(proof, value=b"forged"))
        assert not verify_proof(H(b"x"), proof)
        if proof.leaf is None:  # ends at an empty slot: the last node must really lack that child
            last = proof.steps[-1]
            n = _nib(H(key), len(proof.steps) - 1)
            assert not last.bitmap & (1 << n)
            forged = ProofStep(last.bitmap | (1 << n), last.siblings)
            assert not verify_proof(root, dataclasses.replace(proof, steps=(*proof.steps[:-1], forged)))
        else:  # ends at another key's leaf; it must not be reusable for that key's absence
            present = next(k for k in kv if H(k) == proof.leaf.key_hash)
            assert not verify_proof(root, dataclasses.replace(proof, key=present))
    assert kinds == {True, False}
    # a present key cannot be "proved" absent with its own leaf
    key = next(iter(kv))
    p = tree.prove(key)
    assert not verify_proof(root, dataclasses.replace(p, value=None))


def test_proofs_for_empty_and_single_leaf_trees() -> None:
    store = MemoryStore()
    tree = StateTree(store, PREFIX)
    p = tree.prove(b"a")
    assert p.value is None and p.steps == () and verify_proof(EMPTY_ROOT, p)
    assert not verify_proof(H(b"x"), p)
    apply(store, tree, {b"a": b"1"})
    inc, exc = tree.prove(b"a"), tree.prove(b"b")
    assert inc.value == b"1" and inc.steps == () and verify_proof(tree.root(), inc)
    assert exc.value is None and verify_proof(tree.root(), exc)
    assert not verify_proof(tree.root(), dataclasses.replace(exc, leaf=None))
    assert tree.get(b"a") == b"1" and tree.get(b"b") is None


@pytest.mark.parametrize("bad", [
    None, [], {"key": 5}, {"key": "0x61", "value": None, "steps": "x", "leaf": None},
    {"key": "0x61", "value": None, "steps": [{"bitmap": 70000, "siblings": []}], "leaf": None},
    {"key": "0x61", "value": None, "steps": [{"bitmap": 1, "siblings": ["0x00"]}], "leaf": None},
    {"key": "0x61", "value": None, "steps": [], "leaf": {"key_hash": "0xzz", "value_hash": "0x"}},
])
def test_malformed_proof_json_is_rejected(bad: object) -> None:
    with pytest.raises(ValueError):
        StateProof.from_json(bad)
