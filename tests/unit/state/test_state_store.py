"""Both StateStore backends honour the same contract."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from cowboy_node.state.kv_store import StoreError, WriteOp, prefix_end
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_node.state.memory import MemoryStore
from tests.unit.state.store_support import StoreFactory, reference


def test_get_put_delete(make_store: StoreFactory) -> None:
    s = make_store()
    assert s.get(b"a") is None
    s.write_batch([(b"a", b"1"), (b"b", b"2")])
    assert s.get(b"a") == b"1" and s.get(b"b") == b"2"
    s.write_batch([(b"a", None), (b"b", b"3"), (b"missing", None)])
    assert s.get(b"a") is None and s.get(b"b") == b"3"
    s.write_batch([(b"c", b"x"), (b"c", None), (b"d", None), (b"d", b"y")], sync=False)
    assert s.get(b"c") is None and s.get(b"d") == b"y"  # later ops on a key win
    s.write_batch([(b"e", b"")])
    assert s.get(b"e") == b""  # empty values are values, not deletes
    assert list(s.iterate()) == [(b"b", b"3"), (b"d", b"y"), (b"e", b"")]


def test_ordered_iteration_with_prefix_start_and_reverse(make_store: StoreFactory) -> None:
    s = make_store()
    rng = random.Random(3)
    alphabet = [b"\x00", b"\x01", b"a", b"b", b"\x7f", b"\xfe", b"\xff"]
    data = {b"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))): rng.randbytes(3) for _ in range(300)}
    s.write_batch(list(data.items()))
    prefixes = [b"", b"a", b"ab", b"\xff", b"\xff\xff", b"\x00", b"b\xff", b"zz"]
    starts: list[bytes | None] = [None, b"", b"a", b"a\x00", b"b", b"\xff", b"\xff\xff\xff\xff\xff", b"\x00\x00"]
    for prefix in prefixes:
        for start in starts:
            for reverse in (False, True):
                got = list(s.iterate(prefix, start=start, reverse=reverse))
                assert got == reference(data, prefix, start, reverse), (prefix, start, reverse)


def test_single_key_ranges_in_both_directions(make_store: StoreFactory) -> None:
    s = make_store()
    s.write_batch([(b"a", b"1"), (b"ab", b"2"), (b"b", b"3")])
    for reverse in (False, True):
        assert list(s.iterate(b"b", reverse=reverse)) == [(b"b", b"3")]
        assert list(s.iterate(b"ab", reverse=reverse)) == [(b"ab", b"2")]
        assert next(iter(s.iterate(b"", start=b"b", reverse=reverse))) == (b"b", b"3")
    assert list(s.iterate(b"a", start=b"a", reverse=True)) == [(b"a", b"1")]
    assert list(s.iterate(b"a", start=b"ab", reverse=True)) == [(b"ab", b"2"), (b"a", b"1")]
    assert list(s.iterate(b"a", start=b"ab")) == [(b"ab", b"2")]
    assert list(s.iterate(b"a", start=b"b")) == []
    assert list(s.iterate(b"b", start=b"a", reverse=True)) == []


def test_iteration_reflects_deletes_and_is_lazy(make_store: StoreFactory) -> None:
    s = make_store()
    s.write_batch([(b"k%03d" % i, b"v") for i in range(600)])
    s.write_batch([(b"k%03d" % i, None) for i in range(0, 600, 2)])
    keys = [k for k, _ in s.iterate(b"k")]
    assert keys == [b"k%03d" % i for i in range(1, 600, 2)]
    it = s.iterate(b"k", start=b"k100")
    assert next(it)[0] == b"k101"
    assert [k for k, _ in s.iterate(b"k", start=b"k100", reverse=True)][:2] == [b"k099", b"k097"]


def test_batch_is_atomic_when_the_ops_iterator_raises(make_store: StoreFactory) -> None:
    s = make_store()
    s.write_batch([(b"keep", b"old")])

    def ops() -> Iterator[WriteOp]:
        yield (b"keep", b"new")
        yield (b"x", b"1")
        yield (b"keep", None)
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        s.write_batch(ops())
    assert list(s.iterate()) == [(b"keep", b"old")]


def test_batch_is_atomic_when_an_op_is_malformed(make_store: StoreFactory) -> None:
    s = make_store()
    s.write_batch([(b"keep", b"old")])
    bad: list[WriteOp] = [(b"a", b"1"), (b"b", "text")]  # type: ignore[list-item]
    with pytest.raises(TypeError):
        s.write_batch(bad)
    assert list(s.iterate()) == [(b"keep", b"old")]


def test_leveldb_reopen_persists(tmp_path: Path) -> None:
    s = LevelDBStore(tmp_path / "db")
    s.write_batch([(b"a", b"1"), (b"b", b"2")])
    s.write_batch([(b"a", None)])
    s.close()
    s.close()  # idempotent
    again = LevelDBStore(tmp_path / "db", create_if_missing=False)
    try:
        assert list(again.iterate()) == [(b"b", b"2")]
    finally:
        again.close()


def test_leveldb_locked_path_raises_store_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "locked-db"
    first = LevelDBStore(path)
    try:
        with pytest.raises(StoreError, match="locked-db"):
            LevelDBStore(path)
    finally:
        first.close()
    LevelDBStore(path).close()  # free again once the holder closed it


def test_leveldb_missing_path_without_create_raises_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="nope"):
        LevelDBStore(tmp_path / "nope", create_if_missing=False)


def test_memory_store_survives_writes_during_iteration() -> None:
    s = MemoryStore()
    s.write_batch([(b"%04d" % i, b"v") for i in range(1000)])
    seen = []
    for i, (k, _) in enumerate(s.iterate()):
        seen.append(k)
        if i == 10:
            s.write_batch([(b"%04d" % j, None) for j in range(500)] + [(b"zzzz", b"new")])
    assert seen[:11] == [b"%04d" % i for i in range(11)]
    assert b"0400" not in seen and seen[-1] == b"zzzz"
    assert seen == sorted(seen)


def test_memory_store_bulk_and_small_batches_keep_the_index_sorted() -> None:
    s = MemoryStore()
    rng = random.Random(5)
    model: dict[bytes, bytes] = {}
    for _ in range(40):
        ops: list[WriteOp] = []
        for _ in range(rng.choice([3, 200])):
            k = rng.randbytes(2)
            v = None if rng.random() < 0.3 else rng.randbytes(2)
            ops.append((k, v))
            if v is None:
                model.pop(k, None)
            else:
                model[k] = v
        s.write_batch(ops)
    assert list(s.iterate()) == sorted(model.items())
    assert list(s.iterate(reverse=True)) == sorted(model.items(), reverse=True)


def test_closed_memory_store_refuses_use() -> None:
    s = MemoryStore()
    s.close()
    with pytest.raises(StoreError):
        s.get(b"a")


def test_prefix_end() -> None:
    assert prefix_end(b"") is None
    assert prefix_end(b"\xff\xff") is None
    assert prefix_end(b"a") == b"b"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"a\x00") == b"a\x01"
