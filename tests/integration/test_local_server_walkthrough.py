"""The README walk-through "A job against your own server", with real processes (issue 37 item 1): a devnet node,
a runner set up exactly as ``cowboy-runner init`` writes it, ``python -m http.server`` serving a file on loopback,
and the example job spec pointed at it.

The path a newcomer takes: the first submission is refused and the refusal names the command that fixes it;
``cowboy-runner status`` says what the runner refuses; one ``cowboy-runner capabilities --http-domain 127.0.0.1``
sets the advertised capabilities on chain *and* the executor's allow-list and private-address setting in
runner.toml; after the restart it asks for, the job completes with the file's bytes as its result.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.integration.nodeproc import BIN, NodeProcess, cli, free_port, wait_for
from tests.integration.runnerproc import fund_and_register, runner_cli

REPO = Path(__file__).resolve().parents[2]
DATA = b'{"price": 42}\n'


class Runner:
    """A runner home as ``cowboy-runner init`` writes it (only the QUIC port and the metrics port differ: the test
    node listens on free ports) and its ``run`` process, started without any private-address override."""

    def __init__(self, home: Path, node: NodeProcess, quic_addr: str) -> None:
        self.home = home
        init = runner_cli("init", "--home", str(home), "--validator-rpc", node.url)
        self.address = json.loads(init.stdout)["address"]
        path = home / "runner.toml"
        text = path.read_text()
        text = text.replace("# quic_endpoint = ", f'quic_endpoint = "{quic_addr}"\n# was: ', 1)
        text = text.replace("enabled = true", "enabled = false", 1)  # [metrics]: no fixed port in a test
        path.write_text(text)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "COWBOY_RUNNER_ALLOW_PRIVATE_ADDRESSES"}
        self.log = open(self.home / "runner.log", "ab")  # noqa: SIM115 - closed in stop
        self.proc = subprocess.Popen([str(BIN / "cowboy-runner"), "run", "--home", str(self.home)], stdout=self.log,
                                     stderr=subprocess.STDOUT, env={**env, "PYTHONUNBUFFERED": "1"})

    def status(self) -> dict:
        r = runner_cli("status", "--home", str(self.home), "--json", check=False)
        return json.loads(r.stdout) if r.stdout.strip() else {}

    def wait_ready(self) -> None:
        """Until the session is up and the daemon has read its registration from the chain."""
        def ready() -> bool:
            assert self.proc is not None and self.proc.poll() is None, self.read_log()[-3000:]
            s = self.status()
            return bool(s.get("running") and any(x["connected"] for x in s.get("sessions", []))
                        and s.get("chain_capabilities") is not None)
        wait_for("runner session and registration", ready, timeout=120)

    def read_log(self) -> str:
        return (self.home / "runner.log").read_text(errors="replace")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
            self.log.close()


def _http_server(directory: Path, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory",
                             str(directory)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def up() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/data.json", timeout=2) as r:
                return bool(r.read() == DATA)
        except OSError:
            return False
    wait_for("python -m http.server", up, timeout=60)
    return proc


def _submit(node: NodeProcess, spec: Path) -> subprocess.CompletedProcess[str]:
    return cli("tx", "submit-job", "--key", str(node.home / "keys" / "faucet.key"), "--spec", str(spec), "--rpc",
               node.url, "--wait", "--timeout", "120", check=False)


def test_a_job_against_your_own_http_server_needs_one_runner_command(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "node", block_time_ms=250)
    node.start()
    quic = next(line.split('"')[1] for line in (node.home / "config.toml").read_text().split("[quic]", 1)[1]
                .splitlines() if line.startswith("addr"))
    runner = Runner(tmp_path / "runner", node, quic)
    www = tmp_path / "www"
    www.mkdir()
    (www / "data.json").write_bytes(DATA)
    port = free_port()
    server = _http_server(www, port)
    try:
        fund_and_register(node, runner)  # type: ignore[arg-type]  # duck-typed: home and address
        runner.start()
        runner.wait_ready()
        spec = tmp_path / "job.json"
        doc = json.loads((REPO / "configs" / "examples" / "job-http.json").read_text())
        doc["job_type"]["url"] = f"http://127.0.0.1:{port}/data.json"
        spec.write_text(json.dumps(doc))

        # 1. Refused on chain, and the refusal says what to run (not only "excluded by filter: capability: 1").
        refused = _submit(node, spec)
        assert refused.returncode == 3, refused.stderr
        assert "no_eligible_runner" in refused.stderr
        assert "cowboy-runner capabilities --home RUNNER_HOME --http-domain 127.0.0.1" in refused.stderr, \
            refused.stderr

        # 2. status says what the runner refuses and which key decides it.
        text = runner_cli("status", "--home", str(runner.home), check=False).stdout
        assert "refuses:    http hosts other than example.com (capabilities.http_domains" in text, text
        assert "executors.http.allow_private_addresses = false" in text, text

        # 3. One command: runner.toml (allow-list and private addresses) and the chain's registration together.
        r = runner_cli("capabilities", "--home", str(runner.home), "--http-domain", "127.0.0.1", check=False)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["http_domains"] == ["127.0.0.1", "example.com"] and out["allow_private_addresses"] is True, out
        assert out["chain"]["action"] == "updated" and out["chain"]["status"] == "success", out
        assert out["restart_needed"] is True and "restart it" in r.stderr, r.stderr
        record = node.get(f"/runner/{runner.address}")
        assert record["capabilities"]["http_domains"] == ["127.0.0.1", "example.com"], record
        text = runner_cli("status", "--home", str(runner.home), check=False).stdout
        assert "restart:    runner.toml changed since the daemon started" in text, text

        # 4. After the restart the job runs against the local server and settles with the file as its result.
        runner.stop()
        runner.start()
        runner.wait_ready()
        text = runner_cli("status", "--home", str(runner.home), check=False).stdout
        assert "PROBLEM" not in text and "restart:" not in text, text
        accepted = _submit(node, spec)
        assert accepted.returncode == 0, accepted.stderr
        job_id = json.loads(accepted.stdout)["job_id"]

        def settled() -> dict | None:
            res = json.loads(cli("query", "job", job_id, "--results", "--rpc", node.url).stdout)
            return res if res["outcome"] is not None else None
        results = wait_for("the job's outcome", settled, timeout=120)
        assert results["outcome"]["ok"] is True, results
        assert bytes.fromhex(results["outcome"]["result"][2:]) == DATA, results
    finally:
        runner.stop()
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=10)
        node.terminate()
