"""state/slots.py: the 256 depth-2 slots give the state tree's root, and each slot is a function of its entries."""

from __future__ import annotations

import random

import pytest

from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.slots import EMPTY_SLOT, SLOTS, Slot, root_from_slots, slot_index, slot_of_entries
from cowboy_node.state.tree import StateTree, keccak256
from tests.unit.storage.chain_fixture import commit_transfers


def _slots(entries: dict[bytes, bytes]) -> list[Slot]:
    by_slot: list[list[tuple[bytes, bytes]]] = [[] for _ in range(SLOTS)]
    for k, v in entries.items():
        by_slot[slot_index(keccak256(k))].append((k, v))
    return [slot_of_entries(e) if e else EMPTY_SLOT for e in by_slot]


def _tree_root(entries: dict[bytes, bytes]) -> bytes:
    tree = StateTree(MemoryStore(), b"n/")
    update = tree.prepare(dict(entries))
    return update.root


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 300, 5000])
def test_slots_recompute_the_tree_root(n: int) -> None:
    rng = random.Random(n)
    entries = {rng.randbytes(rng.randint(1, 40)): rng.randbytes(rng.randint(0, 60)) for _ in range(n)}
    assert root_from_slots(_slots(entries)) == _tree_root(entries)


def test_keys_sharing_a_long_hash_prefix_give_the_same_root() -> None:
    # Keys whose hashes share their first byte (one slot) and, some, their first two bytes (one-child chains).
    rng = random.Random(7)
    pool = [rng.randbytes(8) for _ in range(60_000)]
    first = keccak256(pool[0])
    same_byte = [k for k in pool if keccak256(k)[0] == first[0]][:40]
    same_two = [k for k in pool if keccak256(k)[:2] == first[:2]][:3]
    entries = {k: b"v" + k for k in [*same_byte, *same_two]}
    assert len(same_two) >= 2
    assert root_from_slots(_slots(entries)) == _tree_root(entries)


def test_the_slots_of_a_real_chain_give_its_committed_state_root(dev_genesis: DevGenesis, chain) -> None:  # type: ignore[no-untyped-def]
    commit_transfers(chain, dev_genesis, 3)
    entries = {k[2:]: v for k, v in chain.store.iterate(b"s/")}
    assert root_from_slots(_slots(entries)) == chain.head.header.state_root == chain.tree.root()


def test_changing_one_value_changes_its_slot_and_the_root() -> None:
    entries = {bytes([i]) * 3: b"x" for i in range(50)}
    slots = _slots(entries)
    key = next(iter(entries))
    changed = _slots({**entries, key: b"y"})
    i = slot_index(keccak256(key))
    assert changed[i] != slots[i] and [s for j, s in enumerate(changed) if j != i] == \
        [s for j, s in enumerate(slots) if j != i]
    assert root_from_slots(changed) != root_from_slots(slots)
