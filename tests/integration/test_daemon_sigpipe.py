"""The daemons keep SIGPIPE ignored (Python's start-up disposition), so that a write to a closed pipe or socket
is an error they handle, not a signal that kills the process. The printing commands set it to its default (a
closed pipe ends them quietly, ``cowboy-node status | head``); ``cowboy-node run`` did too until this test, so the
validator died on any write to a pipe whose reader had gone."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.integration.nodeproc import NodeProcess
from tests.integration.runnerproc import RunnerProcess

pytestmark = pytest.mark.timeout(600)


def _ignored(pid: int) -> set[int]:
    """The signals process ``pid`` ignores (``SigIgn`` of ``/proc/PID/status``)."""
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("SigIgn:"))
    mask = int(line.split()[1], 16)
    return {n for n in range(1, 65) if mask >> (n - 1) & 1}


def test_node_and_runner_daemons_ignore_sigpipe(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "node")
    node.start()  # returns once /status answers: the CLI has set its signals and is serving
    try:
        assert node.proc is not None
        assert signal.SIGPIPE in _ignored(node.proc.pid)
        runner = RunnerProcess(tmp_path / "runner", node)
        runner.start()
        try:
            assert runner.proc is not None
            deadline = time.monotonic() + 60
            while not runner.status().get("running"):  # its status socket answers: past the CLI's set-up
                assert runner.proc.poll() is None, runner.read_log()[-3000:]
                assert time.monotonic() < deadline, runner.read_log()[-3000:]
                time.sleep(0.2)
            assert signal.SIGPIPE in _ignored(runner.proc.pid)
        finally:
            runner.stop()
    finally:
        assert node.terminate() == 0
