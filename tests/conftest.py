"""Shared fixtures. Imports are lazy so a test module that needs none of them never imports the node."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from tests.skip_policy import pytest_make_collect_report, pytest_runtest_makereport

if TYPE_CHECKING:
    from cowboy_node.chain.chain import Chain
    from cowboy_node.node.devgenesis import DevGenesis


@pytest.fixture(scope="session")
def dev_genesis() -> DevGenesis:
    from tests.helpers import make_dev_genesis

    return make_dev_genesis()


@pytest.fixture
def chain(dev_genesis: DevGenesis) -> Chain:
    from cowboy_node.chain.chain import Chain
    from cowboy_node.state.memory import MemoryStore

    return Chain(MemoryStore(), dev_genesis.genesis)


@pytest.fixture
def new_chain(dev_genesis: DevGenesis) -> Callable[[], Chain]:
    from cowboy_node.chain.chain import Chain
    from cowboy_node.state.memory import MemoryStore

    return lambda: Chain(MemoryStore(), dev_genesis.genesis)


__all__ = ["pytest_make_collect_report", "pytest_runtest_makereport"]  # the CI skip policy's hooks
