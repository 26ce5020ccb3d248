"""Derived keys (``state/derived.py``): stored, read, iterated and journaled like any state key, but left out of the
state tree, so out of every root and proof."""

from __future__ import annotations

from cowboy_node.state.derived import DERIVED_PREFIXES, is_derived
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.tree import StateTree
from cowboy_node.state.world import WorldState
from tests.unit.state.test_state_tree import ref_root

POINTER = b"timer/t/" + b"\x22" * 32
ACTOR = b"timer/a/" + b"\x11" * 20 + b"\x22" * 32


def _world(store: MemoryStore) -> WorldState:
    return WorldState(store, StateTree(store, b"n/"), data_prefix=b"s/")


def test_the_derived_prefixes_are_the_timer_indexes_and_nothing_else() -> None:
    assert DERIVED_PREFIXES == (b"timer/a/", b"timer/t/")
    assert is_derived(POINTER) and is_derived(ACTOR)
    assert not any(is_derived(k) for k in (b"timer/h/" + bytes(16), b"timer/g/x", b"timer/m/x", b"timer/seq",
                                            b"timer/", b"timer/tt", b"acct/timer/t/"))


def test_derived_keys_are_stored_and_read_back_but_the_root_does_not_commit_to_them() -> None:
    store = MemoryStore()
    world = _world(store)
    world.set(b"acct/1", b"x")
    world.set(POINTER, bytes(16))
    world.set(ACTOR, b"\x0c")
    root, ops = world.prepare_commit()
    assert root == ref_root({b"acct/1": b"x"})
    assert (b"s/" + POINTER, bytes(16)) in ops and (b"s/" + ACTOR, b"\x0c") in ops
    store.write_batch(ops, sync=True)
    world.mark_committed()
    again = _world(store)  # as after a restart
    assert again.tree.root() == root
    assert again.get(POINTER) == bytes(16) and list(again.iterate(b"timer/a/")) == [(ACTOR, b"\x0c")]
    assert again.tree.prove(POINTER).value is None  # not in the tree
    again.delete(POINTER)
    assert again.prepare_commit()[0] == root  # deleting one moves no root either
    again.set(b"acct/2", b"y")  # control: a committed key does
    assert again.prepare_commit()[0] == ref_root({b"acct/1": b"x", b"acct/2": b"y"}) != root


def test_a_derived_write_is_undone_by_a_revert() -> None:
    world = _world(MemoryStore())
    cp = world.checkpoint()
    world.set(POINTER, bytes(16))
    world.revert(cp)
    assert world.get(POINTER) is None
    _, ops = world.prepare_commit()
    assert ops == [(b"n/\xff", ops[0][1])]  # the root pointer alone: nothing of the reverted write is stored
