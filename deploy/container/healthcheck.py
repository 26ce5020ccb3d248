#!/usr/bin/env python3
"""Health check of a cowboy-node image container: probes what the container's main process is.

- ``cowboy-node run --home H``: GET /health on the RPC address of ``H/config.toml`` (a wildcard host is probed
  on loopback);
- ``cowboy-runner run --home H``: ``cowboy-runner status --home H`` (the runner's own view of its sessions),
  never a node's RPC, which a runner container does not serve;
- anything else (one-shot helpers, a shell): healthy, since there is no service to probe.

Exit 0 healthy, 1 unhealthy (Docker's HEALTHCHECK convention); the reason goes to stdout, which the engine
keeps in the container's health log.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

RUNNER_STATUS_TIMEOUT_S = 40


def main_argv(proc: Path = Path("/proc/1/cmdline")) -> list[str]:
    """The argument vector of the container's first process."""
    return [a.decode(errors="replace") for a in proc.read_bytes().split(b"\0") if a]


def program_and_home(argv: list[str]) -> tuple[str, str] | None:
    """``("cowboy-node" | "cowboy-runner", home)`` when ``argv`` runs a node or a runner daemon, else None."""
    for i, arg in enumerate(argv):
        name = os.path.basename(arg)
        if name in ("cowboy-node", "cowboy-runner"):
            rest = argv[i + 1:]
            if not rest or rest[0] != "run":
                return None
            home = "/data" if name == "cowboy-node" else "/runner"
            for j, flag in enumerate(rest):
                if flag == "--home" and j + 1 < len(rest):
                    home = rest[j + 1]
                elif flag.startswith("--home="):
                    home = flag.split("=", 1)[1]
            return name, home
    return None


def rpc_url(home: str) -> str:
    """The /health URL of the node whose home is ``home``."""
    cfg = tomllib.loads((Path(home) / "config.toml").read_text())
    addr = str(cfg.get("rpc", {}).get("addr", "127.0.0.1:4000"))
    host, _, port = addr.rpartition(":")
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host in ("[::]", "::"):
        host = "[::1]"
    return f"http://{host}:{port}/health"


def main() -> int:
    target = program_and_home(main_argv())
    if target is None:
        print("no node or runner daemon in this container: nothing to probe")
        return 0
    program, home = target
    try:
        if program == "cowboy-node":
            url = rpc_url(home)
            with urllib.request.urlopen(url, timeout=4) as r:
                print(f"{url}: {r.status}")
                return 0
        # `cowboy-runner status` imports the runner package first: seconds on a loaded machine (15 s seen at a
        # load average of 22 on 2 cores), hence the generous bound; the engine's own timeout is above it.
        out = subprocess.run(["cowboy-runner", "status", "--home", home], capture_output=True, text=True,
                             timeout=RUNNER_STATUS_TIMEOUT_S, check=False)
        print((out.stdout + out.stderr).strip()[-500:])
        return 0 if out.returncode == 0 else 1
    except Exception as e:  # any failure to probe is "unhealthy", with the reason in the health log
        print(f"{program} at {home}: {type(e).__name__}: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
