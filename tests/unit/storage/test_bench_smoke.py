"""Smoke tests of issue 34's benchmarks: tiny runs that stop by themselves and print one JSON object with the
same-run baseline beside the figure (no timing assertions)."""

from __future__ import annotations

import pytest

from tests.unit.project.test_bench_smoke import _run


@pytest.mark.timeout(300)
def test_disk_usage_reports_archive_and_pruned_chains() -> None:
    doc = _run("disk_usage.py", "--idle-blocks", "110", "--load-blocks", "3", "--txs", "5", "--retain", "100")
    assert doc["bench"] == "disk_usage"
    idle = doc["idle"]
    assert idle["archive"]["blocks_kept"] == 111 and idle["pruned"]["blocks_kept"] == 100
    assert idle["pruned"]["earliest_retained_height"] == 11 and idle["archive"]["earliest_retained_height"] == 0
    assert idle["pruned"]["live_bytes"] < idle["archive"]["live_bytes"]
    assert {"pruned_disk_ratio", "pruned_commit_p50_ratio", "pruned_commit_p99_ratio"} <= set(idle)


@pytest.mark.timeout(300)
def test_join_time_reports_state_sync_beside_replay() -> None:
    doc = _run("join_time.py", "--blocks", "6", "--txs", "10", "--tail", "2")
    assert doc["bench"] == "join_time" and doc["blocks"] == 6 and doc["state_keys"] >= 60
    assert doc["snapshot_height"] == 4 and doc["join"]["reached_head"] and doc["join"]["height"] == 6
    assert doc["replay_s"] > 0 and doc["join_s"] > 0 and doc["speedup"] > 0 and not doc["replay_extrapolated"]
    assert {"manifest_s", "chunks_s", "install_s", "block_tail_s"} <= set(doc["join"])
    assert len(doc["load_end"]) == 3
