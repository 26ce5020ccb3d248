"""``run --halt-height`` and ``cowboy-node rollback`` on a real node process and data directory (issue 34 §3).

The node commits the halt height and exits 0 with a clear log line; it refuses to start again at or past it;
``rollback`` undoes the head block; the restarted node re-finalizes the kept block from its vote journal and
re-executes it (same hash); a second rollback is refused with a typed code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.integration.nodeproc import BIN, NodeProcess, cli


def _run_to_exit(node: NodeProcess, *args: str, timeout: float = 90) -> tuple[int, str]:
    """Run the node in the foreground until it exits by itself (bounded); its exit code and log."""
    exe = BIN / "cowboy-node"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "cowboy_node.cli.main"]
    log = node.home / "node.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([*cmd, "run", "--home", str(node.home), *args], stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            rc = proc.wait(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    return rc, log.read_text(errors="replace")


def _head(node: NodeProcess) -> dict[str, object]:
    """The stopped node's head, from ``cowboy-node replay`` (re-executes and checks every stored block)."""
    out = json.loads(cli("replay", "--home", str(node.home), timeout=120).stdout)
    assert out["ok"], out
    return out


def test_halt_height_then_rollback_then_the_same_block_again(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "home", block_time_ms=100)
    rc, log = _run_to_exit(node, "--halt-height", "4")
    assert rc == 0, log[-3000:]
    assert "halt height reached" in log
    assert _head(node)["height"] == 4

    refused = cli("run", "--home", str(node.home), "--halt-height", "4", check=False, timeout=60)
    assert refused.returncode == 1 and "--halt-height: 4 is at or below the committed head 4" in refused.stderr

    done = cli("rollback", "--home", str(node.home), check=False)
    out = json.loads(done.stdout)
    assert done.returncode == 0 and out["ok"] and (out["rolled_back_height"], out["height"]) == (4, 3), out
    assert _head(node)["height"] == 3

    again = json.loads(cli("rollback", "--home", str(node.home), check=False).stdout)
    assert again["ok"] is False and again["code"] == "no_undo_record"

    rc, log = _run_to_exit(node, "--halt-height", "4")
    assert rc == 0 and "halt height reached" in log, log[-3000:]
    assert _head(node)["height"] == 4
    node.start()  # no halt height: the chain goes on from the re-committed block
    try:
        block4 = node.get("/block/4")
        assert block4["hash"] == out["rolled_back_hash"]
        assert node.get("/status")["storage"]["earliest_retained_height"] == 0
    finally:
        assert node.terminate() == 0


def test_rollback_is_refused_while_the_node_runs(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "home", block_time_ms=100)
    node.start()
    try:
        out = json.loads(cli("rollback", "--home", str(node.home), check=False).stdout)
        assert out["ok"] is False and out["code"] == "cannot_open"
    finally:
        assert node.terminate() == 0
