"""schemathesis against a live node: every route of ``GET /openapi.json``, positive and negative cases, stateful.

Starts a fresh single-validator node on loopback (its own temporary home), runs ``st run`` on its contract while a
thread follows the node's height, and prints one JSON object: schemathesis' case count and findings, the blocks
produced during the run and the longest wait between two of them, and the node's logged handler failures. Exit 0
only with no finding, no errored case, no logged 500 and blocks produced throughout (the longest gap between two
heights under ``--max-block-gap-s``).

Checks: every schemathesis check but ``positive_data_acceptance`` (the contract states syntax — hex, lengths,
patterns — while the node also refuses, with a typed 400, schema-valid requests that are wrong in meaning: a
transaction with a bad signature, a mixed-case address with a wrong EIP-55 checksum, ``key`` together with
``prefix``), and the two authentication checks (the API has no authentication).

``make fuzz-api`` runs it long (``FUZZ_API_SECONDS``); ``tests/integration/test_api_contract_fuzz.py`` runs it
short in ``make test``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from itertools import pairwise
from pathlib import Path
from typing import Any

EXCLUDED_CHECKS = "positive_data_acceptance,ignored_auth,object_level_authorization"
BIN = Path(sys.executable).parent


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(*args: str) -> list[str]:
    exe = BIN / "cowboy-node"
    return [str(exe), *args] if exe.exists() else [sys.executable, "-m", "cowboy_node.cli.main", *args]


def _height(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url + "/height", timeout=2) as r:
            return int(json.loads(r.read())["height"])
    except (OSError, ValueError, KeyError):
        return None


class HeightWatch(threading.Thread):
    """Follows ``/height`` every 100 ms; records when each new height was first seen."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.seen: list[tuple[float, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.1):
            h = _height(self.url)
            if h is not None and (not self.seen or h > self.seen[-1][1]):
                self.seen.append((time.monotonic(), h))

    def summary(self, started: float, ended: float) -> dict[str, Any]:
        points = [(t, h) for t, h in self.seen if started <= t <= ended]
        times = [started, *(t for t, _ in points), ended]
        gap = max(b - a for a, b in pairwise(times))
        blocks = points[-1][1] - points[0][1] if len(points) > 1 else 0
        return {"blocks_during_run": blocks, "max_block_gap_s": round(gap, 2)}


def run(seconds: int | None, max_examples: int | None, seed: int | None, workers: int,
        max_block_gap_s: float) -> tuple[int, dict[str, Any]]:
    home = Path(tempfile.mkdtemp(prefix="cowboy-fuzz-api-"))
    rpc = _port()
    url = f"http://127.0.0.1:{rpc}"
    subprocess.run(_cli("init", "--home", str(home), "--chain-id", "cowboy-fuzz-1", "--rpc-addr", f"127.0.0.1:{rpc}",
                        "--quic-addr", f"127.0.0.1:{_port()}", "--metrics-addr", f"127.0.0.1:{_port()}",
                        "--block-time-ms", "250"), check=True, capture_output=True, timeout=120)
    log = open(home / "node.log", "wb")  # noqa: SIM115 - closed below
    node = subprocess.Popen(_cli("run", "--home", str(home)), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while _height(url) is None:
            if node.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("node did not start: " + (home / "node.log").read_text(errors="replace")[-2000:])
            time.sleep(0.1)
        watch = HeightWatch(url)
        watch.start()
        report = home / "st-report.json"
        cmd = [str(BIN / "st"), "run", url + "/openapi.json", "--checks", "all", "--exclude-checks", EXCLUDED_CHECKS,
               "--request-timeout", "10", "--no-color", "--workers", str(workers), "--report", "json",
               "--report-json-path", str(report), "--generation-database", "none"]
        if seconds is not None:
            cmd += ["--max-time", str(seconds)]
        if max_examples is not None:
            cmd += ["--max-examples", str(max_examples)]
        if seed is not None:
            cmd += ["--seed", str(seed)]
        started = time.monotonic()
        st = subprocess.run(cmd, capture_output=True, text=True, timeout=(seconds or 600) + 600, cwd=home,
                            env={**os.environ, "NO_COLOR": "1"})  # cwd: st keeps a cache dir where it runs
        ended = time.monotonic()
        watch.stop.set()
        watch.join()
        doc = json.loads(report.read_text()) if report.exists() else {}
        node_log = (home / "node.log").read_text(errors="replace")
        cases = doc.get("test_cases", {})
        out: dict[str, Any] = {
            "schemathesis": doc.get("schemathesis_version"), "seed": doc.get("seed"),
            "running_time_s": round(float(doc.get("running_time", 0.0)), 1),
            "operations_tested": doc.get("operations", {}).get("tested"), "operations": doc.get("operations"),
            "cases": cases.get("generated"), "cases_with_failures": cases.get("with_failures"),
            "errored_cases": cases.get("errored"),
            "findings": [{"code": f["code"], "title": f["title"], "count": f["count"], "operations": f["operations"]}
                         for f in doc.get("failures", [])],
            "errors": doc.get("errors", []), "warnings_missing_test_data": doc.get("warnings", {}).get(
                "missing_test_data", []),
            "excluded_checks": EXCLUDED_CHECKS.split(","),
            "node_handler_failures": node_log.count("rpc handler failed"),
            **watch.summary(started, ended),
        }
        ok = (st.returncode == 0 and not out["findings"] and not out["errors"] and not out["errored_cases"]
              and out["node_handler_failures"] == 0 and out["blocks_during_run"] > 0
              and out["max_block_gap_s"] <= max_block_gap_s)
        if not ok:
            out["st_output_tail"] = st.stdout[-6000:] + st.stderr[-2000:]
        return (0 if ok else 1), out
    finally:
        node.terminate()
        try:
            node.wait(timeout=30)
        except subprocess.TimeoutExpired:
            node.kill()
            node.wait(timeout=10)
        log.close()
        shutil.rmtree(home, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, help="time budget of the run (st --max-time)")
    ap.add_argument("--max-examples", type=int, help="cases per operation and phase (st --max-examples)")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--max-block-gap-s", type=float, default=10.0,
                    help="longest wait between two heights that still counts as blocks coming throughout")
    args = ap.parse_args()
    rc, out = run(args.seconds, args.max_examples, args.seed, args.workers, args.max_block_gap_s)
    print(json.dumps(out, indent=2))
    return rc


if __name__ == "__main__":
    sys.exit(main())
