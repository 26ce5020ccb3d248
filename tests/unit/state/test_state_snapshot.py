"""``StateStore.snapshot()``: a read-only, point-in-time view, the same for the memory and LevelDB stores."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from cowboy_node.state.kv_store import StateStore, StoreError
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_node.state.memory import MemoryStore
from tests.unit.state.store_support import StoreFactory, reference


def _views(rng: random.Random, alphabet: list[bytes]) -> list[tuple[bytes, bytes | None, bool]]:
    out: list[tuple[bytes, bytes | None, bool]] = [(b"", None, False), (b"", None, True)]
    for _ in range(30):
        prefix = b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 2)))
        start = None if rng.random() < 0.3 else b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3)))
        out.append((prefix, start, rng.random() < 0.5))
    return out


def test_a_snapshot_keeps_answering_for_the_moment_it_was_taken(make_store: StoreFactory) -> None:
    s = make_store()
    rng = random.Random(11)
    alphabet = [b"\x00", b"a", b"b", b"\xff"]
    data: dict[bytes, bytes] = {}
    snaps: list[tuple[StateStore, dict[bytes, bytes]]] = []
    for round_ in range(6):
        ops: list[tuple[bytes, bytes | None]] = []
        for _ in range(rng.choice([3, 200])):  # small batches and bulk ones (the memory store's two paths)
            key = b"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4)))
            value = None if rng.random() < 0.3 else rng.randbytes(2)
            ops.append((key, value))
        s.write_batch(ops)
        for key, value in ops:
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
        snaps.append((s.snapshot(), dict(data)))
        if round_ == 2:
            snaps.append((s.snapshot(), dict(data)))  # two snapshots of one moment
    views = _views(rng, alphabet)
    for snap, expected in snaps:
        for key in [*list(expected)[:20], b"missing", b"a"]:
            assert snap.get(key) == expected.get(key)
        for prefix, start, reverse in views:
            assert list(snap.iterate(prefix, start=start, reverse=reverse)) == \
                reference(expected, prefix, start, reverse), (prefix, start, reverse)
        snap.close()
    assert list(s.iterate()) == reference(data, b"", None, False)  # the store itself has every write


def test_a_snapshot_iteration_is_unaffected_by_writes_made_while_it_runs(make_store: StoreFactory) -> None:
    s = make_store()
    s.write_batch([(bytes([i]), b"v") for i in range(0, 250, 2)])
    snap = s.snapshot()
    it = snap.iterate()
    first = [next(it) for _ in range(10)]
    s.write_batch([(bytes([i]), b"new") for i in range(1, 250, 2)] + [(bytes([i]), None) for i in range(100, 250, 2)])
    rest = list(it)
    assert first + rest == [(bytes([i]), b"v") for i in range(0, 250, 2)]
    assert next(iter(snap.iterate(reverse=True))) == (bytes([248]), b"v")
    snap.close()


def test_a_snapshot_refuses_writes_and_is_its_own_snapshot(make_store: StoreFactory) -> None:
    s = make_store()
    s.write_batch([(b"k", b"1")])
    snap = s.snapshot()
    with pytest.raises(StoreError, match="read-only"):
        snap.write_batch([(b"k", b"2")])
    with pytest.raises(StoreError):
        snap.write_batch([])
    assert snap.snapshot() is snap
    assert s.get(b"k") == b"1" and snap.get(b"k") == b"1"
    snap.close()
    snap.close()  # idempotent
    s.write_batch([(b"k", b"3")])
    assert s.get(b"k") == b"3"


def test_memory_snapshot_is_copy_on_write() -> None:
    s = MemoryStore()
    s.write_batch([(b"a", b"1")])
    snap = s.snapshot()
    assert snap._data is s._data  # nothing copied yet
    s.write_batch([(b"b", b"2")])
    assert snap._data is not s._data and list(snap.iterate()) == [(b"a", b"1")]
    data_after_copy = s._data
    s.write_batch([(b"c", b"3")])
    assert s._data is data_after_copy  # no snapshot since: written in place again
    s.close()
    assert list(snap.iterate()) == [(b"a", b"1")]  # a snapshot outlives the store's close
    with pytest.raises(StoreError):
        s.snapshot()


def test_leveldb_snapshot_cannot_be_taken_of_a_closed_store(tmp_path: Path) -> None:
    s = LevelDBStore(tmp_path / "db")
    s.close()
    with pytest.raises(StoreError, match="cannot snapshot"):
        s.snapshot()
