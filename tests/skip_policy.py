"""CI skip policy (issue 35): under ``.ci/run`` (``COWBOY_CI=1``) a skipped test is a failure, unless it is opt-in
by design or does not apply to this interpreter or host.

A skip in CI almost always means something the suite needs is missing (a Debian package such as bubblewrap or
chromium, a Python interpreter), so the test it claims to run never runs. ``.ci/run`` installs what the suite needs;
a test may still skip there only when its reason says why that is by design:

* ``opt-in:`` — it runs only when asked (an environment variable its make target sets, e.g.
  ``COWBOY_SDK_E2E=1``);
* ``not applicable:`` — it compares with something this interpreter or host cannot have by construction (CPython
  3.11's own Unicode tables on 3.12, a cgroup v1 hierarchy on a cgroup v2 host).

The hooks are imported by ``tests/conftest.py``; ``tests/unit/project/test_ci_skip_policy.py`` runs them.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

CI_ENV = "COWBOY_CI"
"""``1`` under ``.ci/run``."""
ALLOWED = ("opt-in:", "not applicable:")
"""Markers of a skip reason that is by design."""


def ci_failure(reason: str) -> str | None:
    """The failure text for a skip with ``reason`` in CI, or None when the skip is allowed (or not in CI)."""
    if os.environ.get(CI_ENV) != "1" or any(marker in reason for marker in ALLOWED):
        return None
    return (f"skipped in CI ({CI_ENV}=1): {reason} -- .ci/run installs what the suite needs; a test may skip there "
            f"only when opt-in by design ('opt-in: ...') or not applicable to this interpreter/host "
            "('not applicable: ...'), see tests/skip_policy.py")


def _reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr: Any = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _fail_if_disallowed(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    failure = ci_failure(_reason(report))
    if failure is not None:
        report.outcome = "failed"
        report.longrepr = failure


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """A test (or its setup: ``skipif`` markers) skipped in CI fails unless its reason is allowed."""
    outcome = yield
    _fail_if_disallowed(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    """A module skipped at import in CI (``pytest.importorskip``) fails unless its reason is allowed."""
    outcome = yield
    _fail_if_disallowed(outcome.get_result())
