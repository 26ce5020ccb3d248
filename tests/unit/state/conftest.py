"""Fixtures of the store tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cowboy_node.state.kv_store import StateStore
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_node.state.memory import MemoryStore
from tests.unit.state.store_support import StoreFactory


@pytest.fixture(params=["memory", "leveldb"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Each test runs once per backend."""
    opened: list[StateStore] = []

    def factory() -> StateStore:
        store: StateStore = MemoryStore() if request.param == "memory" else LevelDBStore(tmp_path / "db")
        opened.append(store)
        return store

    yield factory
    for s in opened:
        s.close()
