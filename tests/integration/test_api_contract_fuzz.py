"""The short schemathesis run of ``make test``: a live node answers every generated case of every route in
``GET /openapi.json`` within its contract (no 5xx, no undocumented status, code or shape, no hang) while it keeps
producing blocks; and the subscription and verified-read benchmarks run and print their shape (figures are
theirs, not asserted). The long run is ``make fuzz-api``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cowboy_node.rpc.openapi import operations

ROOT = Path(__file__).resolve().parents[2]


def _run(*cmd: str, timeout: float) -> tuple[int, Any]:
    proc = subprocess.run([sys.executable, *cmd], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          check=False)
    try:
        return proc.returncode, json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(f"not one JSON document: {proc.stdout[-2000:]} {proc.stderr[-2000:]}") from None


@pytest.mark.timeout(600)
def test_schemathesis_finds_nothing_on_a_live_node_producing_blocks() -> None:
    rc, doc = _run("scripts/fuzz_api.py", "--max-examples", "5", "--seed", "36", "--max-block-gap-s", "20",
                   timeout=540)
    assert doc["findings"] == [] and doc["errors"] == [] and doc["errored_cases"] == 0, doc.get("st_output_tail")
    # Every operation schemathesis loaded was tested. Loading the served document over HTTP, schemathesis 4.32
    # counts one operation fewer than the contract has (32 in memory from the same document): at most one short.
    assert doc["operations_tested"] == doc["operations"]["total"] and doc["cases"] > 0
    assert doc["operations"]["total"] >= len(operations()) - 1
    assert doc["node_handler_failures"] == 0 and doc["blocks_during_run"] > 0
    assert rc == 0, doc


@pytest.mark.timeout(600)
def test_subscription_bench_prints_both_phases() -> None:
    rc, doc = _run("bench/subscriptions.py", "--blocks", "5", "--slow", "10", "--warmup", "8", timeout=240)
    assert rc == 0 and doc["benchmark"] == "subscriptions"
    (run,) = doc["runs"]  # --runs defaults to 1; each run measures both phases on one node
    assert run["baseline_one_fast_subscriber"]["interval"]["count"] >= 5
    assert run["with_slow_subscribers"]["interval"]["count"] >= 5
    assert run["fast_subscriber_every_height_once"] is True
    assert doc["goals"]["fast_subscriber_every_height_once"] is True


@pytest.mark.timeout(600)
def test_verified_read_bench_prints_its_baseline() -> None:
    rc, doc = _run("bench/verified_reads.py", "--n", "3", timeout=240)
    assert rc == 0 and doc["verify_read_us"] > 0 and doc["baseline_node_bls_verify_us"] > 0
