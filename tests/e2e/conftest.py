"""Fixtures of the real-process network tests: a proxied 4-validator :class:`~tests.e2e.netproc.Testnet`, always
closed (every process killed, every relay closed); a failing test gets the tail of every node.log in its report."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.netproc import Testnet

BLOCK_TIME_MS = 500
"""Block interval of the fixture network."""
FORM_TIMEOUT_S = 120.0
"""How long the fixture waits for the started network to finalize its first blocks (a bound against a network that
never forms, not a timing: four interpreters starting on a host at load 15 can take a minute)."""
LOG_LINES = 60


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """Attach the tail of every validator's log to the report of a failed test that used a testnet."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.when in ("call", "teardown"):
        net = getattr(item, "funcargs", {}).get("testnet")
        if isinstance(net, Testnet):
            report.sections.append((f"testnet node logs ({call.when})", net.logs(LOG_LINES)))


@pytest.fixture
def testnet(tmp_path: Path) -> Iterator[Testnet]:
    """A started, proxied 4-validator network that has finalized height 2 on every validator."""
    net = Testnet.create(tmp_path, n=4, block_time_ms=BLOCK_TIME_MS, proxied=True)
    try:
        try:
            net.start()
            net.wait_heights(2, FORM_TIMEOUT_S)
        except BaseException:
            print(net.logs(LOG_LINES))  # shown as the setup error's captured output
            raise
        yield net
    finally:
        net.close()
