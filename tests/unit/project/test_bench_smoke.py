"""Smoke tests of the transport benchmarks: each runs with tiny parameters, stops by itself, and prints ONE JSON
object of the documented shape with its same-run baseline. No timing assertions (the figures are the
benchmark's business), only that every measured job/heartbeat was counted.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"
SUMMARY_KEYS = {"count", "p50_ms", "p99_ms", "min_ms", "max_ms"}


def _run(script: str, *args: str, timeout: float = 480) -> Any:
    # A session of its own, killed whole on a timeout: a bench that starts a node (soak.py) must not leave it
    # running when the bench is killed (one did, for an hour, after a timeout on a loaded host).
    with subprocess.Popen([sys.executable, str(BENCH / script), *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, cwd=BENCH.parent, start_new_session=True) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # whatever of the group is left (nothing, after a clean exit)
    assert proc.returncode == 0, stderr[-2000:]
    return json.loads(stdout)  # the whole stdout is one JSON document


@pytest.mark.timeout(600)
def test_push_latency_prints_one_json_with_push_and_poll_baseline() -> None:
    doc = _run("push_latency.py", "--block-ms", "200", "--runners", "2", "--jobs", "2", "--poll-s", "0.4")
    assert doc["benchmark"] == "push_latency"
    assert doc["params"]["jobs_per_path"] == 2 and doc["params"]["block_ms"] == 200
    for section, keys in (("push", ("accepted_to_held", "commit_to_held")),
                          ("poll_baseline", ("accepted_to_seen", "commit_to_seen"))):
        for key in keys:
            summary = doc[section][key]
            assert set(summary) == SUMMARY_KEYS
            assert summary["count"] == 2  # every submitted job was measured on this path
            assert summary["p50_ms"] <= summary["p99_ms"]
    assert doc["poll_baseline"]["polls"] >= 1
    goals = doc["goals"]
    assert goals["push_p50_le_block_plus_100ms"]["limit_ms"] == 300
    assert isinstance(goals["push_p50_le_block_plus_100ms"]["met"], bool)
    assert isinstance(goals["push_vs_poll_p50_ge_3x"]["met"], bool)
    assert doc["jobs_completed"] == {"completed": 4, "submitted": 4}  # both paths' runners answered every job
    assert doc["results_forwarded_over_sessions"] == 2  # the push path's results went over the sessions


@pytest.mark.timeout(600)
def test_runner_capacity_prints_one_json_with_raw_echo_baseline() -> None:
    doc = _run("runner_capacity.py", "--runners", "3", "--seconds", "1.5", "--warmup-s", "0.5")
    assert doc["benchmark"] == "runner_capacity"
    (row,) = doc["results"]
    assert row["runners"] == 3
    for kind in ("raw_echo_baseline", "transport"):
        m = row[kind]
        assert m["heartbeats"] > 0 and m["server_cpu_s"] > 0
        assert m["runners_per_core_at_1hz"] > 0
    t = row["transport"]
    assert t["admitted"] == 3 and t["connected"] == 3 and t["present"] == 3  # real sessions, all present
    assert t["server_pings"] > 0
    assert row["ratio"] > 0 and isinstance(row["goal_ratio_le_1_5"], bool)


@pytest.mark.timeout(600)
def test_heartbeat_cost_prints_one_json_with_its_floor_baseline() -> None:
    doc = _run("heartbeat_cost.py", "--sessions", "3", "--rounds", "2", "--repeat", "1")
    assert doc["benchmark"] == "heartbeat_cost"
    assert doc["params"] == {"sessions": 3, "rounds": 2, "repeat": 1}
    base = doc["baseline"]
    assert base["floor_us"] > 0 and base["secp256k1_verify_known_key_us"] > 0
    assert base["ed25519_sign_prepared_key_us"] > 0
    assert doc["heartbeat_us"] > 0 and doc["ratio_to_floor"] > 0


@pytest.mark.timeout(600)
def test_runner_capacity_pairs_mode_reports_a_median_ratio() -> None:
    doc = _run("runner_capacity.py", "--runners", "3", "--seconds", "1.0", "--warmup-s", "0.5", "--pairs", "1")
    assert doc["benchmark"] == "runner_capacity"
    (row,) = doc["results"]
    assert row["runners"] == 3 and row["ratio"] > 0 and isinstance(row["goal_ratio_le_1_5"], bool)
    assert row["held"] == [3, 3] and row["connect_failures"] == [0, 0]  # every runner held a session on both
    assert all(n > 0 for pair in row["pairs"] for n in pair["heartbeats"])  # both sides were measured



SOAK_SAMPLE_KEYS = {"t_s", "rss_kb", "cpu_pct", "height", "blocks", "block_interval_ms", "mempool", "accepted",
                    "rejected", "query"}


@pytest.mark.timeout(400)
def test_soak_prints_one_json_with_samples_goals_and_its_idle_baseline() -> None:
    doc = _run("soak.py", "--duration", "6", "--sample-s", "2", "--idle-s", "1.5", "--block-ms", "250",
               "--tps", "10", "--accounts", "8", "--qps", "10", "--read-qps", "4",
               "--attack", "read-spin", "--attack", "gapped-nonces", "--attack", "slow-headers", timeout=300)
    assert doc["benchmark"] == "soak"
    assert doc["params"]["duration_s"] == 6 and doc["params"]["attacks"] == ["gapped-nonces", "read-spin",
                                                                            "slow-headers"]
    assert doc["baseline"]["blocks"] >= 1 and doc["baseline"]["block_interval_ms"]["p99"] is not None
    assert len(doc["samples"]) >= 2
    for sample in doc["samples"]:
        assert set(sample) == SOAK_SAMPLE_KEYS
        assert sample["rss_kb"] > 0 and set(sample["query"]) == {"status", "account", "actor_read"}
        assert set(sample["mempool"]) >= {"txs", "bytes"}
    load, inclusion = doc["load"], doc["inclusion"]
    assert load["accepted"] > 0 and load["sent"] == load["accepted"] + sum(load["rejected"].values())
    assert inclusion["accepted"] == load["accepted"]
    # every accepted transfer is accounted for by its receipt or the lack of one
    assert sum(inclusion[k] for k in ("included", "evicted", "pending", "lost")) == inclusion["accepted"]
    assert all(doc["queries"][kind]["count"] > 0 for kind in ("status", "account", "actor_read"))
    assert set(doc["attacks"]) == {"read-spin", "gapped-nonces", "slow-headers"}
    assert doc["attacks"]["read-spin"]["reads"] > 0 and doc["attacks"]["gapped-nonces"]["submitted"] > 0
    assert doc["attacks"]["slow-headers"]["opened"] >= 20
    goals = doc["goals"]
    assert set(goals) == {"rss_plateau", "block_interval_p99", "accepted_included_or_evicted", "query_p99"}
    assert goals["block_interval_p99"]["limit_ms"] == 300 and goals["rss_plateau"]["limit_pct"] == 5
    assert all(isinstance(g["met"], bool) for g in goals.values())
    assert doc["node"]["exited_with"] is None


@pytest.mark.timeout(600)
def test_sync_catchup_prints_one_json_with_the_production_rate_beside_the_catch_up() -> None:
    doc = _run("sync_catchup.py", "--blocks", "4", "--txs", "5", "--servers", "1")
    assert doc["bench"] == "sync_catchup"
    assert doc["catch_up"]["blocks"] == 4 and doc["catch_up"]["same_head"]
    assert doc["catch_up"]["server_refusals"] == {} and doc["production"]["blocks_per_s"] > 0
    assert set(doc["catch_up"]["loop_lag_catch_up"]) == {"p50_ms", "p99_ms", "max_ms", "samples"}
