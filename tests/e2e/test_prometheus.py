"""The monitoring files in deploy/ work against a real network: ``promtool`` accepts the scrape config and the
alert rules, a real Prometheus (Debian's ``prometheus`` package) scraping a local 4-validator testnet loads and
evaluates every rule without error, and every query of every Grafana dashboard panel returns at least one series.

Skipped only when the ``prometheus`` and ``promtool`` binaries are absent (``.ci/run`` installs Debian's package;
the skip reason says how). Bounded: the network and Prometheus run for about 20 s of scraping.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import socket
import subprocess
import tomllib
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.netproc import Testnet

ROOT = Path(__file__).resolve().parents[2]
PROM_DIR = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "cowboy-testnet.json"
PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(PROMETHEUS is None or PROMTOOL is None,
                       reason="prometheus/promtool not installed: `apt-get install prometheus` (Debian) failed or "
                              "was not run; .ci/run installs it"),
]


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60, check=False)


def panel_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL expression) of every target of every panel of the provisioned dashboard."""
    doc = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in doc["panels"] for t in p.get("targets", [])]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _api(port: int, path: str, **params: str) -> Any:
    url = f"http://127.0.0.1:{port}/api/v1/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.loads(r.read())
    assert doc["status"] == "success", doc
    return doc["data"]


def test_promtool_accepts_the_scrape_config_and_the_alert_rules() -> None:
    res = _promtool("check", "config", str(PROM_DIR / "prometheus.yml"))
    assert res.returncode == 0, res.stdout + res.stderr
    res = _promtool("check", "rules", str(PROM_DIR / "alerts.yml"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS: 6 rules found" in res.stdout
    broken = yaml.safe_load((PROM_DIR / "alerts.yml").read_text())
    broken["groups"][0]["rules"][0]["expr"] = "up{job= == 0"
    bad = PROM_DIR.parent.parent / ".pytest_cache" / "broken-alerts.yml"
    bad.parent.mkdir(exist_ok=True)
    bad.write_text(yaml.safe_dump(broken))
    assert _promtool("check", "rules", str(bad)).returncode != 0  # the check can fail


def test_alerts_cover_the_conditions_operators_asked_for() -> None:
    rules = {r["alert"]: r["expr"] for g in yaml.safe_load((PROM_DIR / "alerts.yml").read_text())["groups"]
             for r in g["rules"]}
    assert "up{" in rules["CowboyNodeDown"]
    assert "cowboy_consensus_finalized_height" in rules["CowboyNoFinalization"]
    assert "cowboy_consensus_peers" in rules["CowboyPeersBelowQuorum"]
    assert "cowboy_runners_connected" in rules["CowboyRunnerSessionsDropping"]
    assert "cowboy_timers_self_destructed_total" in rules["CowboyTimersFailingForLowFunds"]


def test_a_real_prometheus_scrapes_a_testnet_evaluates_every_rule_and_answers_every_panel(tmp_path: Path) -> None:
    assert PROMETHEUS is not None and PROMTOOL is not None
    net = Testnet.create(tmp_path, n=4, block_time_ms=500, proxied=False)
    prom: subprocess.Popen[bytes] | None = None
    log = (tmp_path / "prometheus.log").open("wb")
    try:
        net.start()
        targets = []
        for v in net.validators:
            cfg = tomllib.loads((v.home / "config.toml").read_text())
            targets.append(cfg["metrics"]["addr"])
        # The deployed config with the local targets and a fast scrape; the rules file is the deployed one.
        config = yaml.safe_load((PROM_DIR / "prometheus.yml").read_text())
        config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
        config["rule_files"] = [str(PROM_DIR / "alerts.yml")]
        jobs = {j["job_name"]: j for j in config["scrape_configs"]}
        jobs["cowboy-validators"]["static_configs"] = [{"targets": targets}]
        config["scrape_configs"] = [jobs["cowboy-validators"]]  # no runners in this network
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        port = _free_port()
        prom = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=log, stderr=subprocess.STDOUT)
        net.wait_heights(2, 45)

        def all_up() -> bool:
            try:
                active = _api(port, "targets")["activeTargets"]
            except OSError:
                return False
            return len(active) == 4 and all(t["health"] == "up" for t in active)

        net.wait_for("every validator scraped", all_up, timeout=30, interval=0.5)

        def empty_panels() -> list[tuple[str, str]]:
            out = []
            for title, expr in panel_queries():
                res = _promtool("query", "instant", f"http://127.0.0.1:{port}", expr)
                assert res.returncode == 0, (title, expr, res.stderr)
                if not res.stdout.strip():
                    out.append((title, expr))
            return out

        # the rate() windows of the panels fill after a few scrapes (1 s interval): polled, not a fixed delay
        # (which a loaded machine outruns); a panel that never gets a series fails below
        with contextlib.suppress(AssertionError):
            net.wait_for("every panel query to return a series", lambda: not empty_panels(), timeout=60,
                         interval=1.0)

        groups = _api(port, "rules")["groups"]
        rules = [r for g in groups for r in g["rules"]]
        assert len(rules) == 6
        assert [(r["name"], r["health"], r.get("lastError")) for r in rules if r["health"] != "ok"] == []
        firing = [r["name"] for r in rules for a in r.get("alerts", []) if a["state"] == "firing"]
        assert "CowboyNodeDown" not in firing and "CowboyPeersBelowQuorum" not in firing

        assert empty_panels() == [], "panel queries that returned no series"
        # Every node-side metric an alert names exists in the scrape (runner metrics need a runner).
        exprs = " ".join(r["query"] for r in rules)
        for name in sorted(set(re.findall(r"\bcowboy_[a-z0-9_]+", exprs))):
            if not name.startswith("cowboy_runner_"):
                assert _api(port, "query", query=f"count({name})")["result"], name
        # The query check can fail: an unknown metric returns nothing.
        res = _promtool("query", "instant", f"http://127.0.0.1:{port}", "cowboy_no_such_metric")
        assert res.returncode == 0 and not res.stdout.strip()
    finally:
        if prom is not None:
            prom.terminate()
            try:
                prom.wait(timeout=15)
            except subprocess.TimeoutExpired:
                prom.kill()
                prom.wait()
        log.close()
        net.close()
