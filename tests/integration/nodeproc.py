"""Run real ``cowboy-node`` processes for integration tests (loopback only, bounded in time)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent


def cli(*args: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the ``cowboy-node`` console script."""
    exe = BIN / "cowboy-node"
    cmd = [str(exe), *args] if exe.exists() else [sys.executable, "-m", "cowboy_node.cli.main", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=check)


def wait_for(what: str, cond: Any, timeout: float = 60.0) -> Any:
    """Poll ``cond()`` every 50 ms until it returns something truthy (returned), else fail naming ``what``. The
    default bound is for an eventual state on a loaded host (load 15 on 2 cores), not a timing."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


_PORT_SPAN = 1500
"""Ports per pytest-xdist worker, from 12000 up: below Linux's ephemeral range (32768–60999 by default), so no
outgoing connection of another test can take a port between this choice and the node's bind (port 0 is
chosen from that range, which is how a node once failed with ``address already in use``)."""
_PORT_BASE = 12000 + _PORT_SPAN * int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").lstrip("gw") or 0)
_next_port = _PORT_BASE + os.getpid() % 500


def free_port() -> int:
    """A loopback port free for both TCP and UDP now, from this worker's own range (see ``_PORT_SPAN``)."""
    global _next_port
    for _ in range(_PORT_SPAN):
        port = _next_port
        _next_port = _PORT_BASE + (_next_port + 1 - _PORT_BASE) % _PORT_SPAN
        try:
            with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                tcp.bind(("127.0.0.1", port))
                udp.bind(("127.0.0.1", port))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port in this worker's range")


class NodeProcess:
    """A node home directory and (when started) its process."""

    def __init__(self, home: Path, block_time_ms: int = 250) -> None:
        self.home = home
        self.rpc_port = free_port()
        self.metrics_port = free_port()
        self.url = f"http://127.0.0.1:{self.rpc_port}"
        self.proc: subprocess.Popen[bytes] | None = None
        cli("init", "--home", str(home), "--chain-id", "cowboy-it-1", "--rpc-addr", f"127.0.0.1:{self.rpc_port}",
            "--quic-addr", f"127.0.0.1:{free_port()}", "--metrics-addr", f"127.0.0.1:{self.metrics_port}",
            "--block-time-ms", str(block_time_ms))

    def start(self, timeout: float = 30) -> None:
        exe = BIN / "cowboy-node"
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "cowboy_node.cli.main"]
        self.log = open(self.home / "node.log", "ab")  # noqa: SIM115 - closed in wait/kill
        self.proc = subprocess.Popen([*cmd, "run", "--home", str(self.home)], stdout=self.log,
                                     stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.close()
                raise RuntimeError(f"node exited with {self.proc.returncode}: {self.read_log()[-2000:]}")
            try:
                if self.get("/health")["ok"]:
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        raise TimeoutError("node did not become healthy")

    def read_log(self) -> str:
        return (self.home / "node.log").read_text(errors="replace")

    def get(self, path: str) -> Any:
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            return json.loads(e.read())

    def post_tx(self, tx_bytes: bytes) -> tuple[int, Any]:
        req = urllib.request.Request(self.url + "/submit", data=tx_bytes,
                                     headers={"Content-Type": "application/octet-stream"})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.log.close()

    def terminate(self, timeout: float = 20) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=timeout)
        self.log.close()
        return rc
