"""Smoke test of ``bench/consensus_flood.py``: a tiny run of two floods in worker subprocesses against this tree
(JSON shape, the tree imported, liveness after the flood) and the ratio helper."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.consensus_flood import ratios

ROOT = Path(__file__).resolve().parents[3]


def test_tiny_run_reports_each_flood_from_this_tree() -> None:
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "consensus_flood.py"), "--scale", "0.0005",
                        "--floods", "junk_certificates_random,conflicting_votes", "--no-tracemalloc"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["baseline_tree"] is None
    junk = out["floods"]["junk_certificates_random"]["current"]
    assert junk["messages"] == 100 and junk["cowboy_node_from"] == str(ROOT)
    assert junk["cpu_s_per_message"] > 0 and junk["liveness_finalized_next_view"] is True
    assert junk["state_after"]["views"] >= 1
    votes = out["floods"]["conflicting_votes"]["current"]
    assert votes["messages"] == 2 and votes["liveness_finalized_next_view"] is True
    assert "ratios_current_over_baseline" not in out["floods"]["conflicting_votes"]


def test_ratios_are_current_over_baseline_and_skip_missing_or_zero() -> None:
    cur = {"cpu_s_per_message": 1.0, "sends_per_message": 0.0, "rss_delta_bytes": 5, "state_after": {"views": 1}}
    base = {"cpu_s_per_message": 4.0, "sends_per_message": 0.0, "state_after": {"views": 200}}
    assert ratios(cur, base) == {"cpu_s_per_message": 0.25, "sends_per_message": None, "views_after": 0.005}
