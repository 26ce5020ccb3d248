"""Real ``cowboy-runner`` processes next to a real ``cowboy-node`` for integration tests: the runner CLI, a local
HTTP job target, a runner home set up with ``init`` + ``register``, and a node world with a job-submitting actor."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from cowboy_protocol.codec import decode
from tests.integration.nodeproc import BIN, NodeProcess, cli, free_port

BODY = b'{"price": 42}'
ACTOR = '''import pvm_host


def start(payload):
    job_id = pvm_host.submit_job(payload)
    pvm_host.set_state(b"job", job_id)
    return job_id


def on_result(payload):
    pvm_host.set_state(b"last", payload)
    return b""
'''


def runner_cli(*args: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
    exe = BIN / "cowboy-runner"
    cmd = [str(exe), *args] if exe.exists() else [sys.executable, "-m", "cowboy_runner.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=check)


class ThreadedApp:
    """An aiohttp application served on ``host`` (a loopback address) from its own thread and event loop, so the
    test's main thread can drive blocking CLIs meanwhile. Subclasses give :meth:`make_app`."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)

    def make_app(self) -> web.Application:
        """The application to serve (called on the server's thread)."""
        raise NotImplementedError

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._runner = web.AppRunner(self.make_app())
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, self.host, 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        self._loop.run_forever()

    def __enter__(self) -> Self:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


HOLD_LIMIT_S = 120.0
"""Longest a held answer waits for :meth:`HttpServer.release` (a test that forgets to release still ends)."""


class HttpServer(ThreadedApp):
    """A local HTTP server answering ``GET /price`` with :data:`BODY`; ``delay_s`` makes every answer slow."""

    def __init__(self, delay_s: float = 0.0, host: str = "127.0.0.1", *, hold: bool = False) -> None:
        super().__init__(host)
        self.delay_s = delay_s
        self.hits = 0
        self._released = threading.Event()
        """With ``hold``: answers wait for :meth:`release` (a test holds a job in flight explicitly instead of
        racing a fixed delay against its checks)."""
        if not hold:
            self._released.set()

    def release(self) -> None:
        """Let held answers go (and every later one answer at once)."""
        self._released.set()

    async def _handle(self, request: web.Request) -> web.Response:
        self.hits += 1
        deadline = time.monotonic() + HOLD_LIMIT_S
        while not self._released.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await asyncio.sleep(self.delay_s)
        return web.Response(body=BODY, content_type="application/json")

    def make_app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/price", self._handle)
        return app


class RunnerProcess:
    """A runner home (init + register through the runner CLI) and its ``run`` process."""

    def __init__(self, home: Path, node: NodeProcess) -> None:
        self.home = home
        out = json.loads(runner_cli("init", "--home", str(home), "--validator-rpc", node.url).stdout)
        self.address = out["address"]
        quic = re.search(r'^addr\s*=\s*"([^"]+)"', (node.home / "config.toml").read_text().split("[quic]", 1)[1],
                         re.M)
        assert quic is not None
        toml = (home / "runner.toml").read_text()
        toml = toml.replace('# quic_endpoint = ', f'quic_endpoint = "{quic.group(1)}"\n# was: ', 1)
        toml = toml.replace('http_domains = ["example.com"]', 'http_domains = ["127.0.0.1"]')
        toml = toml.replace("poll_interval_s = 2.0", "poll_interval_s = 0.5")
        toml = toml.replace("enabled = true", "enabled = false")
        (home / "runner.toml").write_text(toml)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        exe = BIN / "cowboy-runner"
        self.log = open(self.home / "runner.log", "ab")  # noqa: SIM115 - closed in stop/kill
        self.proc = subprocess.Popen([str(exe), "run", "--home", str(self.home)], stdout=self.log,
                                     stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1",
                                          "COWBOY_RUNNER_ALLOW_PRIVATE_ADDRESSES": "1"})

    def status(self) -> dict[str, Any]:
        r = runner_cli("status", "--home", str(self.home), "--json", check=False)
        return json.loads(r.stdout) if r.stdout.strip() else {}

    def wait_session(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None and self.proc.poll() is None, self.read_log()[-3000:]
            s = self.status()
            if s.get("running") and any(x["connected"] for x in s.get("sessions", [])):
                return
            time.sleep(0.2)
        raise AssertionError("runner session never came up: " + self.read_log()[-3000:])

    def read_log(self) -> str:
        return (self.home / "runner.log").read_text(errors="replace")

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=20)
        self.log.close()
        return rc

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.log.close()


def _json(r: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(r.stdout)


def submit_job(node: NodeProcess, actor: str, url: str) -> bytes:
    doc = {"job_type": {"kind": "http", "url": url, "method": "GET"},
           "verification": {"mode": "none", "runners": 1, "threshold": 1}, "max_price": "1000000",
           "timeout_blocks": 200, "callback": {"actor": actor, "handler": "on_result", "correlation_id": "e2e"}}
    called = _json(cli("tx", "call", "--key", str(node.home / "keys" / "faucet.key"), "--actor", actor,
                       "--handler", "start", "--payload", "0x" + json.dumps(doc).encode().hex(), "--rpc", node.url,
                       "--wait", "--timeout", "30"))
    assert called["receipt"]["status"] == "success", called
    return bytes.fromhex(called["result"][2:])


def wait_callback(node: NodeProcess, actor: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = node.get(f"/actor/{actor}/state?key=0x" + b"last".hex())["value"]
        if value is not None:
            return decode(bytes.fromhex(value[2:]))
        time.sleep(0.2)
    raise AssertionError("the actor's callback never stored a result")


@contextmanager
def runner_world(tmp_path: Path, block_time_ms: int = 250) -> Iterator[tuple[NodeProcess, RunnerProcess, str]]:
    """A running node with a registered (not yet running) runner and a funded job-submitting actor."""
    node = NodeProcess(tmp_path / "node", block_time_ms=block_time_ms)
    node.start()
    try:
        faucet = str(node.home / "keys" / "faucet.key")
        runner = RunnerProcess(tmp_path / "runner", node)
        cli("tx", "transfer", "--key", faucet, "--to", runner.address, "--amount", str(10**20), "--rpc", node.url,
            "--wait", "--timeout", "30")
        reg = runner_cli("register", "--home", str(runner.home), "--stake", str(10**18), check=False)
        assert reg.returncode == 0, reg.stderr + reg.stdout
        assert _json(reg)["status"] == "success"
        src = tmp_path / "actor.py"
        src.write_text(ACTOR)
        deployed = _json(cli("tx", "deploy", "--key", faucet, "--source", str(src), "--rpc", node.url,
                             "--timeout", "30"))
        actor = deployed["address"]
        cli("tx", "transfer", "--key", faucet, "--to", actor, "--amount", str(10**20), "--rpc", node.url, "--wait",
            "--timeout", "30")
        yield node, runner, actor
    finally:
        node.terminate()


def set_node_block_time(node: NodeProcess, block_time_ms: int) -> None:
    """Set ``[node] block_time_ms`` in the (stopped) node's config.toml; it takes effect at the next start."""
    path = node.home / "config.toml"
    text, n = re.subn(r"^#?\s*block_time_ms = \d+$", f"block_time_ms = {block_time_ms}", path.read_text(),
                      count=1, flags=re.M)
    assert n == 1, "config.toml has no block_time_ms line"
    path.write_text(text)


def enable_runner_metrics(runner: RunnerProcess) -> str:
    """Turn the (not yet started) runner's Prometheus port on at a free loopback port; returns the metrics URL."""
    port = free_port()
    path = runner.home / "runner.toml"
    head, sep, tail = path.read_text().partition("[metrics]")
    assert sep, "runner.toml has no [metrics] section"
    tail = re.sub(r'^addr = "[^"]*"$', f'addr = "127.0.0.1:{port}"', tail, count=1, flags=re.M)
    tail = re.sub(r"^enabled = false$", "enabled = true", tail, count=1, flags=re.M)
    path.write_text(head + sep + tail)
    return f"http://127.0.0.1:{port}/metrics"


def metric_value(url: str, name: str, **labels: str) -> float:
    """One sample of a Prometheus exposition (0.0 while the labelled series does not exist yet)."""
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


def journal_row(runner: RunnerProcess, job_id: bytes) -> dict[str, Any] | None:
    """The runner's journal row for ``job_id``, read from the SQLite file (read-only, the daemon keeps writing)."""
    db = sqlite3.connect(f"file:{runner.home / 'data' / 'journal.sqlite3'}?mode=ro", uri=True, timeout=5)
    try:
        db.row_factory = sqlite3.Row
        row = db.execute("SELECT * FROM obligations WHERE job_id = ?", (job_id,)).fetchone()
        return None if row is None else dict(row)
    finally:
        db.close()


class HostHttpServer(HttpServer):
    """:class:`HttpServer` on another loopback address (``127.0.0.N``): jobs for it pass the on-chain capability
    filter only for runners whose ``http_domains`` name that address, so several runners can share one node."""

    def __init__(self, host: str, delay_s: float = 0.0, *, hold: bool = False) -> None:
        super().__init__(delay_s, host, hold=hold)

    @property
    def url(self) -> str:
        """The job URL of this server."""
        return f"http://{self.host}:{self.port}/price"


def edit_runner_toml(runner: RunnerProcess, *replacements: tuple[str, str]) -> None:
    """Apply exact text replacements to the runner's ``runner.toml`` (each must match once)."""
    path = runner.home / "runner.toml"
    toml = path.read_text()
    for old, new in replacements:
        assert toml.count(old) == 1, f"{old!r} occurs {toml.count(old)} times in runner.toml"
        toml = toml.replace(old, new)
    path.write_text(toml)


def fund_and_register(node: NodeProcess, runner: RunnerProcess, stake: int = 10**18) -> dict[str, Any]:
    """Fund the runner from the faucet and register it with its own CLI (capabilities from its runner.toml)."""
    cli("tx", "transfer", "--key", str(node.home / "keys" / "faucet.key"), "--to", runner.address, "--amount",
        str(10**20), "--rpc", node.url, "--wait", "--timeout", "30")
    reg = runner_cli("register", "--home", str(runner.home), "--stake", str(stake), check=False)
    assert reg.returncode == 0, reg.stderr + reg.stdout
    out: dict[str, Any] = _json(reg)
    assert out["status"] == "success", out
    return out


def deploy_job_actor(node: NodeProcess, directory: Path) -> str:
    """Deploy and fund the job-submitting :data:`ACTOR`; returns its address."""
    faucet = str(node.home / "keys" / "faucet.key")
    src = directory / "actor.py"
    src.write_text(ACTOR)
    actor: str = _json(cli("tx", "deploy", "--key", faucet, "--source", str(src), "--rpc", node.url,
                           "--timeout", "30"))["address"]
    cli("tx", "transfer", "--key", faucet, "--to", actor, "--amount", str(10**20), "--rpc", node.url, "--wait",
        "--timeout", "30")
    return actor


def submit_job_call(node: NodeProcess, actor: str, url: str) -> dict[str, Any]:
    """Like :func:`submit_job` but returns the ``tx call`` output whatever the receipt says (a job may be refused,
    e.g. ``no_eligible_runner``); on success ``result`` is the 0x-hex job id."""
    doc = {"job_type": {"kind": "http", "url": url, "method": "GET"},
           "verification": {"mode": "none", "runners": 1, "threshold": 1}, "max_price": "1000000",
           "timeout_blocks": 200, "callback": {"actor": actor, "handler": "on_result", "correlation_id": "e2e"}}
    res = cli("tx", "call", "--key", str(node.home / "keys" / "faucet.key"), "--actor", actor, "--handler", "start",
              "--payload", "0x" + json.dumps(doc).encode().hex(), "--rpc", node.url, "--wait", "--timeout", "30",
              check=False)
    # Exit 3 is a failed receipt (docs/api.md "Exit codes"): the output still holds the receipt.
    assert res.returncode in (0, 3), f"tx call exited {res.returncode}: {res.stderr}"
    out: dict[str, Any] = _json(res)
    return out
