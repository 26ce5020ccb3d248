"""WorldState: the buffered, journaled overlay used to execute one block."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from cowboy_node.state.kv_store import StateStore
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.tree import StateTree, TreeError
from cowboy_node.state.world import WorldState

DATA = b"s/"
NODES = b"n/"


def commit(world: WorldState, store: StateStore) -> bytes:
    root, ops = world.prepare_commit()
    store.write_batch(ops)
    world.mark_committed()
    return root


def fresh_root(kv: dict[bytes, bytes]) -> bytes:
    store = MemoryStore()
    tree = StateTree(store, NODES)
    update = tree.prepare(dict(kv))
    return update.root


@pytest.fixture
def setup() -> tuple[MemoryStore, StateTree]:
    store = MemoryStore()
    tree = StateTree(store, NODES)
    w = WorldState(store, tree, data_prefix=DATA)
    for k, v in {b"acct/a": b"1", b"acct/b": b"2", b"acct/c": b"3", b"cfg/x": b"9"}.items():
        w.set(k, v)
    commit(w, store)
    return store, tree


def test_reads_fall_through_and_writes_stay_pending(setup: tuple[MemoryStore, StateTree]) -> None:
    store, tree = setup
    w = WorldState(store, tree, data_prefix=DATA)
    assert w.get(b"acct/a") == b"1" and w.get(b"nope") is None
    before = dict(store.iterate())
    w.set(b"acct/a", b"10")
    w.set(b"acct/d", b"4")
    w.delete(b"acct/b")
    w.delete(b"never-existed")
    assert w.get(b"acct/a") == b"10" and w.get(b"acct/d") == b"4" and w.get(b"acct/b") is None
    assert dict(store.iterate()) == before  # nothing written
    assert WorldState(store, tree, data_prefix=DATA).get(b"acct/a") == b"1"
    assert w.changes() == {b"acct/a": b"10", b"acct/b": None, b"acct/d": b"4", b"never-existed": None}
    assert list(w.changes()) == sorted(w.changes())
    with pytest.raises(TypeError):
        w.set(b"k", "text")  # type: ignore[arg-type]


def test_nested_checkpoints_revert_and_release(setup: tuple[MemoryStore, StateTree]) -> None:
    store, tree = setup
    w = WorldState(store, tree, data_prefix=DATA)
    w.set(b"acct/a", b"A0")
    outer = w.checkpoint()
    w.set(b"acct/a", b"A1")
    w.delete(b"acct/b")
    inner = w.checkpoint()
    w.set(b"acct/a", b"A2")
    w.set(b"acct/new", b"N")
    w.revert(inner)
    assert w.get(b"acct/a") == b"A1" and w.get(b"acct/new") is None and w.get(b"acct/b") is None
    inner2 = w.checkpoint()
    w.set(b"acct/c", b"C2")
    w.release(inner2)  # kept, but still undone by the outer revert
    assert w.get(b"acct/c") == b"C2"
    w.revert(outer)
    assert w.get(b"acct/a") == b"A0" and w.get(b"acct/b") == b"2" and w.get(b"acct/c") == b"3"
    assert w.changes() == {b"acct/a": b"A0"}
    with pytest.raises(ValueError):
        w.revert(outer)  # already closed
    # releasing the outer checkpoint keeps everything written inside it
    cp = w.checkpoint()
    w.set(b"acct/z", b"Z")
    nested = w.checkpoint()
    w.delete(b"acct/a")
    w.release(cp)  # closes the nested one too
    with pytest.raises(ValueError):
        w.release(nested)
    assert w.get(b"acct/z") == b"Z" and w.get(b"acct/a") is None


def test_revert_matches_a_snapshot_model(setup: tuple[MemoryStore, StateTree]) -> None:
    store, tree = setup
    rng = random.Random(12)
    w = WorldState(store, tree, data_prefix=DATA)
    committed = {k[len(DATA):]: v for k, v in store.iterate(DATA)}
    view = dict(committed)
    stack: list[tuple[int, dict[bytes, bytes]]] = []
    for _ in range(3000):
        r = rng.random()
        key = b"acct/%d" % rng.randrange(12)
        if r < 0.45:
            value = rng.randbytes(2)
            w.set(key, value)
            view[key] = value
        elif r < 0.6:
            w.delete(key)
            view.pop(key, None)
        elif r < 0.75:
            stack.append((w.checkpoint(), dict(view)))
        elif r < 0.88 and stack:
            cp, snap = stack.pop()
            w.revert(cp)
            view = snap
        elif stack:
            w.release(stack.pop()[0])
        assert all(w.get(k) == view.get(k) for k in (b"acct/%d" % i for i in range(12)))
        assert dict(w.iterate(b"acct/")) == {k: v for k, v in view.items() if k.startswith(b"acct/")}
    root = commit(w, store)
    assert root == fresh_root(view) == tree.root()


def test_iterate_merges_pending_and_committed(setup: tuple[MemoryStore, StateTree]) -> None:
    store, tree = setup
    w = WorldState(store, tree, data_prefix=DATA)
    w.set(b"acct/b", b"22")
    w.delete(b"acct/c")
    w.set(b"acct/0", b"first")
    w.set(b"acct/bb", b"between")
    w.set(b"acct/zz", b"last")
    w.set(b"acct", b"not under the prefix")
    w.delete(b"acct/missing")
    assert list(w.iterate(b"acct/")) == [
        (b"acct/0", b"first"), (b"acct/a", b"1"), (b"acct/b", b"22"), (b"acct/bb", b"between"),
        (b"acct/zz", b"last")]
    assert list(w.iterate(b"acct/", start=b"acct/b")) == [
        (b"acct/b", b"22"), (b"acct/bb", b"between"), (b"acct/zz", b"last")]
    assert list(w.iterate(b"acct/", start=b"acct/bc")) == [(b"acct/zz", b"last")]
    assert list(w.iterate(b"cfg/")) == [(b"cfg/x", b"9")]
    assert list(w.iterate(b"nothing/")) == []
    # tree nodes and other prefixes of the store never leak into the view
    assert all(not k.startswith(NODES) for k, _ in w.iterate(b""))
    assert [k for k, _ in w.iterate(b"")] == sorted(k for k, _ in w.iterate(b""))


def test_prepare_commit_write_mark_committed_matches_a_fresh_tree(tmp_path: Path) -> None:
    store = LevelDBStore(tmp_path / "db")
    try:
        tree = StateTree(store, NODES)
        rng = random.Random(3)
        model: dict[bytes, bytes] = {}
        for _block in range(15):
            w = WorldState(store, tree, data_prefix=DATA)
            for _ in range(rng.randint(1, 120)):
                key = b"k%d" % rng.randrange(300)
                if rng.random() < 0.25:
                    w.delete(key)
                    model.pop(key, None)
                else:
                    value = rng.randbytes(rng.randint(0, 12))
                    w.set(key, value)
                    model[key] = value
            preview = w.state_root_preview()
            before = dict(store.iterate())
            root, ops = w.prepare_commit()
            assert dict(store.iterate()) == before  # prepare_commit writes nothing
            assert root == preview == fresh_root(model)
            assert w.prepare_commit() == (root, ops)  # stable
            store.write_batch(ops)
            w.mark_committed()
            assert tree.root() == root
            assert w.changes() == {}
            assert {k[len(DATA):]: v for k, v in store.iterate(DATA)} == model
            assert all(w.get(k) == v for k, v in model.items())
        reopened = StateTree(store, NODES)
        assert reopened.root() == fresh_root(model)
    finally:
        store.close()


def test_mark_committed_requires_a_current_prepare(setup: tuple[MemoryStore, StateTree]) -> None:
    store, tree = setup
    w = WorldState(store, tree, data_prefix=DATA)
    w.set(b"acct/a", b"5")
    with pytest.raises(RuntimeError):
        w.mark_committed()
    _, ops = w.prepare_commit()
    w.set(b"acct/a", b"6")  # changed after prepare: the prepared ops are stale
    with pytest.raises(RuntimeError):
        w.mark_committed()
    root, ops = w.prepare_commit()
    store.write_batch(ops)
    w.mark_committed()
    assert tree.root() == root and w.get(b"acct/a") == b"6"


def test_failed_batch_leaves_the_committed_state_in_charge(setup: tuple[MemoryStore, StateTree]) -> None:
    store, tree = setup
    committed_root = tree.root()
    w = WorldState(store, tree, data_prefix=DATA)
    w.set(b"acct/a", b"lost")
    w.prepare_commit()  # the caller's batch fails: never written, never marked
    assert tree.root() == committed_root
    w2 = WorldState(store, tree, data_prefix=DATA)
    assert w2.get(b"acct/a") == b"1"
    w2.set(b"acct/b", b"kept")
    root = commit(w2, store)
    assert root == fresh_root({b"acct/a": b"1", b"acct/b": b"kept", b"acct/c": b"3", b"cfg/x": b"9"})
    with pytest.raises(TreeError):  # the stale world cannot be committed on top of the new state
        w.mark_committed()


def test_empty_block_keeps_the_root(setup: tuple[MemoryStore, StateTree]) -> None:
    store, tree = setup
    root = tree.root()
    w = WorldState(store, tree, data_prefix=DATA)
    assert commit(w, store) == root
    w = WorldState(store, tree, data_prefix=DATA)
    w.set(b"acct/a", b"1")  # same value as committed
    w.delete(b"absent")
    assert commit(w, store) == root
