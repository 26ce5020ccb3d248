"""A real node process: starts, serves, takes a CLI transfer, stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from tests.integration.nodeproc import NodeProcess, cli


def test_cli_transfer_lands_in_a_block_and_sigterm_exits_zero(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "home")
    for f in ("config.toml", "genesis.json", "keys/validator.key", "keys/faucet.key"):
        assert (node.home / f).exists(), f
    for key in ("validator.key", "faucet.key"):
        assert (node.home / "keys" / key).stat().st_mode & 0o777 == 0o600
    node.start()
    try:
        recipient = json.loads(cli("keys", "new", "--out", str(tmp_path / "r.key")).stdout)["address"]
        out = cli("tx", "transfer", "--key", str(node.home / "keys" / "faucet.key"), "--to", recipient,
                  "--amount", "4242", "--rpc", node.url, "--wait", timeout=60)
        result = json.loads(out.stdout)
        assert result["receipt"]["status"] == "success"
        height = result["height"]
        block = node.get(f"/block/{height}")
        assert result["tx_hash"] in block["transactions"]
        acct = json.loads(cli("query", "account", recipient, "--rpc", node.url).stdout)
        assert acct["balance"] == "4242"
        status = json.loads(cli("status", "--rpc", node.url, "--json").stdout)
        assert status["chain_id"] == "cowboy-it-1" and status["height"] >= height
        assert len(status["state_root"]) == 66
        # blocks keep coming, empty ones too
        h0 = node.get("/height")["height"]
        deadline = time.monotonic() + 60  # polled: a fixed second raced block production on a loaded machine
        while node.get("/height")["height"] <= h0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert node.get("/height")["height"] > h0
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        assert "cowboy_height" in text and "cowboy_block_interval_seconds" in text
    finally:
        rc = node.terminate()
    assert rc == 0
    assert "node stopped" in node.read_log()
    replay = json.loads(cli("replay", "--home", str(node.home), timeout=120).stdout)
    assert replay["ok"] is True and replay["height"] >= height


def test_start_refuses_invalid_config_naming_the_key(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "home")
    cfg = node.home / "config.toml"
    cfg.write_text(cfg.read_text().replace('format = "console"', 'format = "xml"'))
    res = cli("run", "--home", str(node.home), check=False, timeout=60)
    assert res.returncode == 1
    assert "config.toml: log.format" in res.stderr and "expected one of" in res.stderr


def test_start_refuses_a_data_directory_of_another_chain(tmp_path: Path) -> None:
    a = NodeProcess(tmp_path / "a")
    a.start()
    assert a.terminate() == 0
    b = NodeProcess(tmp_path / "b")
    shutil.rmtree(b.home / "data")  # holds the empty vote journal init created
    (a.home / "data").rename(b.home / "data")
    res = cli("run", "--home", str(b.home), check=False, timeout=60)
    assert res.returncode == 1 and "belongs to chain" in res.stderr
