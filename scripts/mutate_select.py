#!/usr/bin/env python3
"""Per-mutant test selection for ``scripts/mutate.py``: run a mutant first against the tests that execute the
function it mutates, and the whole list only when those pass.

A mutant changes one function of the module (or module-level code). A test that never calls that function in the
unmutated run behaves identically with the mutant: the program is the same up to the first call, and there is none.
So a session first records, once, which tests call each function of the module (``record``: one pytest run of the
module's tests with calls traced, each call attributed to the test whose setup, call or teardown made it), then
every mutant runs (``run``):

1. its *selection*: the tests recorded calling the functions whose lines the mutant changed, in collection order.
   Lines outside every function (module level, class bodies), and functions the import itself called, select
   every test. A selection that fails kills the mutant (tests are independent: ``make test`` already runs them split
   arbitrarily over xdist workers). A selection runs under a time budget of ``TIME_FACTOR`` × the selected tests'
   recorded time + ``TIME_SLACK_S`` from the end of collection; over it the mutant is killed as a timeout
   (marker ``TIMEOUT_MARKER`` in its output, counted as such by ``mutate.py``), without waiting for the
   session's whole-list timeout;
2. if the selection passes, the module's whole test list (the same command as without selection): a test that only
   sees the mutant through state a shared fixture built in another test's setup is then still run, so a survivor is
   always a survivor of the whole list. The selection can only make a kill come sooner: it never decides a
   survival;
3. a mutant in a function no traced test calls (a child process is not traced) goes straight to the whole list.

    mutate_select.py record MAP TARGET TESTS_JSON -- PYTEST_ARGS...   (in the session's copy of the tree, once)
    mutate_select.py run MAP -- PYTEST_ARGS...                 (cosmic-ray's test command)
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

TIME_FACTOR = 10.0
"""A selection may take this many times its tests' recorded time (a mutant slowed that much is looping)."""
TIME_SLACK_S = float(os.environ.get("MUTATE_SELECT_SLACK_S", "10"))
"""Added to every selection's budget (counted from the end of collection): a loaded machine's noise
(``MUTATE_SELECT_SLACK_S``)."""
TIMEOUT_MARKER = "mutate-select: selection over its time budget"
"""Printed by a selection stopped at its budget; ``mutate.py`` counts such a kill in the timeout column."""
ALL = "*"
"""Span key of code outside every function, and of the functions the import called: every test."""


def function_spans(source: str) -> list[tuple[int, int]]:
    """Line spans (first, last) of every function of ``source``, decorators included, nested ones too."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            spans.append((first, node.end_lineno or node.lineno))
    return spans


def innermost(line: int, spans: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The smallest span holding ``line``; None outside every function."""
    holding = [s for s in spans if s[0] <= line <= s[1]]
    return min(holding, key=lambda s: s[1] - s[0]) if holding else None


def changed_lines(original: str, mutated: str) -> set[int]:
    """1-based line numbers, in ``original``, of the lines the mutation replaced or removed (for a pure insertion,
    the line it was inserted before)."""
    out: set[int] = set()
    matcher = difflib.SequenceMatcher(a=original.splitlines(), b=mutated.splitlines(), autojunk=False)
    for tag, i1, i2, _j1, _j2 in matcher.get_opcodes():
        if tag != "equal":
            out.update(range(i1 + 1, max(i2, i1 + 1) + 1))
    return out


class _Recorder:
    """pytest plugin: which functions of one file each test calls (in its setup, call or teardown), which ones the
    import and collection called, and each test's time.

    A function is named by its code's first line (``co_firstlineno``: the first decorator's line when decorated, as
    :func:`function_spans` counts it). Only calls are traced, not lines: a ``def`` line runs in the enclosing frame
    at import, but only a call runs the function's body, where a mutant is."""

    def __init__(self, target: str) -> None:
        self.target = os.path.realpath(target)
        self.current: str | None = None
        self.calls: dict[str, set[int]] = {}
        self.at_import: set[int] = set()
        self.order: list[str] = []
        self.seconds: dict[str, float] = {}
        self._t0 = 0.0
        self._paths: dict[str, bool] = {}

    def _trace(self, frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        mine = self._paths.get(code.co_filename)
        if mine is None:
            mine = self._paths[code.co_filename] = os.path.realpath(code.co_filename) == self.target
        if mine and event == "call":
            (self.calls.setdefault(self.current, set()) if self.current else self.at_import).add(code.co_firstlineno)
        return None  # no line tracing: the call is all it records

    def pytest_configure(self) -> None:
        sys.settrace(self._trace)
        threading.settrace(self._trace)

    def pytest_unconfigure(self) -> None:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type,unused-ignore]

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:  # before the test's setup
        self.current = nodeid
        self.order.append(nodeid)
        self._t0 = time.perf_counter()

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        self.seconds[nodeid] = self.seconds.get(nodeid, 0.0) + time.perf_counter() - self._t0
        self.current = None


def record(map_path: Path, target: Path, pytest_args: list[str], test_args: list[str]) -> int:
    """One traced run of ``pytest_args``; writes the map (the module's text, the tests that called each of its
    functions, each test's seconds, and which of ``pytest_args`` name tests: ``test_args``). The run must pass.
    ``target`` is relative to the working directory, as the mutants' runs resolve it."""
    import pytest

    rec = _Recorder(str(target))
    code = pytest.main(pytest_args, plugins=[rec])
    if code != 0:
        print(f"mutate-select: the recording run failed (exit {code})", file=sys.stderr)
        return int(code)
    tests: dict[str, set[str]] = {}
    for test, firsts in rec.calls.items():
        for first in firsts:
            tests.setdefault(str(first), set()).add(test)
    for first in rec.at_import:  # a function the import called (a table built at load): every test sees it
        tests[str(first)] = {ALL}
    rank = {t: i for i, t in enumerate(rec.order)}
    doc = {"target": str(target), "source": target.read_text(encoding="utf-8"), "test_args": test_args,
           "order": rec.order, "seconds": {t: round(s, 4) for t, s in rec.seconds.items()},
           "tests": {k: sorted(v, key=lambda t: rank.get(t, -1)) for k, v in tests.items()}}
    map_path.write_text(json.dumps(doc))
    return 0


def selection(doc: dict[str, Any], mutated: str) -> list[str] | None:
    """The tests to run first for ``mutated`` (the module's text with the mutant), in collection order; None: every
    test (code outside the functions, or a function the import ran)."""
    spans = function_spans(doc["source"])
    chosen: set[str] = set()
    for line in changed_lines(doc["source"], mutated):
        span = innermost(line, spans)
        if span is None:
            return None
        hit = doc["tests"].get(str(span[0]), [])
        if ALL in hit:
            return None
        chosen.update(hit)
    rank = {t: i for i, t in enumerate(doc["order"])}
    return sorted(chosen, key=lambda t: rank[t])


class _Budget:
    """pytest plugin: end the process (status 3, :data:`TIMEOUT_MARKER`) when the tests run longer than ``seconds``
    from the end of collection (start-up and collection are not the mutant's: they vary with the machine's load).
    A thread, not SIGALRM: pytest-timeout's signal method would take the alarm over."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._out = os.dup(1)  # the real stdout: pytest's capture has fd 1 while the tests run
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def _expire(self) -> None:
        os.write(self._out, f"{TIMEOUT_MARKER}\n".encode())
        os._exit(3)

    def pytest_collection_finish(self) -> None:
        self._timer.start()

    def cancel(self) -> None:
        self._timer.cancel()


def plan(map_path: Path, pytest_args: list[str]) -> list[tuple[list[str], float | None]]:
    """The pytest runs of one mutant, in order, each ``(arguments, budget in seconds or None)``: the selection
    under its budget when it is a proper subset of the list, then the whole list. A run that fails ends the plan
    (the mutant is killed); only the last run decides a survival."""
    doc = json.loads(map_path.read_text())
    target = Path(doc["target"])
    chosen = selection(doc, target.read_text(encoding="utf-8"))
    if chosen == []:  # no traced test calls it (perhaps one calls it in a child process): the whole list decides
        print("mutate-select: no test calls the mutated function here", flush=True)
    runs: list[tuple[list[str], float | None]] = []
    if chosen and len(chosen) < len(doc["order"]):
        named = set(doc["test_args"])
        options = [a for a in pytest_args if a not in named]
        budget = TIME_FACTOR * sum(doc["seconds"].get(t, 0.0) for t in chosen) + TIME_SLACK_S
        print(f"mutate-select: {len(chosen)} of {len(doc['order'])} tests first (budget {budget:.0f} s "
              "after collection)", flush=True)
        runs.append(([*options, *chosen], budget))
    runs.append((pytest_args, None))
    return runs


def pytest_main(args: list[str], budget: float | None) -> int:
    """One pytest run in this process, ended at ``budget`` seconds after collection (:class:`_Budget`)."""
    import pytest  # here, not at the top: the fork server's client (scripts/mutate_fork.py) plans without it

    if budget is None:
        return int(pytest.main(args))
    timer = _Budget(budget)
    code = pytest.main(args, plugins=[timer])
    timer.cancel()
    return int(code)


def run(map_path: Path, pytest_args: list[str]) -> int:
    """cosmic-ray's test command: the selection under its budget, then (if it passed) the whole list."""
    *first, (whole, _) = plan(map_path, pytest_args)
    for args, budget in first:
        code = pytest_main(args, budget)
        if code != 0:
            return code
    print("mutate-select: the whole list", flush=True)
    # A second pytest.main in one process would reuse imported test modules; the whole list gets its own process.
    os.execv(sys.executable, [sys.executable, "-m", "pytest", *whole])
    return 0  # not reached


def main(argv: list[str]) -> int:
    if len(argv) < 3 or "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    sep = argv.index("--")
    head, pytest_args = argv[:sep], argv[sep + 1:]
    if head[0] == "record" and len(head) == 4:
        return record(Path(head[1]), Path(head[2]), pytest_args, json.loads(head[3]))
    if head[0] == "run" and len(head) == 2:
        return run(Path(head[1]), pytest_args)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
