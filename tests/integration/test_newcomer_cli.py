"""Small things a newcomer trips over (issue 37 item 7), with real processes: ``cowboy-node --version`` answers,
and a port clash at start-up names the config key (``rpc.addr``) instead of a bare ``[Errno 98]``."""

from __future__ import annotations

import socket
import subprocess
from importlib import metadata
from pathlib import Path

from tests.integration.nodeproc import BIN, cli, free_port


def test_version_prints_the_package_version() -> None:
    r = cli("--version")
    assert r.returncode == 0
    assert r.stdout.strip() == f"cowboy-node {metadata.version('cowboy-node')}"


def test_a_port_clash_names_rpc_addr(tmp_path: Path) -> None:
    port = free_port()
    home = tmp_path / "node"
    cli("init", "--home", str(home), "--rpc-addr", f"127.0.0.1:{port}", "--quic-addr", f"127.0.0.1:{free_port()}",
        "--metrics-addr", f"127.0.0.1:{free_port()}")
    with socket.socket() as holder:  # another process's listener, held for the whole run
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", port))
        holder.listen()
        r = subprocess.run([str(BIN / "cowboy-node"), "run", "--home", str(home)], capture_output=True, text=True,
                           timeout=60, check=False)
    assert r.returncode == 1, r.stderr
    assert f"rpc.addr: cannot listen on 127.0.0.1:{port}" in r.stderr, r.stderr
    assert "another process holds it" in r.stderr and "change rpc.addr" in r.stderr, r.stderr
