"""Shared fixtures. Imports are lazy so a test module that needs none of them never imports the node."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from tests.skip_policy import pytest_make_collect_report, pytest_runtest_makereport

if TYPE_CHECKING:
    from cowboy_node.chain.chain import Chain
    from cowboy_node.node.devgenesis import DevGenesis


@pytest.fixture(autouse=True)
def _sigpipe_stays_ignored() -> Iterator[None]:
    """A test must leave SIGPIPE ignored, as Python starts it: at its default, a later test's write to a closed
    pipe (a killed MCP server's stdin) kills the whole xdist worker ("node down") instead of raising an error.
    An in-process ``cowboy-node`` CLI call did this once."""
    yield
    if signal.getsignal(signal.SIGPIPE) != signal.SIG_IGN:
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        pytest.fail("the test left SIGPIPE at its default (a later write to a closed pipe would kill the worker)")


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
